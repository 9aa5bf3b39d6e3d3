// The JSON shapes of OpenAI's completion and chat completion responses and
// stream chunks, built from a finished (or running) job.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/serve/scheduler.h"

namespace qkv::serve {

struct ResponseMeta {
  bool chat = false;
  std::string id;      // "cmpl-..." / "chatcmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;
};

ResponseMeta new_meta(bool chat, const std::string& model);

nlohmann::json usage_json(int64_t prompt, int64_t cached, int64_t completion);
// logprobs of tokens; text_offset counts from offset0 (completions).
nlohmann::json logprobs_json(bool chat, const std::vector<TokenOut>& tokens, int64_t offset0);
// A whole non-streamed response.
nlohmann::json full_response(const ResponseMeta& m, const std::string& text, const nlohmann::json& logprobs,
                             const std::string& finish_reason, const nlohmann::json& usage);
// One stream chunk; finish_reason empty: null. role: the chat delta's role (first chunk).
nlohmann::json chunk(const ResponseMeta& m, const std::string& text, const nlohmann::json& logprobs,
                     const std::string& finish_reason, const std::string& role = "");
// A chat response whose message object is given (content, reasoning_content, tool_calls).
nlohmann::json chat_response(const ResponseMeta& m, const nlohmann::json& message, const nlohmann::json& logprobs,
                             const std::string& finish_reason, const nlohmann::json& usage);
// A chat stream chunk with the given delta object.
nlohmann::json delta_chunk(const ResponseMeta& m, const nlohmann::json& delta, const nlohmann::json& logprobs,
                           const std::string& finish_reason);
// The usage chunk of stream_options.include_usage (no choices).
nlohmann::json usage_chunk(const ResponseMeta& m, const nlohmann::json& usage);

// JSON text; invalid UTF-8 (a token holding part of a character) becomes U+FFFD.
std::string dump(const nlohmann::json& j);
// One server-sent event: "data: JSON\n\n".
std::string sse_event(const nlohmann::json& j);
inline const char* sse_done() { return "data: [DONE]\n\n"; }

}  // namespace qkv::serve

// Request bodies of the completion endpoints, parsed and checked into a
// GenRequest. Every field OpenAI defines for them is read with its type and
// range checked; a wrong one is an ApiError naming the field.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "qkv.h"

namespace qkv::serve {

struct ChatMessage {
  std::string role, content;
};

struct GenRequest {
  bool chat = false;
  std::string model;                  // empty: not given
  std::string prompt;                 // completions: the text (empty when prompt_tokens are given)
  std::vector<int32_t> prompt_tokens; // completions: a prompt given as token ids
  std::vector<ChatMessage> messages;  // chat
  int64_t max_tokens = -1;            // -1: until EOS or the end of the context
  qkv_sampler_options sampler{};
  bool seed_given = false;
  std::vector<std::pair<int32_t, float>> logit_bias;
  std::vector<std::string> stop;
  bool logprobs = false;
  int64_t top_logprobs = 0;
  bool echo = false;  // completions: the prompt before the completion
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  std::string user;
};

// The limits the parser enforces (from the server's flags and the model).
struct RequestLimits {
  int64_t vocab_size = 0;
  size_t max_stop = 4;         // stop strings
  size_t max_stop_bytes = 256;  // each
  size_t max_logit_bias = 1024;
  int64_t max_prompt_tokens = 1 << 20;  // a prompt given as ids
};

// Parses a JSON body, at most max_depth levels deep (deeper: 400).
nlohmann::json parse_body(const std::string& body, int max_depth);

GenRequest parse_completion(const nlohmann::json& body, const RequestLimits& limits);
GenRequest parse_chat(const nlohmann::json& body, const RequestLimits& limits);

}  // namespace qkv::serve

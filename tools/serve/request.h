// Request bodies of the completion endpoints, parsed and checked into a
// GenRequest. Every field OpenAI defines for them is read with its type and
// range checked; a wrong one is an ApiError naming the field.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "qkv.h"
#include "tools/serve/spec_options.h"

namespace qkv::serve {

// An assistant message's call of a tool (arguments: JSON text, as OpenAI sends it).
struct ToolCallIn {
  std::string id, name, arguments;
};

struct ChatMessage {
  std::string role, content;
  std::string reasoning;              // assistant: reasoning_content
  std::vector<ToolCallIn> tool_calls;  // assistant
  std::string tool_call_id, name;      // tool: the call it answers; the tool's name
};

// A function tool of the request.
struct ToolSpec {
  std::string name, description;
  nlohmann::ordered_json parameters;  // a JSON Schema (an empty object schema when not given), in declared order
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
  // Constrained output: a qkv_grammar_kind (-1: none) and its source, from
  // response_format, or llama.cpp's json_schema / grammar fields.
  int grammar_kind = -1;
  std::string grammar_source;
  std::string grammar_param;  // the field it came from, for errors
  // Chat: tools the model may call, and how.
  std::vector<ToolSpec> tools;
  std::string tool_choice = "auto";  // auto, none, required, or function (tool_choice_name)
  std::string tool_choice_name;
  bool parallel_tool_calls = true;
  bool extract_reasoning = true;  // reasoning_format: "none" keeps the thinking inline in content
  nlohmann::json template_kwargs = nlohmann::json::object();  // chat_template_kwargs
  SpeculativeRequest speculative;  // "speculative", "speculative.n_max", .n_min, .p_min
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

// llama-server's speculative decoding fields of obj, as every generating API
// takes them: "speculative" (false turns it off), "speculative.n_max" (0
// turns it off too), "speculative.n_min" (clamped to n_max when drafting),
// "speculative.p_min". prefix: obj's place in the body, for errors
// ("options." for Ollama's options). Out of range: a 400 naming the field.
SpeculativeRequest parse_speculative(const nlohmann::json& obj, const std::string& prefix = "");
SpeculativeRequest parse_speculative(const nlohmann::ordered_json& obj, const std::string& prefix = "");

// Chat fields about tools and reasoning (tools/serve/request_tools.cc):
// tools, tool_choice, parallel_tool_calls, reasoning_format,
// chat_template_kwargs; and the tool parts of message i.
void parse_tool_fields(const nlohmann::json& body, GenRequest& r);
void parse_message_tool_parts(const nlohmann::json& msg, const std::string& where, ChatMessage& m);
// Every tool message answers a call of an earlier assistant message.
void check_tool_messages(const GenRequest& r);
// A function tool's name, description and parameters from the object holding
// them (chat: tools[i].function; Responses: tools[i]); where: its path, for
// errors; names: the tools' names so far (a repeat is a 400).
ToolSpec function_tool(const nlohmann::json& f, const std::string& where, std::set<std::string>& names);
// A tool name as the APIs allow them: letters, digits, '_', '.', '-', up to max_length.
bool valid_tool_name(const std::string& name, size_t max_length = 64);
// tool_choice required or a named function needs tools, and the named one among them (400s).
void check_tool_choice(const GenRequest& r);
// The schemas of the request (response_format, json_schema, tool
// parameters) again from the body text with their keys in the order the
// client wrote them: the order structured output emits properties in. (The
// body's json sorts keys.)
void keep_declared_order(const std::string& body_text, GenRequest& r);

}  // namespace qkv::serve

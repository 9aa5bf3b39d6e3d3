// Tool calls and reasoning in generated text: turns what a model writes into
// the fields of an OpenAI chat `message` (content, reasoning_content,
// tool_calls), for each chat-template family's markup, for a whole text and
// incrementally while it streams. The family comes from the chat template's
// source text (detect_family).
//
// Shared rules for every family:
//  - content and reasoning are whitespace-trimmed at both ends;
//  - a call's arguments are the JSON object text the model wrote (never
//    re-serialised), except where the format has no JSON (Llama 3.1 builtin
//    `name.call(k="v")`, Functionary's `<|python_tag|>` code), which is turned
//    into an object;
//  - markup that does not parse as a call (an opener followed by something
//    else) is kept as content text, never thrown away or thrown as an error;
//  - a call that began but was cut short or broken (JSON incomplete or invalid)
//    is not reported; its raw text becomes content and incomplete_call() says so.
//
// Generic (templates that know no tools): the model is told (see
// generic_tool_system_prompt) to answer with one JSON object, either
//   {"tool_calls": [{"name": "...", "arguments": {...}}, ...]}   (or "tool_call": {...})
// or
//   {"response": "text for the user"}
// An answer that is not such an object is plain content.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace qkv::toolcall {

enum class Family {
  kGeneric,
  kHermes,          // Hermes 2 Pro, Qwen 2.5, Qwen3, QwQ: <tool_call>{...}</tool_call>, <think>
  kLlama3,          // Llama 3.1/3.2/3.3: {"name", "parameters"}, <|python_tag|>
  kMistral,         // [TOOL_CALLS]name[ARGS]{...} or [TOOL_CALLS][{...}]
  kFunctionaryV31,  // <function=name>{...}</function>, <|python_tag|>code
  kFirefunctionV2,  // functools[{...}]
  kCommandRPlus,    // Action: ```json [...] ```
  kCommandR7B,      // <|START_THINKING|>, <|START_ACTION|>[...], <|START_RESPONSE|>
  kDeepSeekR1,      // <think>, <｜tool▁call▁begin｜>function<｜tool▁sep｜>name ```json {...} ```
  kDeepSeekV31,     // <think>, <｜tool▁call▁begin｜>name<｜tool▁sep｜>{...}
  kGptOss,          // harmony channels: analysis, commentary to=functions.x, final
  kNone,            // template knows no tools and no reasoning; text stays text
};

const char* family_name(Family);
// The family whose markup the template renders; kGeneric when the template
// does not handle tools (detect_family never answers kNone: that is for a
// caller that wants no parsing at all).
Family detect_family(const std::string& template_source);
// The family's output may begin with a thinking block.
bool has_reasoning(Family);
// True when a rendered prompt (with the generation prompt) leaves the model
// inside an open thinking block: pass it as ParseOptions::starts_in_reasoning.
bool prompt_opens_reasoning(Family, const std::string& rendered_prompt);

struct ToolCall {
  std::string id;         // "" unless the format carries one
  std::string name;
  std::string arguments;  // JSON object text as the model wrote it, trimmed
};

struct ParsedMessage {
  std::string content, reasoning;
  std::vector<ToolCall> calls;
};

struct ParseOptions {
  bool extract_reasoning = true;     // false: thinking stays inline in content (reasoning_format "none")
  bool starts_in_reasoning = false;  // the prompt ended with the opening think tag
  bool tools = true;                 // false: never parse calls (tool_choice none / no tools)
};

ParsedMessage parse_message(Family, const std::string& text, const ParseOptions&);

// Streaming: feed text as it is generated; each call returns what is new.
struct CallDelta {
  size_t index = 0;
  std::string id, name, arguments;  // name/id set only in the first delta of a call
};
struct MessageDelta {
  std::string content, reasoning;
  std::vector<CallDelta> calls;
  bool empty() const { return content.empty() && reasoning.empty() && calls.empty(); }
};

// Text that could still become markup is held back until it is decided, so no
// byte of call markup or thinking tags reaches a content delta of well-formed
// output; the deltas of each field concatenate to parse_message's field. Each
// feed re-reads the text so far (linear in its length).
class StreamParser {
 public:
  StreamParser(Family, ParseOptions);
  MessageDelta feed(const std::string& text);
  // End of generation. truncated: cut by max_tokens. A call whose JSON is
  // incomplete (or invalid) is then not reported as a call: it is dropped from
  // message().calls (its earlier deltas are void), its raw text is appended to
  // content, and incomplete_call() is true. Formats whose calls have no end
  // (Functionary's <|python_tag|> code) count as incomplete only when truncated.
  MessageDelta finish(bool truncated);
  bool incomplete_call() const { return incomplete_; }
  const ParsedMessage& message() const { return message_; }  // everything so far

 private:
  MessageDelta advance(bool final, bool truncated);

  Family family_;
  ParseOptions options_;
  std::string text_;
  ParsedMessage message_;  // what the deltas so far add up to (after finish: the final message)
  bool incomplete_ = false;
  bool finished_ = false;
};

// Strings whose appearance in free text begins a tool call (for a lazily
// triggered grammar). Empty for kGeneric (its whole answer is the JSON object,
// so a grammar constrains it from the start) and kNone.
std::vector<std::string> call_triggers(Family);
// The text to put before a constrained call (what the model writes before the
// call's name or JSON), e.g. "<tool_call>\n" for kHermes.
std::string call_opener(Family);

// System prompt text telling a model without native tool support about the
// tools (an OpenAI `tools` JSON array) and the Generic answer format.
std::string generic_tool_system_prompt(const std::string& tools_json);

}  // namespace qkv::toolcall

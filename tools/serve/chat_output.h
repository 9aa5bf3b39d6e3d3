// A chat reply as the API presents it: the generated text parsed, per the
// template's tool-call family, into content, reasoning_content and
// tool_calls (runtime/tool_calls/), whole or as stream deltas. Calls get ids
// (call_ + 24 random characters) unless the model wrote its own, unique one.
// A call cut by max_tokens is not presented as a call; finish_reason is
// "tool_calls" when the reply ends with calls.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "runtime/tool_calls/tool_calls.h"
#include "tools/serve/request.h"

namespace qkv::serve {

class ChatOutput {
 public:
  ChatOutput(toolcall::Family family, const GenRequest& r, bool starts_in_reasoning);

  // Streaming: what more text adds (a call's first delta carries its id).
  toolcall::MessageDelta feed_delta(const std::string& text);
  // The end of generation (job_reason: the scheduler's finish reason): the
  // last delta.
  toolcall::MessageDelta finish_delta(const std::string& job_reason);
  // The same as OpenAI chat delta objects ({"content": ...,
  // "reasoning_content": ..., "tool_calls": [...]}; {} when nothing is new).
  nlohmann::json feed(const std::string& text) { return delta_json(feed_delta(text)); }
  nlohmann::json finish(const std::string& job_reason) { return delta_json(finish_delta(job_reason)); }
  static nlohmann::json delta_json(const toolcall::MessageDelta& d);

  // After finish: the reply's finish_reason ("stop", "length", "tool_calls"),
  // the parsed message, its calls' ids, and the OpenAI message object.
  const std::string& finish_reason() const { return finish_reason_; }
  const toolcall::ParsedMessage& parsed() const { return parser_.message(); }
  const std::vector<std::string>& call_ids() const { return ids_; }
  nlohmann::json message() const;

 private:
  void name_calls(toolcall::MessageDelta& d);

  toolcall::StreamParser parser_;
  std::vector<std::string> ids_;  // per call index
  std::string finish_reason_;
};

}  // namespace qkv::serve

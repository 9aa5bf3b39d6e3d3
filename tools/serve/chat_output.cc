#include "tools/serve/chat_output.h"

#include <algorithm>
#include <random>

namespace qkv::serve {

using nlohmann::json;

namespace {

std::string new_call_id() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  static const char* chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += chars[rng() % 62];
  return id;
}

toolcall::ParseOptions options_of(const GenRequest& r, bool starts_in_reasoning) {
  toolcall::ParseOptions o;
  o.extract_reasoning = r.extract_reasoning;
  o.starts_in_reasoning = starts_in_reasoning;
  o.tools = !r.tools.empty() && r.tool_choice != "none";
  return o;
}

}  // namespace

ChatOutput::ChatOutput(toolcall::Family family, const GenRequest& r, bool starts_in_reasoning)
    : parser_(family, options_of(r, starts_in_reasoning)) {}

void ChatOutput::name_calls(toolcall::MessageDelta& d) {
  for (toolcall::CallDelta& c : d.calls) {
    if (c.name.empty()) continue;  // a later delta of a named call
    while (ids_.size() <= c.index) ids_.emplace_back();
    // Tool results are matched to calls by id: a model's own id (Command
    // R7B's grammar lets it write one digit) is kept only while unique.
    const bool taken = std::find(ids_.begin(), ids_.end(), c.id) != ids_.end();
    ids_[c.index] = c.id.empty() || taken ? new_call_id() : c.id;
    c.id = ids_[c.index];
  }
}

toolcall::MessageDelta ChatOutput::feed_delta(const std::string& text) {
  toolcall::MessageDelta d = parser_.feed(text);
  name_calls(d);
  return d;
}

toolcall::MessageDelta ChatOutput::finish_delta(const std::string& job_reason) {
  toolcall::MessageDelta d = parser_.finish(job_reason == "length");
  name_calls(d);
  finish_reason_ = job_reason;
  if (job_reason == "stop" && !parser_.message().calls.empty()) finish_reason_ = "tool_calls";
  // Calls parsed at the end only (none streamed before) get ids here too.
  while (ids_.size() < parser_.message().calls.size()) ids_.push_back(new_call_id());
  return d;
}

json ChatOutput::delta_json(const toolcall::MessageDelta& d) {
  json j = json::object();
  if (!d.reasoning.empty()) j["reasoning_content"] = d.reasoning;
  if (!d.content.empty()) j["content"] = d.content;
  if (!d.calls.empty()) {
    json calls = json::array();
    for (const toolcall::CallDelta& c : d.calls) {
      json call = {{"index", c.index}};
      if (!c.name.empty()) {
        call["id"] = c.id;
        call["type"] = "function";
        call["function"] = {{"name", c.name}, {"arguments", c.arguments}};
      } else {
        call["function"] = {{"arguments", c.arguments}};
      }
      calls.push_back(std::move(call));
    }
    j["tool_calls"] = std::move(calls);
  }
  return j;
}

json ChatOutput::message() const {
  const toolcall::ParsedMessage& m = parser_.message();
  json j = {{"role", "assistant"}};
  j["content"] = m.content.empty() && !m.calls.empty() ? json(nullptr) : json(m.content);
  if (!m.reasoning.empty()) j["reasoning_content"] = m.reasoning;
  if (!m.calls.empty()) {
    json calls = json::array();
    for (size_t i = 0; i < m.calls.size(); ++i) {
      calls.push_back({{"id", i < ids_.size() ? ids_[i] : m.calls[i].id},
                       {"type", "function"},
                       {"function", {{"name", m.calls[i].name}, {"arguments", m.calls[i].arguments}}}});
    }
    j["tool_calls"] = std::move(calls);
  }
  j["refusal"] = nullptr;
  return j;
}

}  // namespace qkv::serve

// OpenAI's Responses API, stateless: POST /v1/responses runs a chat request
// (read by tools/serve/adapters/responses_request.cc, which lists the
// supported and refused fields) and answers with a response object, or with
// its server-sent event stream when `stream` is true.
//
// Output items: a reasoning item (the model's thinking, as reasoning_text
// content; no summaries are generated), a message item with one output_text
// part, and a function_call item per tool call (call_id: the id to answer in
// a function_call_output item). status is "incomplete" with
// incomplete_details.reason "max_output_tokens" when the reply was cut by
// max_output_tokens or the context's end. usage gains draft_tokens and
// draft_accepted_tokens when the slot drafted (speculative decoding).
//
// Streams follow OpenAI's event sequence (each event with `event:` line,
// type and sequence_number): response.created, response.in_progress; per
// item output_item.added, content_part.added, output_text.delta /
// reasoning_text.delta / function_call_arguments.delta, their .done events,
// content_part.done, output_item.done; then response.completed (or
// response.incomplete) carrying the whole response. A failure after the
// stream began ends it with an `error` event and response.failed.
//
// Nothing is stored, so GET/DELETE /v1/responses/{id} (and its cancel and
// input_items routes) answer 404 saying so.
#include <chrono>
#include <map>
#include <memory>
#include <random>

#include "tools/serve/adapters/responses_request.h"
#include "tools/serve/api_error.h"
#include "tools/serve/jobs.h"
#include "tools/serve/responses.h"
#include "tools/serve/server.h"

namespace qkv::serve {

using nlohmann::json;

namespace {

constexpr const char* kEndpoint = "/v1/responses";

std::string new_id(const char* prefix) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  static const char* hex = "0123456789abcdef";
  std::string id = prefix;
  for (int i = 0; i < 32; ++i) id += hex[rng() & 15];
  return id;
}

json output_text_part(const std::string& text) {
  return {{"type", "output_text"}, {"text", text}, {"annotations", json::array()}, {"logprobs", json::array()}};
}

json reasoning_part(const std::string& text) { return {{"type", "reasoning_text"}, {"text", text}}; }

json message_item(const std::string& id, const std::string& text, const std::string& status) {
  json content = json::array();
  if (status != "in_progress") content.push_back(output_text_part(text));
  return {{"type", "message"}, {"id", id}, {"status", status}, {"role", "assistant"}, {"content", content}};
}

json reasoning_item(const std::string& id, const std::string& text, const std::string& status) {
  json content = json::array();
  if (status != "in_progress") content.push_back(reasoning_part(text));
  return {{"type", "reasoning"}, {"id", id}, {"summary", json::array()}, {"content", content}, {"status", status}};
}

json call_item(const std::string& id, const std::string& call_id, const std::string& name,
               const std::string& arguments, const std::string& status) {
  return {{"type", "function_call"}, {"id", id},         {"call_id", call_id},
          {"name", name},            {"arguments", arguments}, {"status", status}};
}

std::string call_id_of(const ChatReply& reply, size_t i) {
  return i < reply.call_ids.size() && !reply.call_ids[i].empty() ? reply.call_ids[i] : reply.message.calls[i].id;
}

// The response object before any output: id, times, the request's echo.
json base_response(const ResponsesRequest& q, const std::string& model) {
  json r = q.echo;
  r["id"] = new_id("resp_");
  r["object"] = "response";
  r["created_at"] =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  r["status"] = "in_progress";
  r["model"] = model;
  r["output"] = json::array();
  r["usage"] = nullptr;
  r["error"] = nullptr;
  r["incomplete_details"] = nullptr;
  r["previous_response_id"] = nullptr;
  r["background"] = false;
  return r;
}

// Status, usage and output_text (the SDKs' convenience: the message text) of
// a response whose output is in place.
void complete_response(json& r, const ChatReply& reply) {
  const bool cut = reply.finish_reason == "length";
  r["status"] = cut ? "incomplete" : "completed";
  r["incomplete_details"] = cut ? json{{"reason", "max_output_tokens"}} : json(nullptr);
  r["usage"] = {{"input_tokens", reply.usage.prompt},
                {"input_tokens_details", {{"cached_tokens", reply.usage.cached}}},
                {"output_tokens", reply.usage.completion},
                {"output_tokens_details", {{"reasoning_tokens", 0}}},
                {"total_tokens", reply.usage.prompt + reply.usage.completion}};
  add_draft_counts(reply.usage, r["usage"]);
  std::string text;
  for (const json& item : r["output"]) {
    if (item["type"] != "message") continue;
    for (const json& part : item["content"]) {
      if (part["type"] == "output_text") text += part["text"].get<std::string>();
    }
  }
  r["output_text"] = text;
}

// A whole (non-streamed) response.
json reply_response(json r, const ChatReply& reply) {
  const toolcall::ParsedMessage& m = reply.message;
  json output = json::array();
  if (!m.reasoning.empty()) output.push_back(reasoning_item(new_id("rs_"), m.reasoning, "completed"));
  // A reply of nothing at all still has its (empty) message.
  if (!m.content.empty() || (output.empty() && m.calls.empty())) {
    output.push_back(message_item(new_id("msg_"), m.content, "completed"));
  }
  for (size_t i = 0; i < m.calls.size(); ++i) {
    output.push_back(
        call_item(new_id("fc_"), call_id_of(reply, i), m.calls[i].name, m.calls[i].arguments, "completed"));
  }
  // What was being written when max_output_tokens ran out is incomplete.
  if (reply.finish_reason == "length") output.back()["status"] = "incomplete";
  r["output"] = std::move(output);
  complete_response(r, reply);
  return r;
}

// The events of one streamed response. The parser's deltas come in the
// order the model wrote them; each kind of delta (reasoning, content, a call)
// goes to an output item, opened when the kind changes and done when the
// next opens or the reply ends.
class EventStream {
 public:
  explicit EventStream(json response) : response_(std::move(response)) {}

  std::string begin() {
    std::string out = event("response.created", {{"response", response_}});
    return out + event("response.in_progress", {{"response", response_}});
  }

  std::string delta(const toolcall::MessageDelta& d) {
    std::string out;
    if (!d.reasoning.empty()) {
      if (kind_ != Kind::kReasoning) out += open(Kind::kReasoning);
      text_ += d.reasoning;
      out += event("response.reasoning_text.delta",
                   {{"item_id", id_}, {"output_index", index_}, {"content_index", 0}, {"delta", d.reasoning}});
    }
    if (!d.content.empty()) {
      if (kind_ != Kind::kMessage) out += open(Kind::kMessage);
      text_ += d.content;
      out += event("response.output_text.delta", {{"item_id", id_},
                                                  {"output_index", index_},
                                                  {"content_index", 0},
                                                  {"delta", d.content},
                                                  {"logprobs", json::array()}});
    }
    for (const toolcall::CallDelta& c : d.calls) {
      if (kind_ != Kind::kCall || call_ != c.index) {
        // Only a call's first delta (with its name) opens its item; the
        // parser sends a call's deltas together, so no other can come late.
        if (c.name.empty()) continue;
        out += open(Kind::kCall, c.index, c.name, c.id);
      }
      if (c.arguments.empty()) continue;
      text_ += c.arguments;
      out += event("response.function_call_arguments.delta",
                   {{"item_id", id_}, {"output_index", index_}, {"delta", c.arguments}});
    }
    return out;
  }

  std::string end(const ChatReply& reply) {
    const toolcall::ParsedMessage& m = reply.message;
    const bool cut = reply.finish_reason == "length";
    std::string out;
    if (kind_ == Kind::kCall) {
      // A call cut short is not a call of the reply (the parser dropped it).
      out += close(call_ < m.calls.size() ? "completed" : "incomplete");
    } else {
      out += close(cut ? "incomplete" : "completed");
    }
    // A call closed earlier (content followed it) and then dropped by the
    // parser at the end was cut short too: the final response says so.
    for (const auto& [call, index] : call_outputs_) {
      if (call >= m.calls.size()) output_[index]["status"] = "incomplete";
    }
    // Calls the parser only recognised at the end.
    for (size_t i = 0; i < m.calls.size(); ++i) {
      if (call_outputs_.count(i)) continue;
      out += open(Kind::kCall, i, m.calls[i].name, call_id_of(reply, i));
      text_ = m.calls[i].arguments;
      out += event("response.function_call_arguments.delta",
                   {{"item_id", id_}, {"output_index", index_}, {"delta", text_}});
      out += close("completed");
    }
    // A reply of nothing at all has an empty message, as a whole response does.
    if (output_.empty()) {
      out += open(Kind::kMessage);
      out += close(cut ? "incomplete" : "completed");
    }
    response_["output"] = output_;
    complete_response(response_, reply);
    const std::string status = response_["status"];
    return out + event(status == "completed" ? "response.completed" : "response.incomplete",
                       {{"response", response_}});
  }

  std::string error(const ApiError& e) {
    std::string out = close("incomplete");  // what was being written stays as far as it got
    out += event("error", {{"code", e.code.empty() ? json(nullptr) : json(e.code)},
                           {"message", e.what()},
                           {"param", e.param.empty() ? json(nullptr) : json(e.param)}});
    response_["status"] = "failed";
    response_["output"] = output_;
    response_["error"] = {{"code", e.code.empty() ? "server_error" : e.code}, {"message", e.what()}};
    return out + event("response.failed", {{"response", response_}});
  }

 private:
  enum class Kind { kNone, kReasoning, kMessage, kCall };

  std::string event(const std::string& type, json data) {
    data["type"] = type;
    data["sequence_number"] = sequence_++;
    return "event: " + type + "\ndata: " + dump(data) + "\n\n";
  }

  std::string open(Kind kind, size_t call = 0, const std::string& name = "", const std::string& call_id = "") {
    std::string out = close("completed");
    kind_ = kind;
    index_ = output_.size();
    text_.clear();
    json item;
    switch (kind) {
      case Kind::kReasoning:
        id_ = new_id("rs_");
        item = reasoning_item(id_, "", "in_progress");
        break;
      case Kind::kMessage:
        id_ = new_id("msg_");
        item = message_item(id_, "", "in_progress");
        break;
      case Kind::kCall:
      case Kind::kNone:
        id_ = new_id("fc_");
        call_ = call;
        call_name_ = name;
        call_id_ = call_id;
        call_outputs_[call] = index_;
        item = call_item(id_, call_id, name, "", "in_progress");
        break;
    }
    output_.push_back(item);
    out += event("response.output_item.added", {{"output_index", index_}, {"item", item}});
    if (kind == Kind::kMessage || kind == Kind::kReasoning) {
      const json part = kind == Kind::kMessage ? output_text_part("") : reasoning_part("");
      out += event("response.content_part.added",
                   {{"item_id", id_}, {"output_index", index_}, {"content_index", 0}, {"part", part}});
    }
    return out;
  }

  // Ends the open item with its status (completed or incomplete).
  std::string close(const std::string& status) {
    std::string out;
    json item;
    const json where = {{"item_id", id_}, {"output_index", index_}};
    switch (kind_) {
      case Kind::kNone: return out;
      case Kind::kReasoning: {
        json done = where;
        done["content_index"] = 0;
        done["text"] = text_;
        out += event("response.reasoning_text.done", done);
        done.erase("text");
        done["part"] = reasoning_part(text_);
        out += event("response.content_part.done", done);
        item = reasoning_item(id_, text_, status);
        break;
      }
      case Kind::kMessage: {
        json done = where;
        done["content_index"] = 0;
        done["text"] = text_;
        done["logprobs"] = json::array();
        out += event("response.output_text.done", done);
        done.erase("text");
        done.erase("logprobs");
        done["part"] = output_text_part(text_);
        out += event("response.content_part.done", done);
        item = message_item(id_, text_, status);
        break;
      }
      case Kind::kCall: {
        json done = where;
        done["name"] = call_name_;
        done["arguments"] = text_;
        out += event("response.function_call_arguments.done", done);
        item = call_item(id_, call_id_, call_name_, text_, status);
        break;
      }
    }
    output_[index_] = item;
    out += event("response.output_item.done", {{"output_index", index_}, {"item", item}});
    kind_ = Kind::kNone;
    return out;
  }

  json response_;
  json output_ = json::array();
  int64_t sequence_ = 0;
  Kind kind_ = Kind::kNone;  // the open item's kind
  size_t index_ = 0;         // its output index
  std::string id_, text_;    // its id and text (a call: its arguments)
  size_t call_ = 0;          // a call's index in the reply
  std::string call_name_, call_id_;
  std::map<size_t, size_t> call_outputs_;  // call index -> output index, of the calls given items
};

void handle_responses(ServedModel& st, const httplib::Request& req, httplib::Response& res) {
  try {
    ResponsesRequest q = parse_responses_request(req.body, st.options.max_json_depth);
    if (!q.gen.model.empty() && !names_model(q.gen.model, st.options.model_id)) {
      throw ApiError(404, "The model '" + q.gen.model + "' does not exist (this server has '" + st.options.model_id +
                              "')", "invalid_request_error", "model", "model_not_found");
    }
    json response = base_response(q, st.options.model_id);
    if (q.gen.stream) {
      auto events = std::make_shared<EventStream>(std::move(response));
      ChatStreamFormat format;
      format.content_type = "text/event-stream";
      format.begin = [events] { return events->begin(); };
      format.delta = [events](const toolcall::MessageDelta& d) { return events->delta(d); };
      format.end = [events](const ChatReply& reply) { return events->end(reply); };
      format.error = [events](const ApiError& e) { return events->error(e); };
      stream_chat(st, q.gen, res, std::move(format), kEndpoint);
      return;
    }
    const ChatReply reply = run_chat(st, q.gen, res);
    res.set_content(dump(reply_response(std::move(response), reply)), "application/json");
    st.metrics.request_done(kEndpoint, 200);
  } catch (const ApiError& e) {
    send_error_for(req, res, e);
    st.metrics.request_done(kEndpoint, e.status);
  } catch (const json::exception& e) {  // a value of an unexpected JSON type
    send_error_for(req, res, ApiError(400, std::string("unexpected JSON: ") + e.what()));
    st.metrics.request_done(kEndpoint, 400);
  }
}

// Retrieving, deleting or cancelling a response: none is ever stored.
void not_stored(ServerState& st, const httplib::Request& req, httplib::Response& res) {
  const std::string id = req.matches.size() > 1 ? req.matches[1].str() : "";
  send_error_for(req, res, ApiError(404, "this server keeps no state: response '" + id + "' was not stored "
                                    "(responses are never stored)", "invalid_request_error", "response_id",
                                    "not_found"));
  st.metrics.request_done(kEndpoint, 404);
}

}  // namespace

void install_responses_routes(httplib::Server& svr, ServerState& st) {
  svr.Post(kEndpoint, with_model(st, handle_responses));
  auto stored = [&st](const httplib::Request& req, httplib::Response& res) { not_stored(st, req, res); };
  svr.Get(R"(/v1/responses/([^/]+)(/input_items)?)", stored);
  svr.Delete(R"(/v1/responses/([^/]+))", stored);
  svr.Post(R"(/v1/responses/([^/]+)/cancel)", stored);
}

}  // namespace qkv::serve

// Anthropic's Messages API: POST /v1/messages and
// POST /v1/messages/count_tokens, so Anthropic's SDKs and tools built on them
// can use qkv serve (the key goes in x-api-key, which the server accepts).
//
// Request (tools/serve/adapters/anthropic_request.cc): model (when given, it
// must be the served model), system (a string or text blocks), messages
// (user and assistant; content a string or blocks: text; tool_use in
// assistant messages, sent to the template as the assistant's tool calls;
// tool_result in user messages, each answering a tool_use of the message
// before, sent as a tool message, is_error as an "Error: " prefix; thinking
// in assistant messages as its reasoning; redacted_thinking dropped),
// max_tokens (required), stop_sequences, temperature (0 to 1), top_p, top_k,
// stream, metadata.user_id, tools (custom tools: name, description,
// input_schema), tool_choice (auto, any, tool by name, none;
// disable_parallel_tool_use), thinking (enabled with a budget_tokens of at
// least 1024 and below max_tokens, or disabled: the template's
// enable_thinking), llama-server's "speculative", "speculative.n_max",
// "speculative.n_min" and "speculative.p_min". cache_control and citations on
// blocks are accepted and have no effect (the server reuses a slot's cached
// prefix by itself).
//
// Refused with a 400 naming the field: image, document and other non-text
// blocks (the model reads text only), Anthropic-hosted tools (web search,
// code execution, bash...), mcp_servers and container, and a final assistant
// message (prefill: the chat templates cannot continue an assistant turn).
//
// Response: a message whose content is a thinking block (signature ""), a
// text block and a tool_use block per call (input: the parsed arguments;
// ids toolu_...); stop_reason end_turn, max_tokens, stop_sequence (with the
// stop_sequence that ended it) or tool_use; usage input_tokens (not read from
// the cache), cache_read_input_tokens (reused from a slot), output_tokens, and
// when the slot drafted (speculative decoding) draft_tokens and
// draft_accepted_tokens (streamed: in message_delta's usage).
// Streamed as Anthropic's named server-sent events: message_start, ping,
// content_block_start/delta/stop per block (thinking_delta, text_delta,
// input_json_delta), message_delta, message_stop; a failure after the start
// is an `error` event. Errors have Anthropic's shape (send_error_for).
#include <random>

#include "tools/serve/adapters/anthropic.h"
#include "tools/serve/api_error.h"
#include "tools/serve/chat_prompt.h"
#include "tools/serve/jobs.h"
#include "tools/serve/server.h"

namespace qkv::serve {

using nlohmann::ordered_json;

namespace {

constexpr const char* kEndpoint = "/v1/messages";
constexpr const char* kCountEndpoint = "/v1/messages/count_tokens";

std::string text_of(const ordered_json& j) { return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace); }

std::string random_id(const char* prefix) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  static const char* chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id += chars[rng() % 62];
  return id;
}

// Calls are named call_... by the server (or by the model); Anthropic's
// clients know tool_use ids as toolu_...
std::string tool_use_id(const std::string& call_id) {
  if (call_id.rfind("toolu_", 0) == 0) return call_id;
  if (call_id.rfind("call_", 0) == 0) return "toolu_" + call_id.substr(5);
  return "toolu_" + call_id;
}

ordered_json tool_input(const std::string& arguments) {
  try {
    ordered_json j = ordered_json::parse(arguments.empty() ? "{}" : arguments);
    if (j.is_object()) return j;
  } catch (const nlohmann::json::exception&) {
  }
  // The parser presents only complete calls, whose arguments the grammar kept an object.
  return ordered_json::object();
}

bool is_one_of(const std::string& s, const std::vector<std::string>& list) {
  for (const std::string& x : list) {
    if (x == s) return true;
  }
  return false;
}

// stop_reason and stop_sequence of a finished reply. The template's own stop
// strings (end of turn markers) end a turn; only the client's are reported.
std::pair<std::string, ordered_json> stop_of(const ChatReply& reply, const std::vector<std::string>& stops) {
  if (reply.finish_reason == "tool_calls") return {"tool_use", nullptr};
  if (reply.finish_reason == "length") return {"max_tokens", nullptr};
  if (!reply.stop_matched.empty() && is_one_of(reply.stop_matched, stops)) return {"stop_sequence", reply.stop_matched};
  return {"end_turn", nullptr};
}

ordered_json usage_json(const Usage& u) {
  ordered_json usage = {{"input_tokens", u.prompt - u.cached}, {"cache_read_input_tokens", u.cached},
                        {"output_tokens", u.completion}};
  add_draft_counts(u, usage);
  return usage;
}

ordered_json message_json(const std::string& id, const std::string& model, const ChatReply& reply,
                          const std::vector<std::string>& stops) {
  ordered_json content = ordered_json::array();
  const toolcall::ParsedMessage& m = reply.message;
  if (!m.reasoning.empty()) content.push_back({{"type", "thinking"}, {"thinking", m.reasoning}, {"signature", ""}});
  // An empty reply still has its (empty) text block: clients read content[0].
  if (!m.content.empty() || (m.calls.empty() && m.reasoning.empty())) {
    content.push_back({{"type", "text"}, {"text", m.content}});
  }
  for (size_t i = 0; i < m.calls.size(); ++i) {
    const std::string call_id = i < reply.call_ids.size() ? reply.call_ids[i] : m.calls[i].id;
    content.push_back({{"type", "tool_use"},
                       {"id", tool_use_id(call_id.empty() ? random_id("toolu_") : call_id)},
                       {"name", m.calls[i].name},
                       {"input", tool_input(m.calls[i].arguments)}});
  }
  const auto [reason, sequence] = stop_of(reply, stops);
  return {{"id", id},         {"type", "message"},      {"role", "assistant"},
          {"model", model},   {"content", content},     {"stop_reason", reason},
          {"stop_sequence", sequence}, {"usage", usage_json(reply.usage)}};
}

std::string sse(const std::string& event, const ordered_json& data) {
  return "event: " + event + "\ndata: " + text_of(data) + "\n\n";
}

// The stream's content blocks: a new block (and index) whenever the kind of
// output changes (thinking, text, a tool call).
class BlockStream {
 public:
  std::string delta(const toolcall::MessageDelta& d) {
    std::string out;
    if (!d.reasoning.empty()) {
      out += open("thinking", {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
      out += block_delta({{"type", "thinking_delta"}, {"thinking", d.reasoning}});
    }
    if (!d.content.empty()) {
      out += open("text", {{"type", "text"}, {"text", ""}});
      out += block_delta({{"type", "text_delta"}, {"text", d.content}});
    }
    for (const toolcall::CallDelta& c : d.calls) {
      if (!c.name.empty()) {  // a call's first delta
        out += close();
        out += open("tool_use", {{"type", "tool_use"},
                                 {"id", tool_use_id(c.id)},
                                 {"name", c.name},
                                 {"input", ordered_json::object()}});
      }
      if (!c.arguments.empty() && kind_ == "tool_use") {
        out += block_delta({{"type", "input_json_delta"}, {"partial_json", c.arguments}});
      }
    }
    return out;
  }

  std::string end(const ChatReply& reply, const std::vector<std::string>& stops) {
    std::string out;
    if (index_ < 0) out += open("text", {{"type", "text"}, {"text", ""}});  // as the whole reply has
    out += close();
    const auto [reason, sequence] = stop_of(reply, stops);
    out += sse("message_delta", {{"type", "message_delta"},
                                 {"delta", {{"stop_reason", reason}, {"stop_sequence", sequence}}},
                                 {"usage", usage_json(reply.usage)}});
    out += sse("message_stop", {{"type", "message_stop"}});
    return out;
  }

 private:
  std::string open(const std::string& kind, const ordered_json& block) {
    if (open_ && kind == kind_ && kind != "tool_use") return {};
    std::string out = close();
    ++index_;
    kind_ = kind;
    open_ = true;
    return out + sse("content_block_start", {{"type", "content_block_start"}, {"index", index_},
                                             {"content_block", block}});
  }
  std::string close() {
    if (!open_) return {};
    open_ = false;
    return sse("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
  }
  std::string block_delta(const ordered_json& delta) {
    return sse("content_block_delta", {{"type", "content_block_delta"}, {"index", index_}, {"delta", delta}});
  }

  int index_ = -1;
  std::string kind_;
  bool open_ = false;
};

// The body as ordered JSON (tool schemas keep their property order, which is
// the order the grammar makes the model write them in), within the server's
// depth limit.
ordered_json read_body(const ServedModel& st, const httplib::Request& req) {
  parse_body(req.body, st.options.max_json_depth);  // the depth and syntax checks, with their errors
  return ordered_json::parse(req.body);
}

void check_model(const ServedModel& st, const GenRequest& r) {
  if (!r.model.empty() && !names_model(r.model, st.options.model_id)) {
    throw ApiError(404, "the model '" + r.model + "' does not exist (this server has '" +
                            st.options.model_id + "')",
                   "not_found_error", "model", "model_not_found");
  }
}

void create_message(ServedModel& st, const httplib::Request& req, httplib::Response& res) {
  MessagesRequest mr = parse_messages_request(read_body(st, req), st.limits, false);
  GenRequest& r = mr.gen;
  check_model(st, r);
  const std::string id = random_id("msg_");
  const std::string model = st.options.model_id;
  if (!r.stream) {
    const ChatReply reply = run_chat(st, r, res);
    res.set_content(text_of(message_json(id, model, reply, mr.stop_sequences)), "application/json");
    st.metrics.request_done(kEndpoint, 200);
    return;
  }
  // message_start tells the prompt's size before the job has it: the prompt
  // rendered as the job will render it.
  const int64_t prompt_tokens = static_cast<int64_t>(render_chat(st.model, st.options.chat_template, r).tokens.size());
  auto blocks = std::make_shared<BlockStream>();
  const std::vector<std::string> stops = mr.stop_sequences;
  ChatStreamFormat f;
  f.content_type = "text/event-stream";
  f.begin = [id, model, prompt_tokens] {
    const ordered_json message = {{"id", id},
                                  {"type", "message"},
                                  {"role", "assistant"},
                                  {"model", model},
                                  {"content", ordered_json::array()},
                                  {"stop_reason", nullptr},
                                  {"stop_sequence", nullptr},
                                  {"usage", {{"input_tokens", prompt_tokens}, {"output_tokens", 0}}}};
    return sse("message_start", {{"type", "message_start"}, {"message", message}}) +
           sse("ping", {{"type", "ping"}});
  };
  f.delta = [blocks](const toolcall::MessageDelta& d) { return blocks->delta(d); };
  f.end = [blocks, stops](const ChatReply& reply) { return blocks->end(reply, stops); };
  f.error = [](const ApiError& e) {
    return sse("error", ordered_json::parse(text_of(error_body(ErrorStyle::kAnthropic, e))));
  };
  stream_chat(st, r, res, std::move(f), kEndpoint);  // counts the request when the stream ends
}

void count_tokens(ServedModel& st, const httplib::Request& req, httplib::Response& res) {
  MessagesRequest mr = parse_messages_request(read_body(st, req), st.limits, true);
  check_model(st, mr.gen);
  const ChatPrompt p = render_chat(st.model, st.options.chat_template, mr.gen);
  res.set_content(text_of({{"input_tokens", static_cast<int64_t>(p.tokens.size())}}), "application/json");
  st.metrics.request_done(kCountEndpoint, 200);
}

// Anthropic's error object has no param: the message names the field, as
// Anthropic's own messages do ("max_tokens: Field required").
ApiError with_field(const ApiError& e) {
  const std::string message = e.what();
  if (e.param.empty() || message.rfind(e.param, 0) == 0) return e;
  return ApiError(e.status, e.param + ": " + message, e.type, e.param, e.code);
}

// Runs a handler; an error becomes Anthropic's error object.
template <typename F>
auto anthropic_handler(const char* endpoint, F f) {
  return [endpoint, f](ServedModel& st, const httplib::Request& req, httplib::Response& res) {
    try {
      f(st, req, res);
    } catch (const ApiError& e) {
      send_error_for(req, res, with_field(e));
      st.metrics.request_done(endpoint, e.status);
    } catch (const nlohmann::json::exception& e) {  // a value of an unexpected JSON type
      send_error_for(req, res, ApiError(400, std::string("unexpected JSON: ") + e.what()));
      st.metrics.request_done(endpoint, 400);
    }
  };
}

}  // namespace

void install_anthropic_routes(httplib::Server& svr, ServerState& st) {
  svr.Post(kEndpoint, with_model(st, anthropic_handler(kEndpoint, create_message)));
  svr.Post(kCountEndpoint, with_model(st, anthropic_handler(kCountEndpoint, count_tokens)));
}

}  // namespace qkv::serve

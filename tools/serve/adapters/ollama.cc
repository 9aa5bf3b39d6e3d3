// The Ollama API on qkv serve (Ollama's docs/api.md), for Ollama's clients
// (ollama-js, ollama-python, and the apps built on them). Errors are
// Ollama's {"error": "message"} with 400, 404 or 500.
//
// POST /api/chat: model (a served model's id, also with ":latest"; an unknown
//   name: 404), messages (role system, user, assistant or tool; content;
//   assistant thinking and tool_calls [{function: {name, arguments: an
//   object}}]; tool messages answer the calls in order: by tool_call_id when
//   given, else the first unanswered call named tool_name, else the first
//   unanswered call; a tool message when no call is left unanswered is passed
//   to the template as it is), tools (OpenAI-style function tools; Ollama has
//   no tool_choice, so calls are "auto": the call grammar waits for the model
//   to begin one, and takes the place of format's grammar), format ("json":
//   any JSON object; an object: a JSON schema, its properties emitted in the
//   order given), options, stream (default true), think, keep_alive. No
//   messages: the "load" reply.
// POST /api/generate: prompt, system, raw (true: the prompt as it is, a plain
//   completion; false: one user turn through the chat template), format,
//   options, stream, think, keep_alive. No prompt and no system: the "load"
//   reply.
// options: temperature, top_k, top_p, min_p, num_predict (-1 and -2: until
//   the end of the context), seed (negative: a random one), stop,
//   repeat_penalty, repeat_last_n, presence_penalty, frequency_penalty,
//   llama-server's speculative, speculative.n_max, .n_min, .p_min;
//   num_ctx is checked and accepted, but the context is the server's per-slot
//   one (-c): a request cannot widen it, and one that does not fit is a 400.
//   Other options (mirostat, typical_p, num_gpu, num_thread...) are ignored,
//   as Ollama ignores what its runner does not use.
// think: true/false sets the template's enable_thinking; "high", "medium",
//   "low" also its reasoning_effort. Thinking is returned apart in
//   message.thinking (generate: thinking) whether or not think is given;
//   think: true for a template without thinking is a 400, as in Ollama.
//
// Refused with 400, naming the field: images (the model reads text only),
// template (the server renders the chat template), suffix (no fill-in-the-
// middle), context (the token context of an earlier /api/generate: the
// server returns none, so a context comes from another server and cannot be
// honoured), logprobs.
// POST /api/embed and /api/embeddings: adapters/ollama_embed.cc. A server that
// only embeds answers /api/chat and /api/generate with a 400.
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>

#include "tools/serve/adapters/ollama.h"
#include "tools/serve/api_error.h"
#include "tools/serve/request.h"
#include "tools/serve/server.h"

namespace qkv::serve {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using ollama::ModelCard;

// The field, or nullptr when absent or null.
const json* get(const json& o, const std::string& name) {
  auto it = o.find(name);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

double number(const json& v, const std::string& name, double lo, double hi) {
  if (!v.is_number()) throw bad_field(name, "'" + name + "' must be a number", "invalid_type");
  const double x = v.get<double>();
  if (!(x >= lo && x <= hi)) {
    throw bad_field(name, "'" + name + "' must be between " + json(lo).dump() + " and " + json(hi).dump() +
                              ", not " + v.dump());
  }
  return x;
}

// An integer option; Ollama's options map also takes integral floats (40.0).
int64_t integer(const json& v, const std::string& name, int64_t lo, int64_t hi) {
  const double d = v.is_number_float() ? v.get<double>() : 0;
  const bool integral_float = v.is_number_float() && std::floor(d) == d && std::fabs(d) < 9e18;
  if (!v.is_number_integer() && !integral_float) {
    throw bad_field(name, "'" + name + "' must be an integer", "invalid_type");
  }
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) {
    throw bad_field(name, "'" + name + "' must be at most " + std::to_string(hi));
  }
  const int64_t x = v.is_number_float() ? static_cast<int64_t>(d) : v.get<int64_t>();
  if (x < lo || x > hi) {
    throw bad_field(name, "'" + name + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                              ", not " + std::to_string(x));
  }
  return x;
}

bool boolean(const json& body, const char* name, bool fallback) {
  const json* v = get(body, name);
  if (!v) return fallback;
  if (!v->is_boolean()) throw bad_field(name, std::string("'") + name + "' must be true or false", "invalid_type");
  return v->get<bool>();
}

std::string text(const json& o, const std::string& key, const std::string& where) {
  const json* v = get(o, key);
  if (!v) return {};
  if (!v->is_string()) throw bad_field(where, "'" + where + "' must be a string", "invalid_type");
  return v->get<std::string>();
}

void refuse_images(const json& o, const std::string& where) {
  const json* images = get(o, "images");
  if (!images) return;
  if (!images->is_array()) throw bad_field(where, "'" + where + "' must be a list of images", "invalid_type");
  if (!images->empty()) {
    throw bad_field(where, "'" + where + "': images are not supported (this server's model reads text only)",
                    "unsupported_value");
  }
}

void parse_options(const json& body, const ServedModel& st, GenRequest& r) {
  qkv_sampler_options_init(&r.sampler);
  const json* o = get(body, "options");
  if (!o) return;
  if (!o->is_object()) throw bad_field("options", "'options' must be an object", "invalid_type");
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  for (auto it = o->begin(); it != o->end(); ++it) {
    const std::string& k = it.key();
    const json& v = *it;
    if (v.is_null()) continue;
    const std::string name = "options." + k;
    if (k == "temperature") {
      r.sampler.temperature = static_cast<float>(number(v, name, 0, 100));
    } else if (k == "top_k") {
      r.sampler.top_k = static_cast<int32_t>(integer(v, name, 0, kInt32Max));
    } else if (k == "top_p") {
      r.sampler.top_p = static_cast<float>(number(v, name, 0, 1));
      if (r.sampler.top_p <= 0) throw bad_field(name, "'" + name + "' must be above 0 (1 turns it off)");
    } else if (k == "min_p") {
      r.sampler.min_p = static_cast<float>(number(v, name, 0, 0.999999));
    } else if (k == "num_predict") {
      const int64_t n = integer(v, name, -2, kInt32Max);
      r.max_tokens = n < 0 ? -1 : n;  // -1: no limit, -2: fill the context; both end with the context
    } else if (k == "num_ctx") {
      integer(v, name, 1, kInt32Max);  // the slot's context is fixed at start (see the header)
    } else if (k == "seed") {
      const int64_t seed = integer(v, name, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
      if (seed >= 0) {
        r.sampler.seed = static_cast<uint64_t>(seed);
        r.seed_given = true;
      }
    } else if (k == "stop") {
      if (v.is_string()) {
        r.stop.push_back(v.get<std::string>());
      } else if (v.is_array()) {
        for (const json& s : v) {
          if (!s.is_string()) throw bad_field(name, "'" + name + "' must be a list of strings", "invalid_type");
          if (!s.get<std::string>().empty()) r.stop.push_back(s.get<std::string>());
        }
      } else {
        throw bad_field(name, "'" + name + "' must be a list of strings", "invalid_type");
      }
      if (r.stop.size() > st.limits.max_stop) {
        throw bad_field(name, "'" + name + "' may hold at most " + std::to_string(st.limits.max_stop) + " strings");
      }
      for (const std::string& s : r.stop) {
        if (s.size() > st.limits.max_stop_bytes) {
          throw bad_field(name, "a stop string is longer than " + std::to_string(st.limits.max_stop_bytes) + " bytes");
        }
      }
    } else if (k == "repeat_penalty") {
      r.sampler.repeat_penalty = static_cast<float>(number(v, name, 0, 100));
    } else if (k == "repeat_last_n") {
      r.sampler.repeat_last_n = integer(v, name, -1, kInt32Max);
    } else if (k == "presence_penalty") {
      r.sampler.presence_penalty = static_cast<float>(number(v, name, -2, 2));
    } else if (k == "frequency_penalty") {
      r.sampler.frequency_penalty = static_cast<float>(number(v, name, -2, 2));
    }
  }
  r.speculative = parse_speculative(*o, "options.");
}

// format: "json" (any JSON object), a JSON schema object (its key order
// kept: `ordered` is the body as written), or "" / absent: free text.
void parse_format(const json& body, const ordered_json& ordered, GenRequest& r) {
  const json* f = get(body, "format");
  if (!f) return;
  if (f->is_string()) {
    const std::string s = f->get<std::string>();
    if (s.empty()) return;
    if (s != "json") throw bad_field("format", "'format' must be \"json\" or a JSON schema object (got \"" + s + "\")");
    r.grammar_kind = QKV_GRAMMAR_JSON_OBJECT;
  } else if (f->is_object()) {
    r.grammar_kind = QKV_GRAMMAR_JSON_SCHEMA;
    r.grammar_source = ordered.at("format").dump();
  } else {
    throw bad_field("format", "'format' must be \"json\" or a JSON schema object", "invalid_type");
  }
  r.grammar_param = "format";
}

// think, stream, keep_alive, logprobs: the fields /api/chat and /api/generate share.
void parse_common(const json& body, const ModelCard& card, const std::string& model, GenRequest& r, bool& stream) {
  stream = boolean(body, "stream", true);
  if (const json* k = get(body, "keep_alive"); k && !k->is_string() && !k->is_number()) {
    throw bad_field("keep_alive", "'keep_alive' must be a duration (\"5m\") or a number of seconds", "invalid_type");
  }
  if (boolean(body, "logprobs", false)) {
    throw bad_field("logprobs", "'logprobs' is not supported on the Ollama API (/v1/chat/completions has it)",
                    "unsupported_value");
  }
  if (const json* t = get(body, "think")) {
    bool on = false;
    if (t->is_boolean()) {
      on = t->get<bool>();
    } else if (t->is_string() && (*t == "high" || *t == "medium" || *t == "low")) {
      on = true;
      r.template_kwargs["reasoning_effort"] = t->get<std::string>();
    } else {
      throw bad_field("think", "'think' must be true, false, \"high\", \"medium\" or \"low\"");
    }
    if (on && !card.thinking) throw bad_field("think", "'" + model + "' does not support thinking");
    r.template_kwargs["enable_thinking"] = on;
  }
}

// The assistant calls seen so far, for matching tool messages to them.
struct PendingCall {
  std::string id, name;
  bool answered = false;
};

void parse_tool_calls(const json& msg, const ordered_json& omsg, const std::string& where, size_t index,
                      ChatMessage& m, std::vector<PendingCall>& calls) {
  const json* tc = get(msg, "tool_calls");
  if (!tc) return;
  if (m.role != "assistant") throw bad_field(where + ".tool_calls", "only assistant messages have 'tool_calls'");
  if (!tc->is_array()) throw bad_field(where + ".tool_calls", "'" + where + ".tool_calls' must be a list", "invalid_type");
  if (tc->size() > 128) throw bad_field(where + ".tool_calls", "'" + where + ".tool_calls' may hold at most 128 calls");
  for (size_t k = 0; k < tc->size(); ++k) {
    const json& c = (*tc)[k];
    const std::string w = where + ".tool_calls[" + std::to_string(k) + "]";
    if (!c.is_object()) throw bad_field(w, "'" + w + "' must be an object", "invalid_type");
    const json* f = get(c, "function");
    if (!f || !f->is_object()) throw bad_field(w + ".function", "'" + w + ".function' must be an object");
    ToolCallIn call;
    call.name = text(*f, "name", w + ".function.name");
    if (call.name.empty()) throw bad_field(w + ".function.name", "'" + w + ".function.name' is required");
    // Ollama's arguments are an object (OpenAI's are its JSON text).
    const json* args = get(*f, "arguments");
    if (args && !args->is_object()) {
      throw bad_field(w + ".function.arguments", "'" + w + ".function.arguments' must be an object", "invalid_type");
    }
    call.arguments = args ? omsg.at("tool_calls")[k].at("function").at("arguments").dump() : "{}";
    call.id = text(c, "id", w + ".id");
    if (call.id.empty()) call.id = "call_" + std::to_string(index) + "_" + std::to_string(k);
    calls.push_back({call.id, call.name, false});
    m.tool_calls.push_back(std::move(call));
  }
}

// A tool message answers a call of an earlier assistant message: the one its
// tool_call_id names, else the first unanswered one named tool_name, else the
// first unanswered one.
void match_tool_message(const json& msg, const std::string& where, ChatMessage& m, std::vector<PendingCall>& calls) {
  const std::string id = text(msg, "tool_call_id", where + ".tool_call_id");
  const std::string name = text(msg, "tool_name", where + ".tool_name");
  PendingCall* match = nullptr;
  if (!id.empty()) {
    for (PendingCall& c : calls) {
      if (c.id == id) match = &c;
    }
    if (!match) {
      throw bad_field(where + ".tool_call_id", "'" + where + ".tool_call_id' \"" + id +
                                                   "\" answers no tool call of an earlier assistant message");
    }
  } else {
    bool any_open = false;
    for (PendingCall& c : calls) {
      if (c.answered) continue;
      any_open = true;
      if (name.empty() || c.name == name) {
        match = &c;
        break;
      }
    }
    if (!match && any_open) {
      throw bad_field(where + ".tool_name", "'" + where + ".tool_name' \"" + name +
                                                "\" names no unanswered tool call of an earlier assistant message");
    }
  }
  if (match) {
    match->answered = true;
    m.tool_call_id = match->id;
  }
  m.name = !name.empty() ? name : match ? match->name : "";
}

void parse_messages(const json& body, const ordered_json& ordered, GenRequest& r) {
  const json& list = body.at("messages");
  if (!list.is_array()) throw bad_field("messages", "'messages' must be a list", "invalid_type");
  std::vector<PendingCall> calls;
  for (size_t i = 0; i < list.size(); ++i) {
    const json& msg = list[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!msg.is_object()) throw bad_field(where, "'" + where + "' must be an object", "invalid_type");
    ChatMessage m;
    m.role = text(msg, "role", where + ".role");
    if (m.role != "system" && m.role != "user" && m.role != "assistant" && m.role != "tool") {
      throw bad_field(where + ".role", "'" + where + ".role' must be system, user, assistant or tool");
    }
    m.content = text(msg, "content", where + ".content");
    refuse_images(msg, where + ".images");
    if (get(msg, "thinking")) {
      if (m.role != "assistant") throw bad_field(where + ".thinking", "only assistant messages have 'thinking'");
      m.reasoning = text(msg, "thinking", where + ".thinking");
    }
    parse_tool_calls(msg, ordered.at("messages")[i], where, i, m, calls);
    if (m.role == "tool") {
      match_tool_message(msg, where, m, calls);
    } else if (get(msg, "tool_name") || get(msg, "tool_call_id")) {
      throw bad_field(where, "only tool messages have 'tool_name' and 'tool_call_id'");
    }
    r.messages.push_back(std::move(m));
  }
}

// tools: OpenAI's function tools, read by the chat endpoint's parser; their
// parameter schemas keep the order the client wrote.
void parse_tools(const json& body, const ordered_json& ordered, GenRequest& r) {
  const json* tools = get(body, "tools");
  if (!tools) return;
  parse_tool_fields(json{{"tools", *tools}}, r);
  for (size_t i = 0; i < r.tools.size(); ++i) {
    const ordered_json& f = ordered.at("tools")[i].at("function");
    if (f.contains("parameters") && f.at("parameters").is_object()) r.tools[i].parameters = f.at("parameters");
  }
}

struct Parsed {
  json body;
  ordered_json ordered;  // the same, keys in the order written
};

Parsed read_body(const ServedModel& st, const httplib::Request& req) {
  Parsed p;
  p.body = parse_body(req.body, st.options.max_json_depth);
  if (!p.body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  p.ordered = ordered_json::parse(req.body);  // parsed once already within the depth limit
  return p;
}

void chat_route(ServedModel& st, const ModelCard& card, const httplib::Request& req, httplib::Response& res,
                ollama::RunSpec& spec) {
  const Parsed p = read_body(st, req);
  const json& body = p.body;
  spec.model = ollama::checked_model(st, body);
  GenRequest r;
  r.chat = true;
  parse_common(body, card, spec.model, r, spec.stream);
  parse_options(body, st, r);
  parse_format(body, p.ordered, r);
  parse_tools(body, p.ordered, r);
  const json* messages = get(body, "messages");
  if (messages) parse_messages(body, p.ordered, r);
  if (r.messages.empty()) {
    ollama::send_load_reply(spec, res);
    st.metrics.request_done(spec.endpoint, 200);
    return;
  }
  ollama::run(st, r, spec, res);
}

void generate_route(ServedModel& st, const ModelCard& card, const httplib::Request& req, httplib::Response& res,
                    ollama::RunSpec& spec) {
  const Parsed p = read_body(st, req);
  const json& body = p.body;
  spec.model = ollama::checked_model(st, body);
  GenRequest r;
  parse_common(body, card, spec.model, r, spec.stream);
  parse_options(body, st, r);
  parse_format(body, p.ordered, r);
  refuse_images(body, "images");
  if (!text(body, "template", "template").empty()) {
    throw bad_field("template", "'template' is not supported: the server renders its chat template (use raw: true "
                                "with a prompt written out in full)", "unsupported_value");
  }
  if (!text(body, "suffix", "suffix").empty()) {
    throw bad_field("suffix", "'suffix' (fill-in-the-middle) is not supported", "unsupported_value");
  }
  if (const json* c = get(body, "context")) {
    if (!c->is_array()) throw bad_field("context", "'context' must be a list of tokens", "invalid_type");
    if (!c->empty()) {
      throw bad_field("context", "'context' is not supported: send the conversation to /api/chat instead",
                      "unsupported_value");
    }
  }
  const std::string prompt = text(body, "prompt", "prompt");
  const std::string system = text(body, "system", "system");
  const bool raw = boolean(body, "raw", false);
  if (prompt.empty() && system.empty()) {
    ollama::send_load_reply(spec, res);
    st.metrics.request_done(spec.endpoint, 200);
    return;
  }
  if (raw) {  // no template: the prompt is the model's text as it is (system is not used, as in Ollama)
    r.prompt = prompt;
  } else {
    r.chat = true;
    ChatMessage turn;
    if (!system.empty()) {
      turn.role = "system";
      turn.content = system;
      r.messages.push_back(turn);
    }
    turn.role = "user";
    turn.content = prompt;
    r.messages.push_back(turn);
  }
  ollama::run(st, r, spec, res);
}

using Route = void (*)(ServedModel&, const ModelCard&, const httplib::Request&, httplib::Response&, ollama::RunSpec&);

auto generation(const char* endpoint, bool chat_shape, Route route) {
  return [endpoint, chat_shape, route](ServedModel& st, const httplib::Request& req, httplib::Response& res) {
    const std::shared_ptr<const ModelCard> card = ollama::card_of(st);
    ollama::RunSpec spec;
    spec.start = Clock::now();
    spec.chat_shape = chat_shape;
    spec.endpoint = endpoint;
    try {
      route(st, *card, req, res, spec);
    } catch (const ApiError& e) {
      send_error_for(req, res, e);
      st.metrics.request_done(endpoint, e.status);
    } catch (const json::exception& e) {  // a value of an unexpected JSON type
      send_error_for(req, res, ApiError(400, std::string("unexpected JSON: ") + e.what()));
      st.metrics.request_done(endpoint, 400);
    }
  };
}

}  // namespace

void install_ollama_routes(httplib::Server& svr, ServerState& st) {
  svr.Post("/api/chat", with_model(st, generation("/api/chat", true, chat_route)));
  svr.Post("/api/generate", with_model(st, generation("/api/generate", false, generate_route)));
  ollama::install_model_routes(svr, st);
  ollama::install_embed_routes(svr, st);
}

}  // namespace qkv::serve

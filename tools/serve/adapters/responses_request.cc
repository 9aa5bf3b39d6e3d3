// OpenAI Responses API requests read into a GenRequest.
//
// The conversation comes whole in every request (the server stores nothing):
// `input` is a string (one user message) or a list of items — messages
// (user, assistant, system, developer; text or input_text/output_text parts),
// function_call items (consecutive ones form one assistant message with tool
// calls), function_call_output items (tool messages answering an earlier
// call_id) and reasoning items (the reasoning of the assistant message that
// follows). `instructions` becomes a system message before them.
//
// Tools are function tools only, in the Responses shape ({type: "function",
// name, description, parameters, strict}, not nested under `function`):
// hosted tools (web_search, file_search, code_interpreter, computer use,
// image generation, MCP...) need services this server does not have and are
// refused with a 400 naming them. text.format (text, json_object,
// json_schema) constrains the output as response_format does for chat; the
// schema keeps the key order the client wrote.
//
// Refused with a 400: previous_response_id, conversation and item_reference
// items (they name stored state), background (nothing runs detached), prompt
// (stored prompt templates), image/file/audio parts (the model reads text),
// top_logprobs and include values other than reasoning.encrypted_content.
// Accepted without effect: store (nothing is stored), truncation,
// service_tier, prompt_cache_key, safety_identifier, reasoning.summary,
// text.verbosity. reasoning.effort "none"/"minimal" turns thinking off in the
// chat template (enable_thinking: false). llama-server's "speculative",
// "speculative.n_max", "speculative.n_min" and "speculative.p_min" set the
// request's speculative decoding as on the chat completions route.
#include "tools/serve/adapters/responses_request.h"

#include <limits>
#include <map>
#include <set>

#include "tools/serve/api_error.h"

namespace qkv::serve {

using nlohmann::json;

namespace {

constexpr size_t kMaxTools = 128;
constexpr size_t kMaxMetadata = 16;

// The field, or nullptr when absent or null (null means "not given").
const json* field(const json& o, const char* name) {
  auto it = o.find(name);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

std::string path(const std::string& where, const char* name) { return where.empty() ? name : where + "." + name; }

std::string text_field(const json& o, const char* name, const std::string& where, bool required) {
  const std::string p = path(where, name);
  const json* v = field(o, name);
  if (!v) {
    if (required) throw bad_field(p, "'" + p + "' is required", "missing_required_parameter");
    return {};
  }
  if (!v->is_string()) throw bad_field(p, "'" + p + "' must be a string", "invalid_type");
  return v->get<std::string>();
}

bool bool_field(const json& o, const char* name, const std::string& where, bool fallback) {
  const std::string p = path(where, name);
  const json* v = field(o, name);
  if (!v) return fallback;
  if (!v->is_boolean()) throw bad_field(p, "'" + p + "' must be true or false", "invalid_type");
  return v->get<bool>();
}

const json* object_field(const json& o, const char* name, const std::string& where) {
  const json* v = field(o, name);
  const std::string p = path(where, name);
  if (v && !v->is_object()) throw bad_field(p, "'" + p + "' must be an object", "invalid_type");
  return v;
}

double number_field(const json& o, const char* name, double lo, double hi, double fallback) {
  const json* v = field(o, name);
  if (!v) return fallback;
  if (!v->is_number()) throw bad_field(name, std::string("'") + name + "' must be a number", "invalid_type");
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi)) {
    throw bad_field(name, std::string("'") + name + "' must be between " + json(lo).dump() + " and " +
                              json(hi).dump() + ", not " + v->dump());
  }
  return x;
}

// One of the listed strings (or "" when absent).
std::string choice_field(const json& o, const char* name, const std::string& where, std::set<std::string> allowed) {
  const std::string v = text_field(o, name, where, false);
  if (!v.empty() && !allowed.count(v)) {
    std::string list;
    for (const std::string& a : allowed) list += (list.empty() ? "" : ", ") + a;
    const std::string p = path(where, name);
    throw bad_field(p, "'" + p + "' must be one of " + list + " (got \"" + v + "\")");
  }
  return v;
}

// Fields naming state a stateless server cannot have, or work it cannot do.
void refuse_unsupported(const json& body) {
  if (field(body, "previous_response_id")) {
    throw bad_field("previous_response_id",
                    "this server keeps no state: previous_response_id is not supported; send the whole "
                    "conversation in input",
                    "unsupported_parameter");
  }
  if (field(body, "conversation")) {
    throw bad_field("conversation",
                    "this server keeps no state: conversation is not supported; send the whole conversation in input",
                    "unsupported_parameter");
  }
  if (bool_field(body, "background", "", false)) {
    throw bad_field("background", "background responses are not supported: this server stores no responses to "
                                  "poll; send the request without background", "unsupported_parameter");
  }
  if (field(body, "prompt")) {
    throw bad_field("prompt", "stored prompt templates ('prompt') are not supported; send instructions and input",
                    "unsupported_parameter");
  }
  if (const json* t = field(body, "top_logprobs")) {
    if (!t->is_number_integer()) throw bad_field("top_logprobs", "'top_logprobs' must be an integer", "invalid_type");
    if (t->get<int64_t>() != 0) {
      throw bad_field("top_logprobs", "'top_logprobs' is not supported on /v1/responses (chat completions has "
                                      "logprobs)", "unsupported_parameter");
    }
  }
  if (const json* inc = field(body, "include")) {
    if (!inc->is_array()) throw bad_field("include", "'include' must be a list of strings", "invalid_type");
    for (const json& x : *inc) {
      if (!x.is_string()) throw bad_field("include", "'include' must be a list of strings", "invalid_type");
      // Reasoning is sent as text; there is no encrypted form to add.
      if (x != "reasoning.encrypted_content") {
        throw bad_field("include", "'include' value \"" + x.get<std::string>() + "\" is not supported",
                        "unsupported_value");
      }
    }
  }
}

// A message's text: a string or a list of text parts.
std::string content_text(const json& c, const std::string& where) {
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) throw bad_field(where, "'" + where + "' must be a string or a list of parts", "invalid_type");
  std::string text;
  for (size_t j = 0; j < c.size(); ++j) {
    const std::string w = where + "[" + std::to_string(j) + "]";
    if (!c[j].is_object()) throw bad_field(w, "'" + w + "' must be an object", "invalid_type");
    const std::string type = text_field(c[j], "type", w, true);
    if (type == "input_text" || type == "output_text" || type == "text") {
      text += text_field(c[j], "text", w, true);
    } else if (type == "refusal") {
      text += text_field(c[j], "refusal", w, true);
    } else if (type == "input_image" || type == "input_file" || type == "input_audio") {
      throw bad_field(w + ".type", "'" + w + ".type' \"" + type + "\" is not supported: the model reads text only",
                      "unsupported_value");
    } else {
      throw bad_field(w + ".type", "'" + w + ".type' must be input_text or output_text (got \"" + type + "\")");
    }
  }
  return text;
}

// A reasoning item's text: its reasoning_text content, else its summary.
std::string reasoning_text(const json& item, const std::string& where) {
  std::string content, summary;
  for (const char* key : {"content", "summary"}) {
    const json* parts = field(item, key);
    if (!parts) continue;
    const std::string w = path(where, key);
    if (!parts->is_array()) throw bad_field(w, "'" + w + "' must be a list of parts", "invalid_type");
    std::string& out = std::string(key) == "content" ? content : summary;
    for (size_t j = 0; j < parts->size(); ++j) {
      const std::string pw = w + "[" + std::to_string(j) + "]";
      if (!(*parts)[j].is_object()) throw bad_field(pw, "'" + pw + "' must be an object", "invalid_type");
      if (!out.empty()) out += "\n\n";
      out += text_field((*parts)[j], "text", pw, true);
    }
  }
  return content.empty() ? summary : content;
}

void parse_input(const json& input, GenRequest& r) {
  if (input.is_string()) {
    r.messages.push_back({"user", input.get<std::string>(), "", {}, "", ""});
    return;
  }
  if (!input.is_array() || input.empty()) {
    throw bad_field("input", "'input' must be a string or a non-empty list of items", "invalid_type");
  }
  std::map<std::string, std::string> call_names;  // call_id -> function name, of the calls so far
  std::string pending_reasoning;                  // for the next assistant message
  bool assistant_last = false;                    // the previous item made or extended an assistant message
  for (size_t i = 0; i < input.size(); ++i) {
    const json& item = input[i];
    const std::string where = "input[" + std::to_string(i) + "]";
    if (!item.is_object()) throw bad_field(where, "'" + where + "' must be an object", "invalid_type");
    // An item without a type is a message (EasyInputMessage).
    const std::string type = field(item, "type") ? text_field(item, "type", where, true) : "message";
    if (type == "message") {
      ChatMessage m;
      m.role = text_field(item, "role", where, true);
      if (m.role != "user" && m.role != "assistant" && m.role != "system" && m.role != "developer") {
        throw bad_field(where + ".role", "'" + where + ".role' must be user, assistant, system or developer");
      }
      const json* c = field(item, "content");
      if (!c) throw bad_field(where + ".content", "'" + where + ".content' is required", "missing_required_parameter");
      m.content = content_text(*c, where + ".content");
      if (m.role == "assistant") {
        m.reasoning = std::move(pending_reasoning);
        pending_reasoning.clear();
      }
      assistant_last = m.role == "assistant";
      r.messages.push_back(std::move(m));
    } else if (type == "function_call") {
      ToolCallIn call;
      call.id = text_field(item, "call_id", where, true);
      call.name = text_field(item, "name", where, true);
      const json* args = field(item, "arguments");
      if (args && args->is_string()) {
        call.arguments = args->get<std::string>();
      } else if (args && args->is_object()) {  // lenient: an object where OpenAI sends its JSON text
        call.arguments = args->dump();
      } else if (args) {
        throw bad_field(where + ".arguments", "'" + where + ".arguments' must be JSON text", "invalid_type");
      } else {
        call.arguments = "{}";
      }
      if (!call_names.emplace(call.id, call.name).second) {
        throw bad_field(where + ".call_id", "'" + where + ".call_id' \"" + call.id + "\" is used by an earlier call");
      }
      // Calls right after an assistant message (or after each other) are
      // that message's calls, as the reply that made them was one message.
      if (!assistant_last || !pending_reasoning.empty()) {
        ChatMessage m;
        m.role = "assistant";
        m.reasoning = std::move(pending_reasoning);
        pending_reasoning.clear();
        r.messages.push_back(std::move(m));
      }
      r.messages.back().tool_calls.push_back(std::move(call));
      assistant_last = true;
    } else if (type == "function_call_output") {
      ChatMessage m;
      m.role = "tool";
      m.tool_call_id = text_field(item, "call_id", where, true);
      auto it = call_names.find(m.tool_call_id);
      if (it == call_names.end()) {
        throw bad_field(where + ".call_id", "'" + where + ".call_id' \"" + m.tool_call_id +
                                                "\" answers no function_call item before it");
      }
      m.name = it->second;
      const json* out = field(item, "output");
      if (!out) throw bad_field(where + ".output", "'" + where + ".output' is required", "missing_required_parameter");
      m.content = content_text(*out, where + ".output");
      assistant_last = false;
      r.messages.push_back(std::move(m));
    } else if (type == "reasoning") {
      std::string text = reasoning_text(item, where);
      if (!text.empty()) pending_reasoning += (pending_reasoning.empty() ? "" : "\n\n") + text;
      assistant_last = false;
    } else if (type == "item_reference") {
      throw bad_field(where + ".type", "this server keeps no state: item_reference items are not supported; send "
                                       "the items themselves", "unsupported_value");
    } else {
      throw bad_field(where + ".type", "'" + where + ".type' \"" + type + "\" is not supported (this server takes "
                                       "message, function_call, function_call_output and reasoning items)",
                      "unsupported_value");
    }
  }
}

void parse_tools(const json& body, GenRequest& r, json& echo) {
  echo["tools"] = json::array();
  if (const json* tools = field(body, "tools")) {
    if (!tools->is_array()) throw bad_field("tools", "'tools' must be a list of tools", "invalid_type");
    if (tools->size() > kMaxTools) {
      throw bad_field("tools", "'tools' may hold at most " + std::to_string(kMaxTools) + " tools");
    }
    std::set<std::string> names;
    for (size_t i = 0; i < tools->size(); ++i) {
      const json& t = (*tools)[i];
      const std::string where = "tools[" + std::to_string(i) + "]";
      if (!t.is_object()) throw bad_field(where, "'" + where + "' must be an object", "invalid_type");
      const std::string type = text_field(t, "type", where, true);
      if (type != "function") {
        throw bad_field(where + ".type", "'" + where + ".type' \"" + type + "\" is not supported: this server "
                                         "runs function tools only", "unsupported_value");
      }
      ToolSpec spec = function_tool(t, where, names);
      // The grammar holds the call to the schema whether strict or not.
      const bool strict = bool_field(t, "strict", where, true);
      echo["tools"].push_back({{"type", "function"},
                               {"name", spec.name},
                               {"description", spec.description.empty() ? json(nullptr) : json(spec.description)},
                               {"parameters", json::parse(spec.parameters.dump())},
                               {"strict", strict}});
      r.tools.push_back(std::move(spec));
    }
  }
  echo["tool_choice"] = "auto";
  if (const json* tc = field(body, "tool_choice")) {
    if (tc->is_string()) {
      r.tool_choice = tc->get<std::string>();
      if (r.tool_choice != "auto" && r.tool_choice != "none" && r.tool_choice != "required") {
        throw bad_field("tool_choice", "'tool_choice' must be \"auto\", \"none\", \"required\" or "
                                       "{\"type\": \"function\", \"name\": ...}");
      }
    } else if (tc->is_object()) {
      const std::string type = text_field(*tc, "type", "tool_choice", true);
      if (type != "function") {
        throw bad_field("tool_choice.type", "'tool_choice.type' \"" + type + "\" is not supported: this server runs "
                                            "function tools only", "unsupported_value");
      }
      r.tool_choice = "function";
      r.tool_choice_name = text_field(*tc, "name", "tool_choice", true);
    } else {
      throw bad_field("tool_choice", "'tool_choice' must be a string or an object", "invalid_type");
    }
    check_tool_choice(r);
    echo["tool_choice"] = *tc;
  }
  r.parallel_tool_calls = bool_field(body, "parallel_tool_calls", "", true);
  echo["parallel_tool_calls"] = r.parallel_tool_calls;
}

void parse_text_format(const json& body, GenRequest& r, json& echo) {
  echo["text"] = {{"format", {{"type", "text"}}}};
  const json* text = object_field(body, "text", "");
  if (!text) return;
  choice_field(*text, "verbosity", "text", {"low", "medium", "high"});
  const json* format = object_field(*text, "format", "text");
  if (!format) return;
  const std::string type = text_field(*format, "type", "text.format", true);
  if (type == "json_schema") {
    const json* schema = field(*format, "schema");
    if (!schema || !(schema->is_object() || schema->is_boolean())) {
      throw bad_field("text.format.schema", "'text.format.schema' must be a JSON Schema object",
                      schema ? "invalid_type" : "missing_required_parameter");
    }
    text_field(*format, "name", "text.format", false);
    text_field(*format, "description", "text.format", false);
    bool_field(*format, "strict", "text.format", false);
    r.grammar_kind = QKV_GRAMMAR_JSON_SCHEMA;
    r.grammar_source = schema->dump();  // replaced by the declared order in parse_responses_request
  } else if (type == "json_object") {
    r.grammar_kind = QKV_GRAMMAR_JSON_OBJECT;
  } else if (type != "text") {
    throw bad_field("text.format.type", "'text.format.type' must be text, json_object or json_schema (got \"" +
                                            type + "\")");
  }
  r.grammar_param = "text.format";
  echo["text"] = *text;
}

void parse_reasoning(const json& body, GenRequest& r, json& echo) {
  echo["reasoning"] = {{"effort", nullptr}, {"summary", nullptr}};
  const json* reasoning = object_field(body, "reasoning", "");
  if (!reasoning) return;
  const std::string effort =
      choice_field(*reasoning, "effort", "reasoning", {"none", "minimal", "low", "medium", "high", "xhigh"});
  // The server produces no summaries (it returns the reasoning text itself).
  const std::string summary = choice_field(*reasoning, "summary", "reasoning", {"auto", "concise", "detailed"});
  choice_field(*reasoning, "generate_summary", "reasoning", {"auto", "concise", "detailed"});
  if (effort == "none" || effort == "minimal") r.template_kwargs["enable_thinking"] = false;
  if (!effort.empty()) echo["reasoning"]["effort"] = effort;
  if (!summary.empty()) echo["reasoning"]["summary"] = summary;
}

void parse_metadata(const json& body, json& echo) {
  echo["metadata"] = json::object();
  const json* md = object_field(body, "metadata", "");
  if (!md) return;
  if (md->size() > kMaxMetadata) {
    throw bad_field("metadata", "'metadata' may hold at most " + std::to_string(kMaxMetadata) + " keys");
  }
  for (auto it = md->begin(); it != md->end(); ++it) {
    if (it.key().size() > 64 || !it->is_string() || it->get<std::string>().size() > 512) {
      throw bad_field("metadata", "'metadata' maps keys of up to 64 characters to strings of up to 512");
    }
  }
  echo["metadata"] = *md;
}

}  // namespace

ResponsesRequest parse_responses_request(const std::string& body_text, int max_depth) {
  const json body = parse_body(body_text, max_depth);
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  refuse_unsupported(body);
  ResponsesRequest q;
  GenRequest& r = q.gen;
  json& echo = q.echo;
  r.chat = true;
  r.model = text_field(body, "model", "", false);

  qkv_sampler_options_init(&r.sampler);
  r.sampler.temperature = static_cast<float>(number_field(body, "temperature", 0, 2, r.sampler.temperature));
  r.sampler.top_p = static_cast<float>(number_field(body, "top_p", 0, 1, r.sampler.top_p));
  if (r.sampler.top_p <= 0) throw bad_field("top_p", "'top_p' must be above 0 (1 turns it off)");
  echo["temperature"] = field(body, "temperature") ? json(body.at("temperature")) : json(1.0);
  echo["top_p"] = field(body, "top_p") ? json(body.at("top_p")) : json(1.0);

  echo["max_output_tokens"] = nullptr;
  if (const json* m = field(body, "max_output_tokens")) {
    if (!m->is_number_integer() || m->get<int64_t>() < 1 ||
        (m->is_number_unsigned() && m->get<uint64_t>() > std::numeric_limits<int32_t>::max()) ||
        m->get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      throw bad_field("max_output_tokens", "'max_output_tokens' must be an integer from 1 to 2147483647");
    }
    r.max_tokens = m->get<int64_t>();
    echo["max_output_tokens"] = r.max_tokens;
  }
  r.stream = bool_field(body, "stream", "", false);
  if (object_field(body, "stream_options", "") && !r.stream) {
    throw bad_field("stream_options", "'stream_options' is only allowed with 'stream': true");
  }
  r.user = text_field(body, "user", "", false);
  r.speculative = parse_speculative(body);  // llama-server's extension fields
  echo["user"] = r.user.empty() ? json(nullptr) : json(r.user);
  echo["store"] = bool_field(body, "store", "", true);
  echo["truncation"] = choice_field(body, "truncation", "", {"auto", "disabled"});
  if (echo["truncation"] == "") echo["truncation"] = "disabled";
  echo["service_tier"] = choice_field(body, "service_tier", "", {"auto", "default", "flex", "scale", "priority"});
  if (echo["service_tier"] == "") echo["service_tier"] = "default";
  text_field(body, "prompt_cache_key", "", false);
  text_field(body, "safety_identifier", "", false);
  parse_metadata(body, echo);

  const std::string instructions = text_field(body, "instructions", "", false);
  echo["instructions"] = field(body, "instructions") ? json(instructions) : json(nullptr);
  if (!instructions.empty()) r.messages.push_back({"system", instructions, "", {}, "", ""});
  const json* input = field(body, "input");
  if (!input) throw bad_field("input", "'input' is required", "missing_required_parameter");
  parse_input(*input, r);

  parse_tools(body, r, echo);
  parse_text_format(body, r, echo);
  parse_reasoning(body, r, echo);

  // Schemas in the key order the client wrote: the order structured output
  // emits properties in (json sorts keys). The body parsed once within the
  // depth limit, so this parse succeeds.
  if (r.grammar_kind == QKV_GRAMMAR_JSON_SCHEMA || !r.tools.empty()) {
    const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(body_text);
    if (r.grammar_kind == QKV_GRAMMAR_JSON_SCHEMA) {
      r.grammar_source = ordered.at("text").at("format").at("schema").dump();
    }
    for (size_t i = 0; i < r.tools.size(); ++i) {  // every tool is a function tool: the indices agree
      const auto& t = ordered.at("tools").at(i);
      if (t.contains("parameters") && t.at("parameters").is_object()) r.tools[i].parameters = t.at("parameters");
    }
  }
  return q;
}

}  // namespace qkv::serve

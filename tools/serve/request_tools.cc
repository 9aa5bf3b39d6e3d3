// The chat request's tool fields, read as OpenAI defines them: function
// tools with JSON Schema parameters, tool_choice (auto, none, required or a
// named function), parallel_tool_calls, assistant messages carrying
// tool_calls, and tool messages answering them by tool_call_id. llama.cpp's
// reasoning_format and chat_template_kwargs ride along.
#include <regex>
#include <set>

#include "tools/serve/api_error.h"
#include "tools/serve/request.h"

namespace qkv::serve {

using nlohmann::json;

namespace {

constexpr size_t kMaxTools = 128;
constexpr size_t kMaxToolCalls = 128;  // per assistant message

const json* get(const json& o, const char* name) {
  auto it = o.find(name);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

std::string text_of(const json& o, const char* name, const std::string& where, bool required) {
  const json* v = get(o, name);
  if (!v) {
    if (required) throw bad_field(where, "'" + where + "." + name + "' is required", "missing_required_parameter");
    return {};
  }
  if (!v->is_string()) throw bad_field(where, "'" + where + "." + name + "' must be a string", "invalid_type");
  return v->get<std::string>();
}

}  // namespace

bool valid_tool_name(const std::string& name, size_t max_length) {
  if (name.empty() || name.size() > max_length) return false;
  static const std::regex re("^[a-zA-Z0-9_.-]+$");
  return std::regex_match(name, re);
}

void check_tool_choice(const GenRequest& r) {
  if (r.tools.empty() && r.tool_choice != "none" && r.tool_choice != "auto") {
    throw bad_field("tool_choice", "'tool_choice' needs 'tools'");
  }
  if (r.tool_choice == "function") {
    bool found = false;
    for (const ToolSpec& t : r.tools) found |= t.name == r.tool_choice_name;
    if (!found) {
      throw bad_field("tool_choice", "'tool_choice' names the function \"" + r.tool_choice_name +
                                         "\", which is not in 'tools'");
    }
  }
}

ToolSpec function_tool(const json& f, const std::string& where, std::set<std::string>& names) {
  // Errors name the field's whole path as their param.
  auto text = [&](const char* key, bool required) {
    const std::string at = where + "." + key;
    const json* v = get(f, key);
    if (!v) {
      if (required) throw bad_field(at, "'" + at + "' is required", "missing_required_parameter");
      return std::string();
    }
    if (!v->is_string()) throw bad_field(at, "'" + at + "' must be a string", "invalid_type");
    return v->get<std::string>();
  };
  ToolSpec spec;
  spec.name = text("name", true);
  if (!valid_tool_name(spec.name)) {
    throw bad_field(where + ".name", "'" + where + ".name' must be 1 to 64 letters, digits, '_', '.' or '-' (got \"" +
                                         spec.name + "\")");
  }
  if (!names.insert(spec.name).second) throw bad_field(where + ".name", "two tools are named \"" + spec.name + "\"");
  spec.description = text("description", false);
  if (const json* p = get(f, "parameters")) {
    if (!p->is_object()) {
      throw bad_field(where + ".parameters", "'" + where + ".parameters' must be a JSON Schema object", "invalid_type");
    }
    spec.parameters = *p;
  } else {
    spec.parameters = {{"type", "object"}, {"properties", json::object()}};
  }
  return spec;
}

void parse_tool_fields(const json& body, GenRequest& r) {
  if (const json* tools = get(body, "tools")) {
    if (!tools->is_array()) throw bad_field("tools", "'tools' must be a list of tools", "invalid_type");
    if (tools->size() > kMaxTools) {
      throw bad_field("tools", "'tools' may hold at most " + std::to_string(kMaxTools) + " tools");
    }
    std::set<std::string> names;
    for (size_t i = 0; i < tools->size(); ++i) {
      const json& t = (*tools)[i];
      const std::string where = "tools[" + std::to_string(i) + "]";
      if (!t.is_object()) throw bad_field(where, "'" + where + "' must be an object", "invalid_type");
      const std::string type = text_of(t, "type", where, true);
      if (type != "function") {
        throw bad_field(where + ".type", "'" + where + ".type' must be \"function\" (got \"" + type + "\")");
      }
      const json* f = get(t, "function");
      if (!f || !f->is_object()) {
        throw bad_field(where + ".function", "'" + where + ".function' must be an object", "missing_required_parameter");
      }
      ToolSpec spec = function_tool(*f, where + ".function", names);
      r.tools.push_back(std::move(spec));
    }
  }
  if (const json* tc = get(body, "tool_choice")) {
    if (tc->is_string()) {
      r.tool_choice = tc->get<std::string>();
      if (r.tool_choice != "auto" && r.tool_choice != "none" && r.tool_choice != "required") {
        throw bad_field("tool_choice", "'tool_choice' must be \"auto\", \"none\", \"required\" or a function");
      }
    } else if (tc->is_object()) {
      const json* f = get(*tc, "function");
      if (text_of(*tc, "type", "tool_choice", true) != "function" || !f || !f->is_object()) {
        throw bad_field("tool_choice", "'tool_choice' as an object must be {\"type\": \"function\", \"function\": "
                                       "{\"name\": ...}}");
      }
      r.tool_choice = "function";
      r.tool_choice_name = text_of(*f, "name", "tool_choice.function", true);
    } else {
      throw bad_field("tool_choice", "'tool_choice' must be a string or an object", "invalid_type");
    }
    check_tool_choice(r);
  }
  if (const json* p = get(body, "parallel_tool_calls")) {
    if (!p->is_boolean()) throw bad_field("parallel_tool_calls", "'parallel_tool_calls' must be true or false", "invalid_type");
    r.parallel_tool_calls = p->get<bool>();
  }
  if (const json* rf = get(body, "reasoning_format")) {
    if (!rf->is_string()) throw bad_field("reasoning_format", "'reasoning_format' must be a string", "invalid_type");
    const std::string v = rf->get<std::string>();
    if (v != "none" && v != "auto" && v != "deepseek" && v != "deepseek-legacy") {
      throw bad_field("reasoning_format", "'reasoning_format' must be none, auto or deepseek");
    }
    r.extract_reasoning = v != "none";
  }
  if (const json* kw = get(body, "chat_template_kwargs")) {
    if (!kw->is_object()) throw bad_field("chat_template_kwargs", "'chat_template_kwargs' must be an object", "invalid_type");
    for (const char* reserved : {"messages", "tools", "bos_token", "eos_token", "add_generation_prompt"}) {
      if (kw->contains(reserved)) {
        throw bad_field("chat_template_kwargs", std::string("'chat_template_kwargs' may not set '") + reserved + "'");
      }
    }
    r.template_kwargs = *kw;
  }
}

void parse_message_tool_parts(const json& msg, const std::string& where, ChatMessage& m) {
  m.reasoning = text_of(msg, "reasoning_content", where, false);
  if (const json* calls = get(msg, "tool_calls")) {
    if (m.role != "assistant") throw bad_field(where + ".tool_calls", "only assistant messages have 'tool_calls'");
    if (!calls->is_array()) throw bad_field(where + ".tool_calls", "'" + where + ".tool_calls' must be a list", "invalid_type");
    if (calls->size() > kMaxToolCalls) {
      throw bad_field(where + ".tool_calls", "'" + where + ".tool_calls' may hold at most " +
                                                 std::to_string(kMaxToolCalls) + " calls");
    }
    for (size_t i = 0; i < calls->size(); ++i) {
      const json& c = (*calls)[i];
      const std::string w = where + ".tool_calls[" + std::to_string(i) + "]";
      if (!c.is_object()) throw bad_field(w, "'" + w + "' must be an object", "invalid_type");
      const json* f = get(c, "function");
      if (!f || !f->is_object()) throw bad_field(w + ".function", "'" + w + ".function' must be an object");
      ToolCallIn call;
      call.id = text_of(c, "id", w, true);
      call.name = text_of(*f, "name", w + ".function", true);
      const json* args = get(*f, "arguments");
      if (args && args->is_string()) {
        call.arguments = args->get<std::string>();
      } else if (args && args->is_object()) {  // lenient: an object where OpenAI sends its JSON text
        call.arguments = args->dump();
      } else if (args) {
        throw bad_field(w + ".function.arguments", "'" + w + ".function.arguments' must be JSON text", "invalid_type");
      } else {
        call.arguments = "{}";
      }
      m.tool_calls.push_back(std::move(call));
    }
  }
  if (m.role == "tool") {
    m.tool_call_id = text_of(msg, "tool_call_id", where, true);
    m.name = text_of(msg, "name", where, false);
  }
}

void check_tool_messages(const GenRequest& r) {
  std::set<std::string> ids;
  for (size_t i = 0; i < r.messages.size(); ++i) {
    const ChatMessage& m = r.messages[i];
    for (const ToolCallIn& c : m.tool_calls) ids.insert(c.id);
    if (m.role == "tool" && !ids.count(m.tool_call_id)) {
      const std::string where = "messages[" + std::to_string(i) + "]";
      throw bad_field(where + ".tool_call_id", "'" + where + ".tool_call_id' \"" + m.tool_call_id +
                                                   "\" answers no tool call of an earlier assistant message");
    }
  }
}

}  // namespace qkv::serve

namespace qkv::serve {

void keep_declared_order(const std::string& body_text, GenRequest& r) {
  if (r.grammar_kind != QKV_GRAMMAR_JSON_SCHEMA && r.tools.empty()) return;
  // Already parsed once within the depth limit, so this parse succeeds.
  const nlohmann::ordered_json body = nlohmann::ordered_json::parse(body_text);
  if (r.grammar_kind == QKV_GRAMMAR_JSON_SCHEMA) {
    const nlohmann::ordered_json* schema = nullptr;
    if (r.grammar_param == "json_schema") {
      schema = &body.at("json_schema");
    } else if (body.at("response_format").contains("json_schema")) {
      schema = &body.at("response_format").at("json_schema").at("schema");
    } else {
      schema = &body.at("response_format").at("schema");
    }
    r.grammar_source = schema->dump();
  }
  if (!r.tools.empty()) {
    const auto& tools = body.at("tools");
    for (size_t i = 0; i < r.tools.size() && i < tools.size(); ++i) {
      const auto& f = tools[i].at("function");
      if (f.contains("parameters") && f.at("parameters").is_object()) r.tools[i].parameters = f.at("parameters");
    }
  }
}

}  // namespace qkv::serve

#include "runtime/chat_template.h"

#include <nlohmann/json.hpp>

#include "kernels/error.h"
#include "runtime/jinja/jinja.h"

namespace qkv {

namespace {

std::string token_text(const GGUFFile& file, const char* id_key) {
  const GGUFValue* id = file.find(id_key);
  const GGUFValue* tokens = file.find("tokenizer.ggml.tokens");
  if (!id || !tokens || !id->is_number()) return "";
  const int64_t i = id->as_int();
  if (i < 0 || static_cast<uint64_t>(i) >= tokens->strings.size()) return "";
  return tokens->strings[static_cast<size_t>(i)];
}

jinja::Value to_value(const nlohmann::ordered_json& j, int depth) {
  if (depth > 100) fail("conversation JSON nested deeper than 100 levels");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return jinja::Value::none();
    case nlohmann::ordered_json::value_t::boolean: return jinja::Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return jinja::Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return jinja::Value(static_cast<double>(u));
      return jinja::Value(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return jinja::Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return jinja::Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      jinja::List l;
      for (const auto& x : j) l.push_back(to_value(x, depth + 1));
      return jinja::Value::list(std::move(l));
    }
    case nlohmann::ordered_json::value_t::object: {
      jinja::Value d = jinja::Value::dict();
      for (auto it = j.begin(); it != j.end(); ++it) d.dict_ref().set(it.key(), to_value(it.value(), depth + 1));
      return d;
    }
    default: fail("conversation JSON holds a value of an unsupported type");
  }
}

}  // namespace

ChatTemplate chat_template_of(const GGUFFile& file) {
  ChatTemplate t;
  if (const GGUFValue* v = file.find("tokenizer.chat_template"); v && v->type == GGUFType::STRING) t.source = v->as_string();
  t.bos_token = token_text(file, "tokenizer.ggml.bos_token_id");
  t.eos_token = token_text(file, "tokenizer.ggml.eos_token_id");
  return t;
}

std::string render_chat(const ChatTemplate& tmpl, const std::string& conversation_json, bool add_generation_prompt) {
  if (tmpl.source.empty()) fail("the model has no chat template (tokenizer.chat_template); give one with --template");
  // nlohmann::ordered_json keeps the keys in file order, as Python's json does.
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(conversation_json);
  } catch (const nlohmann::json::exception& e) {  // syntax, or a number out of range
    fail("the conversation is not valid JSON: ", e.what());
  }
  jinja::Value ctx = jinja::Value::dict();
  jinja::Dict& d = ctx.dict_ref();
  d.set("bos_token", jinja::Value(tmpl.bos_token));
  d.set("eos_token", jinja::Value(tmpl.eos_token));
  if (j.is_array()) {
    d.set("messages", to_value(j, 0));
  } else if (j.is_object()) {
    if (!j.contains("messages") || !j["messages"].is_array()) fail("the conversation JSON object needs a \"messages\" array");
    for (auto it = j.begin(); it != j.end(); ++it) d.set(it.key(), to_value(it.value(), 0));
  } else {
    fail("the conversation JSON must be an array of messages or an object with \"messages\"");
  }
  d.set("add_generation_prompt", jinja::Value(add_generation_prompt));
  return jinja::Template(tmpl.source).render(ctx);
}

}  // namespace qkv

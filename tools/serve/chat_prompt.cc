#include "tools/serve/chat_prompt.h"

#include <algorithm>
#include <ctime>
#include <map>
#include <mutex>

#include <nlohmann/json.hpp>

#include "tools/serve/api_error.h"

namespace qkv::serve {
namespace {

using nlohmann::ordered_json;

std::string chatml(const ordered_json& messages) {
  std::string text;
  for (const auto& m : messages) {
    const std::string role = m["role"] == "developer" ? "system" : m["role"].get<std::string>();
    text += "<|im_start|>" + role + "\n" + m.value("content", std::string()) + "<|im_end|>\n";
  }
  return text + "<|im_start|>assistant\n";
}

// A tool call's arguments as Hugging Face templates expect them: an object
// when the text is a JSON object (most templates apply tojson or items()).
ordered_json arguments_value(const std::string& text) {
  try {
    ordered_json j = ordered_json::parse(text);
    if (j.is_object()) return j;
  } catch (const nlohmann::json::exception&) {
  }
  return text;
}

ordered_json messages_json(const GenRequest& r, bool object_arguments) {
  ordered_json conv = ordered_json::array();
  for (const ChatMessage& m : r.messages) {
    ordered_json j = {{"role", m.role}, {"content", m.content}};
    if (!m.reasoning.empty()) j["reasoning_content"] = m.reasoning;
    if (!m.tool_calls.empty()) {
      ordered_json calls = ordered_json::array();
      for (const ToolCallIn& c : m.tool_calls) {
        calls.push_back({{"id", c.id},
                         {"type", "function"},
                         {"function", {{"name", c.name}, {"arguments", object_arguments ? arguments_value(c.arguments) : ordered_json(c.arguments)}}}});
      }
      j["tool_calls"] = calls;
    }
    if (m.role == "tool") {
      j["tool_call_id"] = m.tool_call_id;
      if (!m.name.empty()) j["name"] = m.name;
    }
    conv.push_back(std::move(j));
  }
  return conv;
}

ordered_json tools_json(const GenRequest& r) {
  ordered_json tools = ordered_json::array();
  for (const ToolSpec& t : r.tools) {
    // description is optional in OpenAI's API, but templates such as
    // Functionary's and gpt-oss's concatenate it unguarded (an undefined
    // value there fails, in Jinja2 too): absent, it is empty.
    ordered_json f = {{"name", t.name}, {"description", t.description}};
    f["parameters"] = ordered_json::parse(t.parameters.dump());
    tools.push_back({{"type", "function"}, {"function", f}});
  }
  return tools;
}

// Variables a family's templates read besides `tools`: Firefunction v2 takes
// the tools as `functions` (JSON text) and today's date as `datetime`;
// Command R+ prints every parameter's description unguarded.
void family_variables(toolcall::Family family, const ordered_json& tools, ordered_json& vars) {
  if (family == toolcall::Family::kFirefunctionV2) {
    vars["functions"] = tools.dump(2);
    char date[64];
    const std::time_t now = std::time(nullptr);
    std::tm utc{};
    gmtime_r(&now, &utc);
    std::strftime(date, sizeof date, "%b %d %Y %H:%M:%S GMT", &utc);
    vars["datetime"] = date;
  }
  if (family == toolcall::Family::kCommandRPlus && vars.contains("tools")) {
    for (auto& tool : vars["tools"]) {
      auto& params = tool["function"]["parameters"];
      if (!params.is_object() || !params.contains("properties") || !params["properties"].is_object()) continue;
      for (auto& prop : params["properties"]) {
        if (prop.is_object() && !prop.contains("description")) prop["description"] = "";
      }
    }
  }
}

std::string render_template(const qkv_model* model, const std::string& source, const ordered_json& vars) {
  const std::string json = vars.dump();
  const char* src = source.empty() ? nullptr : source.c_str();
  int64_t n = 0;
  qkv_status st = qkv_chat_render(model, src, json.c_str(), 1, nullptr, 0, &n);
  std::string text(static_cast<size_t>(n) + 1, '\0');
  if (st == QKV_ERR_BUFFER_TOO_SMALL) st = qkv_chat_render(model, src, json.c_str(), 1, text.data(), n + 1, &n);
  if (st != QKV_OK) {
    throw ApiError(400, std::string("the model's chat template failed: ") + qkv_last_error(), "invalid_request_error",
                   "messages");
  }
  text.resize(static_cast<size_t>(n));
  return text;
}

// A property of a template, found once by rendering a probe and cached per
// template text (source: the template rendered, "" for the model's; text:
// that template's text).
template <typename Probe>
bool template_property(const char* what, const std::string& text, Probe probe) {
  static std::mutex mu;
  static std::map<std::pair<std::string, size_t>, bool> known;
  const auto key = std::make_pair(std::string(what), std::hash<std::string>()(text));
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = known.find(key);
    if (it != known.end()) return it->second;
  }
  bool value = false;
  try {
    value = probe();
  } catch (const ApiError&) {
  }
  std::lock_guard<std::mutex> lock(mu);
  known[key] = value;
  return value;
}

// Whether the template renders a system message: some (Gemma's) raise on
// one, others drop it.
bool renders_system_role(const qkv_model* model, const std::string& source, const std::string& text) {
  return template_property("system", text, [&] {
    const std::string marker = "qkv-system-probe";
    ordered_json vars = {{"messages", ordered_json::array({{{"role", "system"}, {"content", marker}},
                                                           {{"role", "user"}, {"content", "hi"}}})}};
    return render_template(model, source, vars).find(marker) != std::string::npos;
  });
}

// Whether the template takes a call's arguments as an object (most apply
// tojson or items() to them) rather than as the JSON text OpenAI sends
// (DeepSeek V3.1's and Functionary's concatenate them as a string).
bool takes_object_arguments(const qkv_model* model, const std::string& source, const std::string& text) {
  return template_property("object-arguments", text, [&] {
    const ordered_json call = {{"id", "call_probe"},
                               {"type", "function"},
                               {"function", {{"name", "qkv_probe_tool"}, {"arguments", {{"qkv_probe_arg", 1}}}}}};
    const ordered_json tool = {{"type", "function"},
                               {"function", {{"name", "qkv_probe_tool"}, {"description", ""},
                                             {"parameters", {{"type", "object"}, {"properties", ordered_json::object()}}}}}};
    ordered_json vars = {
        {"messages", ordered_json::array({{{"role", "user"}, {"content", "hi"}},
                                          {{"role", "assistant"}, {"content", ""}, {"tool_calls", {call}}},
                                          {{"role", "tool"}, {"tool_call_id", "call_probe"}, {"content", "ok"}}})},
        {"tools", ordered_json::array({tool})}};
    return render_template(model, source, vars).find("qkv_probe_arg") != std::string::npos;
  });
}

// A template that knows no tools gets the conversation's calls and results
// as text in the generic format the model is told to answer in: an assistant
// turn's calls as {"tool_calls": [...]}, and tool results as a user turn
// (consecutive results in one, so user and assistant turns still alternate).
ordered_json calls_as_text(const ordered_json& messages) {
  ordered_json out = ordered_json::array();
  for (const ordered_json& m : messages) {
    if (m.contains("tool_calls")) {
      ordered_json calls = ordered_json::array();
      for (const ordered_json& c : m["tool_calls"]) {
        calls.push_back({{"name", c["function"]["name"]}, {"arguments", c["function"]["arguments"]}, {"id", c["id"]}});
      }
      const std::string text = m["content"].get<std::string>();
      const std::string call_text = ordered_json{{"tool_calls", calls}}.dump();
      out.push_back({{"role", "assistant"}, {"content", text.empty() ? call_text : text + "\n" + call_text}});
    } else if (m["role"] == "tool") {
      ordered_json result = {{"tool_call_id", m["tool_call_id"]}};
      if (m.contains("name")) result["name"] = m["name"];
      result["content"] = m["content"];
      const std::string text = ordered_json{{"tool_response", result}}.dump();
      if (!out.empty() && out.back().value("qkv_tool_results", false)) {
        out.back()["content"] = out.back()["content"].get<std::string>() + "\n" + text;
      } else {
        out.push_back({{"role", "user"}, {"content", text}, {"qkv_tool_results", true}});
      }
    } else {
      out.push_back(m);
    }
  }
  for (ordered_json& m : out) m.erase("qkv_tool_results");
  return out;
}

std::vector<int32_t> tokenize_special(const qkv_model* model, const std::string& text) {
  // Special tokens written by the template become their ids; BOS is added as
  // the vocabulary asks unless the template already wrote it.
  int64_t n = 0;
  const int flags = QKV_TOKENIZE_PARSE_SPECIAL;
  qkv_tokenize_text(model, text.data(), static_cast<int64_t>(text.size()), flags, nullptr, 0, &n);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  if (qkv_tokenize_text(model, text.data(), static_cast<int64_t>(text.size()), flags, ids.data(), n, &n) != QKV_OK) {
    throw ApiError(400, std::string("cannot tokenize the chat prompt: ") + qkv_last_error());
  }
  ids.resize(static_cast<size_t>(n));
  int64_t n_bos = 0;
  int32_t bos[2];
  // ADD_SPECIAL on empty text yields exactly what the vocabulary adds (BOS, maybe EOS).
  if (qkv_tokenize_text(model, "", 0, QKV_TOKENIZE_ADD_SPECIAL, bos, 2, &n_bos) == QKV_OK && n_bos >= 1 &&
      (ids.empty() || ids[0] != bos[0])) {
    ids.insert(ids.begin(), bos[0]);
  }
  return ids;
}

}  // namespace

ChatPrompt render_chat(const qkv_model* model, const std::string& template_source, const GenRequest& r) {
  ChatPrompt p;
  const char* model_template = qkv_model_chat_template(model);
  const std::string source = !template_source.empty() ? template_source : model_template ? model_template : "";
  const bool with_tools = !r.tools.empty() && r.tool_choice != "none";
  p.family = source.empty() ? toolcall::Family::kGeneric : toolcall::detect_family(source);
  bool history_calls = false;
  for (const ChatMessage& m : r.messages) history_calls |= !m.tool_calls.empty();
  const bool generic = p.family == toolcall::Family::kGeneric;
  ordered_json messages =
      messages_json(r, generic || !history_calls || takes_object_arguments(model, template_source, source));
  if (generic) messages = calls_as_text(messages);
  if (with_tools && p.family == toolcall::Family::kGeneric) {
    // The template knows no tools: describe them in the system message.
    const std::string about = toolcall::generic_tool_system_prompt(tools_json(r).dump());
    const bool system_role = source.empty() || renders_system_role(model, template_source, source);
    auto first_user = std::find_if(messages.begin(), messages.end(),
                                   [](const ordered_json& m) { return m["role"] == "user"; });
    if (!system_role && first_user != messages.end()) {
      // No system role (Gemma): the description opens the first user message.
      (*first_user)["content"] = about + "\n\n" + (*first_user)["content"].get<std::string>();
    } else if (!messages.empty() && messages[0]["role"] == "system") {
      messages[0]["content"] = messages[0]["content"].get<std::string>() + "\n\n" + about;
    } else {
      messages.insert(messages.begin(), ordered_json{{"role", "system"}, {"content", about}});
    }
  }
  if (source.empty()) {
    p.text = chatml(messages);
    p.stop = {"<|im_end|>", "<|im_start|>"};
  } else {
    ordered_json vars = ordered_json::object();
    for (auto it = r.template_kwargs.begin(); it != r.template_kwargs.end(); ++it) {
      vars[it.key()] = ordered_json::parse(it.value().dump());
    }
    vars["messages"] = messages;
    if (with_tools && p.family != toolcall::Family::kGeneric) vars["tools"] = tools_json(r);
    // (Firefunction's template reads `functions` with or without tools.)
    family_variables(p.family, with_tools ? tools_json(r) : ordered_json::array(), vars);
    p.text = render_template(model, template_source, vars);
  }
  p.starts_in_reasoning = toolcall::prompt_opens_reasoning(p.family, p.text);
  p.tokens = tokenize_special(model, p.text);
  return p;
}

}  // namespace qkv::serve

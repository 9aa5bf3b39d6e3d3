// The table of tool-call and reasoning formats, one row per template family:
// how to recognise the family in a chat template's source, its thinking tags,
// its call openers and the forms that follow them. The parsers read only this
// table; adding a family is adding a row.
#include <nlohmann/json.hpp>

#include "runtime/tool_calls/tool_calls_internal.h"

namespace qkv::toolcall {
namespace detail {

namespace {

// DeepSeek's markers use fullwidth bars and U+2581 "lower one eighth block" for spaces.
#define DS_CALLS_BEGIN "<\xEF\xBD\x9Ctool\xE2\x96\x81" "calls\xE2\x96\x81" "begin\xEF\xBD\x9C>"
#define DS_CALLS_END "<\xEF\xBD\x9Ctool\xE2\x96\x81" "calls\xE2\x96\x81" "end\xEF\xBD\x9C>"
#define DS_CALL_BEGIN "<\xEF\xBD\x9Ctool\xE2\x96\x81" "call\xE2\x96\x81" "begin\xEF\xBD\x9C>"
#define DS_CALL_END "<\xEF\xBD\x9Ctool\xE2\x96\x81" "call\xE2\x96\x81" "end\xEF\xBD\x9C>"
#define DS_SEP "<\xEF\xBD\x9Ctool\xE2\x96\x81" "sep\xEF\xBD\x9C>"

FamilySpec row(Family family, const char* name, std::vector<std::vector<const char*>> detect) {
  FamilySpec f;
  f.family = family;
  f.name = name;
  f.detect = std::move(detect);
  return f;
}

Opener opener(const char* text, std::vector<Form> forms) {
  Opener o;
  o.text = text;
  o.forms = std::move(forms);
  return o;
}

std::vector<FamilySpec> make_table() {
  std::vector<FamilySpec> t;
  // Rows are tried in this order by detect_family: the more specific first.
  {
    FamilySpec f = row(Family::kGptOss, "gpt-oss", {{"<|channel|>", "<|message|>"}});
    f.layout = Layout::kHarmony;
    f.opener_text = "<|start|>assistant<|channel|>commentary to=functions.";
    f.triggers = {"to=functions."};
    t.push_back(f);
  }
  {
    FamilySpec f = row(Family::kCommandR7B, "Command R7B", {{"<|START_ACTION|>"}});
    f.think_open = "<|START_THINKING|>";
    f.think_close = "<|END_THINKING|>";
    Opener o = opener("<|START_ACTION|>", {Form::kArray});
    o.close = "<|END_ACTION|>";
    f.openers = {o};
    f.silent = {"<|START_RESPONSE|>", "<|END_RESPONSE|>"};
    f.call_ids = true;
    f.opener_text = "<|START_ACTION|>";
    f.triggers = {"<|START_ACTION|>"};
    t.push_back(f);
  }
  {
    FamilySpec f = row(Family::kCommandRPlus, "Command R+", {{"<|CHATBOT_TOKEN|>", "Action:"}});
    Opener o = opener("Action:", {Form::kArray});
    o.args_prefix = "```json";  // here: before the array
    o.close = "```";
    f.openers = {o};
    f.opener_text = "Action:\n```json\n";
    f.triggers = {"Action:"};
    t.push_back(f);
  }
  {
    FamilySpec f = row(Family::kDeepSeekR1, "DeepSeek R1", {{DS_CALLS_BEGIN, "```json"}});
    f.think_open = "<think>";
    f.think_close = "</think>";
    Opener o = opener(DS_CALL_BEGIN, {Form::kNamed});
    o.name_prefix = "function" DS_SEP;
    o.name_end = "\n";
    o.args_prefix = "```json";
    o.args_suffix = "```";
    o.close = DS_CALL_END;
    f.openers = {o};
    f.call_silent = {DS_CALLS_BEGIN, DS_CALLS_END};
    f.opener_text = DS_CALLS_BEGIN DS_CALL_BEGIN "function" DS_SEP;
    f.triggers = {DS_CALLS_BEGIN, DS_CALL_BEGIN};
    t.push_back(f);
  }
  {
    FamilySpec f = row(Family::kDeepSeekV31, "DeepSeek V3.1", {{DS_CALLS_BEGIN}});
    f.think_open = "<think>";
    f.think_close = "</think>";
    Opener o = opener(DS_CALL_BEGIN, {Form::kNamed});
    o.name_end = DS_SEP;
    o.close = DS_CALL_END;
    f.openers = {o};
    f.call_silent = {DS_CALLS_BEGIN, DS_CALLS_END};
    f.opener_text = DS_CALLS_BEGIN DS_CALL_BEGIN;
    f.triggers = {DS_CALLS_BEGIN, DS_CALL_BEGIN};
    t.push_back(f);
  }
  {
    FamilySpec f = row(Family::kFunctionaryV31, "Functionary v3.1", {{"<function="}});
    Opener fn = opener("<function=", {Form::kNamed});
    fn.name_end = ">";
    fn.close = "</function>";
    Opener code = opener("<|python_tag|>", {Form::kRawCode});
    code.raw_code_name = "python";
    f.openers = {fn, code};
    f.opener_text = "<function=";
    f.triggers = {"<function=", "<|python_tag|>"};
    t.push_back(f);
  }
  {
    FamilySpec f = row(Family::kFirefunctionV2, "Firefunction v2", {{"functools["}});
    f.openers = {opener("functools", {Form::kArray})};
    f.opener_text = " functools[";
    f.triggers = {" functools["};
    t.push_back(f);
  }
  {
    FamilySpec f = row(Family::kMistral, "Mistral", {{"[TOOL_CALLS]"}});
    Opener o = opener("[TOOL_CALLS]", {Form::kArray, Form::kNamed});
    o.name_end = "[ARGS]";
    o.id_marker = "[CALL_ID]";
    f.openers = {o};
    f.call_ids = true;
    f.opener_text = "[TOOL_CALLS]";
    f.triggers = {"[TOOL_CALLS]"};
    t.push_back(f);
  }
  {
    FamilySpec f = row(Family::kHermes, "Hermes 2 Pro / Qwen", {{"<tool_call>"}});
    f.think_open = "<think>";
    f.think_close = "</think>";
    Opener o = opener("<tool_call>", {Form::kObject});
    o.close = "</tool_call>";
    f.openers = {o};
    f.opener_text = "<tool_call>\n";
    f.triggers = {"<tool_call>"};
    t.push_back(f);
  }
  {
    FamilySpec f = row(Family::kLlama3, "Llama 3.x", {{"<|start_header_id|>", "ipython"}, {"<|python_tag|>"}});
    f.openers = {opener("<|python_tag|>", {Form::kObject, Form::kPythonCall})};
    f.bare_object_calls = true;
    f.call_separators = ";";
    f.triggers = {"{\"name\"", "<|python_tag|>"};
    t.push_back(f);
  }
  {
    FamilySpec f = row(Family::kGeneric, "Generic", {{}});
    f.layout = Layout::kGenericJson;
    t.push_back(f);
  }
  t.push_back(row(Family::kNone, "none", {}));
  return t;
}

const std::vector<FamilySpec>& table() {
  static const std::vector<FamilySpec> t = make_table();
  return t;
}

}  // namespace

const FamilySpec& spec_of(Family family) {
  for (const FamilySpec& f : table())
    if (f.family == family) return f;
  return table().back();  // kNone
}

}  // namespace detail

using detail::spec_of;

const char* family_name(Family family) { return spec_of(family).name; }

Family detect_family(const std::string& source) {
  for (const detail::FamilySpec& f : detail::table()) {
    for (const auto& group : f.detect) {
      bool all = true;
      for (const char* needle : group) all = all && source.find(needle) != std::string::npos;
      if (all) return f.family;
    }
  }
  return Family::kGeneric;
}

bool has_reasoning(Family family) {
  return spec_of(family).think_open != nullptr || spec_of(family).layout == detail::Layout::kHarmony;
}

bool prompt_opens_reasoning(Family family, const std::string& prompt) {
  const detail::FamilySpec& f = spec_of(family);
  if (!f.think_open) return false;
  size_t open = prompt.rfind(f.think_open);
  if (open == std::string::npos) return false;
  // Only the prompt's tail counts: an opener followed by nothing but whitespace.
  return detail::skip_spaces(prompt, open + std::string(f.think_open).size()) == prompt.size();
}

std::vector<std::string> call_triggers(Family family) {
  const detail::FamilySpec& f = spec_of(family);
  return std::vector<std::string>(f.triggers.begin(), f.triggers.end());
}

std::string call_opener(Family family) { return spec_of(family).opener_text; }

std::string generic_tool_system_prompt(const std::string& tools_json) {
  std::string tools = tools_json;
  try {
    tools = nlohmann::json::parse(tools_json).dump(2);
  } catch (const std::exception&) {
    // Not JSON: pass it on as written; the model still sees the tool text.
  }
  return "You can call the following tools:\n" + tools +
         "\n\nAnswer with a single JSON object and nothing else, in one of two shapes.\n"
         "To call one or more tools:\n"
         "{\"tool_calls\": [{\"name\": \"<tool name>\", \"arguments\": {<argument name>: <value>, ...}}]}\n"
         "To answer the user directly:\n"
         "{\"response\": \"<your answer>\"}\n";
}

}  // namespace qkv::toolcall

#include "runtime/tool_calls/call_grammar.h"

#include "kernels/error.h"
#include "runtime/grammar/json_schema.h"

namespace qkv::toolcall {

namespace {

// A GBNF literal of text.
std::string literal(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          static const char* hex = "0123456789ABCDEF";
          out += "\\x";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

// The name as a JSON string literal, as GBNF.
std::string json_name(const std::string& name) { return literal(nlohmann::json(name).dump()); }

// How a family writes its calls. A call is opener + body, where body uses
// @NAME@ (the name as a JSON string), @RAW@ (the name as is) and @ARGS@ (the
// arguments object); calls follow one another with separator; the reply
// ends with closer. Grammars are GBNF fragments; `ws` is up to two spaces
// or newlines.
struct Format {
  Family family;
  const char* opener;     // literal text; also the lazy trigger
  const char* body;       // GBNF, with the placeholders
  const char* separator;  // GBNF between calls (after the first, each call repeats the opener unless list)
  bool list;              // calls inside one opener ... closer (a JSON list): the opener is not repeated
  const char* closer;     // GBNF after the last call
};

const Format kFormats[] = {
    {Family::kHermes, "<tool_call>", "ws \"{\\\"name\\\": \" @NAME@ \", \\\"arguments\\\": \" @ARGS@ \"}\" ws \"</tool_call>\"",
     "ws", false, ""},
    {Family::kLlama3, "{\"name\"", "\": \" @NAME@ \", \\\"parameters\\\": \" @ARGS@ \"}\"", "\"; \"", false, ""},
    // Devstral's form (the template renders it): [TOOL_CALLS]name[ARGS]{...} per call.
    {Family::kMistral, "[TOOL_CALLS]", "@RAW@ \"[ARGS]\" @ARGS@", "", false, ""},
    {Family::kFunctionaryV31, "<function=", "@RAW@ \">\" @ARGS@ \"</function>\"", "", false, ""},
    {Family::kFirefunctionV2, " functools[", "\"{\\\"name\\\": \" @NAME@ \", \\\"arguments\\\": \" @ARGS@ \"}\"", "\", \"",
     true, "\"]\""},
    {Family::kCommandR7B, "<|START_ACTION|>[",
     "\"{\\\"tool_call_id\\\": \\\"\" [0-9] \"\\\", \\\"tool_name\\\": \" @NAME@ \", \\\"parameters\\\": \" @ARGS@ \"}\"",
     "\", \"", true, "\"]<|END_ACTION|>\""},
    {Family::kCommandRPlus, "Action: ```json\n[",
     "\"{\\\"tool_name\\\": \" @NAME@ \", \\\"parameters\\\": \" @ARGS@ \"}\"", "\", \"", true, "\"]\\n```\""},
    {Family::kDeepSeekR1, "<｜tool▁calls▁begin｜>",
     "\"<｜tool▁call▁begin｜>function<｜tool▁sep｜>\" @RAW@ \"\\n```json\\n\" @ARGS@ \"\\n```<｜tool▁call▁end｜>\"", "", true,
     "\"<｜tool▁calls▁end｜>\""},
    {Family::kDeepSeekV31, "<｜tool▁calls▁begin｜>",
     "\"<｜tool▁call▁begin｜>\" @RAW@ \"<｜tool▁sep｜>\" @ARGS@ \"<｜tool▁call▁end｜>\"", "", true, "\"<｜tool▁calls▁end｜>\""},
    {Family::kGptOss, "<|channel|>commentary to=functions.", "@RAW@ \" <|constrain|>json<|message|>\" @ARGS@", "", false, ""},
};

const Format* format_of(Family f) {
  for (const Format& x : kFormats) {
    if (x.family == f) return &x;
  }
  return nullptr;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += to.size()) s.replace(at, from.size(), to);
  return s;
}

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

}  // namespace

std::string prefix_rule_names(const std::string& g, const std::string& prefix) {
  std::string out;
  out.reserve(g.size() + g.size() / 4);
  for (size_t i = 0; i < g.size();) {
    const char c = g[i];
    if (c == '"' || c == '[') {  // a literal or class: copied through its end, escapes included
      const char close = c == '"' ? '"' : ']';
      out += g[i++];
      while (i < g.size() && g[i] != close) {
        if (g[i] == '\\' && i + 1 < g.size()) out += g[i++];
        out += g[i++];
      }
      if (i < g.size()) out += g[i++];
    } else if (c == '#') {
      while (i < g.size() && g[i] != '\n') out += g[i++];
    } else if (c == '{') {  // a repetition count
      while (i < g.size() && g[i] != '}') out += g[i++];
    } else if (name_char(c)) {
      out += prefix;
      while (i < g.size() && name_char(g[i])) out += g[i++];
    } else {
      out += g[i++];
    }
  }
  return out;
}

CallGrammar tool_call_grammar(Family family, const std::vector<ToolSchema>& tools, bool parallel, bool lazy) {
  QKV_CHECK(!tools.empty(), "tool-call grammar: no tools");
  CallGrammar out;
  std::string rules;
  // One alternative per tool; each tool's parameters become rules t<i>-...
  std::vector<std::string> alternatives;
  const Format* f = format_of(family);
  for (size_t i = 0; i < tools.size(); ++i) {
    std::string args_gbnf;
    try {
      args_gbnf = grammar::json_schema_to_gbnf(tools[i].parameters);
    } catch (const Error& e) {
      fail("tools[", i, "] (", tools[i].name, "): parameters: ", e.what());
    }
    const std::string prefix = "t" + std::to_string(i) + "-";
    rules += prefix_rule_names(args_gbnf, prefix) + "\n";
    const std::string args = prefix + "root";
    if (f) {
      std::string body = f->body;
      body = replace_all(body, "@NAME@", json_name(tools[i].name));
      body = replace_all(body, "@RAW@", literal(tools[i].name));
      body = replace_all(body, "@ARGS@", args);
      alternatives.push_back(body);
    } else {  // generic: {"name": ..., "arguments": ...}
      alternatives.push_back("\"{\\\"name\\\": \" " + json_name(tools[i].name) + " \", \\\"arguments\\\": \" " + args +
                             " \"}\"");
    }
  }
  std::string call = "call ::= ";
  for (size_t i = 0; i < alternatives.size(); ++i) call += (i ? " | " : "") + std::string("( ") + alternatives[i] + " )";
  std::string root;
  if (!f) {  // the generic JSON reply
    const std::string calls = parallel ? "call (\", \" call)*" : "call";
    root = "root ::= \"{\\\"tool_calls\\\": [\" " + calls + " \"]}\"";
    if (lazy) root += " | \"{\\\"response\\\": \" t-string \"}\"";
    out.gbnf = root + "\n" + call + "\nws ::= [ \\n]{0,2}\n" + rules;
    if (lazy) out.gbnf += prefix_rule_names(grammar::json_schema_to_gbnf(nlohmann::ordered_json{{"type", "string"}}), "t-") + "\n";
    return out;
  }
  const std::string opener = literal(f->opener);
  const std::string sep = std::string(f->separator).empty() ? "" : std::string(f->separator) + " ";
  const std::string closer = f->closer;
  std::string more;  // the calls after the first
  if (parallel) more = f->list ? "( " + sep + "call )*" : "( " + sep + opener + " call )*";
  if (lazy) {
    root = "root ::= call " + more + " " + closer;
    out.triggers.push_back(f->opener);
  } else {
    root = "root ::= " + opener + " call " + more + " " + closer;
  }
  out.gbnf = root + "\n" + call + "\nws ::= [ \\n]{0,2}\n" + rules;
  return out;
}

}  // namespace qkv::toolcall

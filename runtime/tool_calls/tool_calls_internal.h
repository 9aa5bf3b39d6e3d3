// What the tool-call parser's files share: the per-family format table, the
// JSON prefix scanner, and the parse of a text (whole or a prefix of one) into
// raw content, raw reasoning and calls.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "runtime/tool_calls/tool_calls.h"

namespace qkv::toolcall::detail {

// How the text after an opener is read.
enum class Form {
  kObject,      // {"name": ..., "arguments"|"parameters": {...}} (also "tool_name", "id", "tool_call_id")
  kArray,       // [ object, object, ... ]
  kNamed,       // name <name_end> {arguments}: the name is markup, the arguments JSON
  kPythonCall,  // name.call(key="value", ...)  (Llama 3.1 builtin tools)
  kRawCode,     // the rest of the text is code: a call named raw_code_name, arguments {"code": ...}
};

// One way a call begins in free text.
struct Opener {
  const char* text = "";       // the literal that begins the call(s)
  std::vector<Form> forms;     // tried in order; the first that is not "not a call" wins
  const char* name_prefix = "";  // kNamed: optional literal before the name
  const char* name_end = "";     // kNamed: literal that ends the name
  const char* id_marker = "";    // kNamed: optional literal after the name that introduces an id
  const char* args_prefix = "";  // optional literal before the arguments (after whitespace)
  const char* args_suffix = "";  // optional literal after the arguments
  const char* close = "";        // optional literal that ends the call
  const char* raw_code_name = "";  // kRawCode
};

// How the text as a whole is laid out.
enum class Layout {
  kMarkers,      // free text with openers (and silent markers) anywhere
  kHarmony,      // gpt-oss channels
  kGenericJson,  // one JSON object: {"tool_calls": [...]} or {"response": "..."}
};

struct FamilySpec {
  Family family = Family::kNone;
  const char* name = "";
  // The template is of this family when all strings of any one group occur in it.
  std::vector<std::vector<const char*>> detect;
  const char* think_open = nullptr;  // thinking block at the start of the output
  const char* think_close = nullptr;
  Layout layout = Layout::kMarkers;
  std::vector<Opener> openers;
  std::vector<const char*> call_silent;  // dropped when calls are parsed (a call block's begin/end)
  std::vector<const char*> silent;       // always dropped (response wrappers)
  bool bare_object_calls = false;  // a JSON object call may begin the output or follow a call
  const char* call_separators = "";  // besides whitespace, may stand between bare calls
  bool call_ids = false;             // calls carry ids: a call is reported once its id is known
  const char* opener_text = "";
  std::vector<const char*> triggers;
};

const FamilySpec& spec_of(Family);

// ---- JSON scanning over a possibly unfinished text ----
enum class Scan { kComplete, kIncomplete, kInvalid };
struct ScanResult {
  Scan status;
  size_t end;  // kComplete: one past the value; kInvalid: the offending byte; kIncomplete: text size
};
// One JSON value starting exactly at pos (no leading whitespace skipped).
ScanResult scan_json_value(const std::string& s, size_t pos);
// Decodes the JSON string whose opening quote is at quote; stops at the closing
// quote or at the end of s, leaving out an unfinished escape. Returns whether
// the closing quote was reached; *end is one past it (or s.size()).
bool decode_json_string(const std::string& s, size_t quote, std::string* out, size_t* end);
// s as a JSON string literal (quotes included), escaping byte by byte so that
// the literal of a prefix is a prefix of the literal.
std::string json_quote(const std::string& s);

bool is_space(char c);
size_t skip_spaces(const std::string& s, size_t pos);
bool starts_with_at(const std::string& s, size_t pos, const char* lit);
// s[pos..] is a proper prefix of lit (the text ends inside it).
bool ends_inside(const std::string& s, size_t pos, const char* lit);

// ---- parse of a text ----
struct RawParse {
  std::string content;    // untrimmed
  std::string reasoning;  // untrimmed
  std::vector<ToolCall> calls;
  bool partial_call = false;  // not final: the last call's arguments are still growing
  bool incomplete = false;    // final: a call began but did not finish (its raw text is in content)
};
// final: the text is all there is; otherwise the result holds only what no
// continuation can change (the last call's arguments may still grow).
RawParse parse_text(const FamilySpec&, const std::string& text, const ParseOptions&, bool final, bool truncated);
// The layouts other than kMarkers, from pos (after any thinking block).
void parse_harmony(const std::string& s, const ParseOptions&, bool final, RawParse* out);
void parse_generic_json(const std::string& s, size_t pos, const ParseOptions&, bool final, RawParse* out);

// ---- call forms (shared by the layouts) ----
enum class CallStatus {
  kNotACall,   // the text after the opener is not a call (decided; never changes with more text)
  kUndecided,  // the text ends before anything is committed
  kPartial,    // the text ends inside a call
  kComplete,
  kBroken,     // invalid after a call was committed
};
struct CallParse {
  CallStatus status = CallStatus::kNotACall;
  std::vector<ToolCall> calls;  // complete calls
  bool has_partial = false;     // a committed, unfinished call
  ToolCall partial;
  size_t end = 0;        // kComplete: one past the call(s)
  size_t raw_start = 0;  // kPartial/kBroken/kUndecided: where the unfinished call's text begins
  bool hold = false;     // kComplete: the text ends inside optional closing markup
};
CallParse parse_call_object(const std::string& s, size_t pos, bool call_ids, bool final);
CallParse parse_call_array(const std::string& s, size_t pos, bool call_ids, bool final);
CallParse parse_opener_forms(const Opener&, const std::string& s, size_t pos, bool call_ids, bool final, bool truncated);

}  // namespace qkv::toolcall::detail

// The shapes a call takes after its opener (see Form): a JSON call object, an
// array of them, a name in markup followed by JSON arguments, Llama 3.1's
// builtin `name.call(k="v")`, and raw code. Each reader decides as early as
// the text allows whether it is looking at a call, so that free text is not
// held back longer than needed, and never changes a decision when more text
// arrives.
#include <cctype>
#include <cstring>
#include <initializer_list>

#include "runtime/tool_calls/tool_calls_internal.h"

namespace qkv::toolcall::detail {

namespace {

std::string rtrim(std::string s) {
  while (!s.empty() && is_space(s.back())) s.pop_back();
  return s;
}

std::string trim(const std::string& s) {
  size_t b = skip_spaces(s, 0);
  return rtrim(s.substr(b));
}

bool is_name_key(const std::string& k) { return k == "name" || k == "tool_name"; }
bool is_args_key(const std::string& k) { return k == "arguments" || k == "parameters"; }
bool is_id_key(const std::string& k) { return k == "id" || k == "tool_call_id"; }

bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > 256) return false;
  for (char c : name)
    if (static_cast<unsigned char>(c) < 0x20) return false;
  return true;
}

// A function name written as markup (not JSON): letters, digits, _-.:/ and
// non-ASCII bytes; spaces are allowed and trimmed.
bool is_markup_name_char(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  return (u >= 0x80) || std::isalnum(u) || std::strchr("_-.:/ \t", c) != nullptr;
}

// After a complete call: optional literals (each may be preceded by
// whitespace). Returns the end of what matched; sets *hold when the text ends
// where one of them could still follow. A final text that ends inside one
// (generation cut in the call's closing markup) ends there: the call is
// whole, and the piece of markup is not content.
size_t match_optional_literals(const std::string& s, size_t end, std::initializer_list<const char*> lits, bool final,
                               bool* hold) {
  for (const char* lit : lits) {
    if (!*lit) continue;
    size_t j = skip_spaces(s, end);
    if (starts_with_at(s, j, lit)) {
      end = j + std::strlen(lit);
    } else if (j < s.size() && ends_inside(s, j, lit)) {
      if (final) return s.size();
      *hold = true;
      return end;
    } else if (!final && j == s.size()) {
      *hold = true;
      return end;
    }
  }
  return end;
}

CallParse status_only(CallStatus st) {
  CallParse r;
  r.status = st;
  return r;
}

// The value of a Python-style keyword argument as JSON: a quoted string, or a
// number / True / False / None written bare.
bool read_python_value(const std::string& s, size_t* i, std::string* json, bool* at_end) {
  size_t p = *i;
  if (p >= s.size()) return *at_end = true, false;
  char q = s[p];
  if (q == '"' || q == '\'') {
    std::string v;
    for (size_t k = p + 1; k < s.size(); ++k) {
      char c = s[k];
      if (c == q) {
        *json = json_quote(v);
        *i = k + 1;
        return true;
      }
      if (c == '\\') {
        if (k + 1 >= s.size()) break;
        char e = s[++k];
        v.push_back(e == 'n' ? '\n' : e == 't' ? '\t' : e);
        continue;
      }
      v.push_back(c);
    }
    *at_end = true;
    return false;
  }
  size_t k = p;
  while (k < s.size() && s[k] != ',' && s[k] != ')' && !is_space(s[k])) ++k;
  if (k == s.size()) return *at_end = true, false;
  std::string tok = s.substr(p, k - p);
  if (tok.empty()) return false;
  if (tok == "True") *json = "true";
  else if (tok == "False") *json = "false";
  else if (tok == "None") *json = "null";
  else if (scan_json_value(tok + " ", 0).status == Scan::kComplete && scan_json_value(tok + " ", 0).end == tok.size() &&
           (tok[0] == '-' || std::isdigit(static_cast<unsigned char>(tok[0]))))
    *json = tok;
  else
    *json = json_quote(tok);
  *i = k;
  return true;
}

// name.call(key="value", ...): reported whole once the closing parenthesis is seen.
CallParse parse_python_call(const std::string& s, size_t pos, bool final) {
  const CallParse undecided = status_only(final ? CallStatus::kNotACall : CallStatus::kUndecided);
  size_t i = pos;
  while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_')) ++i;
  if (i == s.size()) return undecided;
  if (i == pos || std::isdigit(static_cast<unsigned char>(s[pos]))) return status_only(CallStatus::kNotACall);
  std::string name = s.substr(pos, i - pos);
  if (!starts_with_at(s, i, ".call(")) return ends_inside(s, i, ".call(") ? undecided : status_only(CallStatus::kNotACall);
  i += 6;
  std::string args = "{";
  bool first = true;
  for (;;) {
    i = skip_spaces(s, i);
    if (i >= s.size()) return undecided;
    if (s[i] == ')') break;
    if (!first) {
      if (s[i] != ',') return status_only(CallStatus::kNotACall);
      i = skip_spaces(s, i + 1);
    }
    size_t k = i;
    while (k < s.size() && (std::isalnum(static_cast<unsigned char>(s[k])) || s[k] == '_')) ++k;
    if (k == s.size()) return undecided;
    if (k == i) return status_only(CallStatus::kNotACall);
    std::string key = s.substr(i, k - i);
    k = skip_spaces(s, k);
    if (k >= s.size()) return undecided;
    if (s[k] != '=') return status_only(CallStatus::kNotACall);
    k = skip_spaces(s, k + 1);
    std::string value;
    bool at_end = false;
    if (!read_python_value(s, &k, &value, &at_end)) return at_end ? undecided : status_only(CallStatus::kNotACall);
    args += (first ? "" : ", ") + json_quote(key) + ": " + value;
    first = false;
    i = k;
  }
  CallParse r;
  r.status = CallStatus::kComplete;
  r.calls.push_back(ToolCall{"", name, args + "}"});
  r.end = i + 1;
  return r;
}

// name <name_end> [id_marker id <name_end>] {arguments}
CallParse parse_named(const Opener& op, const std::string& s, size_t pos, bool final) {
  const CallParse undecided = status_only(CallStatus::kUndecided);
  const CallParse not_a_call = status_only(CallStatus::kNotACall);
  size_t i = pos;
  if (*op.name_prefix) {
    if (starts_with_at(s, i, op.name_prefix)) i += std::strlen(op.name_prefix);
    else if (ends_inside(s, i, op.name_prefix)) return undecided;
  }
  const bool has_id_marker = *op.id_marker != 0;
  size_t name_begin = i, name_stop = 0;
  bool id_follows = false;
  for (size_t j = i;; ++j) {
    if (j >= s.size()) return undecided;
    if (starts_with_at(s, j, op.name_end)) {
      name_stop = j;
      i = j + std::strlen(op.name_end);
      break;
    }
    if (has_id_marker && starts_with_at(s, j, op.id_marker)) {
      name_stop = j;
      i = j + std::strlen(op.id_marker);
      id_follows = true;
      break;
    }
    if (ends_inside(s, j, op.name_end) || (has_id_marker && ends_inside(s, j, op.id_marker))) return undecided;
    if (!is_markup_name_char(s[j]) || j - name_begin > 256) return not_a_call;
  }
  std::string name = trim(s.substr(name_begin, name_stop - name_begin));
  if (name.empty()) return not_a_call;
  std::string id;
  if (id_follows) {
    size_t j = i;
    for (;; ++j) {
      if (j >= s.size()) return undecided;
      if (starts_with_at(s, j, op.name_end)) break;
      if (ends_inside(s, j, op.name_end)) return undecided;
      if (!std::isalnum(static_cast<unsigned char>(s[j])) || j - i > 64) return not_a_call;
    }
    id = s.substr(i, j - i);
    i = j + std::strlen(op.name_end);
  }
  i = skip_spaces(s, i);
  if (*op.args_prefix) {
    if (starts_with_at(s, i, op.args_prefix)) i = skip_spaces(s, i + std::strlen(op.args_prefix));
    else if (ends_inside(s, i, op.args_prefix)) return undecided;
  }
  if (i >= s.size()) return undecided;
  if (s[i] != '{') return not_a_call;
  // Committed: from here the call is reported as it grows.
  CallParse r;
  r.raw_start = pos;
  ScanResult v = scan_json_value(s, i);
  if (v.status != Scan::kComplete) {
    r.status = v.status == Scan::kIncomplete ? CallStatus::kPartial : CallStatus::kBroken;
    r.has_partial = true;
    r.partial = ToolCall{id, name, rtrim(s.substr(i, v.end - i))};
    return r;
  }
  r.status = CallStatus::kComplete;
  r.calls.push_back(ToolCall{id, name, s.substr(i, v.end - i)});
  r.end = match_optional_literals(s, v.end, {op.args_suffix, op.close}, final, &r.hold);
  return r;
}

}  // namespace

CallParse parse_call_object(const std::string& s, size_t pos, bool call_ids, bool final) {
  (void)final;
  CallParse r;
  r.raw_start = pos;
  std::string name, id;
  bool have_name = false, have_id = false;
  size_t args_begin = std::string::npos, args_end = std::string::npos;
  auto committed = [&] { return have_name && args_begin != std::string::npos && (!call_ids || have_id); };
  auto args_upto = [&](size_t stop) {
    return args_end != std::string::npos ? s.substr(args_begin, args_end - args_begin)
                                         : rtrim(s.substr(args_begin, stop - args_begin));
  };
  auto unfinished = [&](CallStatus st, size_t stop) {
    if (!committed()) return status_only(st == CallStatus::kPartial ? CallStatus::kUndecided : CallStatus::kNotACall);
    r.status = st;
    r.has_partial = true;
    r.partial = ToolCall{call_ids ? id : "", name, args_upto(stop)};
    return r;
  };
  auto at_end = [&] { return unfinished(CallStatus::kPartial, s.size()); };
  auto bad = [&](size_t at) { return unfinished(CallStatus::kBroken, at); };
  size_t i = pos + 1;
  bool first = true;
  for (;;) {
    i = skip_spaces(s, i);
    if (i >= s.size()) return at_end();
    if (first && s[i] == '}') {
      ++i;
      break;
    }
    if (s[i] != '"') return bad(i);
    ScanResult ks = scan_json_value(s, i);
    if (ks.status == Scan::kIncomplete) return at_end();
    if (ks.status == Scan::kInvalid) return bad(ks.end);
    std::string key;
    size_t key_end;
    decode_json_string(s, i, &key, &key_end);
    i = skip_spaces(s, ks.end);
    if (i >= s.size()) return at_end();
    if (s[i] != ':') return bad(i);
    i = skip_spaces(s, i + 1);
    if (i >= s.size()) return at_end();
    const size_t v = i;
    const bool is_name = is_name_key(key) && !have_name;
    const bool is_args = is_args_key(key) && args_begin == std::string::npos;
    if ((is_name && s[v] != '"') || (is_args && s[v] != '{')) return bad(v);
    if (is_args) args_begin = v;
    ScanResult vs = scan_json_value(s, v);
    if (vs.status == Scan::kIncomplete) return at_end();
    if (vs.status == Scan::kInvalid) return bad(vs.end);
    if (is_name) {
      size_t e;
      decode_json_string(s, v, &name, &e);
      if (!valid_name(name)) return bad(v);
      have_name = true;
    } else if (is_args) {
      args_end = vs.end;
    } else if (call_ids && is_id_key(key) && !have_id) {
      size_t e;
      if (s[v] == '"') decode_json_string(s, v, &id, &e);
      else id = s.substr(v, vs.end - v);
      have_id = true;
    }
    i = skip_spaces(s, vs.end);
    if (i >= s.size()) return at_end();
    first = false;
    if (s[i] == ',') {
      ++i;
      continue;
    }
    if (s[i] == '}') {
      ++i;
      break;
    }
    return bad(i);
  }
  if (!have_name) return status_only(CallStatus::kNotACall);
  r.status = CallStatus::kComplete;
  r.calls.push_back(ToolCall{call_ids ? id : "", name, args_begin == std::string::npos ? "{}" : args_upto(i)});
  r.end = i;
  return r;
}

CallParse parse_call_array(const std::string& s, size_t pos, bool call_ids, bool final) {
  CallParse r;
  size_t i = pos + 1;
  size_t tail = pos;  // where the text not yet part of a complete call begins
  auto unfinished = [&](CallStatus st) {
    if (r.calls.empty() && !r.has_partial) return status_only(st == CallStatus::kPartial ? CallStatus::kUndecided : CallStatus::kNotACall);
    r.status = st;
    r.raw_start = tail;
    return r;
  };
  bool need_element = false;
  for (;;) {
    i = skip_spaces(s, i);
    if (i >= s.size()) return unfinished(CallStatus::kPartial);
    if (s[i] == ']' && !need_element) {
      r.status = CallStatus::kComplete;
      r.end = i + 1;
      return r;
    }
    if (s[i] != '{') return unfinished(CallStatus::kBroken);
    CallParse e = parse_call_object(s, i, call_ids, final);
    switch (e.status) {
      case CallStatus::kComplete:
        r.calls.push_back(e.calls[0]);
        tail = i = e.end;
        break;
      case CallStatus::kNotACall:
        return unfinished(CallStatus::kBroken);
      case CallStatus::kUndecided:
        return unfinished(CallStatus::kPartial);
      default:
        r.has_partial = e.has_partial;
        r.partial = e.partial;
        return unfinished(e.status);
    }
    i = skip_spaces(s, i);
    if (i >= s.size()) return unfinished(CallStatus::kPartial);
    if (s[i] == ',') {
      ++i;
      need_element = true;
      continue;
    }
    if (s[i] != ']') return unfinished(CallStatus::kBroken);
    r.status = CallStatus::kComplete;
    r.end = i + 1;
    return r;
  }
}

CallParse parse_opener_forms(const Opener& op, const std::string& s, size_t pos, bool call_ids, bool final,
                             bool truncated) {
  for (Form form : op.forms) {
    CallParse r;
    if (form == Form::kNamed) {
      r = parse_named(op, s, pos, final);
    } else if (form == Form::kPythonCall) {
      r = parse_python_call(s, pos, final);
    } else if (form == Form::kRawCode) {
      if (!final) return status_only(CallStatus::kUndecided);
      std::string code = trim(s.substr(pos));
      if (code.empty()) {
        r = status_only(CallStatus::kNotACall);
      } else if (truncated) {
        r.status = CallStatus::kPartial;  // code cut short is not run
        r.raw_start = pos;
      } else {
        r.status = CallStatus::kComplete;
        r.calls.push_back(ToolCall{"", op.raw_code_name, "{\"code\": " + json_quote(code) + "}"});
        r.end = s.size();
      }
    } else {  // kObject, kArray: optional args_prefix, then the JSON
      size_t i = skip_spaces(s, pos);
      if (*op.args_prefix) {
        if (starts_with_at(s, i, op.args_prefix)) i = skip_spaces(s, i + std::strlen(op.args_prefix));
        else if (ends_inside(s, i, op.args_prefix)) return status_only(CallStatus::kUndecided);
      }
      if (i >= s.size()) return status_only(CallStatus::kUndecided);
      if (s[i] != (form == Form::kObject ? '{' : '[')) {
        r = status_only(CallStatus::kNotACall);
      } else {
        r = form == Form::kObject ? parse_call_object(s, i, call_ids, final) : parse_call_array(s, i, call_ids, final);
        if (r.status == CallStatus::kComplete)
          r.end = match_optional_literals(s, r.end, {op.args_suffix, op.close}, final, &r.hold);
      }
    }
    if (r.status != CallStatus::kNotACall) return r;
  }
  return status_only(CallStatus::kNotACall);
}

}  // namespace qkv::toolcall::detail

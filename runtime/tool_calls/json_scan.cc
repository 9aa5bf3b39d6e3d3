// JSON over a text that may still be growing: where a value ends, whether the
// text so far can still become one, and decoding string literals. Iterative
// (an explicit stack), so hostile nesting cannot exhaust the call stack.
#include <cstdint>

#include "runtime/tool_calls/tool_calls_internal.h"
#include "runtime/utf8.h"

namespace qkv::toolcall::detail {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

size_t skip_spaces(const std::string& s, size_t pos) {
  while (pos < s.size() && is_space(s[pos])) ++pos;
  return pos;
}

bool starts_with_at(const std::string& s, size_t pos, const char* lit) {
  for (size_t i = 0; lit[i]; ++i)
    if (pos + i >= s.size() || s[pos + i] != lit[i]) return false;
  return true;
}

bool ends_inside(const std::string& s, size_t pos, const char* lit) {
  size_t i = 0;
  for (; pos + i < s.size(); ++i)
    if (!lit[i] || s[pos + i] != lit[i]) return false;
  return lit[i] != 0;
}

namespace {

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// A string literal from its opening quote.
ScanResult scan_string(const std::string& s, size_t pos) {
  size_t i = pos + 1;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"') return {Scan::kComplete, i + 1};
    if (c < 0x20) return {Scan::kInvalid, i};
    if (c == '\\') {
      if (i + 1 >= s.size()) return {Scan::kIncomplete, s.size()};
      char e = s[i + 1];
      if (e == 'u') {
        for (size_t k = 0; k < 4; ++k) {
          if (i + 2 + k >= s.size()) return {Scan::kIncomplete, s.size()};
          if (!is_hex(s[i + 2 + k])) return {Scan::kInvalid, i + 2 + k};
        }
        i += 6;
        continue;
      }
      if (e != '"' && e != '\\' && e != '/' && e != 'b' && e != 'f' && e != 'n' && e != 'r' && e != 't')
        return {Scan::kInvalid, i + 1};
      i += 2;
      continue;
    }
    ++i;
  }
  return {Scan::kIncomplete, s.size()};
}

// A number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? as a small automaton.
ScanResult scan_number(const std::string& s, size_t pos) {
  enum { kStart, kMinus, kZero, kInt, kDot, kFrac, kExp, kExpSign, kExpDigits } st = kStart;
  size_t i = pos;
  for (; i < s.size(); ++i) {
    char c = s[i];
    switch (st) {
      case kStart:
        if (c == '-') st = kMinus;
        else if (c == '0') st = kZero;
        else if (is_digit(c)) st = kInt;
        else return {Scan::kInvalid, i};
        continue;
      case kMinus:
        if (c == '0') st = kZero;
        else if (is_digit(c)) st = kInt;
        else return {Scan::kInvalid, i};
        continue;
      case kZero:
      case kInt:
        if (st == kInt && is_digit(c)) continue;
        if (c == '.') { st = kDot; continue; }
        if (c == 'e' || c == 'E') { st = kExp; continue; }
        if (st == kZero && is_digit(c)) return {Scan::kInvalid, i};
        return {Scan::kComplete, i};
      case kDot:
        if (is_digit(c)) { st = kFrac; continue; }
        return {Scan::kInvalid, i};
      case kFrac:
        if (is_digit(c)) continue;
        if (c == 'e' || c == 'E') { st = kExp; continue; }
        return {Scan::kComplete, i};
      case kExp:
        if (c == '+' || c == '-') { st = kExpSign; continue; }
        if (is_digit(c)) { st = kExpDigits; continue; }
        return {Scan::kInvalid, i};
      case kExpSign:
        if (is_digit(c)) { st = kExpDigits; continue; }
        return {Scan::kInvalid, i};
      case kExpDigits:
        if (is_digit(c)) continue;
        return {Scan::kComplete, i};
    }
  }
  // The text ends inside the number: more digits could follow.
  return {Scan::kIncomplete, s.size()};
}

ScanResult scan_literal(const std::string& s, size_t pos) {
  const char* lit = s[pos] == 't' ? "true" : s[pos] == 'f' ? "false" : "null";
  size_t i = 0;
  for (; lit[i]; ++i) {
    if (pos + i >= s.size()) return {Scan::kIncomplete, s.size()};
    if (s[pos + i] != lit[i]) return {Scan::kInvalid, pos + i};
  }
  return {Scan::kComplete, pos + i};
}

}  // namespace

ScanResult scan_json_value(const std::string& s, size_t pos) {
  std::vector<char> stack;  // the open containers, '{' or '['
  enum { kValue, kValueOrClose, kKey, kKeyOrClose, kColon, kAfterValue } expect = kValue;
  size_t i = pos;
  for (;;) {
    if (expect == kAfterValue) {
      if (stack.empty()) return {Scan::kComplete, i};
      i = skip_spaces(s, i);
      if (i >= s.size()) return {Scan::kIncomplete, s.size()};
      char c = s[i];
      if (c == ',') {
        ++i;
        expect = stack.back() == '{' ? kKey : kValue;
      } else if ((c == '}' && stack.back() == '{') || (c == ']' && stack.back() == '[')) {
        stack.pop_back();
        ++i;
      } else {
        return {Scan::kInvalid, i};
      }
      continue;
    }
    if (!stack.empty()) i = skip_spaces(s, i);  // the top-level value starts exactly at pos
    if (i >= s.size()) return {Scan::kIncomplete, s.size()};
    char c = s[i];
    if (expect == kColon) {
      if (c != ':') return {Scan::kInvalid, i};
      ++i;
      expect = kValue;
      continue;
    }
    if (expect == kKey || expect == kKeyOrClose) {
      if (expect == kKeyOrClose && c == '}') {
        stack.pop_back();
        ++i;
        expect = kAfterValue;
        continue;
      }
      if (c != '"') return {Scan::kInvalid, i};
      ScanResult r = scan_string(s, i);
      if (r.status != Scan::kComplete) return r;
      i = r.end;
      expect = kColon;
      continue;
    }
    // kValue or kValueOrClose
    if (expect == kValueOrClose && c == ']') {
      stack.pop_back();
      ++i;
      expect = kAfterValue;
      continue;
    }
    if (c == '{' || c == '[') {
      stack.push_back(c);
      ++i;
      expect = c == '{' ? kKeyOrClose : kValueOrClose;
      continue;
    }
    ScanResult r{Scan::kInvalid, i};
    if (c == '"') r = scan_string(s, i);
    else if (c == '-' || is_digit(c)) r = scan_number(s, i);
    else if (c == 't' || c == 'f' || c == 'n') r = scan_literal(s, i);
    if (r.status != Scan::kComplete) return r;
    i = r.end;
    expect = kAfterValue;
  }
}

namespace {

bool read_hex4(const std::string& s, size_t pos, uint32_t* v) {
  if (pos + 4 > s.size()) return false;
  *v = 0;
  for (size_t k = 0; k < 4; ++k) {
    char c = s[pos + k];
    *v = *v * 16 + static_cast<uint32_t>(is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10);
  }
  return true;
}

}  // namespace

bool decode_json_string(const std::string& s, size_t quote, std::string* out, size_t* end) {
  size_t i = quote + 1;
  while (i < s.size()) {
    char c = s[i];
    if (c == '"') {
      *end = i + 1;
      return true;
    }
    if (c != '\\') {
      out->push_back(c);
      ++i;
      continue;
    }
    if (i + 1 >= s.size()) break;  // an unfinished escape waits for its rest
    char e = s[i + 1];
    if (e != 'u') {
      switch (e) {
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        default: out->push_back(e); break;
      }
      i += 2;
      continue;
    }
    uint32_t cp;
    if (!read_hex4(s, i + 2, &cp)) break;
    size_t next = i + 6;
    if (cp >= 0xD800 && cp < 0xDC00) {  // a high surrogate: its low half follows as \uDC00..
      if (next + 6 > s.size()) break;
      uint32_t lo;
      if (s[next] == '\\' && s[next + 1] == 'u' && read_hex4(s, next + 2, &lo) && lo >= 0xDC00 && lo < 0xE000) {
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        next += 6;
      } else {
        cp = 0xFFFD;
      }
    } else if (cp >= 0xDC00 && cp < 0xE000) {
      cp = 0xFFFD;
    }
    append_utf8(*out, cp);
    i = next;
  }
  *end = s.size();
  return false;
}

std::string json_quote(const std::string& s) {
  static const char* kHex = "0123456789abcdef";
  std::string out = "\"";
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out.push_back(kHex[c >> 4]);
          out.push_back(kHex[c & 15]);
        } else {
          out.push_back(ch);
        }
    }
  }
  out += '"';
  return out;
}

}  // namespace qkv::toolcall::detail

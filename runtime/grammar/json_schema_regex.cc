// A JSON Schema `pattern` (an ECMAScript regex) as GBNF for the content of a
// JSON string.
//
// The regex speaks about the decoded string, the grammar about its JSON
// spelling, so every set of characters is split in two: the characters a JSON
// string may hold as they are, written as one GBNF class, and those it must
// escape (quote, backslash, control characters; DEL too, like the JSON string
// rule), written as their escape sequences. JSON Schema patterns are not
// anchored: a top-level alternative without ^ (or $) may have any characters
// before (or after) it. Backreferences, lookaround and word boundaries have no
// context-free equivalent and are errors.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "kernels/error.h"
#include "runtime/grammar/json_schema_internal.h"

namespace qkv::grammar::schema_detail {

namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;
constexpr uint32_t kMaxCodePoint = 0x10FFFF;

Ranges normalize(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (const auto& [lo, hi] : r) {
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.emplace_back(lo, hi);
    }
  }
  return out;
}

Ranges complement(const Ranges& r) {
  Ranges out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : r) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  return out;
}

Ranges intersect(const Ranges& a, const Ranges& b) {
  Ranges out;
  for (const auto& [alo, ahi] : a) {
    for (const auto& [blo, bhi] : b) {
      const uint32_t lo = std::max(alo, blo), hi = std::min(ahi, bhi);
      if (lo <= hi) out.emplace_back(lo, hi);
    }
  }
  return normalize(out);
}

// What a JSON string must escape (DEL is kept escaped like the string rule does).
const Ranges kEscaped = {{0x00, 0x1F}, {'"', '"'}, {'\\', '\\'}, {0x7F, 0x7F}};
const Ranges kDigit = {{'0', '9'}};
const Ranges kWord = normalize({{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}});
const Ranges kSpace = normalize({{0x09, 0x0D}, {0x20, 0x20}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
                                 {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000},
                                 {0xFEFF, 0xFEFF}});
const Ranges kLineTerminator = {{0x0A, 0x0A}, {0x0D, 0x0D}, {0x2028, 0x2029}};

bool is_escaped_in_json(uint32_t cp) { return cp < 0x20 || cp == '"' || cp == '\\' || cp == 0x7F; }

// The JSON spelling of one character inside a string.
std::string json_spelling(uint32_t cp) {
  switch (cp) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\b': return "\\b";
    case '\f': return "\\f";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: break;
  }
  if (is_escaped_in_json(cp)) {
    static const char kHex[] = "0123456789abcdef";
    return std::string("\\u00") + kHex[cp >> 4] + kHex[cp & 15];
  }
  return utf8_encode(cp);
}

std::string class_of(const Ranges& r, bool negated) {
  std::string out = negated ? "[^" : "[";
  for (const auto& [lo, hi] : r) {
    out += gbnf_class_char(lo);
    if (hi != lo) out += "-" + gbnf_class_char(hi);
  }
  return out + "]";
}

// One item of a sequence: its GBNF, or (literal) the JSON text it stands for,
// kept apart so that neighbouring literal characters merge into one literal.
struct Piece {
  std::string gbnf;
  std::string text;
  bool literal = false;
  bool nullable = false;  // can match the empty string
};

class Translator {
 public:
  Translator(const std::string& pattern, std::vector<uint32_t> cps, const std::string& where,
             const std::string& char_rule, int max_depth, int max_repeat)
      : pattern_(pattern), p_(std::move(cps)), where_(where), char_rule_(char_rule),
        max_depth_(max_depth), max_repeat_(max_repeat) {}

  RegexGbnf run() {
    std::vector<std::string> alts;
    do {
      const bool anchored_start = eat('^');
      Piece seq = sequence(0);
      bool anchored_end = false;
      if (eat('$')) {
        anchored_end = true;
        if (!at_end() && peek() != '|') unsupported("$", "an anchor that is not at the end");
      }
      if (!at_end() && peek() == ')') invalid("unbalanced ')'");
      std::string expr = seq.gbnf;
      if (!anchored_start) expr = char_rule_ + "*" + (expr.empty() ? "" : " " + expr);
      if (!anchored_end) expr += (expr.empty() ? "" : " ") + char_rule_ + "*";
      if (!anchored_start || !anchored_end) uses_char_ = true;
      alts.push_back(expr);
    } while (eat('|'));
    RegexGbnf out;
    out.uses_char = uses_char_;
    for (size_t i = 0; i < alts.size(); ++i) out.expr += (i ? " | " : "") + alts[i];
    return out;
  }

 private:
  bool at_end() const { return i_ >= p_.size(); }
  uint32_t peek(size_t ahead = 0) const { return i_ + ahead < p_.size() ? p_[i_ + ahead] : 0; }
  bool eat(uint32_t c) {
    if (at_end() || p_[i_] != c) return false;
    ++i_;
    return true;
  }

  [[noreturn]] void unsupported(const std::string& construct, const std::string& what) const {
    fail("unsupported regex construct '", construct, "' (", what, ") in 'pattern' at ", where_);
  }
  [[noreturn]] void invalid(const std::string& why) const {
    fail("invalid regex '", pattern_, "' in 'pattern' at ", where_, ": ", why);
  }

  // Alternatives up to ')' or the end.
  Piece alternation(int depth) {
    std::vector<Piece> alts{sequence(depth)};
    while (eat('|')) alts.push_back(sequence(depth));
    if (alts.size() == 1) return alts[0];
    Piece out;
    for (size_t k = 0; k < alts.size(); ++k) {
      out.gbnf += (k ? " | " : "") + alts[k].gbnf;
      out.nullable = out.nullable || alts[k].nullable;
    }
    return out;
  }

  Piece sequence(int depth) {
    std::vector<Piece> pieces;
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '$' && depth == 0) break;  // the caller checks it ends the alternative
      Piece atom_piece = atom(depth);
      quantify(atom_piece);
      if (!atom_piece.gbnf.empty() || atom_piece.literal) pieces.push_back(std::move(atom_piece));
    }
    Piece out;
    out.nullable = true;
    std::string text;
    auto flush = [&] {
      if (text.empty()) return;
      out.gbnf += (out.gbnf.empty() ? "" : " ") + gbnf_literal(text);
      text.clear();
    };
    for (const Piece& piece : pieces) {
      if (piece.literal) {
        text += piece.text;
        out.nullable = false;
        continue;
      }
      flush();
      out.gbnf += (out.gbnf.empty() ? "" : " ") + piece.gbnf;
      out.nullable = out.nullable && piece.nullable;
    }
    flush();
    return out;
  }

  Piece literal(uint32_t cp) {
    Piece piece;
    piece.text = json_spelling(cp);
    piece.gbnf = gbnf_literal(piece.text);
    piece.literal = true;
    return piece;
  }

  Piece set(const Ranges& ranges, const std::string& construct) {
    if (ranges.empty()) unsupported(construct, "a class that matches nothing");
    std::vector<std::string> alts;
    const Ranges plain = intersect(ranges, complement(kEscaped));
    if (!plain.empty()) {
      const Ranges rest = complement(plain);
      alts.push_back(rest.size() < plain.size() ? class_of(rest, true) : class_of(plain, false));
    }
    const Ranges escaped = intersect(ranges, kEscaped);
    const bool all_controls = !escaped.empty() && escaped.front() == std::make_pair(0u, 0x1Fu);
    if (all_controls) alts.push_back(gbnf_literal("\\u00") + " [01] [0-9a-fA-F]");
    // Control characters without a short escape are left out of a set that can
    // produce something else: the grammar may produce less than the regex
    // allows, and listing them one by one would bloat every '.' and [^...].
    std::vector<std::string> rare;
    for (const auto& [lo, hi] : escaped) {
      for (uint32_t cp = lo; cp <= hi; ++cp) {
        if (all_controls && cp < 0x20) continue;
        const std::string spelling = json_spelling(cp);
        (cp < 0x20 && spelling[1] == 'u' ? rare : alts).push_back(gbnf_literal(spelling));
      }
    }
    if (alts.empty()) alts = rare;
    Piece piece;
    if (alts.size() == 1) {
      piece.gbnf = alts[0];
    } else {
      piece.gbnf = "(";
      for (size_t k = 0; k < alts.size(); ++k) piece.gbnf += std::string(k ? " | " : " ") + alts[k];
      piece.gbnf += " )";
    }
    return piece;
  }

  std::string snippet(size_t from) const {
    std::string s;
    for (size_t k = from; k < std::min(i_, p_.size()); ++k) s += utf8_encode(p_[k]);
    return s;
  }

  Piece atom(int depth) {
    const size_t start = i_;
    const uint32_t c = p_[i_++];
    switch (c) {
      case '^': unsupported("^", "an anchor that is not at the start");
      case '$': unsupported("$", "an anchor that is not at the end");
      case '.': return set(complement(kLineTerminator), ".");
      case '[': return char_class(start);
      case '\\': {
        Ranges ranges;
        const uint32_t cp = escape(false, start, ranges);
        return ranges.empty() ? literal(cp) : set(ranges, snippet(start));
      }
      case '(': return group(depth, start);
      case '*':
      case '+':
      case '?': invalid("nothing to repeat before '" + utf8_encode(c) + "'");
      case '{': {
        --i_;
        int lo, hi;
        if (braces(lo, hi)) invalid("nothing to repeat before '{'");
        ++i_;
        return literal('{');  // not a quantifier: ECMAScript reads it as itself
      }
      default: return literal(c);
    }
  }

  Piece group(int depth, size_t start) {
    if (depth + 1 > max_depth_) invalid("groups nest deeper than " + std::to_string(max_depth_) + " levels");
    if (eat('?')) {
      if (eat(':')) {
      } else if (peek() == '=' || peek() == '!') {
        ++i_;
        unsupported(snippet(start), "lookahead");
      } else if (peek() == '<' && (peek(1) == '=' || peek(1) == '!')) {
        i_ += 2;
        unsupported(snippet(start), "lookbehind");
      } else if (eat('<')) {
        while (!at_end() && peek() != '>') ++i_;
        if (!eat('>')) invalid("unterminated group name");
      } else {
        unsupported(snippet(start) + utf8_encode(peek()), "an unknown group kind");
      }
    }
    Piece inner = alternation(depth + 1);
    if (!eat(')')) invalid("missing ')'");
    if (inner.gbnf.empty() && inner.nullable) return Piece{"", "", false, true};
    inner.gbnf = "(" + inner.gbnf + ")";
    inner.literal = false;
    return inner;
  }

  // {m}, {m,} or {m,n} at i_: consumes it and returns true, else leaves i_.
  bool braces(int& lo, int& hi) {
    size_t k = i_ + 1;
    auto number = [&](int& v) {
      const size_t from = k;
      long long n = 0;
      while (k < p_.size() && p_[k] >= '0' && p_[k] <= '9') {
        n = std::min<long long>(n * 10 + (p_[k] - '0'), 1LL << 40);
        ++k;
      }
      v = static_cast<int>(std::min<long long>(n, 1 << 30));
      return k > from;
    };
    if (!number(lo)) return false;
    hi = lo;
    if (k < p_.size() && p_[k] == ',') {
      ++k;
      if (!number(hi)) hi = -1;
    }
    if (k >= p_.size() || p_[k] != '}') return false;
    i_ = k + 1;
    return true;
  }

  void quantify(Piece& piece) {
    int lo = 0, hi = -1;
    if (at_end()) return;
    const size_t start = i_;
    const uint32_t c = peek();
    if (c == '*') {
      ++i_;
    } else if (c == '+') {
      ++i_;
      lo = 1;
    } else if (c == '?') {
      ++i_;
      hi = 1;
    } else if (c != '{' || !braces(lo, hi)) {
      return;
    }
    eat('?');  // lazy: the same language
    if (!at_end() && (peek() == '*' || peek() == '+' || peek() == '?')) invalid("nothing to repeat");
    if (!at_end() && peek() == '{') {
      const size_t keep = i_;
      int a, b;
      if (braces(a, b)) invalid("nothing to repeat");
      i_ = keep;
    }
    if (hi >= 0 && hi < lo) invalid("quantifier " + snippet(start) + " has its maximum below its minimum");
    if (lo > max_repeat_ || hi > max_repeat_) {
      fail("regex quantifier ", snippet(start), " in 'pattern' at ", where_, " is above the limit of ", max_repeat_);
    }
    if (piece.gbnf.empty()) return;  // repeating nothing is nothing
    if (hi < 0 && piece.nullable) {
      // (x?)* and the like loop without consuming anything in a grammar matcher.
      unsupported(snippet(start), "an unbounded repetition of something that can match nothing");
    }
    std::string suffix;
    if (lo == 0 && hi < 0) {
      suffix = "*";
    } else if (lo == 1 && hi < 0) {
      suffix = "+";
    } else if (lo == 0 && hi == 1) {
      suffix = "?";
    } else if (hi < 0) {
      suffix = "{" + std::to_string(lo) + ",}";
    } else if (lo == hi) {
      suffix = lo == 1 ? "" : "{" + std::to_string(lo) + "}";
    } else {
      suffix = "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
    }
    if (hi == 0) {
      piece = Piece{"", "", false, true};
      return;
    }
    piece.literal = false;
    piece.gbnf += suffix;
    piece.nullable = piece.nullable || lo == 0;
  }

  uint32_t hex_digits(int n) {
    uint32_t v = 0;
    for (int k = 0; k < n; ++k) {
      const uint32_t c = peek();
      int d;
      if (c >= '0' && c <= '9') {
        d = static_cast<int>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        d = static_cast<int>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        d = static_cast<int>(c - 'A' + 10);
      } else {
        invalid("expected a hex digit in an escape");
      }
      ++i_;
      v = v * 16 + static_cast<uint32_t>(d);
    }
    return v;
  }

  // After a backslash: a single code point, or (ranges non-empty) a class escape.
  uint32_t escape(bool in_class, size_t start, Ranges& ranges) {
    if (at_end()) invalid("trailing backslash");
    const uint32_t c = p_[i_++];
    switch (c) {
      case 'd': ranges = kDigit; return 0;
      case 'D': ranges = complement(kDigit); return 0;
      case 'w': ranges = kWord; return 0;
      case 'W': ranges = complement(kWord); return 0;
      case 's': ranges = kSpace; return 0;
      case 'S': ranges = complement(kSpace); return 0;
      case 't': return '\t';
      case 'n': return '\n';
      case 'r': return '\r';
      case 'v': return '\v';
      case 'f': return '\f';
      case 'b':
        if (in_class) return '\b';
        unsupported("\\b", "a word boundary");
      case 'B': unsupported("\\B", "a word boundary");
      case '0':
        if (peek() >= '0' && peek() <= '9') unsupported(snippet(start) + utf8_encode(peek()), "an octal escape");
        return 0;
      case 'k': unsupported("\\k", "a named backreference");
      case 'p':
      case 'P': unsupported(snippet(start), "a Unicode property escape");
      case 'c': {
        const uint32_t l = peek();
        if (!((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z'))) invalid("\\c must be followed by a letter");
        ++i_;
        return l % 32;
      }
      case 'x': return hex_digits(2);
      case 'u': {
        uint32_t cp;
        if (eat('{')) {
          cp = 0;
          int n = 0;
          while (!at_end() && peek() != '}' && n < 8) {
            cp = cp * 16 + hex_digits(1);
            ++n;
          }
          if (!eat('}') || n == 0 || cp > kMaxCodePoint) invalid("bad \\u{...} escape");
          return cp;
        }
        cp = hex_digits(4);
        // A surrogate pair written as two escapes is one character.
        if (cp >= 0xD800 && cp <= 0xDBFF && peek() == '\\' && peek(1) == 'u') {
          const size_t keep = i_;
          i_ += 2;
          const uint32_t low = hex_digits(4);
          if (low >= 0xDC00 && low <= 0xDFFF) return 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          i_ = keep;
        }
        if (cp >= 0xD800 && cp <= 0xDFFF) unsupported(snippet(start), "a lone surrogate");
        return cp;
      }
      default: break;
    }
    if (c >= '1' && c <= '9') unsupported(snippet(start), "a backreference");
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) unsupported(snippet(start), "an unknown escape");
    return c;  // \. \* \/ \- ... stand for themselves
  }

  Piece char_class(size_t start) {
    const bool negated = eat('^');
    Ranges ranges;
    for (;;) {
      if (at_end()) invalid("unterminated character class");
      if (eat(']')) break;
      Ranges member;
      uint32_t lo = class_atom(member);
      if (member.empty() && peek() == '-' && peek(1) != ']' && i_ + 1 < p_.size()) {
        ++i_;
        Ranges member_hi;
        const uint32_t hi = class_atom(member_hi);
        if (member_hi.empty()) {
          if (hi < lo) invalid("character class range out of order");
          ranges.emplace_back(lo, hi);
          continue;
        }
        // [a-\d]: ECMAScript (outside unicode mode) reads the '-' as itself.
        ranges.emplace_back(lo, lo);
        ranges.emplace_back('-', '-');
        ranges.insert(ranges.end(), member_hi.begin(), member_hi.end());
        continue;
      }
      if (member.empty()) {
        ranges.emplace_back(lo, lo);
      } else {
        ranges.insert(ranges.end(), member.begin(), member.end());
      }
    }
    ranges = normalize(ranges);
    if (negated) ranges = complement(ranges);
    return set(ranges, snippet(start));
  }

  uint32_t class_atom(Ranges& member) {
    const size_t start = i_;
    const uint32_t c = p_[i_++];
    if (c != '\\') return c;
    return escape(true, start, member);
  }

  const std::string& pattern_;
  std::vector<uint32_t> p_;
  size_t i_ = 0;
  const std::string& where_;
  const std::string& char_rule_;
  int max_depth_, max_repeat_;
  bool uses_char_ = false;
};

}  // namespace

RegexGbnf regex_to_gbnf(const std::string& pattern, const std::string& where, const std::string& char_rule,
                        int max_depth, int max_repeat) {
  auto cps = decode_utf8(pattern);
  if (!cps) fail("JSON Schema: 'pattern' at ", where, " is not valid UTF-8");
  return Translator(pattern, std::move(*cps), where, char_rule, max_depth, max_repeat).run();
}

}  // namespace qkv::grammar::schema_detail

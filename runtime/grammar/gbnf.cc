#include "runtime/grammar/gbnf.h"

#include <map>
#include <utility>
#include <vector>

#include "kernels/error.h"

namespace qkv::grammar {

namespace {

using Sequence = std::vector<Element>;

class GbnfParser {
 public:
  GbnfParser(const std::string& text, const GbnfLimits& limits) : s_(text), limits_(limits) {}

  Grammar parse() {
    if (s_.size() > limits_.max_bytes) {
      fail("GBNF grammar: ", s_.size(), " bytes is more than the limit of ", limits_.max_bytes);
    }
    skip_space(true);
    while (pos_ < s_.size()) {
      const size_t at = pos_;
      const std::string name = parse_name();
      skip_space(false);
      if (s_.compare(pos_, 3, "::=") != 0) error("expected '::=' after the rule name '" + name + "'");
      pos_ += 3;
      skip_space(true);
      const uint32_t r = rule_id(name, at);
      if (defined_[r]) error_at(at, "rule '" + name + "' is defined twice");
      defined_[r] = 1;
      rules_[r] = parse_alternates(false, name);
      if (pos_ < s_.size() && s_[pos_] != '\n' && s_[pos_] != '\r') error("expected the end of the rule");
      skip_space(true);
    }
    for (uint32_t r = 0; r < names_.size(); ++r) {
      if (!defined_[r]) error_at(first_use_[r], "undefined rule '" + names_[r] + "'");
    }
    const auto root = index_.find("root");
    if (root == index_.end()) fail("GBNF grammar: no 'root' rule (the start rule)");
    return build(root->second);
  }

 private:
  [[noreturn]] void error_at(size_t at, const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    fail("GBNF grammar: ", what, " at line ", line, ", column ", col);
  }
  [[noreturn]] void error(const std::string& what) const { error_at(pos_, what); }

  // Spaces, tabs and comments; newlines too when newline_ok.
  void skip_space(bool newline_ok) {
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == ' ' || c == '\t') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n' && s_[pos_] != '\r') ++pos_;
      } else if (newline_ok && (c == '\n' || c == '\r')) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (pos_ < s_.size() && name_char(s_[pos_])) ++pos_;
    if (pos_ == start) error("expected a rule name");
    return s_.substr(start, pos_ - start);
  }

  uint32_t rule_id(const std::string& name, size_t at) {
    auto it = index_.find(name);
    if (it != index_.end()) return it->second;
    return add_rule(name, at);
  }

  uint32_t add_rule(const std::string& name, size_t at) {
    if (names_.size() >= limits_.max_rules) error_at(at, "more than " + std::to_string(limits_.max_rules) + " rules");
    const auto r = static_cast<uint32_t>(names_.size());
    names_.push_back(name);
    index_[name] = r;
    rules_.emplace_back();
    defined_.push_back(0);
    first_use_.push_back(at);
    return r;
  }

  // A rule for a group or a repetition, named after the rule it is in.
  uint32_t generated_rule(const std::string& base, std::vector<Sequence> alternatives) {
    std::string name;
    do {
      name = base + "-" + std::to_string(++generated_);
    } while (index_.count(name));
    const uint32_t r = add_rule(name, pos_);
    defined_[r] = 1;
    rules_[r] = std::move(alternatives);
    return r;
  }

  uint32_t class_id(CodeRanges ranges) {
    ranges = normalize_ranges(std::move(ranges));
    auto it = class_index_.find(ranges);
    if (it != class_index_.end()) return it->second;
    const auto id = static_cast<uint32_t>(classes_.size());
    classes_.push_back(ranges);
    class_index_.emplace(std::move(ranges), id);
    return id;
  }

  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i, ++pos_) {
      if (pos_ >= s_.size()) error("unfinished escape");
      const char c = s_[pos_];
      int d;
      if (c >= '0' && c <= '9') {
        d = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        d = c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        d = c - 'A' + 10;
      } else {
        error("expected a hex digit in the escape");
      }
      v = v * 16 + static_cast<uint32_t>(d);
    }
    return v;
  }

  // One code point of a literal or class (UTF-8 decoded, escapes applied).
  uint32_t parse_char() {
    if (pos_ >= s_.size()) error("unexpected end of the grammar");
    const auto c = static_cast<unsigned char>(s_[pos_]);
    if (c == '\\') {
      ++pos_;
      if (pos_ >= s_.size()) error("unfinished escape");
      const char e = s_[pos_++];
      switch (e) {
        case 'x': return hex(2);
        case 'u': return hex(4);
        case 'U': return hex(8);
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '0': return 0;
        default:
          if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9')) {
            pos_ -= 2;
            error(std::string("unknown escape '\\") + e + "'");
          }
          return static_cast<unsigned char>(e);  // \\ \" \[ \] \- \^ ... stand for themselves
      }
    }
    // UTF-8: the lead byte gives the length.
    const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || pos_ + n > s_.size()) error("invalid UTF-8 in the grammar");
    uint32_t v = n == 1 ? c : c & (0x7F >> n);
    for (int i = 1; i < n; ++i) {
      const auto b = static_cast<unsigned char>(s_[pos_ + i]);
      if ((b & 0xC0) != 0x80) error("invalid UTF-8 in the grammar");
      v = (v << 6) | (b & 0x3F);
    }
    pos_ += n;
    return v;
  }

  std::vector<Sequence> parse_alternates(bool nested, const std::string& rule) {
    std::vector<Sequence> alternatives;
    alternatives.push_back(parse_sequence(nested, rule));
    while (pos_ < s_.size() && s_[pos_] == '|') {
      ++pos_;
      skip_space(true);
      alternatives.push_back(parse_sequence(nested, rule));
    }
    return alternatives;
  }

  Sequence parse_sequence(bool nested, const std::string& rule) {
    Sequence seq;
    size_t item = 0;  // where the last item starts in seq (what a repetition applies to)
    bool have_item = false;
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == '"') {
        item = seq.size();
        ++pos_;
        while (pos_ < s_.size() && s_[pos_] != '"') {
          if (s_[pos_] == '\n' || s_[pos_] == '\r') error("unterminated literal");
          const uint32_t cp = parse_char();
          seq.push_back({Op::kClass, class_id({{cp, cp}})});
        }
        if (pos_ >= s_.size()) error("unterminated literal");
        ++pos_;
        have_item = true;
      } else if (c == '[') {
        item = seq.size();
        ++pos_;
        bool negate = false;
        if (pos_ < s_.size() && s_[pos_] == '^') {
          negate = true;
          ++pos_;
        }
        CodeRanges ranges;
        while (pos_ < s_.size() && s_[pos_] != ']') {
          if (s_[pos_] == '\n' || s_[pos_] == '\r') error("unterminated character class");
          const uint32_t lo = parse_char();
          uint32_t hi = lo;
          if (pos_ + 1 < s_.size() && s_[pos_] == '-' && s_[pos_ + 1] != ']') {
            ++pos_;
            if (s_[pos_] == '\n' || s_[pos_] == '\r') error("unterminated character class");
            hi = parse_char();
            if (hi < lo) error("character range with its end before its start");
          }
          ranges.emplace_back(lo, hi);
        }
        if (pos_ >= s_.size()) error("unterminated character class");
        ++pos_;
        ranges = normalize_ranges(std::move(ranges));
        if (negate) ranges = complement_ranges(ranges);
        if (ranges.empty()) error_at(pos_ - 1, "character class matches nothing");
        seq.push_back({Op::kClass, class_id(ranges)});
        have_item = true;
      } else if (c == '.') {
        item = seq.size();
        ++pos_;
        seq.push_back({Op::kClass, class_id({{0, 0x10FFFF}})});
        have_item = true;
      } else if (name_char(c)) {
        item = seq.size();
        const size_t at = pos_;
        const std::string name = parse_name();
        seq.push_back({Op::kRule, rule_id(name, at)});
        have_item = true;
      } else if (c == '(') {
        item = seq.size();
        ++pos_;
        skip_space(true);
        std::vector<Sequence> alternatives = parse_alternates(true, rule);
        if (pos_ >= s_.size() || s_[pos_] != ')') error("expected ')'");
        ++pos_;
        seq.push_back({Op::kRule, generated_rule(rule, std::move(alternatives))});
        have_item = true;
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (!have_item) error(std::string("'") + c + "' with nothing before it to repeat");
        ++pos_;
        int min = 0, max = -1;
        if (c == '+') {
          min = 1;
        } else if (c == '?') {
          max = 1;
        } else if (c == '{') {
          skip_space(nested);
          min = parse_count();
          skip_space(nested);
          if (pos_ < s_.size() && s_[pos_] == ',') {
            ++pos_;
            skip_space(nested);
            if (pos_ < s_.size() && s_[pos_] != '}') max = parse_count();
          } else {
            max = min;
          }
          skip_space(nested);
          if (pos_ >= s_.size() || s_[pos_] != '}') error("expected '}'");
          ++pos_;
          if (max >= 0 && max < min) error("repetition {m,n} with n < m");
        }
        repeat(seq, item, min, max, rule);
        have_item = false;  // x** is an error, as in llama.cpp
      } else {
        break;
      }
      if (seq.size() > limits_.max_elements) error("grammar too large");
      skip_space(nested);
    }
    return seq;
  }

  int parse_count() {
    const size_t start = pos_;
    long v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      v = v * 10 + (s_[pos_++] - '0');
      if (v > limits_.max_repeat) error_at(start, "repetition count above the limit of " + std::to_string(limits_.max_repeat));
    }
    if (pos_ == start) error("expected a number");
    return static_cast<int>(v);
  }

  // Replaces seq[item..] by min copies of it and then up to max - min more
  // (max < 0: any number).
  void repeat(Sequence& seq, size_t item, int min, int max, const std::string& rule) {
    const Sequence x(seq.begin() + static_cast<std::ptrdiff_t>(item), seq.end());
    seq.resize(item);
    if (x.empty()) return;
    if (x.size() * static_cast<size_t>(std::max(min, max)) + seq.size() > limits_.max_elements) error("grammar too large");
    for (int i = 0; i < min; ++i) seq.insert(seq.end(), x.begin(), x.end());
    if (max < 0) {
      if (x.size() == 1 && x[0].op == Op::kClass) {
        seq.push_back({Op::kClassStar, x[0].arg});  // in place: no stack growth
        return;
      }
      // star ::= x star | (empty)
      const uint32_t star = generated_rule(rule, {});
      Sequence loop = x;
      loop.push_back({Op::kRule, star});
      rules_[star] = {loop, Sequence{}};
      seq.push_back({Op::kRule, star});
      return;
    }
    // Up to max - min optional copies, nested so the parse stays unambiguous:
    // opt_k ::= x opt_(k-1) | (empty).
    uint32_t inner = 0;
    bool have_inner = false;
    for (int k = 0; k < max - min; ++k) {
      Sequence body = x;
      if (have_inner) body.push_back({Op::kRule, inner});
      inner = generated_rule(rule, {body, Sequence{}});
      have_inner = true;
    }
    if (have_inner) seq.push_back({Op::kRule, inner});
  }

  Grammar build(uint32_t root) {
    Grammar g;
    g.root = root;
    g.rule_names = names_;
    g.alternatives.resize(rules_.size());
    for (uint32_t r = 0; r < rules_.size(); ++r) {
      for (const Sequence& alt : rules_[r]) {
        g.alternatives[r].push_back(static_cast<uint32_t>(g.elements.size()));
        g.elements.insert(g.elements.end(), alt.begin(), alt.end());
        g.elements.push_back({Op::kEnd, 0});
      }
    }
    if (g.elements.size() > limits_.max_elements) fail("GBNF grammar: more than ", limits_.max_elements, " elements");
    g.classes.reserve(classes_.size());
    for (const CodeRanges& c : classes_) g.classes.emplace_back(c);
    g.finish();
    return g;
  }

  const std::string& s_;
  const GbnfLimits limits_;
  size_t pos_ = 0;
  int generated_ = 0;
  std::vector<std::string> names_;
  std::map<std::string, uint32_t> index_;
  std::vector<std::vector<Sequence>> rules_;
  std::vector<char> defined_;
  std::vector<size_t> first_use_;
  std::vector<CodeRanges> classes_;
  std::map<CodeRanges, uint32_t> class_index_;
};

}  // namespace

Grammar parse_gbnf(const std::string& text, const GbnfLimits& limits) { return GbnfParser(text, limits).parse(); }

}  // namespace qkv::grammar

#include "runtime/jinja/lexer.h"

#include <cstring>

#include "kernels/error.h"

namespace qkv::jinja {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

void append_utf8(uint32_t c, std::string* out) { *out += from_code_points(&c, 1); }

class Lexer {
 public:
  explicit Lexer(const std::string& s) : s_(s) {}

  std::vector<Token> run() {
    bool line_starting = true;
    while (i_ < s_.size()) {
      size_t start = find_opener(i_);
      std::string text = s_.substr(i_, start - i_);
      const Pos text_pos = pos_at(i_);
      if (start == s_.size()) {
        emit_text(text, text_pos);
        break;
      }
      const char type = s_[start + 1];  // '{', '%' or '#'
      const char sign = start + 2 < s_.size() ? s_[start + 2] : 0;
      if (sign == '-') {
        size_t n = text.size();
        while (n > 0 && is_space(text[n - 1])) --n;
        text.resize(n);
      } else if (sign != '+' && type != '{') {  // lstrip_blocks
        const size_t nl = text.rfind('\n');
        const size_t l = nl == std::string::npos ? 0 : nl + 1;
        if (l > 0 || line_starting) {
          bool blank = true;
          for (size_t k = l; k < text.size(); ++k) blank = blank && is_space(text[k]);
          if (blank) text.resize(l);
        }
      }
      emit_text(text, text_pos);
      i_ = start + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      if (type == '#') {
        line_starting = comment(start);
      } else if (type == '%' && raw_block(start)) {
        line_starting = last_end_newline_;
      } else {
        out_.push_back({type == '{' ? Token::kVarBegin : Token::kBlockBegin, "", pos_at(start)});
        tag(type == '{' ? '}' : '%');
        line_starting = last_end_newline_;
      }
    }
    out_.push_back({Token::kEnd, "", pos_at(s_.size())});
    return std::move(out_);
  }

 private:
  size_t find_opener(size_t from) const {
    for (size_t k = from; k + 1 < s_.size(); ++k)
      if (s_[k] == '{' && (s_[k + 1] == '{' || s_[k + 1] == '%' || s_[k + 1] == '#')) return k;
    return s_.size();
  }

  Pos pos_at(size_t at) {
    while (pos_off_ < at && pos_off_ < s_.size()) {
      if (s_[pos_off_] == '\n') {
        ++cur_.line;
        cur_.col = 1;
      } else {
        ++cur_.col;
      }
      ++pos_off_;
    }
    return cur_;
  }

  [[noreturn]] void error(size_t at, const std::string& what) {
    const Pos p = pos_at(at);
    fail("template line ", p.line, " column ", p.col, ": ", what);
  }

  void emit_text(const std::string& t, Pos p) {
    if (!t.empty()) out_.push_back({Token::kText, t, p});
  }

  // After an end marker at i_ of length n (sign already consumed): trim_blocks or '-'.
  void after_end(char sign, size_t end) {
    i_ = end;
    last_end_newline_ = false;
    if (sign == '-') {
      while (i_ < s_.size() && is_space(s_[i_])) ++i_;
      last_end_newline_ = i_ > end && s_[i_ - 1] == '\n';
    } else if (sign != '+' && trim_) {
      if (i_ < s_.size() && s_[i_] == '\n') {
        ++i_;
        last_end_newline_ = true;
      }
    }
  }

  bool comment(size_t start) {
    const size_t e = s_.find("#}", i_);
    if (e == std::string::npos) error(start, "unterminated comment");
    const char sign = e > i_ && (s_[e - 1] == '-' || s_[e - 1] == '+') ? s_[e - 1] : 0;
    trim_ = true;
    after_end(sign, e + 2);
    return last_end_newline_;
  }

  // {% raw %}...{% endraw %}: the text between, verbatim.
  bool raw_block(size_t start) {
    size_t k = i_;
    while (k < s_.size() && is_space(s_[k])) ++k;
    if (s_.compare(k, 3, "raw") != 0 || (k + 3 < s_.size() && (is_name_start(s_[k + 3]) || is_digit(s_[k + 3]))))
      return false;
    k += 3;
    while (k < s_.size() && is_space(s_[k])) ++k;
    char sign = 0;
    if (k < s_.size() && (s_[k] == '-' || s_[k] == '+')) sign = s_[k++];
    if (s_.compare(k, 2, "%}") != 0) return false;
    after_end(sign, k + 2);
    size_t from = i_;
    for (size_t at = s_.find("{%", from); at != std::string::npos; at = s_.find("{%", at + 2)) {
      size_t m = at + 2;
      const char open_sign = m < s_.size() && (s_[m] == '-' || s_[m] == '+') ? s_[m] : 0;
      if (open_sign) ++m;
      while (m < s_.size() && is_space(s_[m])) ++m;
      if (s_.compare(m, 6, "endraw") != 0) continue;
      m += 6;
      while (m < s_.size() && is_space(s_[m])) ++m;
      char esign = 0;
      if (m < s_.size() && (s_[m] == '-' || s_[m] == '+')) esign = s_[m++];
      if (s_.compare(m, 2, "%}") != 0) continue;
      std::string text = s_.substr(from, at - from);
      if (open_sign == '-') {
        size_t n = text.size();
        while (n > 0 && is_space(text[n - 1])) --n;
        text.resize(n);
      }
      emit_text(text, pos_at(from));
      after_end(esign, m + 2);
      return true;
    }
    error(start, "unterminated raw block (no {% endraw %})");
  }

  void tag(char close) {  // close: '}' for }}, '%' for %}
    const size_t start = i_ - 2;
    int depth = 0;
    while (true) {
      while (i_ < s_.size() && is_space(s_[i_])) ++i_;
      if (i_ >= s_.size()) error(start, close == '}' ? "unterminated '{{' (no '}}')" : "unterminated '{%' (no '%}')");
      if (depth == 0) {
        char sign = 0;
        size_t k = i_;
        if (s_[k] == '-' || s_[k] == '+') sign = s_[k++];
        if (k + 1 < s_.size() && s_[k] == close && s_[k + 1] == '}' && !(close == '}' && sign == '+')) {
          out_.push_back({close == '}' ? Token::kVarEnd : Token::kBlockEnd, "", pos_at(i_)});
          trim_ = close == '%';
          after_end(sign, k + 2);
          return;
        }
      }
      const Pos p = pos_at(i_);
      const char c = s_[i_];
      if (is_name_start(c)) {
        size_t k = i_;
        while (k < s_.size() && (is_name_start(s_[k]) || is_digit(s_[k]))) ++k;
        out_.push_back({Token::kName, s_.substr(i_, k - i_), p});
        i_ = k;
      } else if (is_digit(c)) {
        number(p);
      } else if (c == '\'' || c == '"') {
        string(p);
      } else {
        static const char* kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">",
                                     "=", "(", ")", "[", "]", "{", "}", ",", ".", ":", "|", ";"};
        bool found = false;
        for (const char* op : kOps) {
          const size_t n = std::strlen(op);
          if (s_.compare(i_, n, op) == 0) {
            if (op[0] == '(' || op[0] == '[' || op[0] == '{') ++depth;
            if ((op[0] == ')' || op[0] == ']' || op[0] == '}') && depth > 0) --depth;
            out_.push_back({Token::kOp, op, p});
            i_ += n;
            found = true;
            break;
          }
        }
        if (!found) error(i_, std::string("unexpected character '") + c + "' in a tag");
      }
    }
  }

  void number(Pos p) {
    size_t k = i_;
    while (k < s_.size() && (is_digit(s_[k]) || s_[k] == '_')) ++k;
    bool is_float = false;
    if (k + 1 < s_.size() && s_[k] == '.' && is_digit(s_[k + 1])) {
      is_float = true;
      ++k;
      while (k < s_.size() && (is_digit(s_[k]) || s_[k] == '_')) ++k;
    }
    if (k < s_.size() && (s_[k] == 'e' || s_[k] == 'E')) {
      size_t m = k + 1;
      if (m < s_.size() && (s_[m] == '+' || s_[m] == '-')) ++m;
      if (m < s_.size() && is_digit(s_[m])) {
        is_float = true;
        k = m;
        while (k < s_.size() && is_digit(s_[k])) ++k;
      }
    }
    std::string t;
    for (size_t m = i_; m < k; ++m)
      if (s_[m] != '_') t += s_[m];
    out_.push_back({is_float ? Token::kFloat : Token::kInt, t, p});
    i_ = k;
  }

  void string(Pos p) {
    const char q = s_[i_];
    const size_t start = i_;
    std::string v;
    ++i_;
    while (true) {
      if (i_ >= s_.size()) error(start, "unterminated string literal");
      const char c = s_[i_];
      if (c == q) {
        ++i_;
        break;
      }
      if (c != '\\' || i_ + 1 >= s_.size()) {
        v += c;
        ++i_;
        continue;
      }
      const char e = s_[i_ + 1];
      i_ += 2;
      switch (e) {
        case 'n': v += '\n'; break;
        case 't': v += '\t'; break;
        case 'r': v += '\r'; break;
        case '0': v += '\0'; break;
        case 'a': v += '\a'; break;
        case 'b': v += '\b'; break;
        case 'f': v += '\f'; break;
        case 'v': v += '\v'; break;
        case '\\': v += '\\'; break;
        case '\'': v += '\''; break;
        case '"': v += '"'; break;
        case '\n': break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (size_t k = 0; k < n; ++k) {
            const char h = i_ + k < s_.size() ? s_[i_ + k] : 0;
            const int d = is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
            if (d < 0) error(i_ - 2, std::string("truncated \\") + e + " escape in a string literal");
            cp = cp * 16 + d;
          }
          if (cp > 0x10ffff) error(i_ - 2, "escape beyond U+10FFFF in a string literal");
          i_ += n;
          append_utf8(cp, &v);
          break;
        }
        default:
          v += '\\';
          v += e;
      }
    }
    out_.push_back({Token::kString, v, p});
  }

  const std::string& s_;
  size_t i_ = 0;
  size_t pos_off_ = 0;
  Pos cur_;
  bool trim_ = true;
  bool last_end_newline_ = false;
  std::vector<Token> out_;
};

}  // namespace

std::vector<Token> lex(const std::string& source) { return Lexer(source).run(); }

}  // namespace qkv::jinja

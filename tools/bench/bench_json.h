// A small JSON value with a strict parser and a printer: what `qkv bench
// --json` writes and `qkv plot` (and the tests) read back. Header-only so the
// tests can use the same reader as the tools.
//
// The parser accepts RFC 8259 JSON only (no comments, no trailing commas),
// bounds nesting depth, and fails with a qkv::Error naming the source and the
// byte offset. Objects keep their keys in order; a repeated key is an error.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "kernels/error.h"

namespace qkv::tools {

class Json {
 public:
  enum class Kind { Null, Bool, Number, String, Array, Object };

  Json() = default;
  static Json null() { return Json(); }
  static Json boolean(bool v) {
    Json j;
    j.kind_ = Kind::Bool;
    j.bool_ = v;
    return j;
  }
  // A non-finite number prints as null (JSON has no NaN or infinity).
  static Json number(double v) {
    Json j;
    j.kind_ = Kind::Number;
    j.number_ = v;
    return j;
  }
  static Json string(std::string v) {
    Json j;
    j.kind_ = Kind::String;
    j.string_ = std::move(v);
    return j;
  }
  static Json array() {
    Json j;
    j.kind_ = Kind::Array;
    return j;
  }
  static Json object() {
    Json j;
    j.kind_ = Kind::Object;
    return j;
  }

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::Null; }
  bool is_number() const { return kind_ == Kind::Number; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_array() const { return kind_ == Kind::Array; }
  bool is_object() const { return kind_ == Kind::Object; }

  bool as_bool() const {
    QKV_CHECK(kind_ == Kind::Bool, "JSON: expected true or false");
    return bool_;
  }
  double as_number() const {
    QKV_CHECK(kind_ == Kind::Number, "JSON: expected a number");
    return number_;
  }
  const std::string& as_string() const {
    QKV_CHECK(kind_ == Kind::String, "JSON: expected a string");
    return string_;
  }
  const std::vector<Json>& items() const {
    QKV_CHECK(kind_ == Kind::Array, "JSON: expected an array");
    return array_;
  }
  const std::vector<std::pair<std::string, Json>>& members() const {
    QKV_CHECK(kind_ == Kind::Object, "JSON: expected an object");
    return object_;
  }

  // Object member by key, or nullptr (also when this is not an object).
  const Json* find(const std::string& key) const {
    if (kind_ != Kind::Object) return nullptr;
    for (const auto& m : object_)
      if (m.first == key) return &m.second;
    return nullptr;
  }
  // Object member by key; throws naming the key when absent.
  const Json& at(const std::string& key) const {
    const Json* j = find(key);
    QKV_CHECK(j != nullptr, "JSON: missing key \"", key, "\"");
    return *j;
  }

  // Building: push to an array, set (add or replace) an object member.
  Json& push(Json v) {
    QKV_CHECK(kind_ == Kind::Array, "JSON: push on a non-array");
    array_.push_back(std::move(v));
    return array_.back();
  }
  Json& set(const std::string& key, Json v) {
    QKV_CHECK(kind_ == Kind::Object, "JSON: set on a non-object");
    for (auto& m : object_) {
      if (m.first == key) {
        m.second = std::move(v);
        return m.second;
      }
    }
    object_.emplace_back(key, std::move(v));
    return object_.back().second;
  }

  // Text with `indent` spaces per level (0: one line).
  std::string dump(int indent = 2) const {
    std::string out;
    dump_to(out, indent, 0);
    return out;
  }

  // Parses a whole document; `where` names the source in errors.
  static Json parse(const std::string& text, const std::string& where = "JSON") {
    Parser p{text, where, 0};
    p.skip_space();
    Json v = p.value(0);
    p.skip_space();
    if (p.pos != text.size()) p.error("unexpected text after the value");
    return v;
  }

 private:
  static void quote(std::string& out, const std::string& s) {
    out += '"';
    for (const char ch : s) {
      const unsigned char c = static_cast<unsigned char>(ch);
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
          if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
          } else {
            out += ch;
          }
      }
    }
    out += '"';
  }

  void dump_to(std::string& out, int indent, int level) const {
    auto newline = [&](int lvl) {
      if (indent > 0) {
        out += '\n';
        out.append(size_t(indent) * size_t(lvl), ' ');
      }
    };
    switch (kind_) {
      case Kind::Null: out += "null"; break;
      case Kind::Bool: out += bool_ ? "true" : "false"; break;
      case Kind::Number: {
        if (!std::isfinite(number_)) {
          out += "null";
        } else if (number_ == std::floor(number_) && std::fabs(number_) < 9007199254740992.0) {
          out += std::to_string(static_cast<long long>(number_));
        } else {
          char buf[32];
          std::snprintf(buf, sizeof buf, "%.10g", number_);
          out += buf;
        }
        break;
      }
      case Kind::String: quote(out, string_); break;
      case Kind::Array:
        out += '[';
        for (size_t i = 0; i < array_.size(); ++i) {
          if (i) out += ',';
          newline(level + 1);
          array_[i].dump_to(out, indent, level + 1);
        }
        if (!array_.empty()) newline(level);
        out += ']';
        break;
      case Kind::Object:
        out += '{';
        for (size_t i = 0; i < object_.size(); ++i) {
          if (i) out += ',';
          newline(level + 1);
          quote(out, object_[i].first);
          out += indent > 0 ? ": " : ":";
          object_[i].second.dump_to(out, indent, level + 1);
        }
        if (!object_.empty()) newline(level);
        out += '}';
        break;
    }
  }

  struct Parser {
    const std::string& text;
    const std::string& where;
    size_t pos;
    static constexpr int kMaxDepth = 64;

    [[noreturn]] void error(const char* what) const { fail(where, ": invalid JSON at byte ", pos, ": ", what); }
    void skip_space() {
      while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t' || text[pos] == '\n' || text[pos] == '\r'))
        ++pos;
    }
    bool literal(const char* word) {
      size_t n = 0;
      while (word[n]) ++n;
      if (text.compare(pos, n, word) != 0) return false;
      pos += n;
      return true;
    }
    Json value(int depth) {
      if (depth > kMaxDepth) error("nesting too deep");
      if (pos >= text.size()) error("unexpected end");
      const char c = text[pos];
      if (c == '{') return object(depth);
      if (c == '[') return array(depth);
      if (c == '"') return Json::string(string_body());
      if (c == '-' || (c >= '0' && c <= '9')) return number();
      if (literal("true")) return Json::boolean(true);
      if (literal("false")) return Json::boolean(false);
      if (literal("null")) return Json::null();
      error("expected a value");
    }
    Json object(int depth) {
      Json o = Json::object();
      ++pos;  // '{'
      skip_space();
      if (pos < text.size() && text[pos] == '}') {
        ++pos;
        return o;
      }
      for (;;) {
        skip_space();
        if (pos >= text.size() || text[pos] != '"') error("expected a key string");
        std::string key = string_body();
        if (o.find(key)) error("repeated key");
        skip_space();
        if (pos >= text.size() || text[pos] != ':') error("expected ':'");
        ++pos;
        skip_space();
        o.object_.emplace_back(std::move(key), value(depth + 1));
        skip_space();
        if (pos < text.size() && text[pos] == ',') {
          ++pos;
          continue;
        }
        if (pos < text.size() && text[pos] == '}') {
          ++pos;
          return o;
        }
        error("expected ',' or '}'");
      }
    }
    Json array(int depth) {
      Json a = Json::array();
      ++pos;  // '['
      skip_space();
      if (pos < text.size() && text[pos] == ']') {
        ++pos;
        return a;
      }
      for (;;) {
        skip_space();
        a.array_.push_back(value(depth + 1));
        skip_space();
        if (pos < text.size() && text[pos] == ',') {
          ++pos;
          continue;
        }
        if (pos < text.size() && text[pos] == ']') {
          ++pos;
          return a;
        }
        error("expected ',' or ']'");
      }
    }
    Json number() {
      const size_t start = pos;
      auto digits = [&] {
        const size_t d0 = pos;
        while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') ++pos;
        return pos > d0;
      };
      if (text[pos] == '-') ++pos;
      if (pos < text.size() && text[pos] == '0') {
        ++pos;
      } else if (!digits()) {
        error("bad number");
      }
      if (pos < text.size() && text[pos] == '.') {
        ++pos;
        if (!digits()) error("bad number fraction");
      }
      if (pos < text.size() && (text[pos] == 'e' || text[pos] == 'E')) {
        ++pos;
        if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) ++pos;
        if (!digits()) error("bad number exponent");
      }
      return Json::number(std::strtod(text.substr(start, pos - start).c_str(), nullptr));
    }
    unsigned hex4() {
      if (pos + 4 > text.size()) error("short \\u escape");
      unsigned v = 0;
      for (int i = 0; i < 4; ++i) {
        const char h = text[pos++];
        v <<= 4;
        if (h >= '0' && h <= '9') v |= unsigned(h - '0');
        else if (h >= 'a' && h <= 'f') v |= unsigned(h - 'a' + 10);
        else if (h >= 'A' && h <= 'F') v |= unsigned(h - 'A' + 10);
        else error("bad hex digit in \\u escape");
      }
      return v;
    }
    static void utf8(std::string& out, unsigned cp) {
      if (cp < 0x80) {
        out += char(cp);
      } else if (cp < 0x800) {
        out += char(0xC0 | (cp >> 6));
        out += char(0x80 | (cp & 0x3F));
      } else if (cp < 0x10000) {
        out += char(0xE0 | (cp >> 12));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
      } else {
        out += char(0xF0 | (cp >> 18));
        out += char(0x80 | ((cp >> 12) & 0x3F));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
      }
    }
    std::string string_body() {
      ++pos;  // opening quote
      std::string s;
      for (;;) {
        if (pos >= text.size()) error("unterminated string");
        const char c = text[pos++];
        if (c == '"') return s;
        if (static_cast<unsigned char>(c) < 0x20) error("control character in a string");
        if (c != '\\') {
          s += c;
          continue;
        }
        if (pos >= text.size()) error("unterminated escape");
        const char e = text[pos++];
        switch (e) {
          case '"': s += '"'; break;
          case '\\': s += '\\'; break;
          case '/': s += '/'; break;
          case 'b': s += '\b'; break;
          case 'f': s += '\f'; break;
          case 'n': s += '\n'; break;
          case 'r': s += '\r'; break;
          case 't': s += '\t'; break;
          case 'u': {
            unsigned cp = hex4();
            if (cp >= 0xD800 && cp < 0xDC00) {
              if (!(pos + 2 <= text.size() && text[pos] == '\\' && text[pos + 1] == 'u')) error("lone surrogate");
              pos += 2;
              const unsigned lo = hex4();
              if (lo < 0xDC00 || lo >= 0xE000) error("bad low surrogate");
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp < 0xE000) {
              error("lone surrogate");
            }
            utf8(s, cp);
            break;
          }
          default: error("bad escape");
        }
      }
    }
  };

  Kind kind_ = Kind::Null;
  bool bool_ = false;
  double number_ = 0.0;
  std::string string_;
  std::vector<Json> array_;
  std::vector<std::pair<std::string, Json>> object_;
};

}  // namespace qkv::tools

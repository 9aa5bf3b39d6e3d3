// Writing text into GBNF: literals and character-class members escaped so
// that the GBNF parser reads back exactly the code points meant, and the
// UTF-8 coding both sides work in.
#include <cstdio>

#include "runtime/grammar/json_schema_internal.h"

namespace qkv::grammar::schema_detail {

namespace {

std::string hex_escape(uint32_t cp) {
  char buf[16];
  if (cp <= 0xFF) {
    std::snprintf(buf, sizeof buf, "\\x%02X", static_cast<unsigned>(cp));
  } else if (cp <= 0xFFFF) {
    std::snprintf(buf, sizeof buf, "\\u%04X", static_cast<unsigned>(cp));
  } else {
    std::snprintf(buf, sizeof buf, "\\U%08X", static_cast<unsigned>(cp));
  }
  return buf;
}

}  // namespace

std::string gbnf_literal(const std::string& text) {
  std::string out = "\"";
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"') {
      out += "\\\"";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      out += hex_escape(c);
    } else {
      out += ch;  // UTF-8 bytes pass through; the parser decodes them
    }
  }
  return out + "\"";
}

std::string gbnf_class_char(uint32_t cp) {
  // Letters and digits are safe anywhere in a class; everything else is
  // escaped so that ] \ ^ - never take their class meaning.
  if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9')) {
    return std::string(1, static_cast<char>(cp));
  }
  return hex_escape(cp);
}

std::optional<std::vector<uint32_t>> decode_utf8(const std::string& text) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > text.size()) return std::nullopt;
    uint32_t cp = n == 1 ? c : c & (0x7Fu >> n);
    for (int k = 1; k < n; ++k) {
      const auto b = static_cast<unsigned char>(text[i + k]);
      if ((b & 0xC0) != 0x80) return std::nullopt;
      cp = (cp << 6) | (b & 0x3F);
    }
    static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return std::nullopt;
    out.push_back(cp);
    i += n;
  }
  return out;
}

}  // namespace qkv::grammar::schema_detail

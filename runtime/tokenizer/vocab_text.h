// Small text helpers shared by the tokenizer's loaders and models.
#pragma once

#include <string>

namespace qkv {

inline const std::string kSpaceMark = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK "▁"

inline std::string replace_all(const std::string& s, const std::string& from, const std::string& to) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    if (s.compare(i, from.size(), from) == 0) {
      out += to;
      i += from.size();
    } else {
      out += s[i++];
    }
  }
  return out;
}

inline std::string escape_spaces(const std::string& s) { return replace_all(s, " ", kSpaceMark); }
inline std::string unescape_spaces(const std::string& s) { return replace_all(s, kSpaceMark, " "); }

// "<0xNN>" with two upper- or lower-case hex digits -> the byte; -1 otherwise.
inline int parse_byte_piece(const std::string& p) {
  if (p.size() != 6 || p.compare(0, 3, "<0x") != 0 || p[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(p[3]), lo = hex(p[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

}  // namespace qkv

// A character class (a set of Unicode code points, as a grammar's [a-z] or
// [^"\\] means) turned into a small automaton over UTF-8 bytes, so the
// grammar engine consumes token bytes one at a time: a token that ends inside
// a multi-byte character (byte-level BPE pieces, SentencePiece byte fallback)
// leaves the automaton mid-character instead of being rejected. Surrogates
// (U+D800-U+DFFF) are never in a class: they have no UTF-8 encoding.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

namespace qkv::grammar {

using CodeRanges = std::vector<std::pair<uint32_t, uint32_t>>;  // inclusive [first, last]

// Sorted, merged, surrogates and values past U+10FFFF removed.
CodeRanges normalize_ranges(CodeRanges ranges);
// Every code point not in ranges (which must be normalized).
CodeRanges complement_ranges(const CodeRanges& ranges);

class Utf8Class {
 public:
  static constexpr uint8_t kFail = 255;  // the byte cannot continue a character of the class
  static constexpr uint8_t kDone = 254;  // the byte completes a character of the class
  explicit Utf8Class(const CodeRanges& ranges);  // ranges normalized

  // From state (0: at a character's start) on byte b: the next state, kDone or kFail.
  uint8_t next(uint8_t state, uint8_t b) const { return table_[state][b]; }
  const CodeRanges& ranges() const { return ranges_; }
  int states() const { return static_cast<int>(table_.size()); }

 private:
  CodeRanges ranges_;
  std::vector<std::array<uint8_t, 256>> table_;
};

}  // namespace qkv::grammar

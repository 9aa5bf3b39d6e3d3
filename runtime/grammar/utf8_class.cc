#include "runtime/grammar/utf8_class.h"

#include <algorithm>
#include <map>

#include "kernels/error.h"
#include "runtime/utf8.h"

namespace qkv::grammar {

namespace {

constexpr uint32_t kMaxCode = 0x10FFFF;

// One run of UTF-8 encodings: per byte position an inclusive byte range.
using ByteSeq = std::vector<std::pair<uint8_t, uint8_t>>;

// Splits [lo, hi] until every piece encodes to the same length and its
// encodings form a product of byte ranges (the standard UTF-8 range split).
void split(uint32_t lo, uint32_t hi, std::vector<ByteSeq>& out) {
  if (lo > hi) return;
  for (uint32_t edge : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= edge && edge < hi) {
      split(lo, edge, out);
      split(edge + 1, hi, out);
      return;
    }
  }
  const std::string a = utf8_encode(lo);
  const int n = static_cast<int>(a.size());
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split(lo, lo | m, out);
        split((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split(lo, (hi & ~m) - 1, out);
        split(hi & ~m, hi, out);
        return;
      }
    }
  }
  const std::string b = utf8_encode(hi);
  ByteSeq seq;
  for (int i = 0; i < n; ++i) seq.emplace_back(static_cast<uint8_t>(a[i]), static_cast<uint8_t>(b[i]));
  out.push_back(std::move(seq));
}

}  // namespace

CodeRanges normalize_ranges(CodeRanges ranges) {
  CodeRanges cut;
  for (auto [lo, hi] : ranges) {
    if (lo > hi || lo > kMaxCode) continue;
    hi = std::min(hi, kMaxCode);
    // Surrogates have no UTF-8 form.
    if (lo < 0xD800 && hi >= 0xD800) {
      cut.emplace_back(lo, 0xD7FF);
      lo = 0xE000;
    } else if (lo >= 0xD800 && lo <= 0xDFFF) {
      lo = 0xE000;
    }
    if (lo <= hi) cut.emplace_back(lo, hi);
  }
  std::sort(cut.begin(), cut.end());
  CodeRanges merged;
  for (const auto& r : cut) {
    if (!merged.empty() && r.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  return merged;
}

CodeRanges complement_ranges(const CodeRanges& ranges) {
  CodeRanges out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : ranges) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCode) out.emplace_back(next, kMaxCode);
  return normalize_ranges(out);
}

Utf8Class::Utf8Class(const CodeRanges& ranges) : ranges_(ranges) {
  std::vector<ByteSeq> seqs;
  for (const auto& [lo, hi] : ranges_) split(lo, hi, seqs);
  // Subset construction: a state is the set of (sequence, bytes matched).
  using StateSet = std::vector<std::pair<uint32_t, uint8_t>>;
  std::map<StateSet, uint8_t> ids;
  std::vector<StateSet> sets;
  StateSet start;
  for (uint32_t i = 0; i < seqs.size(); ++i) start.emplace_back(i, 0);
  ids[start] = 0;
  sets.push_back(start);
  for (size_t s = 0; s < sets.size(); ++s) {
    std::array<uint8_t, 256> row;
    row.fill(kFail);
    for (int byte = 0; byte < 256; ++byte) {
      StateSet next;
      bool done = false;
      for (const auto& [seq, at] : sets[s]) {
        const auto [lo, hi] = seqs[seq][at];
        if (byte < lo || byte > hi) continue;
        if (at + 1u == seqs[seq].size()) {
          done = true;
        } else {
          next.emplace_back(seq, static_cast<uint8_t>(at + 1));
        }
      }
      // UTF-8 encodings are prefix-free: a byte completes a character or continues one, never both.
      if (done) {
        row[byte] = kDone;
      } else if (!next.empty()) {
        auto it = ids.find(next);
        if (it == ids.end()) {
          QKV_CHECK(sets.size() < kDone, "character class too complex for its UTF-8 automaton");
          it = ids.emplace(next, static_cast<uint8_t>(sets.size())).first;
          sets.push_back(next);
        }
        row[byte] = it->second;
      }
    }
    table_.push_back(row);
  }
}

}  // namespace qkv::grammar

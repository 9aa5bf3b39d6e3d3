// The merge loop both BPE models share: symbols in a doubly linked list over a
// text, and a heap of adjacent pairs that may merge, best priority first
// (leftmost on ties). A pair's priority comes from the model (SentencePiece:
// the merged piece's score; byte-level BPE: minus the merge's rank).
#pragma once

#include <cstddef>
#include <cstdint>
#include <queue>
#include <vector>

namespace qkv {

// A run of the text; len 0 once merged into its left neighbour.
struct MergeSymbol {
  size_t start, len;
  int64_t prev, next;
};

// Splits [begin, end) into symbols of char_len(i) bytes each.
template <class CharLen>
std::vector<MergeSymbol> merge_symbols(size_t begin, size_t end, CharLen char_len) {
  std::vector<MergeSymbol> sym;
  for (size_t i = begin; i < end;) {
    const size_t n = std::min(char_len(i), end - i);
    const auto k = static_cast<int64_t>(sym.size());
    sym.push_back({i, n, k - 1, k + 1});
    i += n;
  }
  if (!sym.empty()) sym.back().next = -1;
  return sym;
}

// Merges until no pair applies. priority(left, right, &p) says whether the
// pair of symbols may merge and with what priority (higher first).
template <class Priority>
void merge_all(std::vector<MergeSymbol>& sym, Priority priority) {
  struct Candidate {
    double priority;
    int64_t left, right;
    size_t len;
  };
  struct Order {
    bool operator()(const Candidate& a, const Candidate& b) const {
      return a.priority != b.priority ? a.priority < b.priority : a.left > b.left;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, Order> heap;
  auto consider = [&](int64_t l, int64_t r) {
    double p;
    if (l >= 0 && r >= 0 && priority(sym[l], sym[r], &p)) heap.push({p, l, r, sym[l].len + sym[r].len});
  };
  for (size_t i = 0; i + 1 < sym.size(); ++i) consider(int64_t(i), int64_t(i + 1));
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    MergeSymbol& l = sym[c.left];
    MergeSymbol& r = sym[c.right];
    // Stale if either side was merged since (r gone, or r grew: l's length is
    // fixed while l.next == right, so the sum tells).
    if (l.len == 0 || r.len == 0 || l.next != c.right || l.len + r.len != c.len) continue;
    l.len = c.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = c.left;
    consider(l.prev, c.left);
    consider(c.left, l.next);
  }
}

}  // namespace qkv

// The pushdown steps of the grammar engine. A parse stack is a chain of
// frames in an arena (each frame: where its alternative continues and the
// frame to return to), so stacks share their common bottoms and a step
// copies nothing but the new top. The parser state is a set of top frames,
// each at a terminal (a class, maybe mid-character), after closure: rule
// references expanded into their alternatives, finished alternatives popped.
// A reference that ends its alternative pushes no return frame (tail call),
// so right recursion, which the GBNF parser makes of repetition, keeps the
// stack depth constant.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "runtime/grammar/grammar.h"

namespace qkv::grammar {

constexpr int32_t kNoParent = -1;  // the root rule's frame: finishing it finishes the grammar
constexpr int32_t kBoundary = -2;  // the unknown context of a rule, for per-position precomputation

struct Frame {
  uint32_t pos;    // element to match next
  uint8_t sub;     // UTF-8 automaton state inside the class at pos (0: at a character's start)
  int32_t parent;  // frame to continue when the alternative ends
};

// Where a closure or a byte step leads.
struct Tops {
  std::vector<int32_t> frames;  // top frames, each at a class
  bool finished = false;        // the root rule (kNoParent) or the rule at kBoundary ended
  void clear() {
    frames.clear();
    finished = false;
  }
};

// A set of bytes.
struct ByteSet {
  std::array<uint64_t, 4> w{};
  bool has(uint8_t b) const { return (w[b >> 6] >> (b & 63)) & 1; }
  void add(uint8_t b) { w[b >> 6] |= uint64_t{1} << (b & 63); }
  bool merge(const ByteSet& o) {
    bool changed = false;
    for (int i = 0; i < 4; ++i) {
      const uint64_t v = w[i] | o.w[i];
      changed |= v != w[i];
      w[i] = v;
    }
    return changed;
  }
};

class StackMachine {
 public:
  explicit StackMachine(const Grammar& grammar);
  const Grammar& grammar() const { return g_; }

  // Closure of frame f (appended to arena) into out.
  void expand(std::vector<Frame>& arena, int32_t f, Tops& out) const;
  // Top frame f consumes byte b; the resulting tops go to out.
  void advance(std::vector<Frame>& arena, int32_t f, uint8_t b, Tops& out) const;
  // Bytes that can follow the rule holding element pos, in any context.
  const ByteSet& follow_of(uint32_t pos) const { return follow_[g_.rule_of[pos]]; }

 private:
  const Grammar& g_;
  std::vector<ByteSet> follow_;  // per rule
  std::vector<ByteSet> class_first_;  // per class: bytes that start one of its characters
};

}  // namespace qkv::grammar

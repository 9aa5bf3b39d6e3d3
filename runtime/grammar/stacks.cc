#include "runtime/grammar/stacks.h"

#include "kernels/error.h"

namespace qkv::grammar {

namespace {
// A closure creating more frames than this is a grammar whose ambiguity
// explodes (nested optional runs matching the same text many ways).
constexpr size_t kMaxClosureFrames = 1 << 16;
}  // namespace

StackMachine::StackMachine(const Grammar& grammar) : g_(grammar) {
  const size_t n_rules = g_.alternatives.size();
  class_first_.resize(g_.classes.size());
  for (size_t c = 0; c < g_.classes.size(); ++c) {
    for (int b = 0; b < 256; ++b) {
      if (g_.classes[c].next(0, static_cast<uint8_t>(b)) != Utf8Class::kFail) class_first_[c].add(static_cast<uint8_t>(b));
    }
  }
  // FIRST bytes and nullability of each rule, to a fixed point.
  std::vector<ByteSet> first(n_rules);
  std::vector<char> nullable(n_rules, 0);
  // FIRST of the elements from i to the end of the alternative; whether all can be empty.
  auto first_of_rest = [&](uint32_t i, ByteSet& out) {
    for (;; ++i) {
      const Element& e = g_.elements[i];
      if (e.op == Op::kEnd) return true;
      if (e.op == Op::kRule) {
        out.merge(first[e.arg]);
        if (!nullable[e.arg]) return false;
      } else {
        out.merge(class_first_[e.arg]);
        if (e.op == Op::kClass) return false;
      }
    }
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t r = 0; r < n_rules; ++r) {
      for (uint32_t start : g_.alternatives[r]) {
        ByteSet f;
        const bool empty = first_of_rest(start, f);
        changed |= first[r].merge(f);
        if (empty && !nullable[r]) {
          nullable[r] = 1;
          changed = true;
        }
      }
    }
  }
  // FOLLOW bytes: what comes after each reference, plus the caller's FOLLOW
  // when the rest of the caller's alternative can be empty.
  follow_.assign(n_rules, ByteSet{});
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t i = 0; i < g_.elements.size(); ++i) {
      const Element& e = g_.elements[i];
      if (e.op != Op::kRule) continue;
      ByteSet f;
      if (first_of_rest(i + 1, f)) f.merge(follow_[g_.rule_of[i]]);
      changed |= follow_[e.arg].merge(f);
    }
  }
}

void StackMachine::expand(std::vector<Frame>& arena, int32_t f0, Tops& out) const {
  const size_t arena_start = arena.size();
  std::vector<int32_t> work{f0};
  while (!work.empty()) {
    const int32_t f = work.back();
    work.pop_back();
    if (arena.size() - arena_start > kMaxClosureFrames) {
      fail("grammar: too ambiguous (one step expands to more than ", kMaxClosureFrames, " parse states)");
    }
    if (f == kNoParent || f == kBoundary) {
      out.finished = true;
      continue;
    }
    const Frame fr = arena[f];
    const Element& e = g_.elements[fr.pos];
    switch (e.op) {
      case Op::kClass:
        out.frames.push_back(f);
        break;
      case Op::kClassStar:
        out.frames.push_back(f);
        arena.push_back({fr.pos + 1, 0, fr.parent});
        work.push_back(static_cast<int32_t>(arena.size() - 1));
        break;
      case Op::kRule: {
        int32_t cont = fr.parent;
        if (g_.elements[fr.pos + 1].op != Op::kEnd) {
          arena.push_back({fr.pos + 1, 0, fr.parent});
          cont = static_cast<int32_t>(arena.size() - 1);
        }
        for (uint32_t start : g_.alternatives[e.arg]) {
          arena.push_back({start, 0, cont});
          work.push_back(static_cast<int32_t>(arena.size() - 1));
        }
        break;
      }
      case Op::kEnd:
        work.push_back(fr.parent);
        break;
    }
  }
}

void StackMachine::advance(std::vector<Frame>& arena, int32_t f, uint8_t b, Tops& out) const {
  const Frame fr = arena[f];
  const Element& e = g_.elements[fr.pos];
  const uint8_t next = g_.classes[e.arg].next(fr.sub, b);
  if (next == Utf8Class::kFail) return;
  if (next == Utf8Class::kDone) {
    // A finished character: a class moves on; a starred class may repeat or move on.
    arena.push_back({e.op == Op::kClass ? fr.pos + 1 : fr.pos, 0, fr.parent});
    expand(arena, static_cast<int32_t>(arena.size() - 1), out);
    return;
  }
  arena.push_back({fr.pos, next, fr.parent});
  out.frames.push_back(static_cast<int32_t>(arena.size() - 1));
}

}  // namespace qkv::grammar

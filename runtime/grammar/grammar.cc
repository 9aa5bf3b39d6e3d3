#include "runtime/grammar/grammar.h"

#include "kernels/error.h"

namespace qkv::grammar {

void Grammar::finish() {
  const size_t n_rules = alternatives.size();
  QKV_CHECK(root < n_rules, "grammar: no root rule");
  rule_of.assign(elements.size(), 0);
  for (uint32_t r = 0; r < n_rules; ++r) {
    QKV_CHECK(!alternatives[r].empty(), "grammar: rule '", rule_names[r], "' has no alternative");
    for (uint32_t start : alternatives[r]) {
      for (uint32_t i = start;; ++i) {
        QKV_CHECK(i < elements.size(), "grammar: alternative of rule '", rule_names[r], "' runs past the end");
        rule_of[i] = r;
        if (elements[i].op == Op::kEnd) break;
      }
    }
  }
  // Nullable rules (can match the empty string), to a fixed point.
  std::vector<char> nullable(n_rules, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t r = 0; r < n_rules; ++r) {
      if (nullable[r]) continue;
      for (uint32_t start : alternatives[r]) {
        bool empty = true;
        for (uint32_t i = start; elements[i].op != Op::kEnd && empty; ++i) {
          const Element& e = elements[i];
          empty = e.op == Op::kClassStar || (e.op == Op::kRule && nullable[e.arg]);
        }
        if (empty) {
          nullable[r] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  // Left recursion: a rule reachable from itself through leading elements
  // that match nothing. Depth-first search with colours over the rules a rule
  // can start with.
  std::vector<std::vector<uint32_t>> starts(n_rules);
  for (uint32_t r = 0; r < n_rules; ++r) {
    for (uint32_t start : alternatives[r]) {
      for (uint32_t i = start; elements[i].op != Op::kEnd; ++i) {
        const Element& e = elements[i];
        if (e.op == Op::kRule) starts[r].push_back(e.arg);
        if (e.op == Op::kClass || (e.op == Op::kRule && !nullable[e.arg])) break;
      }
    }
  }
  std::vector<uint8_t> colour(n_rules, 0);  // 0 new, 1 on the path, 2 done
  std::vector<std::pair<uint32_t, size_t>> path;
  for (uint32_t r0 = 0; r0 < n_rules; ++r0) {
    if (colour[r0]) continue;
    path.emplace_back(r0, 0);
    colour[r0] = 1;
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next == starts[r].size()) {
        colour[r] = 2;
        path.pop_back();
        continue;
      }
      const uint32_t s = starts[r][next++];
      if (colour[s] == 1) fail("grammar: rule '", rule_names[s], "' is left-recursive (it can reach itself before matching any character)");
      if (colour[s] == 0) {
        colour[s] = 1;
        path.emplace_back(s, 0);
      }
    }
  }
}

}  // namespace qkv::grammar

// A context-free grammar in the form the matcher runs: rules of alternatives,
// each alternative a run of elements in one flat array ending with kEnd.
// Terminals are character classes (one code point each, matched byte by byte
// through a Utf8Class); kClassStar is a class repeated zero or more times in
// place, so a JSON string's body or a run of digits does not grow the parse
// stack. Repetition of anything else is rewritten into generated rules by the
// parser (right recursion, which the matcher runs in constant stack depth).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/grammar/utf8_class.h"

namespace qkv::grammar {

enum class Op : uint8_t { kClass, kClassStar, kRule, kEnd };

struct Element {
  Op op;
  uint32_t arg;  // class index (kClass, kClassStar) or rule index (kRule)
};

struct Grammar {
  std::vector<Element> elements;
  std::vector<std::vector<uint32_t>> alternatives;  // per rule: where each alternative starts in elements
  std::vector<uint32_t> rule_of;                     // per element: its rule
  std::vector<std::string> rule_names;
  std::vector<Utf8Class> classes;
  uint32_t root = 0;

  // Checks what the matcher relies on: every rule has an alternative, no
  // rule can reach itself without consuming input (left recursion); fails
  // naming the rule. Fills rule_of.
  void finish();
};

}  // namespace qkv::grammar

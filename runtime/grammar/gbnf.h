// llama.cpp's GBNF grammar syntax, so existing grammar files work unchanged:
//   name ::= alternatives      (the start rule is `root`)
//   "literal" (escapes \n \r \t \\ \" \xHH \uHHHH \UHHHHHHHH), [a-z] [^"\\] .
//   ( group ) a | b, repetition * + ? {m} {m,} {m,n}, # comments.
// A rule ends at the end of its line unless a parenthesis is open. Errors
// name the line and column.
#pragma once

#include <cstddef>
#include <string>

#include "runtime/grammar/grammar.h"

namespace qkv::grammar {

struct GbnfLimits {
  size_t max_bytes = 1 << 20;   // grammar text
  size_t max_rules = 16384;     // named and generated
  size_t max_elements = 1 << 20;
  int max_repeat = 10000;       // the m and n of {m,n}
};

Grammar parse_gbnf(const std::string& text, const GbnfLimits& limits = {});

}  // namespace qkv::grammar

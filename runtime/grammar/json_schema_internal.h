// Pieces of the JSON Schema compiler (json_schema.cc) that are ideas of their
// own: GBNF text escaping, the integer-range grammar, and the translation of
// a `pattern` regex into the content of a JSON string.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/utf8.h"

namespace qkv::grammar::schema_detail {

// A GBNF literal ("...") matching exactly the UTF-8 text.
std::string gbnf_literal(const std::string& text);
// One code point written for a GBNF character class ([...]).
std::string gbnf_class_char(uint32_t cp);

// Code points of a UTF-8 text; nullopt when it is not valid UTF-8.
std::optional<std::vector<uint32_t>> decode_utf8(const std::string& text);

// A GBNF expression (alternatives, no trailing space) for the decimal integers
// in [lo, hi] written the JSON way (no leading zeros, no "-0"). A missing
// bound is open; an open side allows at most max_digits digits, so the output
// stays finite.
std::string integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi, int max_digits);

struct RegexGbnf {
  std::string expr;       // matches the string's content, between its quotes
  bool uses_char = false; // expr refers to the JSON string character rule
};
// Translates an ECMAScript `pattern` into the content of a JSON string whose
// decoded value matches it (JSON Schema semantics: an unanchored side allows
// any characters). Characters JSON must escape are produced escaped.
// `char_rule` names the rule of one JSON string character; `where` is the
// JSON pointer for error messages. Throws qkv::Error on unsupported constructs.
RegexGbnf regex_to_gbnf(const std::string& pattern, const std::string& where, const std::string& char_rule,
                        int max_depth, int max_repeat);

}  // namespace qkv::grammar::schema_detail

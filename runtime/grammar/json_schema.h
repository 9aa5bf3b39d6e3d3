// JSON Schema -> GBNF: the grammar of the JSON texts a schema accepts, for
// constrained decoding of structured output (OpenAI response_format
// json_schema, Ollama format, tool-call arguments).
//
// The grammar is sound, not complete: every text it produces is valid JSON that
// validates against the schema, but not every valid text can be produced
// (object properties come in one order, numbers and strings in one canonical
// spelling, whitespace is at most one space between tokens). A keyword that
// constrains values and that the compiler cannot honour exactly is an error,
// never silently ignored.
//
// Supported: type (and type unions), enum, const, anyOf, oneOf (as anyOf:
// overlapping alternatives are not excluded), allOf with one constraining
// subschema, local $ref (recursion allowed), nullable (OpenAPI), properties,
// required, additionalProperties, minProperties/maxProperties only when the
// listed properties already satisfy them, items, prefixItems, additionalItems,
// minItems, maxItems, uniqueItems: false, minLength, maxLength, pattern
// (ECMAScript regex without backreferences or lookaround), format (date, time,
// date-time, uuid, email), and integer minimum/maximum/exclusiveMinimum/
// exclusiveMaximum. Annotations (title, description, default, examples, ...)
// and "x-" extension keywords are ignored.
//
// Without additionalProperties an object with listed properties gets just
// those (an object without any gets any). Required properties come first, in the order of `properties` (an
// ordered_json keeps the declared order; a plain nlohmann::json sorts its
// keys, and then key order it is), then the optional ones.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

namespace qkv::grammar {

struct SchemaLimits {
  int max_depth = 64;             // nesting of subschemas
  size_t max_rules = 4096;        // rules in the produced grammar
  size_t max_grammar_bytes = 1 << 20;
  int max_repeat = 1000;          // minItems/maxItems/minLength/maxLength bounds that are enforced exactly
};

// GBNF text whose start rule is `root`. Throws qkv::Error naming the problem
// and the JSON pointer of the subschema, e.g. "unsupported JSON Schema keyword
// 'not' at #/properties/x".
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, const SchemaLimits& limits = {});

// Any JSON value whose top level is an object (OpenAI's response_format
// json_object / Ollama's format "json").
std::string json_object_gbnf();

}  // namespace qkv::grammar

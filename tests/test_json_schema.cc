// ctest-labels: asan
// The JSON Schema -> GBNF compiler: the grammar it writes for each kind of
// schema, exact integer ranges (checked number by number), the JSON spelling
// of pattern strings, fail-closed errors with the JSON pointer of the
// offending subschema, its limits, and that every grammar it writes parses.
#include <doctest/doctest.h>

#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/error.h"
#include "runtime/grammar/gbnf.h"
#include "runtime/grammar/json_schema.h"

using namespace qkv::grammar;
using nlohmann::json;

namespace {

std::string gbnf(const std::string& schema, const SchemaLimits& limits = {}) {
  return json_schema_to_gbnf(nlohmann::ordered_json::parse(schema), limits);
}

std::string error_of(const std::string& schema, const SchemaLimits& limits = {}) {
  try {
    gbnf(schema, limits);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

// The body of one rule of a grammar ("" when absent).
std::string rule_body(const std::string& grammar, const std::string& name) {
  const std::string head = name + " ::= ";
  size_t at = grammar.rfind("\n" + head);
  at = at == std::string::npos ? (grammar.rfind(head, 0) == 0 ? 0 : std::string::npos) : at + 1;
  if (at == std::string::npos) return "";
  const size_t from = at + head.size();
  return grammar.substr(from, grammar.find('\n', from) - from);
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The integer-range grammars are literals, digit classes, groups and counted
// repetitions: the same text without quotes and spaces is an ECMAScript regex.
std::regex range_regex(std::string body) {
  const std::string suffix = " space";
  REQUIRE(body.size() > suffix.size());
  REQUIRE(body.compare(body.size() - suffix.size(), suffix.size(), suffix) == 0);
  body.resize(body.size() - suffix.size());
  std::string re;
  for (const char c : body) {
    if (c != '"' && c != ' ') re += c;
  }
  return std::regex(re);
}

const char* const kSchemas[] = {
    R"({})",
    R"(true)",
    R"({"type": "string"})",
    R"({"type": ["string", "null"]})",
    R"({"type": "integer", "minimum": -37, "maximum": 1234})",
    R"({"type": "integer", "exclusiveMinimum": 0})",
    R"({"type": "number"})",
    R"({"type": "boolean", "title": "flag", "description": "ignored"})",
    R"({"type": "object", "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 20},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        "email": {"type": "string", "format": "email"}}, "required": ["name", "age"]})",
    R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {}},
        "additionalProperties": false})",
    R"({"type": "object", "properties": {"é\"x": {"const": 1}, "a/b": {"type": "boolean"}, "": {"type": "null"}},
        "required": [""], "additionalProperties": {"type": "integer"}})",
    R"({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "boolean"}], "minItems": 3, "maxItems": 5,
        "items": {"type": "null"}})",
    R"({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 4})",
    R"({"type": "string", "pattern": "^[a-z]+\\d{2,3}$"})",
    R"({"type": "string", "pattern": "^(?<y>\\d{4})-(?:0[1-9]|1[0-2])$|^none$"})",
    R"({"type": "string", "pattern": "a\"b\\\\c[^x]\\S.é😀"})",
    R"({"type": "string", "format": "date-time"})",
    R"({"type": "string", "format": "uuid"})",
    R"({"enum": ["a", "b\"c", 1, null, {"x": [1, 2]}], "nullable": true})",
    R"({"anyOf": [{"type": "integer", "minimum": 5}, {"type": "string", "maxLength": 2}]})",
    R"({"oneOf": [{"const": "x"}, {"$ref": "#/definitions/y"}], "definitions": {"y": {"type": "array",
        "items": {"$ref": "#"}, "maxItems": 2}}})",
    R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"}, "next": {"anyOf": [
        {"$ref": "#/$defs/node"}, {"type": "null"}]}}, "required": ["v", "next"], "additionalProperties": false}},
        "$ref": "#/$defs/node"})",
    R"({"allOf": [{"$ref": "#/$defs/a"}], "description": "d", "$defs": {"a": {"type": "integer", "minimum": 1}}})",
};

}  // namespace

TEST_CASE("every grammar names root and parses as GBNF") {
  for (const char* schema : kSchemas) {
    CAPTURE(schema);
    const std::string g = gbnf(schema);
    CHECK(g.rfind("root ::= ", 0) == 0);
    CHECK(g.back() == '\n');
    CHECK_NOTHROW(parse_gbnf(g));
  }
  const std::string object = json_object_gbnf();
  CHECK(rule_body(object, "root") == "object");
  CHECK(rule_body(object, "space") == "\" \"?");
  CHECK_NOTHROW(parse_gbnf(object));
}

TEST_CASE("primitives: bounded whitespace, JSON strings, finite numbers, any value") {
  const std::string any = gbnf("{}");
  CHECK(rule_body(any, "root") == "value");
  CHECK(rule_body(any, "value") == "object | array | string | number | boolean | null");
  CHECK(rule_body(any, "space") == "\" \"?");
  CHECK(rule_body(any, "char") == R"([^"\\\x7F\x00-\x1F] | [\\] (["\\/bfnrt] | "u" [0-9a-fA-F]{4}))");
  CHECK(rule_body(any, "integral-part") == "[0] | [1-9] [0-9]{0,15}");
  CHECK(rule_body(any, "decimal-part") == "[0-9]{1,16}");
  CHECK(contains(rule_body(any, "number"), "([eE] [-+]? [0-9]{1,2})?"));
  CHECK(gbnf("true") == any);
  CHECK(rule_body(gbnf(R"({"type": ["string", "null"]})"), "root") == "string | null");
  CHECK(rule_body(gbnf(R"({"type": "integer", "nullable": true})"), "root") == "integer | null");
  // Primitives are emitted only when used.
  CHECK(!contains(gbnf(R"({"type": "boolean"})"), "number ::="));
}

TEST_CASE("objects: required in order, optional skippable, additional names exclude the listed ones") {
  const std::string g = gbnf(R"({"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "integer"},
      "c": {"type": "boolean"}}, "required": ["b", "a"], "additionalProperties": false})");
  CHECK(rule_body(g, "root") == R"("{" space root-b-kv "," space root-a-kv ("," space root-c-kv)? "}" space)");
  CHECK(rule_body(g, "root-b-kv") == R"("\"b\"" space ":" space string)");

  // No required property: any one can come first, the rest follow in order.
  const std::string opt = gbnf(R"({"properties": {"a": {"type": "integer"}, "b": {"type": "string"},
      "c": {"type": "boolean"}}, "additionalProperties": false})");
  CHECK(rule_body(opt, "root") == R"("{" space (root-a-kv root-rest | root-b-kv ("," space root-c-kv)? | root-c-kv)? "}" space)");
  CHECK(rule_body(opt, "root-rest") == R"(("," space root-b-kv)? ("," space root-c-kv)?)");

  // Names are exact JSON string literals.
  const std::string esc = gbnf(R"({"properties": {"q\"b\\s": {"type": "null"}}, "required": ["q\"b\\s"],
      "additionalProperties": false})");
  CHECK(contains(esc, R"("\"q\\\"b\\\\s\"" space ":" space null)"));

  // Additional properties come last, repeat, and never reuse a listed name.
  // Unsaid additionalProperties: only the listed properties, unless none are listed.
  CHECK(!contains(gbnf(R"({"type": "object", "properties": {"a": {"type": "null"}}})"), "additional"));
  CHECK(rule_body(gbnf(R"({"type": "object"})"), "root") == "object");
  const std::string add = gbnf(R"({"properties": {"ab": {"type": "null"}}, "additionalProperties": {"type": "integer"}})");
  CHECK(contains(rule_body(add, "root"), "(\",\" space root-additional-kv)*"));
  CHECK(rule_body(add, "root-additional-kv") == "root-additional-key \":\" space integer");
  const std::string key = rule_body(add, "root-additional-key");
  CHECK(contains(key, R"("a" ([^\x22\x5C\x7F\x00-\x1Fb] key-char* "\"" | "b" ([^\x22\x5C\x7F\x00-\x1F] key-char* "\"") | "\""))"));
  // A required name that is not listed takes the additional schema.
  CHECK(contains(gbnf(R"({"required": ["z"], "additionalProperties": {"type": "boolean"}})"),
                 R"(root-z-kv ::= "\"z\"" space ":" space boolean)"));
  // Plain {"type": "object"} is any object.
  CHECK(rule_body(gbnf(R"({"type": "object"})"), "root") == "object");
  // min/maxProperties pass when the listed properties decide them.
  CHECK_NOTHROW(gbnf(R"({"properties": {"a": {}}, "required": ["a"], "minProperties": 1, "maxProperties": 1,
      "additionalProperties": false})"));
}

TEST_CASE("arrays: tuples, rest items and exact counts") {
  CHECK(rule_body(gbnf(R"({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 4})"), "root") ==
        R"("[" space integer ("," space integer){1,3} "]" space)");
  CHECK(rule_body(gbnf(R"({"type": "array", "items": {"type": "integer"}, "maxItems": 3})"), "root") ==
        R"("[" space (integer ("," space integer){0,2})? "]" space)");
  CHECK(rule_body(gbnf(R"({"type": "array", "items": {"type": "string"}, "minItems": 1})"), "root") ==
        R"("[" space string ("," space string)* "]" space)");
  CHECK(rule_body(gbnf(R"({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "boolean"}],
      "minItems": 1, "maxItems": 5, "items": {"type": "null"}})"), "root") ==
        R"("[" space integer ("," space boolean ("," space null){0,3})? "]" space)");
  CHECK(rule_body(gbnf(R"({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": false})"),
                  "root") == R"("[" space (integer ("," space string)?)? "]" space)");
  // Draft 7 tuples.
  CHECK(rule_body(gbnf(R"({"type": "array", "items": [{"type": "integer"}], "additionalItems": false, "minItems": 1})"),
                  "root") == R"("[" space integer "]" space)");
  CHECK(rule_body(gbnf(R"({"type": "array", "maxItems": 0})"), "root") == R"("[" space "]" space)");
  CHECK(rule_body(gbnf(R"({"type": "array"})"), "root") == "array");
}

TEST_CASE("strings: lengths in characters, formats, enum and const literals") {
  CHECK(rule_body(gbnf(R"({"type": "string", "minLength": 1, "maxLength": 20})"), "root") ==
        R"("\"" char{1,20} "\"" space)");
  CHECK(rule_body(gbnf(R"({"type": "string", "minLength": 3})"), "root") == R"("\"" char{3,} "\"" space)");
  CHECK(rule_body(gbnf(R"({"type": "string", "maxLength": 0})"), "root") == R"("\"" "\"" space)");
  const std::string date = gbnf(R"({"type": "string", "format": "date"})");
  CHECK(rule_body(date, "root") == R"("\"" date "\"" space)");
  CHECK(contains(rule_body(date, "date"), R"("02-" ("0" [1-9] | "1" [0-9] | "2" [0-8]))"));
  CHECK(contains(gbnf(R"({"format": "date-time"})"), "date-time ::= date \"T\" time"));
  CHECK(contains(gbnf(R"({"format": "uuid"})"), "[0-9a-fA-F]{8} \"-\""));
  CHECK(contains(gbnf(R"({"format": "email"})"), "\"@\""));
  CHECK(rule_body(gbnf(R"({"enum": ["a", "b\"c", 1.5, null, {"x": [1, true]}]})"), "root") ==
        R"("\"a\"" space | "\"b\\\"c\"" space | "1.5" space | "null" space | "{\"x\":[1,true]}" space)");
  CHECK(rule_body(gbnf(R"({"const": "é\n"})"), "root") == "\"\\\"é\\\\n\\\"\" space");
  // type filters enum values (1.0 is an integer).
  CHECK(rule_body(gbnf(R"({"type": "integer", "enum": [1, 2.0, 2.5, "x"]})"), "root") ==
        R"("1" space | "2.0" space)");
}

TEST_CASE("patterns: regex to JSON string content") {
  auto content = [](const std::string& pattern) {
    const std::string body = rule_body(gbnf(json{{"type", "string"}, {"pattern", pattern}}.dump()), "root");
    const std::string open = "\"\\\"\" (", close = ") \"\\\"\" space";
    REQUIRE(body.rfind(open, 0) == 0);
    REQUIRE(body.size() >= open.size() + close.size());
    return body.substr(open.size(), body.size() - open.size() - close.size());
  };
  CHECK(content("^abc$") == R"("abc")");
  CHECK(content("^ab*c?$") == R"("a" "b"* "c"?)");
  CHECK(content("^(foo|bar)+x{2,}?$") == R"(("foo" | "bar")+ "x"{2,})");
  CHECK(content("^(?:a|)b$") == R"(("a" | ) "b")");
  CHECK(content("^[a-c\\d_]{3}$") == R"([0-9\x5Fa-c]{3})");
  CHECK(content("^\\d+\\.\\d*$") == R"([0-9]+ "." [0-9]*)");
  // Unanchored sides allow anything, like JSON Schema's search semantics.
  CHECK(content("ab") == R"(char* "ab" char*)");
  CHECK(content("^a|b$") == R"("a" char* | char* "b")");
  // Quotes, backslashes and control characters are produced escaped.
  CHECK(content("^\"\\\\\\n\\t$") == R"("\\\"\\\\\\n\\t")");
  CHECK(content("^[\"x]$") == R"(( [x] | "\\\"" ))");
  CHECK(content("^[^a]$") == R"(( [\x20-\x21\x23-\x5B\x5D-\x60b-\x7E\x80-\U0010FFFF] | "\\u00" [01] [0-9a-fA-F] | "\\\"" | "\\\\" | "\\u007f" ))");
  // Unicode, escapes by code point, surrogate pairs.
  CHECK(content("^é\\u00e9\\x41\\uD83D\\uDE00$") == "\"ééA😀\"");
  // Braces that are not a quantifier are themselves.
  CHECK(content("^a{,3}$") == R"("a{,3}")");
  for (const char* pattern : {"^(a|b)*c$", "[^\"]+", ".", "\\s\\S\\w\\W\\D", "^[\\u0000-\\uffff]$"}) {
    CAPTURE(pattern);
    CHECK_NOTHROW(parse_gbnf(gbnf(json{{"pattern", pattern}}.dump())));
  }
}

TEST_CASE("integers: exact digit ranges for the bounds") {
  CHECK(rule_body(gbnf(R"({"type": "integer", "minimum": 0, "maximum": 150})"), "root") ==
        R"(([0-9] | [1-9] [0-9] | "1" ([0-4] [0-9] | "5" "0")) space)");
  CHECK(rule_body(gbnf(R"({"type": "integer"})"), "root") == "integer");
  CHECK(rule_body(gbnf(R"({"type": "integer", "exclusiveMinimum": 0})"), "root") == "([1-9] | [1-9] [0-9]{1,15}) space");

  struct Case {
    const char* schema;
    long long lo, hi;  // the window checked, each number in it
  };
  const Case cases[] = {
      {R"({"type": "integer", "minimum": -37, "maximum": 1234})", -2000, 2000},
      {R"({"type": "integer", "exclusiveMinimum": -1000, "exclusiveMaximum": -5})", -3000, 100},
      {R"({"type": "integer", "minimum": 7})", -50, 20000},
      {R"({"type": "integer", "maximum": -7})", -20000, 50},
      {R"({"type": "integer", "minimum": 2.5, "maximum": 99.5})", -10, 200},
      {R"({"type": "integer", "minimum": 3, "exclusiveMinimum": true, "maximum": 10, "exclusiveMaximum": true})", -5, 20},
      {R"({"type": "integer", "minimum": 999, "maximum": 100001})", 0, 110000},
      {R"({"type": "integer", "minimum": 0, "maximum": 0})", -10, 10},
      {R"({"type": "integer", "maximum": 5, "minimum": -5})", -100, 100},
  };
  for (const Case& c : cases) {
    CAPTURE(c.schema);
    const json schema = json::parse(c.schema);
    auto inside = [&](long long v) {
      auto lower = [&](const char* key, bool exclusive) {
        if (!schema.contains(key) || schema[key].is_boolean()) return true;
        const double b = schema[key].get<double>();
        return exclusive ? v > b : v >= b;
      };
      auto upper = [&](const char* key, bool exclusive) {
        if (!schema.contains(key) || schema[key].is_boolean()) return true;
        const double b = schema[key].get<double>();
        return exclusive ? v < b : v <= b;
      };
      const bool draft4_min = schema.value("exclusiveMinimum", json(false)) == json(true);
      const bool draft4_max = schema.value("exclusiveMaximum", json(false)) == json(true);
      return lower("minimum", draft4_min) && lower("exclusiveMinimum", true) && upper("maximum", draft4_max) &&
             upper("exclusiveMaximum", true);
    };
    const std::regex re = range_regex(rule_body(gbnf(c.schema), "root"));
    int mismatches = 0;
    for (long long v = c.lo; v <= c.hi && mismatches < 5; ++v) {
      const bool matched = std::regex_match(std::to_string(v), re);
      if (matched != inside(v)) {
        ++mismatches;
        FAIL_CHECK("integer " << v << (matched ? " matched" : " did not match"));
      }
    }
    for (const char* spelling : {"-0", "00", "01", "-01", "+1", ""}) CHECK(!std::regex_match(spelling, re));
  }
}

TEST_CASE("$ref: one rule per target, recursion, annotations beside it") {
  const std::string list = gbnf(R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
      "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}, "required": ["v", "next"],
      "additionalProperties": false}}, "$ref": "#/$defs/node", "title": "list"})");
  CHECK(rule_body(list, "root") == "node");
  CHECK(rule_body(list, "node") == R"("{" space node-v-kv "," space node-next-kv "}" space)");
  CHECK(contains(list, "node-next ::= node | null"));
  const std::string tree = gbnf(R"({"type": "array", "items": {"$ref": "#"}, "maxItems": 2})");
  CHECK(rule_body(tree, "root") == R"("[" space (root ("," space root)?)? "]" space)");
  CHECK(rule_body(gbnf(R"({"definitions": {"a b": {"type": "null"}}, "$ref": "#/definitions/a%20b"})"), "a-b") ==
        "null");
  CHECK(rule_body(gbnf(R"({"allOf": [{"$ref": "#/$defs/a"}, {"description": "x"}], "$defs": {"a": {"const": 1}}})"),
                  "root") == "a");
}

TEST_CASE("unsupported keywords and invalid schemas are errors naming the keyword and the pointer") {
  struct Case {
    const char* schema;
    const char* message;
  };
  const Case cases[] = {
      {R"({"properties": {"x": {"not": {}}}})", "unsupported JSON Schema keyword 'not' at #/properties/x"},
      {R"({"items": {"if": {}, "then": {}}})", "unsupported JSON Schema keyword 'if' at #/items"},
      {R"({"type": "object", "patternProperties": {"^a": {}}})", "unsupported JSON Schema keyword 'patternProperties' at #"},
      {R"({"properties": {"n": {"type": "integer", "multipleOf": 2}}})",
       "unsupported JSON Schema keyword 'multipleOf' at #/properties/n"},
      {R"({"anyOf": [{"type": "string", "format": "ipv4"}]})", "unsupported JSON Schema format 'ipv4' at #/anyOf/0"},
      {R"({"properties": {"p": {"type": "string", "pattern": "(a)\\1"}}})",
       "unsupported regex construct '\\1' (a backreference) in 'pattern' at #/properties/p"},
      {R"~({"pattern": "a(?=b)"})~", "unsupported regex construct '(?=' (lookahead) in 'pattern' at #"},
      {R"({"pattern": "(?<!b)a"})", "unsupported regex construct '(?<!' (lookbehind) in 'pattern' at #"},
      {R"({"pattern": "\\bword"})", "unsupported regex construct '\\b' (a word boundary) in 'pattern' at #"},
      {R"({"pattern": "(a*)*"})", "unsupported regex construct '*' (an unbounded repetition of something that can match nothing)"},
      {R"({"pattern": "a(b"})", "invalid regex 'a(b' in 'pattern' at #: missing ')'"},
      {R"({"pattern": "*a"})", "nothing to repeat"},
      {R"({"properties": {"n": {"type": "integer", "minimum": "x"}}})", "JSON Schema: 'minimum' at #/properties/n must be a number"},
      {R"({"type": "number", "minimum": 0})", "unsupported JSON Schema keyword 'minimum' at # for type 'number'"},
      {R"({"type": "integer", "minimum": 5, "maximum": 4})", "no integer at # is within its minimum and maximum"},
      {R"({"type": "foo"})", "JSON Schema: 'type' at # has an unknown type \"foo\""},
      {R"({"allOf": [{"type": "string"}, {"maxLength": 3}]})", "'allOf' at #/allOf with more than one constraining subschema"},
      {R"({"type": "object", "anyOf": [{}]})", "'type' alongside 'anyOf' at # is unsupported"},
      {R"({"$ref": "#/$defs/a", "type": "object", "$defs": {"a": {}}})", "'type' alongside '$ref' at # is unsupported"},
      {R"({"enum": ["a"], "maxLength": 3})", "'maxLength' alongside 'enum' at # is unsupported"},
      {R"({"enum": []})", "'enum' at # must be a non-empty array"},
      {R"({"type": "string", "enum": [1]})", "no value of 'enum'/'const' at #"},
      {R"({"$ref": "https://example.com/s.json"})", "unsupported remote JSON Schema $ref 'https://example.com/s.json' at #"},
      {R"({"$ref": "#/$defs/missing"})", "$ref '#/$defs/missing' at # does not resolve"},
      {R"({"$ref": "#anchor"})", "unsupported JSON Schema $ref '#anchor' at #"},
      {R"({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"})",
       "refers back to itself without a value in between"},
      {R"({"anyOf": [{"$ref": "#"}, {"type": "null"}]})", "$ref '#' at #/anyOf/0 refers back to itself"},
      {R"(false)", "JSON Schema at # is 'false'"},
      {R"({"items": false, "minItems": 1})", "the array at # can have no length"},
      {R"({"properties": {"a": false}})", "JSON Schema at #/properties/a is 'false'"},
      {R"(3)", "JSON Schema at # must be an object or a boolean, not number"},
      {R"({"properties": []})", "'properties' at # must be an object"},
      {R"({"required": ["x"], "additionalProperties": false})", "required property 'x' at # is not in 'properties'"},
      {R"({"properties": {"a": {}}, "minProperties": 1})", "unsupported JSON Schema keyword 'minProperties' at #"},
      {R"({"properties": {"a": {}}, "additionalProperties": true, "maxProperties": 1})",
       "unsupported JSON Schema keyword 'maxProperties' at #"},
      {R"({"type": "array", "uniqueItems": true})", "unsupported JSON Schema keyword 'uniqueItems' at #"},
      {R"({"type": "array", "contains": {}})", "unsupported JSON Schema keyword 'contains' at #"},
      {R"({"minItems": -1})", "'minItems' at # must be a non-negative integer"},
      {R"({"minLength": 5, "maxLength": 2})", "'minLength' at # is above 'maxLength'"},
      {R"({"format": "date", "pattern": "x"})", "'pattern' alongside 'format' at # is unsupported"},
      {R"({"nullable": "yes"})", "'nullable' at # must be a boolean"},
      {R"({"properties": {"a~b/c": {"unknownKeyword": 1}}})", "unsupported JSON Schema keyword 'unknownKeyword' at #/properties/a~0b~1c"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.schema);
    const std::string message = error_of(c.schema);
    CAPTURE(message);
    CHECK(contains(message, c.message));
  }
  // Annotations and extensions are ignored.
  CHECK_NOTHROW(gbnf(R"({"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "x", "$comment": "c",
      "title": "t", "description": "d", "default": 1, "examples": [1], "deprecated": true, "readOnly": true,
      "writeOnly": false, "x-order": 3, "type": "integer"})"));
}

TEST_CASE("limits: depth, rules, size and repetition bounds") {
  std::string deep = "{}";
  for (int i = 0; i < 70; ++i) deep = R"({"type": "array", "items": )" + deep + "}";
  const std::string message = error_of(deep);
  CHECK(contains(message, "JSON Schema nests deeper than 64 levels at #/items/items/"));
  SchemaLimits shallow;
  shallow.max_depth = 3;
  CHECK(contains(error_of(R"({"items": {"items": {"items": {"items": {"type": "null"}}}}})", shallow),
                 "nests deeper than 3 levels at #/items/items/items/items"));
  CHECK_NOTHROW(gbnf(R"({"items": {"items": {"items": {}}}})", shallow));

  json wide = {{"type", "object"}, {"properties", json::object()}};
  for (int i = 0; i < 100; ++i) wide["properties"]["p" + std::to_string(i)] = {{"type", "array"}, {"maxItems", i + 1}};
  SchemaLimits few_rules;
  few_rules.max_rules = 50;
  CHECK_THROWS_WITH_AS(json_schema_to_gbnf(wide, few_rules), doctest::Contains("needs more than 50 rules"),
                       qkv::Error);
  CHECK_NOTHROW(parse_gbnf(json_schema_to_gbnf(wide)));
  SchemaLimits small;
  small.max_grammar_bytes = 2000;
  CHECK_THROWS_WITH_AS(json_schema_to_gbnf(wide, small), doctest::Contains("larger than 2000 bytes"), qkv::Error);

  CHECK(contains(error_of(R"({"type": "array", "maxItems": 1001})"), "'maxItems' at # is 1001, above the limit of 1000"));
  CHECK(contains(error_of(R"({"type": "string", "minLength": 5000})"), "'minLength' at # is 5000, above the limit of 1000"));
  CHECK(contains(error_of(R"({"pattern": "^a{1001}$"})"), "regex quantifier {1001} in 'pattern' at # is above the limit of 1000"));
  SchemaLimits big_repeat;
  big_repeat.max_repeat = 5000;
  CHECK(rule_body(gbnf(R"({"type": "string", "maxLength": 5000})", big_repeat), "root") ==
        R"("\"" char{0,5000} "\"" space)");
  // Depth also bounds regex group nesting.
  CHECK(contains(error_of(R"({"pattern": ")" + std::string(100, '(') + "a" + std::string(100, ')') + R"("})"),
                 "groups nest deeper than 64 levels"));
}

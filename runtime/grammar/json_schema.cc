// The JSON Schema compiler: one walk over the schema producing GBNF rules.
//
// Every subschema compiles to an expression matching a JSON value followed by
// at most one space (the whitespace between tokens is bounded so that a
// sampler cannot wander in it). Composite bodies become named rules derived
// from where they sit (root-address-street); identical bodies share a rule.
// Each $ref target becomes one rule, reserved before its body is compiled, so
// recursive schemas give recursive grammars. Shared primitives (string,
// number, the any-value rules, formats) are emitted once, on first use.
//
// Keywords are checked before anything is compiled: annotations are ignored,
// a keyword the compiler does not know or cannot honour is an error naming it
// and the JSON pointer of its subschema.
#include "runtime/grammar/json_schema.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "runtime/grammar/json_schema_compiler.h"
#include "runtime/grammar/json_schema_internal.h"

namespace qkv::grammar::schema_detail {

namespace {

const std::set<std::string> kAnnotations = {
    "$schema", "$id", "$comment", "$anchor", "$vocabulary", "title", "description", "default", "examples",
    "example", "deprecated", "readOnly", "writeOnly", "contentEncoding", "contentMediaType", "$defs",
    "definitions"};
const std::set<std::string> kObjectKeywords = {"properties", "required", "additionalProperties", "minProperties",
                                               "maxProperties"};
const std::set<std::string> kArrayKeywords = {"items", "prefixItems", "additionalItems", "minItems", "maxItems",
                                              "uniqueItems"};
const std::set<std::string> kStringKeywords = {"minLength", "maxLength", "pattern", "format"};
const std::set<std::string> kNumberKeywords = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
const std::set<std::string> kOtherKeywords = {"type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "nullable"};
const char* const kTypes[] = {"object", "array", "string", "number", "integer", "boolean", "null"};

struct Primitive {
  const char* name;
  const char* body;
  std::vector<const char*> uses;
};

const std::vector<Primitive>& primitives() {
  static const std::vector<Primitive> kPrimitives = {
      {"space", "\" \"?", {}},
      {"char", R"([^"\\\x7F\x00-\x1F] | [\\] (["\\/bfnrt] | "u" [0-9a-fA-F]{4}))", {}},
      {"string", R"("\"" char* "\"" space)", {"char", "space"}},
      {"integral-part", "[0] | [1-9] [0-9]{0,15}", {}},
      {"decimal-part", "[0-9]{1,16}", {}},
      {"number", R"("-"? integral-part ("." decimal-part)? ([eE] [-+]? [0-9]{1,2})? space)",
       {"integral-part", "decimal-part", "space"}},
      {"integer", R"("-"? integral-part space)", {"integral-part", "space"}},
      {"boolean", R"(("true" | "false") space)", {"space"}},
      {"null", R"("null" space)", {"space"}},
      {"value", "object | array | string | number | boolean | null",
       {"object", "array", "string", "number", "boolean", "null"}},
      {"object", R"("{" space (string ":" space value ("," space string ":" space value)*)? "}" space)",
       {"space", "string", "value"}},
      {"array", R"("[" space (value ("," space value)*)? "]" space)", {"space", "value"}},
      {"key-char", R"([^"\\\x7F\x00-\x1F])", {}},
      // Each month with its number of days; February stops at 28, which leaves
      // out leap days rather than admit the 29th of a common year. Years start at
      // 1000: validators reject year 0.
      {"date", R"([1-9] [0-9]{3} "-" (("0" [13578] | "1" [02]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]) | ("0" [469] | "11") "-" ("0" [1-9] | [12] [0-9] | "30") | "02-" ("0" [1-9] | "1" [0-9] | "2" [0-8])))",
       {}},
      {"time", R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,9})? ("Z" | [+\x2D] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]))",
       {}},
      {"date-time", R"(date "T" time)", {"date", "time"}},
      {"uuid", R"([0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12})", {}},
      {"email-atom", R"([A-Za-z0-9!\x23$%&'*+/=?^_`{|}~\x2D]{1,32})", {}},
      {"email-label", R"([A-Za-z0-9] ([A-Za-z0-9\x2D]{0,61} [A-Za-z0-9])?)", {}},
      // Bounded (a local part of at most 4 atoms, at most 3 labels before the top
      // level): every address the grammar can start ends within ~400 bytes.
      {"email", R"(email-atom ("." email-atom){0,3} "@" (email-label "."){1,3} [A-Za-z]{2,24})", {"email-atom", "email-label"}},
  };
  return kPrimitives;
}

bool matches_type(const json& v, const std::string& type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  if (type == "number") return v.is_number();
  // integer: any number without a fractional part (1.0 is an integer in JSON Schema).
  if (v.is_number_integer()) return true;
  return v.is_number_float() && std::isfinite(v.get<double>()) && v.get<double>() == std::floor(v.get<double>());
}

bool is_name(const std::string& expr) {
  if (expr.empty()) return false;
  for (const char c : expr) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

bool ignored(const std::string& keyword) { return kAnnotations.count(keyword) || keyword.rfind("x-", 0) == 0; }

}  // namespace

std::string child(const std::string& ptr, const std::string& token) {
  std::string out = ptr + "/";
  for (const char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::string child(const std::string& ptr, const std::string& keyword, size_t index) {
  return child(ptr, keyword) + "/" + std::to_string(index);
}

std::string sanitize(const std::string& s) {
  std::string out;
  for (const char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    out += ok ? c : '-';
    if (out.size() >= 40) break;  // keep names readable; uniqueness comes from suffixes
  }
  return out.empty() ? "x" : out;
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

std::string repeat(const std::string& atom, long long lo, long long hi) {
  if (hi == 0) return "";
  if (lo == 0 && hi < 0) return atom + "*";
  if (lo == 1 && hi < 0) return atom + "+";
  if (lo == 0 && hi == 1) return atom + "?";
  if (hi < 0) return atom + "{" + std::to_string(lo) + ",}";
  if (lo == hi) return lo == 1 ? atom : atom + "{" + std::to_string(lo) + "}";
  return atom + "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
}

bool is_trivially_true(const json& s) {
  if (s.is_boolean()) return s.get<bool>();
  if (!s.is_object()) return false;
  for (const auto& [k, v] : s.items()) {
    if (!ignored(k)) return false;
  }
  return true;
}

Compiler::Compiler(const json& root, const SchemaLimits& limits) : root_(root), limits_(limits) {
  for (const Primitive& p : primitives()) taken_.insert(p.name);
}

std::string Compiler::run() {
  ref("#", "#", 0);
  std::string out;
  for (const std::string& name : order_) out += name + " ::= " + bodies_[name] + "\n";
  if (out.size() > limits_.max_grammar_bytes) too_big("#");
  return out;
}

void Compiler::too_big(const std::string& ptr) const {
  fail("JSON Schema grammar is larger than ", limits_.max_grammar_bytes, " bytes (at ", ptr, ")");
}

void Compiler::add(const std::string& name, const std::string& body, const std::string& ptr) {
  if (order_.size() >= limits_.max_rules) {
    fail("JSON Schema grammar needs more than ", limits_.max_rules, " rules (at ", ptr, ")");
  }
  bytes_ += name.size() + body.size() + 6;
  if (bytes_ > limits_.max_grammar_bytes) too_big(ptr);
  order_.push_back(name);
  bodies_[name] = body;
  taken_.insert(name);
}

std::string Compiler::fresh_name(const std::string& hint) const {
  if (!taken_.count(hint)) return hint;
  for (int i = 1;; ++i) {
    const std::string name = hint + "-" + std::to_string(i);
    if (!taken_.count(name)) return name;
  }
}

std::string Compiler::use(const std::string& name) {
  if (!emitted_.insert(name).second) return name;
  for (const Primitive& p : primitives()) {
    if (name != p.name) continue;
    add(p.name, p.body, "#");
    for (const char* dep : p.uses) use(dep);
  }
  return name;
}

std::string Compiler::rule(const std::string& hint, const std::string& body, const std::string& ptr) {
  if (is_name(body)) return body;
  auto it = by_body_.find(body);
  if (it != by_body_.end()) return it->second;
  const std::string name = fresh_name(hint);
  add(name, body, ptr);
  by_body_[body] = name;
  return name;
}

std::string Compiler::visit(const json& s, const std::string& ptr, int depth, const std::string& hint) {
  return rule(hint, body(s, ptr, depth, hint), ptr);
}

std::optional<long long> Compiler::count(const json& s, const char* key, const std::string& ptr) const {
  if (!s.contains(key)) return std::nullopt;
  const json& v = s[key];
  const bool integral = v.is_number_unsigned() || (v.is_number_integer() && v.get<long long>() >= 0) ||
                        (v.is_number_float() && v.get<double>() >= 0 && v.get<double>() == std::floor(v.get<double>()));
  if (!integral) fail("JSON Schema: '", key, "' at ", ptr, " must be a non-negative integer");
  // Counts past any limit behave alike; clamping keeps the arithmetic in range.
  return v.get<double>() > 1e15 ? 1000000000000000LL : v.get<long long>();
}

std::optional<long long> Compiler::repeat_bound(const json& s, const char* key, const std::string& ptr) const {
  auto n = count(s, key, ptr);
  if (n && *n > limits_.max_repeat) {
    fail("JSON Schema: '", key, "' at ", ptr, " is ", *n, ", above the limit of ", limits_.max_repeat);
  }
  return n;
}

const json& Compiler::resolve(const std::string& fragment, const std::string& ref_text, const std::string& ptr) const {
  if (fragment.empty()) return root_;
  if (fragment[0] != '/') {
    fail("unsupported JSON Schema $ref '", ref_text, "' at ", ptr, " (only JSON pointers like '#/$defs/name')");
  }
  try {
    return root_.at(json::json_pointer(fragment));
  } catch (const json::exception&) {
    fail("JSON Schema: $ref '", ref_text, "' at ", ptr, " does not resolve");
  }
}

std::string Compiler::ref(const std::string& ref_text, const std::string& ptr, int depth) {
  if (ref_text.empty() || ref_text[0] != '#') {
    fail("unsupported remote JSON Schema $ref '", ref_text, "' at ", ptr, " (only local refs starting with '#')");
  }
  std::string fragment;  // the pointer, URI-decoded
  for (size_t i = 1; i < ref_text.size(); ++i) {
    if (ref_text[i] == '%' && i + 2 < ref_text.size() && std::isxdigit(static_cast<unsigned char>(ref_text[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(ref_text[i + 2]))) {
      fragment += static_cast<char>(std::stoi(ref_text.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      fragment += ref_text[i];
    }
  }
  auto it = refs_.find(fragment);
  if (it != refs_.end()) {
    auto open = open_refs_.find(fragment);
    // A cycle that reaches its start without entering an object or array
    // would be a left-recursive rule that matches nothing.
    if (open != open_refs_.end() && open->second == brackets_) {
      fail("JSON Schema: $ref '", ref_text, "' at ", ptr, " refers back to itself without a value in between");
    }
    return it->second;
  }
  const json& target = resolve(fragment, ref_text, ptr);
  const std::string name =
      fragment.empty() ? "root" : fresh_name(sanitize(fragment.substr(fragment.rfind('/') + 1)));
  // Reserved before the body is compiled, so that the target can refer to itself.
  refs_[fragment] = name;
  open_refs_[fragment] = brackets_;
  add(name, "", ptr);
  const std::string target_ptr = "#" + fragment;
  const std::string b = body(target, target_ptr, fragment.empty() ? depth : depth + 1, name);
  bytes_ += b.size();
  if (bytes_ > limits_.max_grammar_bytes) too_big(target_ptr);
  bodies_[name] = b;
  open_refs_.erase(fragment);
  return name;
}

std::string Compiler::body(const json& s, const std::string& ptr, int depth, const std::string& hint) {
  if (depth > limits_.max_depth) fail("JSON Schema nests deeper than ", limits_.max_depth, " levels at ", ptr);
  if (s.is_boolean()) {
    if (!s.get<bool>()) fail("JSON Schema at ", ptr, " is 'false': no value satisfies it");
    return use("value");
  }
  if (!s.is_object()) fail("JSON Schema at ", ptr, " must be an object or a boolean, not ", s.type_name());
  for (const auto& [k, v] : s.items()) {
    const bool known = ignored(k) || kOtherKeywords.count(k) || kObjectKeywords.count(k) ||
                       kArrayKeywords.count(k) || kStringKeywords.count(k) || kNumberKeywords.count(k);
    if (!known) fail("unsupported JSON Schema keyword '", k, "' at ", ptr);
  }
  bool nullable = false;
  if (s.contains("nullable")) {
    if (!s["nullable"].is_boolean()) fail("JSON Schema: 'nullable' at ", ptr, " must be a boolean");
    nullable = s["nullable"].get<bool>();
  }
  std::vector<std::string> alts = constrained(s, ptr, depth, hint);
  if (nullable) alts.push_back(use("null"));
  std::vector<std::string> unique;
  for (const std::string& a : alts) {
    if (std::find(unique.begin(), unique.end(), a) == unique.end()) unique.push_back(a);
  }
  if (std::find(unique.begin(), unique.end(), "value") != unique.end()) return "value";
  return join(unique, " | ");
}

// The value-constraining keywords as alternatives. Keywords of different
// groups ($ref, enum/const, a combinator, the type keywords) would need an
// intersection of grammars: only enum/const with type is supported (by
// filtering the values).
std::vector<std::string> Compiler::constrained(const json& s, const std::string& ptr, int depth,
                                               const std::string& hint) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : s.items()) {
    if (!ignored(k) && k != "nullable") keys.push_back(k);
  }
  auto siblings_must_be = [&](const std::string& keyword, const std::set<std::string>& allowed) {
    for (const std::string& k : keys) {
      if (k != keyword && !allowed.count(k)) {
        fail("JSON Schema: '", k, "' alongside '", keyword, "' at ", ptr, " is unsupported");
      }
    }
  };
  if (s.contains("$ref")) {
    siblings_must_be("$ref", {});
    if (!s["$ref"].is_string()) fail("JSON Schema: '$ref' at ", ptr, " must be a string");
    return {ref(s["$ref"].get<std::string>(), ptr, depth)};
  }
  if (s.contains("enum") || s.contains("const")) {
    siblings_must_be(s.contains("enum") ? "enum" : "const", {"type", "enum", "const"});
    return literals(s, ptr);
  }
  for (const std::string keyword : {"anyOf", "oneOf", "allOf"}) {
    if (!s.contains(keyword)) continue;
    siblings_must_be(keyword, {});
    const json& subs = s[keyword];
    if (!subs.is_array() || subs.empty()) fail("JSON Schema: '", keyword, "' at ", ptr, " must be a non-empty array");
    if (keyword == "allOf") return all_of(subs, child(ptr, keyword), depth, hint);
    std::vector<std::string> alts;
    for (size_t i = 0; i < subs.size(); ++i) {
      alts.push_back(visit(subs[i], child(ptr, keyword, i), depth + 1, hint + "-" + std::to_string(i)));
    }
    return alts;
  }
  return typed(s, ptr, depth, hint);
}

std::vector<std::string> Compiler::all_of(const json& subs, const std::string& ptr, int depth,
                                          const std::string& hint) {
  std::optional<size_t> only;
  for (size_t i = 0; i < subs.size(); ++i) {
    if (is_trivially_true(subs[i])) continue;
    if (only) fail("JSON Schema: 'allOf' at ", ptr, " with more than one constraining subschema is unsupported");
    only = i;
  }
  if (!only) return {use("value")};
  return {body(subs[*only], ptr + "/" + std::to_string(*only), depth + 1, hint)};
}

std::vector<std::string> Compiler::types_of(const json& s, const std::string& ptr) const {
  std::vector<std::string> types;
  if (s.contains("type")) {
    const json& t = s["type"];
    const json list = t.is_array() ? t : json::array({t});
    if (list.empty()) fail("JSON Schema: 'type' at ", ptr, " must not be an empty array");
    for (const json& name : list) {
      if (!name.is_string() ||
          std::find(std::begin(kTypes), std::end(kTypes), name.get<std::string>()) == std::end(kTypes)) {
        fail("JSON Schema: 'type' at ", ptr, " has an unknown type ", name.dump());
      }
      types.push_back(name.get<std::string>());
    }
    return types;
  }
  // Without "type", type-specific keywords say what the value is meant to be;
  // producing only that type is a subset of what the schema accepts.
  auto any_of = [&](const std::set<std::string>& keywords) {
    for (const std::string& k : keywords) {
      if (s.contains(k)) return true;
    }
    return false;
  };
  if (any_of(kObjectKeywords)) types.push_back("object");
  if (any_of(kArrayKeywords)) types.push_back("array");
  if (any_of(kStringKeywords)) types.push_back("string");
  if (any_of(kNumberKeywords)) types.push_back("number");
  return types;
}

std::vector<std::string> Compiler::literals(const json& s, const std::string& ptr) {
  std::vector<json> values;
  if (s.contains("enum")) {
    if (!s["enum"].is_array() || s["enum"].empty()) fail("JSON Schema: 'enum' at ", ptr, " must be a non-empty array");
    for (const json& v : s["enum"]) {
      if (!s.contains("const") || v == s["const"]) values.push_back(v);
    }
  } else {
    values.push_back(s["const"]);
  }
  if (s.contains("type")) {
    const std::vector<std::string> types = types_of(s, ptr);
    std::vector<json> kept;
    for (const json& v : values) {
      for (const std::string& t : types) {
        if (matches_type(v, t)) {
          kept.push_back(v);
          break;
        }
      }
    }
    values = kept;
  }
  if (values.empty()) fail("JSON Schema: no value of 'enum'/'const' at ", ptr, " satisfies the schema's other keywords");
  std::vector<std::string> alts;
  use("space");
  for (const json& v : values) alts.push_back(gbnf_literal(v.dump()) + " space");
  return alts;
}

std::vector<std::string> Compiler::typed(const json& s, const std::string& ptr, int depth, const std::string& hint) {
  const std::vector<std::string> types = types_of(s, ptr);
  if (types.empty()) return {use("value")};
  const bool has_number = std::find(types.begin(), types.end(), "number") != types.end();
  std::vector<std::string> alts;
  std::set<std::string> done;
  for (const std::string& t : types) {
    if (!done.insert(t).second || (t == "integer" && has_number)) continue;
    if (t == "object") {
      alts.push_back(object(s, ptr, depth, hint));
    } else if (t == "array") {
      alts.push_back(array(s, ptr, depth, hint));
    } else if (t == "string") {
      alts.push_back(string(s, ptr));
    } else if (t == "integer") {
      alts.push_back(integer(s, ptr));
    } else if (t == "number") {
      for (const std::string& k : kNumberKeywords) {
        if (s.contains(k) && !s[k].is_boolean()) {
          fail("unsupported JSON Schema keyword '", k, "' at ", ptr, " for type 'number' (bounds are supported on integers)");
        }
      }
      alts.push_back(use("number"));
    } else {
      alts.push_back(use(t));
    }
  }
  return alts;
}

}  // namespace qkv::grammar::schema_detail

namespace qkv::grammar {

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, const SchemaLimits& limits) {
  try {
    return schema_detail::Compiler(schema, limits).run();
  } catch (const nlohmann::json::exception& e) {
    // e.g. a string that is not UTF-8 in a json built by the caller
    fail("JSON Schema: ", e.what());
  }
}

std::string json_object_gbnf() { return json_schema_to_gbnf(nlohmann::ordered_json{{"type", "object"}}); }

}  // namespace qkv::grammar

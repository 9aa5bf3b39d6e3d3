// The grammar of one JSON type under its keywords: objects, arrays, strings
// and integers (numbers, booleans and null are fixed primitives).
//
// Objects list their properties in one order: the required ones, each present,
// then the optional ones, each possibly skipped, then (when allowed) any number
// of additional properties whose names are none of the listed ones. Arrays
// count items with bounded repetition; strings count JSON string characters
// (an escape is one character, as it is one character of the decoded value).
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "runtime/grammar/json_schema_compiler.h"
#include "runtime/grammar/json_schema_internal.h"

namespace qkv::grammar::schema_detail {

namespace {

// Integer bounds beyond this (about 2^60) would make the digit arithmetic
// overflow; a bound further out than any producible number is no bound.
constexpr int64_t kMaxBound = 1000000000000000000LL;
constexpr int kMaxIntegerDigits = 16;

bool is_escaped_in_json(uint32_t cp) { return cp < 0x20 || cp == '"' || cp == '\\' || cp == 0x7F; }

// The names an additional property may not have, as a trie of code points.
struct Trie {
  std::map<uint32_t, Trie> next;
  bool end = false;
};

// The rest of a key after the trie node's path, through the closing quote:
// a key that is not a listed name. Only unescaped characters are produced, so
// a name is never spelled differently from the way it is listed ("\u0061" for
// "a"), which would make it a duplicate the trie cannot see.
std::string not_listed(const Trie& node) {
  std::string other = "[^\\x22\\x5C\\x7F\\x00-\\x1F";
  std::vector<std::string> alts;
  for (const auto& [cp, sub] : node.next) {
    other += gbnf_class_char(cp);
    alts.push_back(gbnf_literal(utf8_encode(cp)) + " " + not_listed(sub));
  }
  alts.insert(alts.begin(), other + "] key-char* \"\\\"\"");
  if (!node.end) alts.push_back("\"\\\"\"");
  return "(" + join(alts, " | ") + ")";
}

}  // namespace

std::string Compiler::additional_key(const std::vector<std::string>& names, const std::string& hint,
                                     const std::string& ptr) {
  Trie trie;
  for (const std::string& name : names) {
    auto cps = decode_utf8(name);
    if (!cps) fail("JSON Schema: property name at ", ptr, " is not valid UTF-8");
    Trie* node = &trie;
    bool producible = true;
    for (const uint32_t cp : *cps) {
      if (is_escaped_in_json(cp)) {  // cannot be spelled without escapes: never produced
        producible = false;
        break;
      }
      node = &node->next[cp];
    }
    if (producible) node->end = true;
  }
  use("key-char");
  return rule(hint + "-additional-key", "\"\\\"\" " + not_listed(trie) + " space", ptr);
}

std::string Compiler::object(const json& s, const std::string& ptr, int depth, const std::string& hint) {
  const json empty = json::object();
  const json& props = s.contains("properties") ? s["properties"] : empty;
  if (!props.is_object()) fail("JSON Schema: 'properties' at ", ptr, " must be an object");
  std::vector<std::string> required;
  if (s.contains("required")) {
    const json& r = s["required"];
    if (!r.is_array()) fail("JSON Schema: 'required' at ", ptr, " must be an array of strings");
    for (const json& name : r) {
      if (!name.is_string()) fail("JSON Schema: 'required' at ", ptr, " must be an array of strings");
      if (std::find(required.begin(), required.end(), name.get<std::string>()) == required.end()) {
        required.push_back(name.get<std::string>());
      }
    }
  }
  const json* additional = nullptr;  // null: additional properties are not allowed
  if (!s.contains("additionalProperties")) {
    // Unsaid, JSON Schema allows any other property; the grammar does only
    // when the schema lists none (an open object). With listed properties a
    // model gets exactly those, as llama.cpp's grammars do and OpenAI's strict
    // mode requires: the output still validates, and a model cannot wander
    // into properties nobody asked for.
    if (!props.empty()) {
      additional = nullptr;
    } else {
      additional = &s;  // any value; only its presence matters below
    }
  } else {
    const json& a = s["additionalProperties"];
    if (!a.is_boolean() && !a.is_object()) {
      fail("JSON Schema: 'additionalProperties' at ", ptr, " must be a boolean or an object");
    }
    if (!(a.is_boolean() && !a.get<bool>())) additional = &a;
  }
  const bool additional_any = additional == &s || (additional && is_trivially_true(*additional));

  // Every listed name with its schema and pointer: required ones first.
  struct Prop {
    std::string name;
    const json* schema;  // null: any value
    std::string ptr;
  };
  std::vector<Prop> listed;
  // Required properties in the order `properties` declares them (what strict
  // structured output emits), then required names that only
  // additionalProperties describes.
  std::vector<std::string> in_order;
  for (const auto& item : props.items()) {
    if (std::find(required.begin(), required.end(), item.key()) != required.end()) in_order.push_back(item.key());
  }
  for (const std::string& name : required) {
    if (!props.contains(name)) in_order.push_back(name);
  }
  required = in_order;
  for (const std::string& name : required) {
    if (props.contains(name)) {
      listed.push_back({name, &props[name], child(child(ptr, "properties"), name)});
    } else if (!additional) {
      fail("JSON Schema: required property '", name, "' at ", ptr,
           " is not in 'properties' and additional properties are not allowed");
    } else {
      listed.push_back({name, additional_any ? nullptr : additional, child(ptr, "additionalProperties")});
    }
  }
  for (const auto& [name, sub] : props.items()) {
    if (std::find(required.begin(), required.end(), name) == required.end()) {
      listed.push_back({name, &sub, child(child(ptr, "properties"), name)});
    }
  }

  // min/maxProperties only where the listed properties already decide them.
  if (auto min = count(s, "minProperties", ptr); min && *min > static_cast<long long>(required.size())) {
    fail("unsupported JSON Schema keyword 'minProperties' at ", ptr, " (supported only up to the number of required properties)");
  }
  if (auto max = count(s, "maxProperties", ptr); max && (additional || *max < static_cast<long long>(listed.size()))) {
    fail("unsupported JSON Schema keyword 'maxProperties' at ", ptr,
         " (supported only with additionalProperties false and at least as many as the listed properties)");
  }

  if (listed.empty() && additional_any) return use("object");
  use("space");

  const Bracketed inside(*this);
  std::vector<std::string> kvs;
  std::vector<std::string> names;
  for (const Prop& p : listed) {
    const std::string sub_hint = hint + "-" + sanitize(p.name);
    const std::string value = p.schema ? visit(*p.schema, p.ptr, depth + 1, sub_hint) : use("value");
    kvs.push_back(rule(sub_hint + "-kv", gbnf_literal(json(p.name).dump()) + " space \":\" space " + value, ptr));
    names.push_back(p.name);
  }
  std::string out = "\"{\" space";
  const size_t n_required = required.size();
  for (size_t i = 0; i < n_required; ++i) out += (i ? " \",\" space " : " ") + kvs[i];
  // The optional items in order; the last may repeat (additional properties).
  std::vector<std::string> optional(kvs.begin() + static_cast<long>(n_required), kvs.end());
  bool last_repeats = false;
  if (additional) {
    const std::string value = additional_any ? use("value")
                                             : visit(*additional, child(ptr, "additionalProperties"), depth + 1,
                                                     hint + "-additional");
    optional.push_back(rule(hint + "-additional-kv", additional_key(names, hint, ptr) + " \":\" space " + value, ptr));
    last_repeats = true;
  }
  if (!optional.empty()) {
    // rest[i]: the optional items from i on, each after a comma, each skippable.
    const size_t k = optional.size();
    std::vector<std::string> rest(k + 1);
    for (size_t i = k; i-- > 0;) {
      if (i == 0 && n_required == 0 && k > 1) break;  // rest[0] would be unused
      const std::string item = "(\",\" space " + optional[i] + ")" + (i + 1 == k && last_repeats ? "*" : "?");
      rest[i] = i + 1 == k ? item : rule(hint + "-rest", item + " " + rest[i + 1], ptr);
    }
    if (n_required > 0) {
      out += " " + rest[0];
    } else {
      // No required item: the first present item has no comma before it.
      std::vector<std::string> first;
      for (size_t i = 0; i < k; ++i) {
        const bool tail = i + 1 < k || last_repeats;
        first.push_back(optional[i] + (tail ? " " + rest[i + 1 < k ? i + 1 : i] : ""));
      }
      out += " (" + join(first, " | ") + ")?";
    }
  }
  return out + " \"}\" space";
}

std::string Compiler::array(const json& s, const std::string& ptr, int depth, const std::string& hint) {
  // The tuple (prefixItems, or items as an array in drafts before 2020-12) and
  // the schema of the items after it (null: none allowed).
  const json* tuple = nullptr;
  std::string tuple_ptr;
  const json* rest = &s;  // &s stands for "any value"
  std::string rest_ptr;
  auto rest_from = [&](const char* key) {
    if (!s.contains(key)) return;
    const json& r = s[key];
    if (!r.is_boolean() && !r.is_object()) fail("JSON Schema: '", key, "' at ", ptr, " must be a schema");
    rest = r.is_boolean() && !r.get<bool>() ? nullptr : &r;
    rest_ptr = child(ptr, key);
  };
  if (s.contains("prefixItems")) {
    tuple = &s["prefixItems"];
    tuple_ptr = child(ptr, "prefixItems");
    if (s.contains("items") && s["items"].is_array()) fail("JSON Schema: 'items' at ", ptr, " must be a schema next to 'prefixItems'");
    if (s.contains("additionalItems")) fail("unsupported JSON Schema keyword 'additionalItems' at ", ptr, " next to 'prefixItems'");
    rest_from("items");
  } else if (s.contains("items") && s["items"].is_array()) {
    tuple = &s["items"];
    tuple_ptr = child(ptr, "items");
    rest_from("additionalItems");
  } else {
    rest_from("items");
  }
  if (tuple && !tuple->is_array()) fail("JSON Schema: '", tuple_ptr.substr(ptr.size() + 1), "' at ", ptr, " must be an array");
  if (s.contains("uniqueItems")) {
    if (!s["uniqueItems"].is_boolean()) fail("JSON Schema: 'uniqueItems' at ", ptr, " must be a boolean");
    if (s["uniqueItems"].get<bool>()) fail("unsupported JSON Schema keyword 'uniqueItems' at ", ptr);
  }
  const long long min = repeat_bound(s, "minItems", ptr).value_or(0);
  const auto max_bound = repeat_bound(s, "maxItems", ptr);
  const long long n_tuple = tuple ? static_cast<long long>(tuple->size()) : 0;
  long long max = max_bound ? *max_bound : -1;
  if (!rest && (max < 0 || max > n_tuple)) max = n_tuple;
  if (max >= 0 && min > max) fail("JSON Schema: the array at ", ptr, " can have no length between 'minItems' and the items allowed");
  const bool rest_any = rest == &s || (rest && is_trivially_true(*rest));
  if (!tuple && rest_any && min == 0 && max < 0) return use("array");
  use("space");

  const Bracketed inside(*this);
  std::vector<std::string> items;  // the tuple items that can be present
  for (long long i = 0; i < n_tuple && (max < 0 || i < max); ++i) {
    items.push_back(visit((*tuple)[static_cast<size_t>(i)], child(tuple_ptr, std::to_string(i)), depth + 1,
                          hint + "-" + std::to_string(i)));
  }
  const bool rest_used = rest && (max < 0 || max > n_tuple);
  const std::string rest_item =
      !rest_used ? "" : rest_any ? use("value") : visit(*rest, rest_ptr, depth + 1, hint + "-item");
  const long long rest_min = std::max(0LL, min - n_tuple);
  const long long rest_max = max < 0 ? -1 : max - n_tuple;
  const std::string comma = "\",\" space ";

  // From the last item back: each item after the required ones is optional
  // and carries what follows it, so an absent item ends the array.
  auto cat = [](const std::string& a, const std::string& b) { return a.empty() ? b : b.empty() ? a : a + " " + b; };
  const std::string more = "(" + comma + rest_item + ")";
  std::string tail;
  if (rest_used && items.empty()) {
    // The first item has no comma before it.
    const std::string after_first = repeat(more, std::max(0LL, rest_min - 1), rest_max < 0 ? -1 : rest_max - 1);
    tail = rest_min == 0 ? "(" + cat(rest_item, after_first) + ")?" : cat(rest_item, after_first);
  } else if (rest_used) {
    tail = repeat(more, rest_min, rest_max);
  }
  for (size_t i = items.size(); i-- > 0;) {
    const std::string here = cat((i == 0 ? "" : comma) + items[i], tail);
    tail = static_cast<long long>(i) < min ? here : "(" + here + ")?";
  }
  return cat(cat("\"[\" space", tail), "\"]\" space");
}

std::string Compiler::string(const json& s, const std::string& ptr) {
  const auto min = repeat_bound(s, "minLength", ptr);
  const auto max = repeat_bound(s, "maxLength", ptr);
  const std::string quote = "\"\\\"\"";
  auto others = [&](const char* keyword) {
    for (const char* k : {"format", "pattern", "minLength", "maxLength"}) {
      if (k != std::string(keyword) && s.contains(k)) {
        fail("JSON Schema: '", k, "' alongside '", keyword, "' at ", ptr, " is unsupported");
      }
    }
  };
  if (s.contains("format")) {
    others("format");
    static const std::set<std::string> kFormats = {"date", "time", "date-time", "uuid", "email"};
    if (!s["format"].is_string()) fail("JSON Schema: 'format' at ", ptr, " must be a string");
    const std::string format = s["format"].get<std::string>();
    if (!kFormats.count(format)) fail("unsupported JSON Schema format '", format, "' at ", ptr);
    use("space");
    return quote + " " + use(format) + " " + quote + " space";
  }
  if (s.contains("pattern")) {
    others("pattern");
    if (!s["pattern"].is_string()) fail("JSON Schema: 'pattern' at ", ptr, " must be a string");
    const RegexGbnf re = regex_to_gbnf(s["pattern"].get<std::string>(), ptr, "char", limits_.max_depth, limits_.max_repeat);
    if (re.uses_char) use("char");
    use("space");
    return quote + " (" + re.expr + ") " + quote + " space";
  }
  if (!min && !max) return use("string");
  if (min && max && *min > *max) fail("JSON Schema: 'minLength' at ", ptr, " is above 'maxLength'");
  use("char");
  use("space");
  const std::string chars = repeat("char", min.value_or(0), max ? *max : -1);
  return quote + (chars.empty() ? "" : " " + chars) + " " + quote + " space";
}

std::string Compiler::integer(const json& s, const std::string& ptr) {
  std::optional<int64_t> lo, hi;
  auto bound = [&](const char* key, bool lower, bool exclusive) {
    const json& v = s[key];
    if (!v.is_number()) fail("JSON Schema: '", key, "' at ", ptr, " must be a number");
    const double d = v.get<double>();
    if (lower ? d < -static_cast<double>(kMaxBound) : d > static_cast<double>(kMaxBound)) return;  // beyond reach
    if (lower ? d > static_cast<double>(kMaxBound) : d < -static_cast<double>(kMaxBound)) {
      fail("JSON Schema: '", key, "' at ", ptr, " is beyond the supported integer range");
    }
    int64_t b;
    if (v.is_number_integer()) {
      b = v.get<int64_t>();
      if (exclusive) b += lower ? 1 : -1;
    } else {
      const double r = lower ? std::floor(d) + (exclusive || std::floor(d) != d ? 1 : 0)
                             : std::ceil(d) - (exclusive || std::ceil(d) != d ? 1 : 0);
      b = static_cast<int64_t>(r);
    }
    auto& slot = lower ? lo : hi;
    if (!slot || (lower ? b > *slot : b < *slot)) slot = b;
  };
  // Draft 4 spells exclusivity as a boolean next to minimum/maximum.
  auto draft4 = [&](const char* key) {
    return s.contains(key) && s[key].is_boolean() && s[key].get<bool>();
  };
  if (s.contains("minimum")) bound("minimum", true, draft4("exclusiveMinimum"));
  if (s.contains("maximum")) bound("maximum", false, draft4("exclusiveMaximum"));
  if (s.contains("exclusiveMinimum") && !s["exclusiveMinimum"].is_boolean()) bound("exclusiveMinimum", true, true);
  if (s.contains("exclusiveMaximum") && !s["exclusiveMaximum"].is_boolean()) bound("exclusiveMaximum", false, true);
  if (!lo && !hi) return use("integer");
  if (lo && hi && *lo > *hi) fail("JSON Schema: no integer at ", ptr, " is within its minimum and maximum");
  use("space");
  return "(" + integer_range_gbnf(lo, hi, kMaxIntegerDigits) + ") space";
}

}  // namespace qkv::grammar::schema_detail

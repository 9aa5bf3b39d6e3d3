// The JSON Schema compiler's state, shared by its two halves: json_schema.cc
// (keywords, combinators, $ref, rule bookkeeping) and json_schema_types.cc
// (the bodies of objects, arrays, strings and integers).
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/grammar/json_schema.h"

namespace qkv::grammar::schema_detail {

// Ordered: properties keep the order they were declared in.
using json = nlohmann::ordered_json;

// The JSON pointer of a subschema: ptr/token (escaped), ptr/keyword/index.
std::string child(const std::string& ptr, const std::string& token);
std::string child(const std::string& ptr, const std::string& keyword, size_t index);
// A rule-name fragment (GBNF names are [a-zA-Z0-9-]+).
std::string sanitize(const std::string& s);
std::string join(const std::vector<std::string>& parts, const std::string& sep);
// atom repeated between lo and hi times (hi < 0: unbounded); "" for none.
std::string repeat(const std::string& atom, long long lo, long long hi);
// True for `true` and for objects of annotations only: they constrain nothing.
bool is_trivially_true(const json& s);

class Compiler {
 public:
  Compiler(const json& root, const SchemaLimits& limits);
  std::string run();

  // A shared primitive rule (string, number, value, ...) by name, emitted
  // with the rules it uses on first use.
  std::string use(const std::string& name);
  // The body as something usable inside a sequence: a rule name.
  std::string rule(const std::string& hint, const std::string& body, const std::string& ptr);
  // A subschema as a rule name.
  std::string visit(const json& s, const std::string& ptr, int depth, const std::string& hint);
  // A non-negative integer keyword, if present.
  std::optional<long long> count(const json& s, const char* key, const std::string& ptr) const;
  // A count the grammar enforces by repetition: at most limits.max_repeat.
  std::optional<long long> repeat_bound(const json& s, const char* key, const std::string& ptr) const;

  // Type bodies (json_schema_types.cc): sequences matching one value and a space.
  std::string object(const json& s, const std::string& ptr, int depth, const std::string& hint);
  std::string array(const json& s, const std::string& ptr, int depth, const std::string& hint);
  std::string string(const json& s, const std::string& ptr);
  std::string integer(const json& s, const std::string& ptr);

  // Marks the subschemas compiled while it lives as values inside brackets:
  // a $ref cycle through them consumes input on every turn.
  struct Bracketed {
    explicit Bracketed(Compiler& c) : c_(c) { ++c_.brackets_; }
    ~Bracketed() { --c_.brackets_; }
    Bracketed(const Bracketed&) = delete;
    Bracketed& operator=(const Bracketed&) = delete;
    Compiler& c_;
  };

 private:
  [[noreturn]] void too_big(const std::string& ptr) const;
  void add(const std::string& name, const std::string& body, const std::string& ptr);
  std::string fresh_name(const std::string& hint) const;
  const json& resolve(const std::string& fragment, const std::string& ref_text, const std::string& ptr) const;
  std::string ref(const std::string& ref_text, const std::string& ptr, int depth);
  std::string body(const json& s, const std::string& ptr, int depth, const std::string& hint);
  std::vector<std::string> constrained(const json& s, const std::string& ptr, int depth, const std::string& hint);
  std::vector<std::string> all_of(const json& subs, const std::string& ptr, int depth, const std::string& hint);
  std::vector<std::string> types_of(const json& s, const std::string& ptr) const;
  std::vector<std::string> literals(const json& s, const std::string& ptr);
  std::vector<std::string> typed(const json& s, const std::string& ptr, int depth, const std::string& hint);
  std::string additional_key(const std::vector<std::string>& names, const std::string& hint, const std::string& ptr);

  const json& root_;
  const SchemaLimits& limits_;
  std::vector<std::string> order_;              // rule names, in output order
  std::map<std::string, std::string> bodies_;   // name -> body
  std::map<std::string, std::string> by_body_;  // body -> name, to share identical rules
  std::map<std::string, std::string> refs_;     // $ref fragment -> rule name
  std::map<std::string, int> open_refs_;        // refs being compiled -> brackets_ when they began
  int brackets_ = 0;                            // values inside an object or array being compiled
  std::set<std::string> taken_;                 // names in use or reserved for primitives
  std::set<std::string> emitted_;               // primitives already added
  size_t bytes_ = 0;
};

}  // namespace qkv::grammar::schema_detail

// The values a Jinja template computes with, with Python's semantics where
// templates can see them: truthiness, equality, str() and repr() formatting,
// and json.dumps (tojson). Dicts keep insertion order, as Python's do.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace qkv::jinja {

class Value;
struct Interp;

// Positional and keyword arguments of a call, filter or test.
struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};

using List = std::vector<Value>;
struct Dict;
using NativeFn = std::function<Value(Interp&, Args&)>;

class Value {
 public:
  enum Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunc };

  Value() = default;  // undefined
  static Value none() { Value v; v.kind_ = kNone; return v; }
  static Value undefined(std::string hint) { Value v; v.s_ = std::make_shared<std::string>(std::move(hint)); return v; }
  Value(bool b) : kind_(kBool), i_(b) {}
  Value(int64_t i) : kind_(kInt), i_(i) {}
  Value(int i) : kind_(kInt), i_(i) {}
  Value(double f) : kind_(kFloat), f_(f) {}
  Value(std::string s) : kind_(kString), s_(std::make_shared<std::string>(std::move(s))) {}
  Value(const char* s) : Value(std::string(s)) {}
  static Value list(List items = {});
  static Value dict();
  static Value namespace_();
  static Value func(std::string name, NativeFn fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == kUndefined; }
  bool is_none() const { return kind_ == kNone; }
  bool is_string() const { return kind_ == kString; }
  bool is_number() const { return kind_ == kInt || kind_ == kFloat; }  // bools are not, as in Jinja
  bool is_list() const { return kind_ == kList; }
  bool is_dict() const { return kind_ == kDict; }
  bool is_func() const { return kind_ == kFunc; }
  bool is_namespace() const;
  // Lists made by map / select / reject are Python generators in Jinja: tojson refuses them.
  bool is_generator() const { return generator_; }
  Value as_generator() const { Value v = *this; v.generator_ = true; return v; }

  bool as_bool() const { return i_ != 0; }
  int64_t as_int() const { return i_; }
  double as_float() const { return kind_ == kFloat ? f_ : static_cast<double>(i_); }
  const std::string& str_ref() const { return *s_; }  // kString only
  List& items() const { return *list_; }               // kList only
  Dict& dict_ref() const { return *dict_; }            // kDict only
  const std::string& undefined_hint() const;           // kUndefined: what was missing
  const std::string& func_name() const { return *s_; }
  Value call(Interp& in, Args& args) const { return (*fn_)(in, args); }

  bool truthy() const;
  // Python's str(): what {{ x }} prints (undefined prints nothing).
  std::string str() const;
  // Python's repr(): how values print inside lists and dicts.
  std::string repr() const;
  // Jinja's name of the type, for error messages ("str object", "dict object").
  std::string type_name() const;
  bool operator==(const Value& o) const;

 private:
  Kind kind_ = kUndefined;
  bool generator_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<std::string> s_;  // string text, undefined hint, function name
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<NativeFn> fn_;
};

struct Dict {
  std::vector<std::pair<std::string, Value>> entries;
  bool is_namespace = false;
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value v);
};

// Python's repr() of a float ("1.0", "0.1", "1e-05", "1e+16", "nan", "inf").
std::string float_repr(double f);
// Python's json.dumps(v, ensure_ascii=False, indent, separators, sort_keys);
// indent < 0 means None. Throws on values JSON cannot hold.
struct JsonStyle {
  int indent = -1;
  std::string item_sep, key_sep;  // empty: Python's defaults for the indent
  bool sort_keys = false;
};
std::string to_json(const Value& v, const JsonStyle& style);

// UTF-8 helpers: code points of a string and back (invalid bytes map to themselves).
std::vector<uint32_t> code_points(const std::string& s);
std::string from_code_points(const uint32_t* cp, size_t n);

}  // namespace qkv::jinja

// The interpreter's state, shared by the renderer and the builtins table.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/jinja/ast.h"
#include "runtime/jinja/jinja.h"

namespace qkv::jinja {

using Scope = std::unordered_map<std::string, Value>;
using Stack = std::vector<std::shared_ptr<Scope>>;

struct Interp {
  Stack stack;
  // Every scope made while rendering. A macro's closure holds the scopes it
  // was defined in, and the macro is a value in one of them: a cycle of
  // shared_ptrs. Template::render clears the scopes still alive at its end.
  std::vector<std::weak_ptr<Scope>> made;
  std::shared_ptr<Scope> new_scope() {
    auto sc = std::make_shared<Scope>();
    made.push_back(sc);
    return sc;
  }
  Limits limits;
  int call_depth = 0;
  int64_t steps = 0;
  Pos pos;  // of the expression being evaluated, for error messages

  [[noreturn]] void error(const std::string& what) const {
    fail("template line ", pos.line, " column ", pos.col, ": ", what);
  }
  void step() {
    if (++steps > limits.max_steps) error("template exceeds its step budget (a runaway loop?)");
  }
  Value lookup(const std::string& name) const;
};

using FilterFn = Value (*)(Interp&, const Value&, Args&);
using TestFn = bool (*)(Interp&, const Value&, Args&);

const FilterFn* find_filter(const std::string& name);
const TestFn* find_test(const std::string& name);
// A method of a str / dict / list value bound to it, or undefined.
Value bound_method(Interp& in, const Value& self, const std::string& name);
// range, namespace, dict, raise_exception, strftime_now.
void add_globals(Scope* globals);
// Items of an iterable (list, dict keys, string characters); undefined is empty.
List iterate(Interp& in, const Value& v);
// Attribute access as Jinja does it (obj.name) and subscripting (obj[key]).
Value get_attr(Interp& in, const Value& obj, const std::string& name);
Value get_item(Interp& in, const Value& obj, const Value& key);

// Argument helpers: the i-th positional or the keyword `name`, else a default.
const Value* arg(Args& a, size_t i, const char* name);

}  // namespace qkv::jinja

// Evaluates a parsed template: statements write to the output, expressions
// compute Values with Python's operator semantics.
#include <cmath>
#include <limits>

#include "runtime/jinja/interp.h"

namespace qkv::jinja {

Value Interp::lookup(const std::string& name) const {
  for (auto it = stack.rbegin(); it != stack.rend(); ++it) {
    auto f = (*it)->find(name);
    if (f != (*it)->end()) return f->second;
  }
  return Value::undefined("'" + name + "' is undefined");
}

namespace {

enum class Flow { kNormal, kBreak, kContinue };

struct Renderer {
  Interp& in;
  std::string* out;

  void emit(const std::string& s) {
    if (out->size() + s.size() > in.limits.max_output)
      in.error("rendered output exceeds " + std::to_string(in.limits.max_output) + " bytes");
    *out += s;
  }

  Flow body(const Body& b) {
    for (const auto& s : b) {
      const Flow f = stmt(*s);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  void assign(const std::string& name, Value v) { (*in.stack.back())[name] = std::move(v); }

  void assign_targets(const std::vector<std::string>& targets, const Value& v) {
    if (targets.size() == 1) {
      assign(targets[0], v);
      return;
    }
    List items = iterate(in, v);
    if (items.size() != targets.size())
      in.error("cannot unpack " + std::to_string(items.size()) + " values into " + std::to_string(targets.size()) +
               " names");
    for (size_t i = 0; i < targets.size(); ++i) assign(targets[i], items[i]);
  }

  std::string capture(const Body& b) {
    std::string buf;
    std::string* saved = out;
    out = &buf;
    body(b);
    out = saved;
    return buf;
  }

  Value make_macro(const Stmt& s, Stack closure, bool is_caller) {
    const Stmt* sp = &s;
    return Value::func(is_caller ? "caller" : s.text, [sp, closure, this](Interp& in2, Args& a) -> Value {
      if (++in2.call_depth > in2.limits.max_call_depth) in2.error("macro calls nested too deeply");
      Stack saved = std::move(in2.stack);
      in2.stack = closure;
      in2.stack.push_back(in2.new_scope());
      Scope& sc = *in2.stack.back();
      if (a.pos.size() > sp->targets.size())
        in2.error("macro '" + sp->text + "' takes " + std::to_string(sp->targets.size()) + " arguments");
      for (size_t i = 0; i < sp->targets.size(); ++i) {
        const Value* v = arg(a, i, sp->targets[i].c_str());
        if (v) sc[sp->targets[i]] = *v;
        else if (sp->defaults[i]) sc[sp->targets[i]] = eval(*sp->defaults[i]);
        else sc[sp->targets[i]] = Value::undefined("'" + sp->targets[i] + "' is undefined");
      }
      for (const auto& kv : a.kw) {
        bool known = false;
        for (const auto& t : sp->targets) known = known || t == kv.first;
        if (!known && kv.first != "caller") in2.error("macro '" + sp->text + "' has no argument '" + kv.first + "'");
        if (kv.first == "caller") sc["caller"] = kv.second;
      }
      std::string text = capture(sp->bodies[0]);
      in2.stack = std::move(saved);
      --in2.call_depth;
      return Value(text);
    });
  }

  Flow stmt(const Stmt& s) {
    in.pos = s.pos;
    in.step();
    switch (s.kind) {
      case Stmt::kText: emit(s.text); return Flow::kNormal;
      case Stmt::kOutput: emit(eval(*s.expr).str()); return Flow::kNormal;
      case Stmt::kIf:
        for (size_t i = 0; i < s.conds.size(); ++i)
          if (eval(*s.conds[i]).truthy()) return body(s.bodies[i]);
        if (s.bodies.size() > s.conds.size()) return body(s.bodies.back());
        return Flow::kNormal;
      case Stmt::kFor: return for_loop(s);
      case Stmt::kSet: {
        Value v = eval(*s.expr);
        if (!s.text.empty()) {
          Value ns = in.lookup(s.targets[0]);
          in.pos = s.pos;
          if (!ns.is_namespace()) in.error("cannot assign attribute '" + s.text + "' on a non-namespace object");
          ns.dict_ref().set(s.text, v);
        } else {
          assign_targets(s.targets, v);
        }
        return Flow::kNormal;
      }
      case Stmt::kSetBlock: assign(s.targets[0], Value(capture(s.bodies[0]))); return Flow::kNormal;
      case Stmt::kMacro: {
        Stack closure = in.stack;
        assign(s.text, make_macro(s, closure, false));
        return Flow::kNormal;
      }
      case Stmt::kCallBlock: {
        Stmt caller;  // the block as a macro with the call's parameters
        Value c = make_macro(s, in.stack, true);
        const Expr& call = *s.expr;
        Value fn = eval(*call.kids[0]);
        Args a = eval_args(call, 1);
        a.kw.emplace_back("caller", c);
        in.pos = s.pos;
        if (!fn.is_func()) in.error("call block on something that is not a macro");
        emit(fn.call(in, a).str());
        return Flow::kNormal;
      }
      case Stmt::kFilterBlock: {
        Value text(capture(s.bodies[0]));
        emit(apply_filter(*s.expr, text).str());
        return Flow::kNormal;
      }
      case Stmt::kBreak: return Flow::kBreak;
      case Stmt::kContinue: return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  Flow for_loop(const Stmt& s) {
    List all = iterate(in, eval(*s.expr));
    in.stack.push_back(in.new_scope());
    List items;
    if (s.cond) {
      for (const Value& v : all) {
        assign_targets(s.targets, v);
        if (eval(*s.cond).truthy()) items.push_back(v);
      }
    } else {
      items = std::move(all);
    }
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      in.step();
      Value loop = Value::dict();
      Dict& d = loop.dict_ref();
      d.set("index", Value(i + 1));
      d.set("index0", Value(i));
      d.set("revindex", Value(n - i));
      d.set("revindex0", Value(n - i - 1));
      d.set("first", Value(i == 0));
      d.set("last", Value(i == n - 1));
      d.set("length", Value(n));
      d.set("depth", Value(1));
      d.set("depth0", Value(0));
      d.set("previtem", i > 0 ? items[i - 1] : Value::undefined("there is no previous item"));
      d.set("nextitem", i + 1 < n ? items[i + 1] : Value::undefined("there is no next item"));
      d.set("cycle", Value::func("loop.cycle", [i](Interp& in2, Args& a) -> Value {
              if (a.pos.empty()) in2.error("loop.cycle needs at least one argument");
              return a.pos[static_cast<size_t>(i) % a.pos.size()];
            }));
      assign("loop", loop);
      assign_targets(s.targets, items[i]);
      if (body(s.bodies[0]) == Flow::kBreak) break;
    }
    in.stack.pop_back();
    if (n == 0 && s.bodies.size() > 1) return body(s.bodies[1]);
    return Flow::kNormal;
  }

  Args eval_args(const Expr& e, size_t from) {
    Args a;
    const size_t nkw = e.ops.size();
    const size_t npos = e.kids.size() - from - nkw;
    for (size_t i = 0; i < npos; ++i) a.pos.push_back(eval(*e.kids[from + i]));
    for (size_t i = 0; i < nkw; ++i) a.kw.emplace_back(e.ops[i], eval(*e.kids[from + npos + i]));
    return a;
  }

  Value apply_filter(const Expr& e, const Value& input) {
    const FilterFn* f = find_filter(e.name);
    in.pos = e.pos;
    if (!f) in.error("no filter named '" + e.name + "'");
    Args a = eval_args(e, 1);
    in.pos = e.pos;
    return (*f)(in, input, a);
  }

  [[noreturn]] void undefined_error(const Value& v) { in.error(v.undefined_hint()); }

  Value arith(const std::string& op, const Value& l, const Value& r) {
    if (l.is_undefined()) undefined_error(l);
    if (r.is_undefined()) undefined_error(r);
    auto bad = [&]() -> Value {
      in.error("unsupported operand type(s) for " + op + ": '" + l.type_name() + "' and '" + r.type_name() + "'");
    };
    const bool nums = (l.is_number() || l.kind() == Value::kBool) && (r.is_number() || r.kind() == Value::kBool);
    const bool ints = nums && l.kind() != Value::kFloat && r.kind() != Value::kFloat;
    if (op == "+") {
      if (l.is_string() && r.is_string()) return Value(l.str_ref() + r.str_ref());
      if (l.is_list() && r.is_list()) {
        List out = l.items();
        out.insert(out.end(), r.items().begin(), r.items().end());
        return Value::list(std::move(out));
      }
      if (ints) {
        int64_t o;
        if (__builtin_add_overflow(l.as_int(), r.as_int(), &o)) in.error("integer overflow in +");
        return Value(o);
      }
      if (nums) return Value(l.as_float() + r.as_float());
      return bad();
    }
    if (op == "*") {
      const Value* seq = l.is_string() || l.is_list() ? &l : r.is_string() || r.is_list() ? &r : nullptr;
      const Value* cnt = seq == &l ? &r : &l;
      if (seq && cnt->kind() == Value::kInt) {
        const int64_t k = std::max<int64_t>(0, cnt->as_int());
        const size_t unit = seq->is_string() ? seq->str_ref().size() : seq->items().size();
        if (unit && static_cast<uint64_t>(k) > in.limits.max_output / unit) in.error("repetition result too large");
        if (seq->is_string()) {
          std::string o;
          for (int64_t i = 0; i < k; ++i) o += seq->str_ref();
          return Value(o);
        }
        List o;
        for (int64_t i = 0; i < k; ++i) o.insert(o.end(), seq->items().begin(), seq->items().end());
        return Value::list(std::move(o));
      }
      if (ints) {
        int64_t o;
        if (__builtin_mul_overflow(l.as_int(), r.as_int(), &o)) in.error("integer overflow in *");
        return Value(o);
      }
      if (nums) return Value(l.as_float() * r.as_float());
      return bad();
    }
    if (!nums) return bad();
    if (op == "-") {
      if (ints) {
        int64_t o;
        if (__builtin_sub_overflow(l.as_int(), r.as_int(), &o)) in.error("integer overflow in -");
        return Value(o);
      }
      return Value(l.as_float() - r.as_float());
    }
    if (op == "/") {
      if (r.as_float() == 0) in.error("division by zero");
      return Value(l.as_float() / r.as_float());
    }
    if (op == "//" || op == "%") {
      if (ints) {
        const int64_t a = l.as_int(), b = r.as_int();
        if (b == 0) in.error("integer division or modulo by zero");
        if (a == std::numeric_limits<int64_t>::min() && b == -1) in.error("integer overflow in " + op);
        int64_t q = a / b, m = a % b;
        if (m != 0 && ((m < 0) != (b < 0))) {
          --q;
          m += b;
        }
        return op == "//" ? Value(q) : Value(m);
      }
      const double a = l.as_float(), b = r.as_float();
      if (b == 0) in.error("float division or modulo by zero");
      const double q = std::floor(a / b);
      return op == "//" ? Value(q) : Value(a - q * b);
    }
    if (op == "**") {
      if (ints && r.as_int() >= 0) {
        int64_t o = 1;
        for (int64_t i = 0; i < r.as_int(); ++i) {
          if (__builtin_mul_overflow(o, l.as_int(), &o)) in.error("integer overflow in **");
          if (o == 0 || o == 1) break;
        }
        return Value(o);
      }
      return Value(std::pow(l.as_float(), r.as_float()));
    }
    return bad();
  }

  bool less(const Value& l, const Value& r, const std::string& op) {
    const bool ln = l.is_number() || l.kind() == Value::kBool, rn = r.is_number() || r.kind() == Value::kBool;
    if (ln && rn) return l.as_float() < r.as_float();
    if (l.is_string() && r.is_string()) return l.str_ref() < r.str_ref();
    if (l.is_undefined()) undefined_error(l);
    if (r.is_undefined()) undefined_error(r);
    in.error("'" + op + "' not supported between instances of '" + l.type_name() + "' and '" + r.type_name() + "'");
  }

  bool contains(const Value& hay, const Value& needle) {
    if (hay.is_string()) {
      if (!needle.is_string()) in.error("'in <string>' requires string as left operand, not " + needle.type_name());
      return hay.str_ref().find(needle.str_ref()) != std::string::npos;
    }
    if (hay.is_dict()) return needle.is_string() && hay.dict_ref().find(needle.str_ref()) != nullptr;
    if (hay.is_list()) {
      for (const Value& v : hay.items())
        if (v == needle) return true;
      return false;
    }
    if (hay.is_undefined()) return false;
    in.error("argument of type '" + hay.type_name() + "' is not iterable");
  }

  Value eval(const Expr& e) {
    in.pos = e.pos;
    switch (e.kind) {
      case Expr::kLiteral: return e.value;
      case Expr::kName: return in.lookup(e.name);
      case Expr::kAttr: {
        Value o = eval(*e.kids[0]);
        in.pos = e.pos;
        return get_attr(in, o, e.name);
      }
      case Expr::kItem: {
        Value o = eval(*e.kids[0]);
        Value k = eval(*e.kids[1]);
        in.pos = e.pos;
        return get_item(in, o, k);
      }
      case Expr::kSlice: return slice(e);
      case Expr::kCall: {
        Value fn = eval(*e.kids[0]);
        Args a = eval_args(e, 1);
        in.pos = e.pos;
        if (fn.is_undefined()) undefined_error(fn);
        if (!fn.is_func()) in.error("'" + fn.type_name() + "' is not callable");
        in.step();
        return fn.call(in, a);
      }
      case Expr::kFilter: return apply_filter(e, eval(*e.kids[0]));
      case Expr::kTest: {
        Value v = eval(*e.kids[0]);
        const TestFn* t = find_test(e.name);
        in.pos = e.pos;
        if (!t) in.error("no test named '" + e.name + "'");
        Args a = eval_args(e, 1);
        in.pos = e.pos;
        return Value((*t)(in, v, a) != e.negated);
      }
      case Expr::kNeg: {
        Value v = eval(*e.kids[0]);
        if (v.kind() == Value::kInt) {
          if (v.as_int() == std::numeric_limits<int64_t>::min()) in.error("integer overflow in unary -");
          return Value(-v.as_int());
        }
        if (v.kind() == Value::kFloat) return Value(-v.as_float());
        if (v.kind() == Value::kBool) return Value(static_cast<int64_t>(-v.as_int()));
        if (v.is_undefined()) undefined_error(v);
        in.error("bad operand type for unary -: '" + v.type_name() + "'");
      }
      case Expr::kNot: return Value(!eval(*e.kids[0]).truthy());
      case Expr::kBinary: {
        if (e.name == "and") {
          Value l = eval(*e.kids[0]);
          return l.truthy() ? eval(*e.kids[1]) : l;
        }
        if (e.name == "or") {
          Value l = eval(*e.kids[0]);
          return l.truthy() ? l : eval(*e.kids[1]);
        }
        Value l = eval(*e.kids[0]);
        Value r = eval(*e.kids[1]);
        in.pos = e.pos;
        if (e.name == "~") {
          std::string s = l.str() + r.str();
          if (s.size() > in.limits.max_output) in.error("string result too large");
          return Value(s);
        }
        return arith(e.name, l, r);
      }
      case Expr::kCompare: {
        Value l = eval(*e.kids[0]);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value r = eval(*e.kids[i + 1]);
          in.pos = e.pos;
          const std::string& op = e.ops[i];
          bool ok;
          if (op == "==") ok = l == r;
          else if (op == "!=") ok = !(l == r);
          else if (op == "<") ok = less(l, r, op);
          else if (op == ">") ok = less(r, l, op);
          else if (op == "<=") ok = !less(r, l, op);
          else if (op == ">=") ok = !less(l, r, op);
          else if (op == "in") ok = contains(r, l);
          else ok = !contains(r, l);
          if (!ok) return Value(false);
          l = r;
        }
        return Value(true);
      }
      case Expr::kCond: {
        if (eval(*e.kids[0]).truthy()) return eval(*e.kids[1]);
        if (e.kids[2]) return eval(*e.kids[2]);
        return Value::undefined("the inline if expression evaluated to false and no else section was defined");
      }
      case Expr::kList:
      case Expr::kTuple: {
        List l;
        for (const auto& k : e.kids) l.push_back(eval(*k));
        return Value::list(std::move(l));
      }
      case Expr::kDict: {
        Value d = Value::dict();
        for (size_t i = 0; i + 1 < e.kids.size(); i += 2) {
          Value k = eval(*e.kids[i]);
          Value v = eval(*e.kids[i + 1]);
          in.pos = e.kids[i]->pos;
          if (!k.is_string()) in.error("dict keys must be strings here, not " + k.type_name());
          d.dict_ref().set(k.str_ref(), v);
        }
        return d;
      }
    }
    in.error("internal: unknown expression kind");
  }

  Value slice(const Expr& e) {
    Value o = eval(*e.kids[0]);
    int64_t idx[3] = {0, 0, 1};
    bool given[3] = {false, false, false};
    for (int k = 0; k < 3; ++k) {
      if (!e.kids[k + 1]) continue;
      Value v = eval(*e.kids[k + 1]);
      if (v.is_none()) continue;
      in.pos = e.pos;
      if (v.kind() != Value::kInt) in.error("slice indices must be integers or None");
      idx[k] = v.as_int();
      given[k] = true;
    }
    in.pos = e.pos;
    if (idx[2] == 0) in.error("slice step cannot be zero");
    std::vector<uint32_t> cps;
    int64_t n;
    if (o.is_string()) {
      cps = code_points(o.str_ref());
      n = static_cast<int64_t>(cps.size());
    } else if (o.is_list()) {
      n = static_cast<int64_t>(o.items().size());
    } else {
      if (o.is_undefined()) undefined_error(o);
      in.error("'" + o.type_name() + "' cannot be sliced");
    }
    const int64_t step = idx[2];
    auto norm = [&](int64_t v, bool g, int64_t def) {
      if (!g) return def;
      if (v < 0) v += n;
      if (step > 0) return std::clamp<int64_t>(v, 0, n);
      return std::clamp<int64_t>(v, -1, n - 1);
    };
    const int64_t start = norm(idx[0], given[0], step > 0 ? 0 : n - 1);
    const int64_t stop = norm(idx[1], given[1], step > 0 ? n : -1);
    std::vector<int64_t> picks;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) picks.push_back(i);
    if (o.is_string()) {
      std::vector<uint32_t> sel;
      for (int64_t i : picks) sel.push_back(cps[i]);
      return Value(from_code_points(sel.data(), sel.size()));
    }
    List l;
    for (int64_t i : picks) l.push_back(o.items()[i]);
    return Value::list(std::move(l));
  }
};

}  // namespace

Template::Template(const std::string& source) : prog_(std::make_shared<Program>(parse(source))) {}

std::string Template::render(const Value& context, const Limits& limits) const {
  Interp in;
  in.limits = limits;
  struct BreakCycles {  // on return and on a template error alike
    Interp& in;
    ~BreakCycles() {
      in.stack.clear();
      for (const auto& w : in.made)
        if (auto sc = w.lock()) sc->clear();
    }
  } break_cycles{in};
  auto globals = in.new_scope();
  add_globals(globals.get());
  if (context.is_dict())
    for (const auto& e : context.dict_ref().entries) (*globals)[e.first] = e.second;
  in.stack.push_back(globals);
  in.stack.push_back(in.new_scope());
  std::string out;
  Renderer r{in, &out};
  r.body(prog_->body);
  return out;
}

}  // namespace qkv::jinja

// Jinja's filters, tests, global functions and the str / dict methods chat
// templates call, each a row of a table.
#include <algorithm>
#include <cmath>
#include <ctime>
#include <cstring>

#include "runtime/jinja/interp.h"

namespace qkv::jinja {

const Value* arg(Args& a, size_t i, const char* name) {
  if (i < a.pos.size()) return &a.pos[i];
  for (auto& kv : a.kw)
    if (kv.first == name) return &kv.second;
  return nullptr;
}

namespace {

bool is_ws(uint32_t c) { return c == ' ' || (c >= '\t' && c <= '\r') || c == 0x1c || c == 0x1d || c == 0x1e || c == 0x1f || c == 0x85 || c == 0xa0 || c == 0x3000 || c == 0x2028 || c == 0x2029 || (c >= 0x2000 && c <= 0x200a); }

std::string need_str(Interp& in, const Value& v, const char* what) {
  if (v.is_string()) return v.str_ref();
  if (v.is_undefined()) in.error(v.undefined_hint());
  in.error(std::string(what) + " expects a string, got " + v.type_name());
}

std::string strip(const std::string& s, const Value* chars, bool left, bool right) {
  std::vector<uint32_t> cp = code_points(s);
  std::vector<uint32_t> set;
  const bool custom = chars && chars->is_string();
  if (custom) set = code_points(chars->str_ref());
  auto drop = [&](uint32_t c) { return custom ? std::find(set.begin(), set.end(), c) != set.end() : is_ws(c); };
  size_t b = 0, e = cp.size();
  if (left)
    while (b < e && drop(cp[b])) ++b;
  if (right)
    while (e > b && drop(cp[e - 1])) --e;
  return from_code_points(cp.data() + b, e - b);
}

std::string map_ascii(std::string s, int (*f)(int)) {
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x80) c = static_cast<char>(f(c));
  return s;
}

std::string capitalize(const std::string& s) {
  std::string out = map_ascii(s, [](int c) { return std::tolower(c); });
  if (!out.empty() && static_cast<unsigned char>(out[0]) < 0x80) out[0] = static_cast<char>(std::toupper(out[0]));
  return out;
}

std::string title(const std::string& s) {  // Python's str.title on ASCII letters
  std::string out = s;
  bool prev_cased = false;
  for (char& c : out) {
    const bool alpha = std::isalpha(static_cast<unsigned char>(c)) && static_cast<unsigned char>(c) < 0x80;
    if (alpha) c = static_cast<char>(prev_cased ? std::tolower(c) : std::toupper(c));
    prev_cased = alpha;
  }
  return out;
}

std::string replace(Interp& in, const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  std::string out;
  if (from.empty()) {
    std::vector<uint32_t> cp = code_points(s);
    int64_t done = 0;
    for (size_t i = 0; i <= cp.size(); ++i) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      if (i < cp.size()) out += from_code_points(&cp[i], 1);
      if (out.size() > in.limits.max_output) in.error("replace result too large");
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t f = s.find(from, pos);
    if (f == std::string::npos) break;
    out.append(s, pos, f - pos);
    out += to;
    pos = f + from.size();
    ++done;
    if (out.size() > in.limits.max_output) in.error("replace result too large");
  }
  out.append(s, pos, std::string::npos);
  return out;
}

List split(const std::string& s, const Value* sep, int64_t maxsplit) {
  List out;
  if (!sep || sep->is_none()) {
    std::vector<uint32_t> cp = code_points(s);
    size_t i = 0;
    while (true) {
      while (i < cp.size() && is_ws(cp[i])) ++i;
      if (i >= cp.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        size_t e = cp.size();
        while (e > i && is_ws(cp[e - 1])) --e;
        out.push_back(Value(from_code_points(cp.data() + i, e - i)));
        break;
      }
      size_t j = i;
      while (j < cp.size() && !is_ws(cp[j])) ++j;
      out.push_back(Value(from_code_points(cp.data() + i, j - i)));
      i = j;
    }
    return out;
  }
  const std::string& d = sep->str_ref();
  size_t pos = 0;
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    const size_t f = s.find(d, pos);
    if (f == std::string::npos) break;
    out.push_back(Value(s.substr(pos, f - pos)));
    pos = f + d.size();
  }
  out.push_back(Value(s.substr(pos)));
  return out;
}

int64_t int_arg(Interp& in, const Value* v, int64_t def) {
  if (!v || v->is_none()) return def;
  if (v->kind() != Value::kInt && v->kind() != Value::kBool) in.error("expected an integer argument, got " + v->type_name());
  return v->as_int();
}

bool prefix_test(Interp& in, const std::string& s, const Value* p, bool start) {
  if (!p) in.error(std::string(start ? "startswith" : "endswith") + " needs an argument");
  List opts = p->is_list() ? p->items() : List{*p};
  for (const Value& o : opts) {
    const std::string t = need_str(in, o, start ? "startswith" : "endswith");
    if (t.size() <= s.size() && (start ? s.compare(0, t.size(), t) == 0 : s.compare(s.size() - t.size(), t.size(), t) == 0))
      return true;
  }
  return false;
}

Value str_method(Interp& in, const std::string& s, const std::string& name, Args& a) {
  if (name == "startswith") return Value(prefix_test(in, s, arg(a, 0, "prefix"), true));
  if (name == "endswith") return Value(prefix_test(in, s, arg(a, 0, "suffix"), false));
  if (name == "strip") return Value(strip(s, arg(a, 0, "chars"), true, true));
  if (name == "lstrip") return Value(strip(s, arg(a, 0, "chars"), true, false));
  if (name == "rstrip") return Value(strip(s, arg(a, 0, "chars"), false, true));
  if (name == "split") return Value::list(split(s, arg(a, 0, "sep"), int_arg(in, arg(a, 1, "maxsplit"), -1)));
  if (name == "upper") return Value(map_ascii(s, [](int c) { return std::toupper(c); }));
  if (name == "lower") return Value(map_ascii(s, [](int c) { return std::tolower(c); }));
  if (name == "title") return Value(title(s));
  if (name == "capitalize") return Value(capitalize(s));
  if (name == "replace") {
    const Value* f = arg(a, 0, "old");
    const Value* t = arg(a, 1, "new");
    if (!f || !t) in.error("replace needs two arguments");
    return Value(replace(in, s, need_str(in, *f, "replace"), need_str(in, *t, "replace"), int_arg(in, arg(a, 2, "count"), -1)));
  }
  if (name == "find" || name == "count") {
    const Value* f = arg(a, 0, "sub");
    if (!f) in.error(name + " needs an argument");
    const std::string t = need_str(in, *f, name.c_str());
    if (name == "find") {
      const size_t p = s.find(t);
      return Value(p == std::string::npos ? int64_t{-1} : static_cast<int64_t>(code_points(s.substr(0, p)).size()));
    }
    int64_t n = 0;
    if (t.empty()) return Value(static_cast<int64_t>(code_points(s).size()) + 1);
    for (size_t p = s.find(t); p != std::string::npos; p = s.find(t, p + t.size())) ++n;
    return Value(n);
  }
  if (name == "join") {
    const Value* l = arg(a, 0, "iterable");
    if (!l) in.error("join needs an argument");
    std::string out;
    bool first = true;
    for (const Value& v : iterate(in, *l)) {
      out += (first ? "" : s) + need_str(in, v, "str.join");
      first = false;
    }
    return Value(out);
  }
  in.error("str object has no method '" + name + "'");
}

const char* kStrMethods[] = {"startswith", "endswith", "strip", "lstrip", "rstrip", "split", "upper", "lower",
                             "title", "capitalize", "replace", "find", "count", "join"};

}  // namespace

List iterate(Interp& in, const Value& v) {
  switch (v.kind()) {
    case Value::kUndefined: return {};
    case Value::kList: return v.items();
    case Value::kDict: {
      List out;
      for (const auto& e : v.dict_ref().entries) out.push_back(Value(e.first));
      return out;
    }
    case Value::kString: {
      List out;
      std::vector<uint32_t> cp = code_points(v.str_ref());
      for (uint32_t c : cp) out.push_back(Value(from_code_points(&c, 1)));
      return out;
    }
    default: in.error("'" + v.type_name() + "' is not iterable");
  }
}

Value bound_method(Interp& in, const Value& self, const std::string& name) {
  (void)in;
  if (self.is_string()) {
    for (const char* m : kStrMethods)
      if (name == m) {
        const std::string s = self.str_ref();
        return Value::func(name, [s, name](Interp& in2, Args& a) { return str_method(in2, s, name, a); });
      }
  } else if (self.is_dict() && !self.is_namespace()) {
    if (name == "items" || name == "keys" || name == "values" || name == "get") {
      Value d = self;
      return Value::func(name, [d, name](Interp& in2, Args& a) -> Value {
        const Dict& dd = d.dict_ref();
        if (name == "get") {
          const Value* k = arg(a, 0, "key");
          if (!k) in2.error("get needs a key");
          const Value* def = arg(a, 1, "default");
          const Value* v = k->is_string() ? dd.find(k->str_ref()) : nullptr;
          return v ? *v : def ? *def : Value::none();
        }
        List out;
        for (const auto& e : dd.entries) {
          if (name == "keys") out.push_back(Value(e.first));
          else if (name == "values") out.push_back(e.second);
          else out.push_back(Value::list({Value(e.first), e.second}));
        }
        return Value::list(std::move(out));
      });
    }
  }
  return Value::undefined("'" + self.type_name() + "' has no attribute '" + name + "'");
}

Value get_attr(Interp& in, const Value& obj, const std::string& name) {
  if (obj.is_undefined()) in.error(obj.undefined_hint());
  if (obj.is_dict()) {
    Value m = obj.is_namespace() ? Value() : bound_method(in, obj, name);
    if (m.is_func()) return m;
    if (const Value* v = obj.dict_ref().find(name)) return *v;
    return Value::undefined("'" + obj.type_name() + "' has no attribute '" + name + "'");
  }
  return bound_method(in, obj, name);
}

Value get_item(Interp& in, const Value& obj, const Value& key) {
  if (obj.is_undefined()) in.error(obj.undefined_hint());
  if (obj.is_dict()) {
    if (key.is_string()) {
      if (const Value* v = obj.dict_ref().find(key.str_ref())) return *v;
      Value m = bound_method(in, obj, key.str_ref());
      if (m.is_func()) return m;
    }
    return Value::undefined("'" + obj.type_name() + "' has no attribute '" + key.str() + "'");
  }
  if ((obj.is_list() || obj.is_string()) && key.kind() == Value::kInt) {
    if (obj.is_list()) {
      const int64_t n = static_cast<int64_t>(obj.items().size());
      int64_t i = key.as_int() < 0 ? key.as_int() + n : key.as_int();
      if (i >= 0 && i < n) return obj.items()[i];
    } else {
      std::vector<uint32_t> cp = code_points(obj.str_ref());
      const int64_t n = static_cast<int64_t>(cp.size());
      int64_t i = key.as_int() < 0 ? key.as_int() + n : key.as_int();
      if (i >= 0 && i < n) return Value(from_code_points(&cp[i], 1));
    }
    return Value::undefined("'" + obj.type_name() + "' has no element " + key.str());
  }
  if (key.is_string()) return get_attr(in, obj, key.str_ref());
  return Value::undefined("'" + obj.type_name() + "' has no element " + key.str());
}

namespace {

int64_t length(Interp& in, const Value& v) {
  switch (v.kind()) {
    case Value::kUndefined: return 0;
    case Value::kString: return static_cast<int64_t>(code_points(v.str_ref()).size());
    case Value::kList: return static_cast<int64_t>(v.items().size());
    case Value::kDict: return static_cast<int64_t>(v.dict_ref().entries.size());
    default: in.error("object of type '" + v.type_name() + "' has no len()");
  }
}

Value attr_path(Interp& in, const Value& v, const std::string& path) {
  Value cur = v;
  size_t pos = 0;
  while (true) {
    const size_t dot = path.find('.', pos);
    const std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    cur = digits ? get_item(in, cur, Value(static_cast<int64_t>(std::stoll(part)))) : get_item(in, cur, Value(part));
    if (dot == std::string::npos) return cur;
    if (cur.is_undefined()) return cur;
    pos = dot + 1;
  }
}

// Runs the test named by a.pos[first] with the arguments after it.
bool run_test(Interp& in, const Value& v, Args& a, size_t first) {
  if (a.pos.size() <= first) return v.truthy();
  const std::string name = need_str(in, a.pos[first], "test name");
  const TestFn* t = find_test(name);
  if (!t) in.error("no test named '" + name + "'");
  Args rest;
  rest.pos.assign(a.pos.begin() + first + 1, a.pos.end());
  return (*t)(in, v, rest);
}

Value f_select_like(Interp& in, const Value& v, Args& a, bool attr, bool keep) {
  List out;
  if (!v.truthy()) return Value::list();  // Jinja selects nothing from a false value (none, "")
  for (const Value& item : iterate(in, v)) {
    Value probe = item;
    if (attr) {
      if (a.pos.empty()) in.error("selectattr / rejectattr need an attribute name");
      probe = attr_path(in, item, need_str(in, a.pos[0], "attribute"));
    }
    if (run_test(in, probe, a, attr ? 1 : 0) == keep) out.push_back(item);
  }
  return Value::list(std::move(out)).as_generator();
}

Value f_map(Interp& in, const Value& v, Args& a) {
  List out;
  const Value* attribute = nullptr;
  for (auto& kv : a.kw)
    if (kv.first == "attribute") attribute = &kv.second;
  const Value* def = nullptr;
  for (auto& kv : a.kw)
    if (kv.first == "default") def = &kv.second;
  if (!v.truthy()) return Value::list();
  for (const Value& item : iterate(in, v)) {
    if (attribute) {
      Value r = attr_path(in, item, need_str(in, *attribute, "attribute"));
      out.push_back(r.is_undefined() && def ? *def : r);
    } else {
      if (a.pos.empty()) in.error("map needs a filter name or attribute=");
      const std::string name = need_str(in, a.pos[0], "filter name");
      const FilterFn* f = find_filter(name);
      if (!f) in.error("no filter named '" + name + "'");
      Args rest;
      rest.pos.assign(a.pos.begin() + 1, a.pos.end());
      out.push_back((*f)(in, item, rest));
    }
  }
  return Value::list(std::move(out)).as_generator();
}

Value f_tojson(Interp& in, const Value& v, Args& a) {
  JsonStyle st;
  if (const Value* i = arg(a, 1, "indent"); i && !i->is_none()) st.indent = static_cast<int>(int_arg(in, i, -1));
  if (const Value* i = arg(a, 0, "ensure_ascii"); i && i->truthy()) in.error("tojson: ensure_ascii=True is not supported");
  if (const Value* s = arg(a, 2, "separators"); s && !s->is_none()) {
    if (!s->is_list() || s->items().size() != 2) in.error("tojson: separators must be a pair of strings");
    st.item_sep = need_str(in, s->items()[0], "separators");
    st.key_sep = need_str(in, s->items()[1], "separators");
    if (st.item_sep.empty() || st.key_sep.empty()) in.error("tojson: empty separators are not supported");
  }
  if (const Value* s = arg(a, 3, "sort_keys")) st.sort_keys = s->truthy();
  if (st.indent > 64) in.error("tojson: indent too large");
  try {
    return Value(to_json(v, st));
  } catch (const Error& e) {
    in.error(e.what());
  }
}

Value f_join(Interp& in, const Value& v, Args& a) {
  const Value* d = arg(a, 0, "d");
  const Value* attribute = arg(a, 1, "attribute");
  const std::string sep = d ? d->str() : "";
  std::string out;
  bool first = true;
  for (const Value& item : iterate(in, v)) {
    out += (first ? "" : sep) + (attribute ? attr_path(in, item, attribute->str()).str() : item.str());
    first = false;
    if (out.size() > in.limits.max_output) in.error("join result too large");
  }
  return Value(out);
}

Value f_int(Interp& in, const Value& v, Args& a) {
  const Value* d = arg(a, 0, "default");
  const int64_t def = d ? int_arg(in, d, 0) : 0;
  if (v.kind() == Value::kInt || v.kind() == Value::kBool) return Value(v.as_int());
  if (v.kind() == Value::kFloat) return std::isfinite(v.as_float()) && std::fabs(v.as_float()) < 9.2e18 ? Value(static_cast<int64_t>(v.as_float())) : Value(def);
  if (v.is_string()) {
    const std::string s = strip(v.str_ref(), nullptr, true, true);
    char* end = nullptr;
    errno = 0;
    const long long r = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && end && *end == 0 && errno == 0) return Value(static_cast<int64_t>(r));
    const double f = std::strtod(s.c_str(), &end);
    if (!s.empty() && end && *end == 0 && std::isfinite(f) && std::fabs(f) < 9.2e18) return Value(static_cast<int64_t>(f));
  }
  return Value(def);
}

#define FILTER(name) []([[maybe_unused]] Interp & in, [[maybe_unused]] const Value& v, [[maybe_unused]] Args& a) -> Value
#define UNUSED (void)in, (void)a, (void)v

const std::pair<const char*, FilterFn> kFilters[] = {
    {"trim", FILTER(trim) { UNUSED; return Value(strip(v.str(), arg(a, 0, "chars"), true, true)); }},
    {"tojson", f_tojson},
    {"length", FILTER(length) { UNUSED; return Value(length(in, v)); }},
    {"count", FILTER(count) { UNUSED; return Value(length(in, v)); }},
    {"upper", FILTER(upper) { UNUSED; return Value(map_ascii(v.str(), [](int c) { return std::toupper(c); })); }},
    {"lower", FILTER(lower) { UNUSED; return Value(map_ascii(v.str(), [](int c) { return std::tolower(c); })); }},
    {"capitalize", FILTER(capitalize) { UNUSED; return Value(capitalize(v.str())); }},
    {"title", FILTER(title) { UNUSED; return Value(title(v.str())); }},
    {"replace", FILTER(replace) {
       const Value* f = arg(a, 0, "old");
       const Value* t = arg(a, 1, "new");
       if (!f || !t) in.error("replace needs two arguments");
       return Value(replace(in, v.str(), f->str(), t->str(), int_arg(in, arg(a, 2, "count"), -1)));
     }},
    {"join", f_join},
    {"items", FILTER(items) {
       UNUSED;
       if (v.is_undefined()) return Value::list();
       if (!v.is_dict()) in.error("items filter expects a mapping, got " + v.type_name());
       List out;
       for (const auto& e : v.dict_ref().entries) out.push_back(Value::list({Value(e.first), e.second}));
       return Value::list(std::move(out));
     }},
    {"default", FILTER(default) {
       const Value* d = arg(a, 0, "default_value");
       const Value* b = arg(a, 1, "boolean");
       const bool use = v.is_undefined() || (b && b->truthy() && !v.truthy());
       return use ? (d ? *d : Value("")) : v;
     }},
    {"first", FILTER(first) {
       UNUSED;
       List l = iterate(in, v);
       return l.empty() ? Value::undefined("No first item, sequence was empty.") : l.front();
     }},
    {"last", FILTER(last) {
       UNUSED;
       List l = iterate(in, v);
       return l.empty() ? Value::undefined("No last item, sequence was empty.") : l.back();
     }},
    {"list", FILTER(list) { UNUSED; return Value::list(iterate(in, v)); }},
    {"string", FILTER(string) { UNUSED; return Value(v.str()); }},
    {"int", f_int},
    {"float", FILTER(float) {
       UNUSED;
       if (v.is_number() || v.kind() == Value::kBool) return Value(v.as_float());
       if (v.is_string()) {
         char* end = nullptr;
         const std::string s = strip(v.str_ref(), nullptr, true, true);
         const double f = std::strtod(s.c_str(), &end);
         if (!s.empty() && *end == 0) return Value(f);
       }
       const Value* d = arg(a, 0, "default");
       return d ? *d : Value(0.0);
     }},
    {"abs", FILTER(abs) {
       UNUSED;
       if (v.kind() == Value::kInt) return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
       if (v.kind() == Value::kFloat) return Value(std::fabs(v.as_float()));
       in.error("bad operand type for abs(): '" + v.type_name() + "'");
     }},
    {"safe", FILTER(safe) { UNUSED; return v; }},
    {"reverse", FILTER(reverse) {
       UNUSED;
       if (v.is_string()) {
         std::vector<uint32_t> cp = code_points(v.str_ref());
         std::reverse(cp.begin(), cp.end());
         return Value(from_code_points(cp.data(), cp.size()));
       }
       List l = iterate(in, v);
       std::reverse(l.begin(), l.end());
       return Value::list(std::move(l));
     }},
    {"unique", FILTER(unique) {
       UNUSED;
       List out;
       for (const Value& x : iterate(in, v))
         if (std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
       return Value::list(std::move(out));
     }},
    {"map", f_map},
    {"select", FILTER(select) { return f_select_like(in, v, a, false, true); }},
    {"reject", FILTER(reject) { return f_select_like(in, v, a, false, false); }},
    {"selectattr", FILTER(selectattr) { return f_select_like(in, v, a, true, true); }},
    {"rejectattr", FILTER(rejectattr) { return f_select_like(in, v, a, true, false); }},
    {"indent", FILTER(indent) {
       const Value* w = arg(a, 0, "width");
       const Value* first = arg(a, 1, "first");
       const Value* blank = arg(a, 2, "blank");
       const std::string pad = w && w->is_string() ? w->str_ref() : std::string(std::clamp<int64_t>(int_arg(in, w, 4), 0, 256), ' ');
       const std::string s = v.str();
       std::string out;
       size_t pos = 0;
       bool first_line = true;
       while (pos <= s.size()) {
         size_t nl = s.find('\n', pos);
         const std::string line = s.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
         const bool is_blank = line.empty();
         if ((first_line ? (first && first->truthy()) : true) && (!is_blank || (blank && blank->truthy())))
           out += pad;
         out += line;
         first_line = false;
         if (nl == std::string::npos) break;
         out += '\n';
         pos = nl + 1;
       }
       return Value(out);
     }},
};

#define TEST(name) [](Interp & in, const Value& v, Args& a) -> bool

const Value& test_arg(Interp& in, Args& a) {
  if (a.pos.empty()) in.error("this test needs an argument");
  return a.pos[0];
}

const std::pair<const char*, TestFn> kTests[] = {
    {"defined", TEST(defined) { UNUSED; return !v.is_undefined(); }},
    {"undefined", TEST(undefined) { UNUSED; return v.is_undefined(); }},
    {"none", TEST(none) { UNUSED; return v.is_none(); }},
    {"string", TEST(string) { UNUSED; return v.is_string(); }},
    {"number", TEST(number) { UNUSED; return v.is_number() || v.kind() == Value::kBool; }},
    {"integer", TEST(integer) { UNUSED; return v.kind() == Value::kInt; }},
    {"float", TEST(float) { UNUSED; return v.kind() == Value::kFloat; }},
    {"mapping", TEST(mapping) { UNUSED; return v.is_dict() && !v.is_namespace(); }},
    {"iterable", TEST(iterable) { UNUSED; return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined(); }},
    {"sequence", TEST(sequence) { UNUSED; return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined(); }},
    {"boolean", TEST(boolean) { UNUSED; return v.kind() == Value::kBool; }},
    {"true", TEST(true) { UNUSED; return v.kind() == Value::kBool && v.as_bool(); }},
    {"false", TEST(false) { UNUSED; return v.kind() == Value::kBool && !v.as_bool(); }},
    {"callable", TEST(callable) { UNUSED; return v.is_func(); }},
    {"equalto", TEST(equalto) { return v == test_arg(in, a); }},
    {"eq", TEST(eq) { return v == test_arg(in, a); }},
    {"==", TEST(eq) { return v == test_arg(in, a); }},
    {"ne", TEST(ne) { return !(v == test_arg(in, a)); }},
    {"!=", TEST(ne) { return !(v == test_arg(in, a)); }},
    {"sameas", TEST(sameas) {
       const Value& o = test_arg(in, a);
       if (v.kind() != o.kind()) return false;
       return v.kind() == Value::kNone || v.kind() == Value::kUndefined || (v.kind() == Value::kBool && v == o) || (v.kind() != Value::kBool && v == o && !v.is_list() && !v.is_dict());
     }},
    {"in", TEST(in) {
       const Value& h = test_arg(in, a);
       if (h.is_string()) return v.is_string() && h.str_ref().find(v.str_ref()) != std::string::npos;
       if (h.is_dict()) return v.is_string() && h.dict_ref().find(v.str_ref());
       for (const Value& x : iterate(in, h))
         if (x == v) return true;
       return false;
     }},
    {"odd", TEST(odd) { UNUSED; if (v.kind() != Value::kInt) in.error("odd expects an integer"); return v.as_int() % 2 != 0; }},
    {"even", TEST(even) { UNUSED; if (v.kind() != Value::kInt) in.error("even expects an integer"); return v.as_int() % 2 == 0; }},
    {"divisibleby", TEST(divisibleby) {
       const int64_t d = int_arg(in, &test_arg(in, a), 1);
       if (d == 0 || v.kind() != Value::kInt) in.error("divisibleby needs integers and a nonzero divisor");
       return v.as_int() % d == 0;
     }},
    {"lower", TEST(lower) { UNUSED; return v.is_string() && map_ascii(v.str_ref(), [](int c) { return std::tolower(c); }) == v.str_ref(); }},
    {"upper", TEST(upper) { UNUSED; return v.is_string() && map_ascii(v.str_ref(), [](int c) { return std::toupper(c); }) == v.str_ref(); }},
};

}  // namespace

const FilterFn* find_filter(const std::string& name) {
  if (name == "d") return find_filter("default");
  for (const auto& f : kFilters)
    if (name == f.first) return &f.second;
  return nullptr;
}

const TestFn* find_test(const std::string& name) {
  for (const auto& t : kTests)
    if (name == t.first) return &t.second;
  return nullptr;
}

void add_globals(Scope* g) {
  (*g)["range"] = Value::func("range", [](Interp& in, Args& a) -> Value {
    if (a.pos.empty() || a.pos.size() > 3) in.error("range expects 1 to 3 integer arguments");
    int64_t start = 0, stop, step = 1;
    if (a.pos.size() == 1) {
      stop = int_arg(in, &a.pos[0], 0);
    } else {
      start = int_arg(in, &a.pos[0], 0);
      stop = int_arg(in, &a.pos[1], 0);
      if (a.pos.size() == 3) step = int_arg(in, &a.pos[2], 1);
    }
    if (step == 0) in.error("range() arg 3 must not be zero");
    const double n = std::ceil((static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step));
    if (n > 1e6) in.error("range too large (over 1000000 items)");
    List out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
      out.push_back(Value(i));
      if (__builtin_add_overflow(i, step, &i)) break;  // the next value would be past int64, so past stop
    }
    return Value::list(std::move(out));
  });
  (*g)["namespace"] = Value::func("namespace", [](Interp& in, Args& a) -> Value {
    Value ns = Value::namespace_();
    if (!a.pos.empty()) {
      if (!a.pos[0].is_dict()) in.error("namespace() takes a mapping or keyword arguments");
      for (const auto& e : a.pos[0].dict_ref().entries) ns.dict_ref().set(e.first, e.second);
    }
    for (const auto& kv : a.kw) ns.dict_ref().set(kv.first, kv.second);
    return ns;
  });
  (*g)["dict"] = Value::func("dict", [](Interp&, Args& a) -> Value {
    Value d = Value::dict();
    for (const auto& kv : a.kw) d.dict_ref().set(kv.first, kv.second);
    return d;
  });
  (*g)["raise_exception"] = Value::func("raise_exception", [](Interp&, Args& a) -> Value {
    throw TemplateRaise(a.pos.empty() ? std::string() : a.pos[0].str());
  });
  (*g)["strftime_now"] = Value::func("strftime_now", [](Interp& in, Args& a) -> Value {
    const Value* f = arg(a, 0, "format");
    if (!f || !f->is_string()) in.error("strftime_now needs a format string");
    if (f->str_ref().size() > 256) in.error("strftime_now format too long");
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    localtime_r(&t, &tm);
    char buf[1024];
    const size_t n = std::strftime(buf, sizeof buf, f->str_ref().c_str(), &tm);
    return Value(std::string(buf, n));
  });
}

}  // namespace qkv::jinja

#include "runtime/jinja/value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "kernels/error.h"

namespace qkv::jinja {

Value Value::list(List items) {
  Value v;
  v.kind_ = kList;
  v.list_ = std::make_shared<List>(std::move(items));
  return v;
}

Value Value::dict() {
  Value v;
  v.kind_ = kDict;
  v.dict_ = std::make_shared<Dict>();
  return v;
}

Value Value::namespace_() {
  Value v = dict();
  v.dict_->is_namespace = true;
  return v;
}

Value Value::func(std::string name, NativeFn fn) {
  Value v;
  v.kind_ = kFunc;
  v.s_ = std::make_shared<std::string>(std::move(name));
  v.fn_ = std::make_shared<NativeFn>(std::move(fn));
  return v;
}

bool Value::is_namespace() const { return kind_ == kDict && dict_->is_namespace; }

const std::string& Value::undefined_hint() const {
  static const std::string empty;
  return s_ ? *s_ : empty;
}

const Value* Dict::find(const std::string& key) const {
  for (const auto& e : entries)
    if (e.first == key) return &e.second;
  return nullptr;
}

void Dict::set(const std::string& key, Value v) {
  for (auto& e : entries)
    if (e.first == key) {
      e.second = std::move(v);
      return;
    }
  entries.emplace_back(key, std::move(v));
}

bool Value::truthy() const {
  switch (kind_) {
    case kUndefined:
    case kNone: return false;
    case kBool:
    case kInt: return i_ != 0;
    case kFloat: return f_ != 0;
    case kString: return !s_->empty();
    case kList: return !list_->empty();
    case kDict: return dict_->is_namespace || !dict_->entries.empty();
    case kFunc: return true;
  }
  return false;
}

std::string float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  if (f == 0) return std::signbit(f) ? "-0.0" : "0.0";
  char buf[64];
  for (int prec = 1; prec <= 17; ++prec) {  // the shortest digits that read back exactly
    std::snprintf(buf, sizeof buf, "%.*e", prec - 1, f);
    if (std::strtod(buf, nullptr) == f) break;
  }
  std::string e(buf);
  const bool neg = e[0] == '-';
  if (neg) e.erase(0, 1);
  const size_t epos = e.find('e');
  const int exp = std::atoi(e.c_str() + epos + 1);
  std::string digits;
  for (size_t i = 0; i < epos; ++i)
    if (e[i] != '.') digits += e[i];
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out;
  if (exp >= -5 + 1 && exp < 16) {  // Python's repr: fixed notation for 1e-4 <= |f| < 1e16
    if (exp >= 0) {
      std::string ip = digits.substr(0, std::min<size_t>(digits.size(), exp + 1));
      while (static_cast<int>(ip.size()) < exp + 1) ip += '0';
      std::string fp = digits.size() > static_cast<size_t>(exp + 1) ? digits.substr(exp + 1) : "0";
      out = ip + "." + fp;
    } else {
      out = "0." + std::string(-exp - 1, '0') + digits;
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += eb;
  }
  return neg ? "-" + out : out;
}

namespace {

std::string py_str_repr(const std::string& s) {
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == q || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + q;
}

}  // namespace

std::string Value::str() const {
  switch (kind_) {
    case kUndefined: return "";
    case kString: return *s_;
    default: return repr();
  }
}

std::string Value::repr() const {
  switch (kind_) {
    case kUndefined: return "";
    case kNone: return "None";
    case kBool: return i_ ? "True" : "False";
    case kInt: return std::to_string(i_);
    case kFloat: return float_repr(f_);
    case kString: return py_str_repr(*s_);
    case kList: {
      std::string out = "[";
      for (size_t i = 0; i < list_->size(); ++i) out += (i ? ", " : "") + (*list_)[i].repr();
      return out + "]";
    }
    case kDict: {
      std::string out = dict_->is_namespace ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& e : dict_->entries) {
        out += (first ? "" : ", ") + py_str_repr(e.first) + ": " + e.second.repr();
        first = false;
      }
      return out + (dict_->is_namespace ? "}>" : "}");
    }
    case kFunc: return "<function " + *s_ + ">";
  }
  return "";
}

std::string Value::type_name() const {
  switch (kind_) {
    case kUndefined: return "undefined";
    case kNone: return "NoneType object";
    case kBool: return "bool object";
    case kInt: return "int object";
    case kFloat: return "float object";
    case kString: return "str object";
    case kList: return "list object";
    case kDict: return dict_->is_namespace ? "Namespace object" : "dict object";
    case kFunc: return "function object";
  }
  return "object";
}

bool Value::operator==(const Value& o) const {
  if (is_number() || kind_ == kBool) {
    if (!(o.is_number() || o.kind_ == kBool)) return false;
    if (kind_ == kFloat || o.kind_ == kFloat) return as_float() == o.as_float();
    return i_ == o.i_;
  }
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case kUndefined:
    case kNone: return true;
    case kString: return *s_ == *o.s_;
    case kList:
      if (list_->size() != o.list_->size()) return false;
      for (size_t i = 0; i < list_->size(); ++i)
        if (!((*list_)[i] == (*o.list_)[i])) return false;
      return true;
    case kDict: {
      if (dict_ == o.dict_) return true;
      if (dict_->entries.size() != o.dict_->entries.size()) return false;
      for (const auto& e : dict_->entries) {
        const Value* v = o.dict_->find(e.first);
        if (!v || !(*v == e.second)) return false;
      }
      return true;
    }
    case kFunc: return fn_ == o.fn_;
    default: return false;
  }
}

namespace {

void json_string(const std::string& s, std::string* out) {
  *out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          *out += b;
        } else {
          *out += static_cast<char>(c);
        }
    }
  }
  *out += '"';
}

void json_value(const Value& v, const JsonStyle& st, int depth, std::string* out) {
  if (depth > 200) fail("tojson: nesting deeper than 200");
  const std::string item_sep = !st.item_sep.empty() ? st.item_sep : (st.indent >= 0 ? "," : ", ");
  const std::string key_sep = !st.key_sep.empty() ? st.key_sep : ": ";
  auto newline = [&](int d) {
    if (st.indent >= 0) *out += "\n" + std::string(static_cast<size_t>(st.indent) * d, ' ');
  };
  switch (v.kind()) {
    case Value::kNone: *out += "null"; return;
    case Value::kBool: *out += v.as_bool() ? "true" : "false"; return;
    case Value::kInt: *out += std::to_string(v.as_int()); return;
    case Value::kFloat: {
      const double f = v.as_float();
      *out += std::isnan(f) ? "NaN" : std::isinf(f) ? (f < 0 ? "-Infinity" : "Infinity") : float_repr(f);
      return;
    }
    case Value::kString: json_string(v.str_ref(), out); return;
    case Value::kList: {
      if (v.is_generator()) fail("tojson: Object of type generator is not JSON serializable");
      const List& l = v.items();
      if (l.empty()) {
        *out += "[]";
        return;
      }
      *out += '[';
      for (size_t i = 0; i < l.size(); ++i) {
        if (i) *out += item_sep;
        newline(depth + 1);
        json_value(l[i], st, depth + 1, out);
      }
      newline(depth);
      *out += ']';
      return;
    }
    case Value::kDict: {
      if (v.is_namespace()) fail("tojson: Object of type Namespace is not JSON serializable");
      std::vector<const std::pair<std::string, Value>*> es;
      for (const auto& e : v.dict_ref().entries) es.push_back(&e);
      if (st.sort_keys)
        std::stable_sort(es.begin(), es.end(), [](auto* a, auto* b) { return a->first < b->first; });
      if (es.empty()) {
        *out += "{}";
        return;
      }
      *out += '{';
      for (size_t i = 0; i < es.size(); ++i) {
        if (i) *out += item_sep;
        newline(depth + 1);
        json_string(es[i]->first, out);
        *out += key_sep;
        json_value(es[i]->second, st, depth + 1, out);
      }
      newline(depth);
      *out += '}';
      return;
    }
    case Value::kUndefined: fail("tojson: Object of type Undefined is not JSON serializable");
    case Value::kFunc: fail("tojson: Object of type function is not JSON serializable");
  }
}

}  // namespace

std::string to_json(const Value& v, const JsonStyle& style) {
  std::string out;
  json_value(v, style, 0, &out);
  return out;
}

std::vector<uint32_t> code_points(const std::string& s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = s[i];
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) {
      out.push_back(0x80000000u | c);  // a stray byte, kept as itself
      ++i;
      continue;
    }
    uint32_t cp = n == 1 ? c : c & (0x7f >> n);
    bool ok = true;
    for (int k = 1; k < n; ++k) {
      const unsigned char d = s[i + k];
      if ((d >> 6) != 2) ok = false;
      cp = (cp << 6) | (d & 0x3f);
    }
    if (!ok) {
      out.push_back(0x80000000u | c);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += n;
  }
  return out;
}

std::string from_code_points(const uint32_t* cp, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t c = cp[i];
    if (c & 0x80000000u) {
      out += static_cast<char>(c & 0xff);
    } else if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xc0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3f));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xe0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (c & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (c & 0x3f));
    }
  }
  return out;
}

}  // namespace qkv::jinja

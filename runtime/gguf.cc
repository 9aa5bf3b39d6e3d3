#include "runtime/gguf.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "kernels/error.h"
#include "runtime/atomic_file.h"

namespace qkv {

namespace {

// Caps beyond "fits in the file": they keep a hostile file from making the
// parser allocate far more memory than the file's own size.
constexpr uint64_t kMaxTensors = uint64_t(1) << 20;
constexpr uint64_t kMaxKV = uint64_t(1) << 20;
constexpr uint64_t kMaxNameLength = 65535;           // keys and tensor names
constexpr uint64_t kMaxStringArray = uint64_t(1) << 24;  // elements of one string array
constexpr uint64_t kMaxNestedArray = uint64_t(1) << 20;  // elements of an array of arrays
constexpr int kMaxArrayDepth = 4;
constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS
constexpr uint64_t kMaxAlignment = uint64_t(1) << 20;

// Bytes of a scalar of type t; 0 for STRING and ARRAY.
uint64_t scalar_size(GGUFType t) {
  switch (t) {
    case GGUFType::UINT8: case GGUFType::INT8: case GGUFType::BOOL: return 1;
    case GGUFType::UINT16: case GGUFType::INT16: return 2;
    case GGUFType::UINT32: case GGUFType::INT32: case GGUFType::FLOAT32: return 4;
    case GGUFType::UINT64: case GGUFType::INT64: case GGUFType::FLOAT64: return 8;
    case GGUFType::STRING: case GGUFType::ARRAY: return 0;
  }
  return 0;
}

bool valid_type(uint32_t t) { return t <= 12; }

// Bytes-left-aware reader over the file image; every read is bounds-checked.
class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size, const std::string& name)
      : data_(data), size_(size), name_(name) {}
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  [[noreturn]] void bad(const std::string& what) const {
    fail("GGUF file '", name_, "': ", what, " (at byte offset ", pos_, ")");
  }
  void need(uint64_t n, const char* what) const {
    if (n > left()) {
      fail("GGUF file '", name_, "': truncated: ", what, " needs ", n, " bytes at offset ", pos_,
           " but only ", left(), " remain");
    }
  }
  const uint8_t* take(uint64_t n, const char* what) {
    need(n, what);
    const uint8_t* p = data_ + pos_;
    pos_ += n;
    return p;
  }
  template <typename T>
  T read(const char* what) {
    T v;
    std::memcpy(&v, take(sizeof(T), what), sizeof(T));
    return v;
  }
  std::string read_string(const char* what, uint64_t max_len) {
    const uint64_t len = read<uint64_t>(what);
    need(len, what);  // a length beyond the file's end: truncated (or absurd)
    if (len > max_len) {
      bad(detail::concat(what, " has length ", len, ", more than the limit of ", max_len));
    }
    const uint8_t* p = take(len, what);
    return std::string(reinterpret_cast<const char*>(p), len);
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& name_;
};

GGUFValue read_value(Cursor& c, GGUFType type, int depth);

GGUFValue read_array(Cursor& c, int depth) {
  if (depth >= kMaxArrayDepth) c.bad("arrays nested deeper than 4 levels");
  GGUFValue v;
  v.type = GGUFType::ARRAY;
  const uint32_t et = c.read<uint32_t>("array element type");
  if (!valid_type(et)) c.bad(detail::concat("unknown array element type ", et));
  v.elem_type = static_cast<GGUFType>(et);
  v.count = c.read<uint64_t>("array length");
  const uint64_t es = scalar_size(v.elem_type);
  if (es != 0) {
    // Numbers: the count is bounded by the bytes left before anything is allocated.
    if (v.count > c.left() / es) {
      c.bad(detail::concat("array of ", v.count, " ", gguf_type_name(v.elem_type),
                           " runs past the end of the file"));
    }
    const uint8_t* p = c.take(v.count * es, "array data");
    v.raw.assign(p, p + v.count * es);
    if (v.elem_type == GGUFType::BOOL) {
      for (uint8_t b : v.raw) {
        if (b > 1) c.bad("array of bool holds a value other than 0 or 1");
      }
    }
  } else if (v.elem_type == GGUFType::STRING) {
    // Each string needs at least its 8-byte length.
    if (v.count > c.left() / 8 || v.count > kMaxStringArray) {
      c.bad(detail::concat("array of ", v.count, " strings is larger than the file allows"));
    }
    v.strings.reserve(v.count);
    for (uint64_t i = 0; i < v.count; ++i) {
      v.strings.push_back(c.read_string("string in array", c.left()));
    }
  } else {
    // Nested arrays: each needs at least 12 bytes (element type + count).
    if (v.count > c.left() / 12 || v.count > kMaxNestedArray) {
      c.bad(detail::concat("array of ", v.count, " arrays is larger than the file allows"));
    }
    v.items.reserve(v.count);
    for (uint64_t i = 0; i < v.count; ++i) v.items.push_back(read_array(c, depth + 1));
  }
  return v;
}

GGUFValue read_value(Cursor& c, GGUFType type, int depth) {
  if (type == GGUFType::ARRAY) return read_array(c, depth);
  GGUFValue v;
  v.type = type;
  if (type == GGUFType::STRING) {
    v.str = c.read_string("string value", c.left());
    return v;
  }
  const uint64_t n = scalar_size(type);
  std::memcpy(&v.bits, c.take(n, "value"), n);  // little-endian host assumed (x86, ARM)
  if (type == GGUFType::BOOL && v.bits > 1) c.bad("bool value other than 0 or 1");
  return v;
}

bool add_overflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_add_overflow(a, b, out); }
bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_mul_overflow(a, b, out); }

}  // namespace

const char* gguf_type_name(GGUFType t) {
  switch (t) {
    case GGUFType::UINT8: return "u8";
    case GGUFType::INT8: return "i8";
    case GGUFType::UINT16: return "u16";
    case GGUFType::INT16: return "i16";
    case GGUFType::UINT32: return "u32";
    case GGUFType::INT32: return "i32";
    case GGUFType::FLOAT32: return "f32";
    case GGUFType::BOOL: return "bool";
    case GGUFType::STRING: return "string";
    case GGUFType::ARRAY: return "array";
    case GGUFType::UINT64: return "u64";
    case GGUFType::INT64: return "i64";
    case GGUFType::FLOAT64: return "f64";
  }
  return "unknown";
}

std::string ggml_type_name(uint32_t type) {
  static const char* const kNames[] = {
      "F32", "F16", "Q4_0", "Q4_1", "Q4_2", "Q4_3", "Q5_0", "Q5_1", "Q8_0", "Q8_1",
      "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S",
      "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64", "F64", "IQ1_M",
      "BF16", "Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8", "TQ1_0", "TQ2_0"};
  if (type < sizeof(kNames) / sizeof(kNames[0])) return kNames[type];
  return "unknown type " + std::to_string(type);
}

bool ggml_type_layout(uint32_t type, uint64_t* block_values, uint64_t* block_bytes) {
  struct Layout { uint32_t type; uint64_t values, bytes; };
  static const Layout kLayouts[] = {
      {0, 1, 4},     {1, 1, 2},     {2, 32, 18},   {3, 32, 20},   {6, 32, 22},
      {7, 32, 24},   {8, 32, 34},   {9, 32, 36},   {10, 256, 84}, {11, 256, 110},
      {12, 256, 144}, {13, 256, 176}, {14, 256, 210}, {15, 256, 292}, {24, 1, 1},
      {25, 1, 2},    {26, 1, 4},    {27, 1, 8},    {28, 1, 8},    {30, 1, 2},
      {20, 32, 18},  {23, 256, 136}};
  for (const Layout& l : kLayouts) {
    if (l.type == type) {
      *block_values = l.values;
      *block_bytes = l.bytes;
      return true;
    }
  }
  return false;
}

// ---- GGUFValue ----

namespace {
template <typename T>
GGUFValue scalar(GGUFType t, T v) {
  GGUFValue out;
  out.type = t;
  std::memcpy(&out.bits, &v, sizeof(T));
  return out;
}
}  // namespace

GGUFValue GGUFValue::u8(uint8_t v) { return scalar(GGUFType::UINT8, v); }
GGUFValue GGUFValue::i8(int8_t v) { return scalar(GGUFType::INT8, v); }
GGUFValue GGUFValue::u16(uint16_t v) { return scalar(GGUFType::UINT16, v); }
GGUFValue GGUFValue::i16(int16_t v) { return scalar(GGUFType::INT16, v); }
GGUFValue GGUFValue::u32(uint32_t v) { return scalar(GGUFType::UINT32, v); }
GGUFValue GGUFValue::i32(int32_t v) { return scalar(GGUFType::INT32, v); }
GGUFValue GGUFValue::u64(uint64_t v) { return scalar(GGUFType::UINT64, v); }
GGUFValue GGUFValue::i64(int64_t v) { return scalar(GGUFType::INT64, v); }
GGUFValue GGUFValue::f32(float v) { return scalar(GGUFType::FLOAT32, v); }
GGUFValue GGUFValue::f64(double v) { return scalar(GGUFType::FLOAT64, v); }
GGUFValue GGUFValue::boolean(bool v) { return scalar(GGUFType::BOOL, static_cast<uint8_t>(v)); }
GGUFValue GGUFValue::string(const std::string& v) {
  GGUFValue out;
  out.type = GGUFType::STRING;
  out.str = v;
  return out;
}

GGUFValue GGUFValue::numeric_array(GGUFType elem_type, const std::vector<double>& values) {
  const uint64_t es = scalar_size(elem_type);
  QKV_CHECK(es != 0, "numeric_array: element type ", gguf_type_name(elem_type), " is not a number");
  GGUFValue out;
  out.type = GGUFType::ARRAY;
  out.elem_type = elem_type;
  out.count = values.size();
  out.raw.resize(values.size() * es);
  for (size_t i = 0; i < values.size(); ++i) {
    const double x = values[i];
    GGUFValue s;
    switch (elem_type) {
      case GGUFType::UINT8: s = u8(static_cast<uint8_t>(x)); break;
      case GGUFType::INT8: s = i8(static_cast<int8_t>(x)); break;
      case GGUFType::UINT16: s = u16(static_cast<uint16_t>(x)); break;
      case GGUFType::INT16: s = i16(static_cast<int16_t>(x)); break;
      case GGUFType::UINT32: s = u32(static_cast<uint32_t>(x)); break;
      case GGUFType::INT32: s = i32(static_cast<int32_t>(x)); break;
      case GGUFType::UINT64: s = u64(static_cast<uint64_t>(x)); break;
      case GGUFType::INT64: s = i64(static_cast<int64_t>(x)); break;
      case GGUFType::FLOAT32: s = f32(static_cast<float>(x)); break;
      case GGUFType::FLOAT64: s = f64(x); break;
      case GGUFType::BOOL: s = boolean(x != 0.0); break;
      default: break;
    }
    std::memcpy(out.raw.data() + i * es, &s.bits, es);
  }
  return out;
}

GGUFValue GGUFValue::f32_array(const std::vector<float>& values) {
  GGUFValue out;
  out.type = GGUFType::ARRAY;
  out.elem_type = GGUFType::FLOAT32;
  out.count = values.size();
  out.raw.resize(values.size() * 4);
  if (!values.empty()) std::memcpy(out.raw.data(), values.data(), out.raw.size());
  return out;
}

GGUFValue GGUFValue::i32_array(const std::vector<int32_t>& values) {
  GGUFValue out;
  out.type = GGUFType::ARRAY;
  out.elem_type = GGUFType::INT32;
  out.count = values.size();
  out.raw.resize(values.size() * 4);
  if (!values.empty()) std::memcpy(out.raw.data(), values.data(), out.raw.size());
  return out;
}

GGUFValue GGUFValue::string_array(const std::vector<std::string>& values) {
  GGUFValue out;
  out.type = GGUFType::ARRAY;
  out.elem_type = GGUFType::STRING;
  out.count = values.size();
  out.strings = values;
  return out;
}

GGUFValue GGUFValue::array_of_arrays(const std::vector<GGUFValue>& arrays) {
  GGUFValue out;
  out.type = GGUFType::ARRAY;
  out.elem_type = GGUFType::ARRAY;
  out.count = arrays.size();
  for (const GGUFValue& a : arrays) {
    QKV_CHECK(a.type == GGUFType::ARRAY, "array_of_arrays: an element is not an array");
  }
  out.items = arrays;
  return out;
}

bool GGUFValue::is_integer() const {
  switch (type) {
    case GGUFType::UINT8: case GGUFType::INT8: case GGUFType::UINT16: case GGUFType::INT16:
    case GGUFType::UINT32: case GGUFType::INT32: case GGUFType::UINT64: case GGUFType::INT64:
      return true;
    default: return false;
  }
}

bool GGUFValue::is_number() const {
  return is_integer() || type == GGUFType::FLOAT32 || type == GGUFType::FLOAT64;
}

int64_t GGUFValue::as_int() const {
  switch (type) {
    case GGUFType::UINT8: case GGUFType::UINT16: case GGUFType::UINT32: return static_cast<int64_t>(bits);
    case GGUFType::INT8: return static_cast<int8_t>(bits);
    case GGUFType::INT16: return static_cast<int16_t>(bits);
    case GGUFType::INT32: return static_cast<int32_t>(bits);
    case GGUFType::INT64: return static_cast<int64_t>(bits);
    case GGUFType::UINT64:
      QKV_CHECK(bits <= uint64_t(std::numeric_limits<int64_t>::max()), "u64 value ", bits,
                " does not fit a signed 64-bit integer");
      return static_cast<int64_t>(bits);
    default: fail("expected an integer, found a ", gguf_type_name(type));
  }
}

uint64_t GGUFValue::as_uint() const {
  if (type == GGUFType::UINT64) return bits;
  const int64_t v = as_int();
  QKV_CHECK(v >= 0, "expected a non-negative integer, found ", v);
  return static_cast<uint64_t>(v);
}

double GGUFValue::as_double() const {
  if (type == GGUFType::FLOAT32) {
    float f;
    const uint32_t b = static_cast<uint32_t>(bits);
    std::memcpy(&f, &b, 4);
    return f;
  }
  if (type == GGUFType::FLOAT64) {
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
  }
  if (type == GGUFType::UINT64) return static_cast<double>(bits);
  if (is_integer()) return static_cast<double>(as_int());
  fail("expected a number, found a ", gguf_type_name(type));
}

bool GGUFValue::as_bool() const {
  QKV_CHECK(type == GGUFType::BOOL, "expected a bool, found a ", gguf_type_name(type));
  return bits != 0;
}

const std::string& GGUFValue::as_string() const {
  QKV_CHECK(type == GGUFType::STRING, "expected a string, found a ", gguf_type_name(type));
  return str;
}

GGUFValue GGUFValue::element(uint64_t i) const {
  QKV_CHECK(type == GGUFType::ARRAY, "expected an array, found a ", gguf_type_name(type));
  const uint64_t es = scalar_size(elem_type);
  QKV_CHECK(es != 0, "array of ", gguf_type_name(elem_type), " has no scalar elements");
  QKV_CHECK(i < count, "array index ", i, " out of range (", count, " elements)");
  GGUFValue v;
  v.type = elem_type;
  std::memcpy(&v.bits, raw.data() + i * es, es);
  return v;
}

std::vector<float> GGUFValue::as_f32_vector() const {
  QKV_CHECK(type == GGUFType::ARRAY, "expected an array, found a ", gguf_type_name(type));
  QKV_CHECK(scalar_size(elem_type) != 0 && elem_type != GGUFType::BOOL,
            "expected an array of numbers, found an array of ", gguf_type_name(elem_type));
  std::vector<float> out(count);
  for (uint64_t i = 0; i < count; ++i) out[i] = static_cast<float>(element(i).as_double());
  return out;
}

std::vector<int64_t> GGUFValue::as_int_vector() const {
  QKV_CHECK(type == GGUFType::ARRAY, "expected an array, found a ", gguf_type_name(type));
  std::vector<int64_t> out(count);
  for (uint64_t i = 0; i < count; ++i) out[i] = element(i).as_int();
  return out;
}

// ---- GGUFFile ----

bool GGUFFile::has_magic(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  char magic[4];
  const bool ok = std::fread(magic, 1, 4, f) == 4 && std::memcmp(magic, "GGUF", 4) == 0;
  std::fclose(f);
  return ok;
}

GGUFFile GGUFFile::open(const std::string& path) {
  MappedFile m = MappedFile::open(path);
  GGUFFile g = parse(m.data, m.size, path, m.keep_alive);
  g.file_mapping_ = m.data;
  return g;
}

GGUFFile GGUFFile::parse(const uint8_t* data, uint64_t size, const std::string& name,
                         std::shared_ptr<const void> keep_alive) {
  GGUFFile g;
  g.path_ = name;
  g.size_ = size;
  g.keep_alive_ = std::move(keep_alive);
  Cursor c(data, size, g.path_);

  if (size < 4 || std::memcmp(data, "GGUF", 4) != 0) {
    fail("'", name, "' is not a GGUF file (wrong magic; expected \"GGUF\")");
  }
  c.take(4, "magic");
  g.version_ = c.read<uint32_t>("version");
  if (g.version_ != 2 && g.version_ != 3) {
    fail("GGUF file '", name, "': unsupported version ", g.version_,
         " (qkv reads versions 2 and 3)");
  }
  const uint64_t n_tensors = c.read<uint64_t>("tensor count");
  const uint64_t n_kv = c.read<uint64_t>("metadata count");
  // Minimum encodings: a KV is 8 (key length) + 4 (type) + 1 bytes, a tensor
  // info 8 + 4 + 4 + 8 bytes; counts the file cannot hold are rejected up front.
  if (n_kv > kMaxKV || n_kv > c.left() / 13) {
    c.bad(detail::concat("metadata count ", n_kv, " is larger than the file can hold"));
  }
  if (n_tensors > kMaxTensors || n_tensors > c.left() / 24) {
    c.bad(detail::concat("tensor count ", n_tensors, " is larger than the file can hold"));
  }

  g.kv_.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.read_string("metadata key", kMaxNameLength);
    const uint32_t t = c.read<uint32_t>("metadata value type");
    if (!valid_type(t)) c.bad(detail::concat("metadata key '", key, "' has unknown value type ", t));
    GGUFValue v = read_value(c, static_cast<GGUFType>(t), 0);
    if (!g.kv_index_.emplace(key, g.kv_.size()).second) {
      c.bad(detail::concat("duplicate metadata key '", key, "'"));
    }
    g.kv_.emplace_back(std::move(key), std::move(v));
  }

  if (const GGUFValue* a = g.find("general.alignment")) {
    if (a->type != GGUFType::UINT32) {
      fail("GGUF file '", name, "': general.alignment must be a u32, found a ", gguf_type_name(a->type));
    }
    const uint64_t al = a->bits;
    if (al == 0 || (al & (al - 1)) != 0 || al > kMaxAlignment) {
      fail("GGUF file '", name, "': general.alignment ", al, " is not a power of two up to ",
           kMaxAlignment);
    }
    g.alignment_ = al;
  }

  g.tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GGUFTensorInfo t;
    t.name = c.read_string("tensor name", kMaxNameLength);
    const uint32_t n_dims = c.read<uint32_t>("tensor dimension count");
    if (n_dims == 0 || n_dims > kMaxDims) {
      c.bad(detail::concat("tensor '", t.name, "' has ", n_dims, " dimensions (1 to 4 allowed)"));
    }
    t.n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t ne = c.read<uint64_t>("tensor dimension");
      if (ne == 0 || mul_overflows(t.n_elements, ne, &t.n_elements) ||
          t.n_elements > (uint64_t(1) << 56)) {
        c.bad(detail::concat("tensor '", t.name, "' has an impossible dimension ", ne));
      }
      t.ne.push_back(ne);
    }
    t.type = c.read<uint32_t>("tensor type");
    t.offset = c.read<uint64_t>("tensor offset");
    uint64_t bv, bb;
    if (ggml_type_layout(t.type, &bv, &bb)) {
      if (t.ne[0] % bv != 0) {
        c.bad(detail::concat("tensor '", t.name, "' of type ", ggml_type_name(t.type),
                             " has rows of ", t.ne[0], " values, not a multiple of its block of ", bv));
      }
      t.n_bytes = t.n_elements / bv * bb;  // n_elements < 2^56, bb < 2^9: no overflow
    }
    if (!g.tensor_index_.emplace(t.name, g.tensors_.size()).second) {
      c.bad(detail::concat("duplicate tensor name '", t.name, "'"));
    }
    g.tensors_.push_back(std::move(t));
  }

  // The data starts at the next multiple of the alignment.
  const uint64_t end_of_infos = c.pos();
  g.data_offset_ = (end_of_infos + g.alignment_ - 1) / g.alignment_ * g.alignment_;
  if (!g.tensors_.empty() && g.data_offset_ > size) {
    fail("GGUF file '", name, "': truncated: tensor data would start at byte ", g.data_offset_,
         " but the file has ", size, " bytes");
  }

  for (GGUFTensorInfo& t : g.tensors_) {
    if (t.offset % g.alignment_ != 0) {
      fail("GGUF file '", name, "': tensor '", t.name, "' offset ", t.offset,
           " is not a multiple of the alignment ", g.alignment_);
    }
    uint64_t begin, end;
    if (add_overflows(g.data_offset_, t.offset, &begin) || add_overflows(begin, t.n_bytes, &end) ||
        end > size) {
      fail("GGUF file '", name, "': tensor '", t.name, "' data (offset ", t.offset, ", ", t.n_bytes,
           " bytes) lies past the end of the file (", size, " bytes)");
    }
    t.data = data + begin;
  }

  // No two tensors may share bytes.
  std::vector<const GGUFTensorInfo*> by_offset;
  for (const GGUFTensorInfo& t : g.tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GGUFTensorInfo* a, const GGUFTensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const GGUFTensorInfo* a = by_offset[i - 1];
    const GGUFTensorInfo* b = by_offset[i];
    if (a->offset + a->n_bytes > b->offset || (a->offset == b->offset)) {
      fail("GGUF file '", name, "': tensors '", a->name, "' and '", b->name, "' overlap");
    }
  }
  return g;
}

const GGUFValue* GGUFFile::find(const std::string& key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const GGUFValue& GGUFFile::get(const std::string& key) const {
  const GGUFValue* v = find(key);
  if (!v) fail("GGUF file '", path_, "': required key '", key, "' is missing");
  return *v;
}

const GGUFTensorInfo* GGUFFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

// ---- GGUFWriter ----

namespace {

void put_bytes(std::vector<uint8_t>& out, const void* p, size_t n) {
  const uint8_t* b = static_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + n);
}
template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  put_bytes(out, &v, sizeof(T));
}
void put_string(std::vector<uint8_t>& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  put_bytes(out, s.data(), s.size());
}

void put_value(std::vector<uint8_t>& out, const GGUFValue& v) {
  if (v.type == GGUFType::STRING) {
    put_string(out, v.str);
  } else if (v.type == GGUFType::ARRAY) {
    put<uint32_t>(out, static_cast<uint32_t>(v.elem_type));
    if (v.elem_type == GGUFType::STRING) {
      QKV_CHECK(v.strings.size() == v.count, "GGUF writer: string array count mismatch");
      put<uint64_t>(out, v.count);
      for (const std::string& s : v.strings) put_string(out, s);
    } else if (v.elem_type == GGUFType::ARRAY) {
      QKV_CHECK(v.items.size() == v.count, "GGUF writer: nested array count mismatch");
      put<uint64_t>(out, v.count);
      for (const GGUFValue& item : v.items) {
        QKV_CHECK(item.type == GGUFType::ARRAY, "GGUF writer: nested element is not an array");
        put_value(out, item);
      }
    } else {
      QKV_CHECK(v.raw.size() == v.count * scalar_size(v.elem_type),
                "GGUF writer: numeric array byte count mismatch");
      put<uint64_t>(out, v.count);
      put_bytes(out, v.raw.data(), v.raw.size());
    }
  } else {
    put_bytes(out, &v.bits, scalar_size(v.type));
  }
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

GGUFWriter::GGUFWriter(uint32_t version, uint64_t alignment) : version_(version), alignment_(alignment) {
  QKV_CHECK(version == 2 || version == 3, "GGUF writer: version must be 2 or 3, not ", version);
  QKV_CHECK(alignment != 0 && (alignment & (alignment - 1)) == 0 && alignment <= kMaxAlignment,
            "GGUF writer: alignment ", alignment, " is not a power of two");
  if (alignment != 32) set("general.alignment", GGUFValue::u32(static_cast<uint32_t>(alignment)));
}

void GGUFWriter::set(const std::string& key, GGUFValue value) {
  for (auto& kv : kv_) {
    if (kv.first == key) {
      kv.second = std::move(value);
      return;
    }
  }
  kv_.emplace_back(key, std::move(value));
}

void GGUFWriter::remove(const std::string& key) {
  for (size_t i = 0; i < kv_.size(); ++i) {
    if (kv_[i].first == key) {
      kv_.erase(kv_.begin() + static_cast<std::ptrdiff_t>(i));
      return;
    }
  }
}

void GGUFWriter::add_tensor(const std::string& name, uint32_t type, const std::vector<uint64_t>& ne,
                            const void* data, uint64_t n_bytes) {
  QKV_CHECK(!ne.empty() && ne.size() <= kMaxDims, "GGUF writer: tensor '", name, "' needs 1 to 4 dims");
  for (const Tensor& t : tensors_) QKV_CHECK(t.name != name, "GGUF writer: duplicate tensor '", name, "'");
  uint64_t bv, bb;
  if (ggml_type_layout(type, &bv, &bb)) {
    uint64_t n = 1;
    for (uint64_t d : ne) n *= d;
    QKV_CHECK(ne[0] % bv == 0 && n / bv * bb == n_bytes, "GGUF writer: tensor '", name, "' has ",
              n_bytes, " bytes, which does not match its shape and type ", ggml_type_name(type));
  }
  tensors_.push_back({name, type, ne, data, n_bytes});
}

std::vector<uint8_t> GGUFWriter::header() const {
  std::vector<uint8_t> out;
  put_bytes(out, "GGUF", 4);
  put<uint32_t>(out, version_);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, kv_.size());
  for (const auto& kv : kv_) {
    put_string(out, kv.first);
    put<uint32_t>(out, static_cast<uint32_t>(kv.second.type));
    put_value(out, kv.second);
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    put_string(out, t.name);
    put<uint32_t>(out, static_cast<uint32_t>(t.ne.size()));
    for (uint64_t d : t.ne) put<uint64_t>(out, d);
    put<uint32_t>(out, t.type);
    put<uint64_t>(out, offset);
    offset = align_up(offset + t.n_bytes, alignment_);
  }
  if (!tensors_.empty()) out.resize(align_up(out.size(), alignment_), 0);
  return out;
}

std::vector<uint8_t> GGUFWriter::serialize() const {
  std::vector<uint8_t> out = header();
  for (const Tensor& t : tensors_) {
    put_bytes(out, t.data, t.n_bytes);
    out.resize(align_up(out.size(), alignment_), 0);
  }
  return out;
}

void GGUFWriter::write(const std::string& path) const {
  for (const Tensor& t : tensors_) {
    QKV_CHECK(t.data != nullptr || t.n_bytes == 0, "GGUF writer: tensor '", t.name, "' has no data");
  }
  AtomicFile out(path);
  const std::vector<uint8_t> head = header();
  out.write(head.data(), head.size());
  const std::vector<uint8_t> zeros(alignment_, 0);
  for (const Tensor& t : tensors_) {
    out.write(t.data, t.n_bytes);
    out.write(zeros.data(), padding(t.n_bytes));
  }
  out.commit();
}

}  // namespace qkv

// GGUF (llama.cpp's model file format), versions 2 and 3: a validating reader
// over a memory map and a writer.
//
// Layout: "GGUF", u32 version, u64 tensor_count, u64 kv_count, the key/value
// metadata, the tensor infos, padding to the alignment (general.alignment,
// default 32), then the tensor data; tensor offsets are relative to the data
// start. Everything is little endian.
//
// The reader trusts nothing: every count and length is bounded by the bytes
// left in the file (and by fixed caps) before anything is allocated, every
// tensor must lie inside the file, be aligned and not overlap another, and
// names must be unique. Any violation throws qkv::Error naming the file and the
// problem.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/mapped_file.h"

namespace qkv {

enum class GGUFType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
  BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
const char* gguf_type_name(GGUFType t);

// ggml tensor types qkv knows by name. Only F32, F16, BF16 and Q8_0 can be
// computed with; the others are recognised so errors can name them.
namespace ggml_type {
constexpr uint32_t F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8,
                   Q8_1 = 9, Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14,
                   Q8_K = 15, BF16 = 30;
}
// "F32", "Q4_K", ... or "unknown type N".
std::string ggml_type_name(uint32_t type);
// Values per block and bytes per block; false when qkv does not know the
// layout (then the tensor's byte size is unknown).
bool ggml_type_layout(uint32_t type, uint64_t* block_values, uint64_t* block_bytes);

// One metadata value: a scalar, a string or an array (possibly nested).
struct GGUFValue {
  GGUFType type = GGUFType::UINT8;
  uint64_t bits = 0;  // scalar payload: the little-endian value zero-extended to 64 bits
  std::string str;    // STRING

  // ARRAY: elem_type and count; numbers/bools are packed little endian in
  // `raw`, strings are in `strings`, nested arrays in `items`.
  GGUFType elem_type = GGUFType::UINT8;
  uint64_t count = 0;
  std::vector<uint8_t> raw;
  std::vector<std::string> strings;
  std::vector<GGUFValue> items;

  // Scalars of each type (constructors for the writer and tests).
  static GGUFValue u8(uint8_t v);
  static GGUFValue i8(int8_t v);
  static GGUFValue u16(uint16_t v);
  static GGUFValue i16(int16_t v);
  static GGUFValue u32(uint32_t v);
  static GGUFValue i32(int32_t v);
  static GGUFValue u64(uint64_t v);
  static GGUFValue i64(int64_t v);
  static GGUFValue f32(float v);
  static GGUFValue f64(double v);
  static GGUFValue boolean(bool v);
  static GGUFValue string(const std::string& v);
  // Arrays of numbers: values converted to elem_type (which must be numeric or BOOL).
  static GGUFValue numeric_array(GGUFType elem_type, const std::vector<double>& values);
  static GGUFValue f32_array(const std::vector<float>& values);
  static GGUFValue i32_array(const std::vector<int32_t>& values);
  static GGUFValue string_array(const std::vector<std::string>& values);
  static GGUFValue array_of_arrays(const std::vector<GGUFValue>& arrays);

  bool is_integer() const;  // a scalar integer type (not BOOL)
  bool is_number() const;   // integer or float scalar
  // Conversions; each throws qkv::Error (naming the type) when the value does not fit.
  int64_t as_int() const;       // any integer type whose value fits int64
  uint64_t as_uint() const;     // any integer type with a non-negative value
  double as_double() const;     // any number
  bool as_bool() const;         // BOOL
  const std::string& as_string() const;  // STRING

  // Element i of a numeric/bool array as a scalar value.
  GGUFValue element(uint64_t i) const;
  std::vector<float> as_f32_vector() const;    // numeric array -> floats
  std::vector<int64_t> as_int_vector() const;  // integer array -> int64
};

struct GGUFTensorInfo {
  std::string name;
  std::vector<uint64_t> ne;  // ne[0] innermost (the contiguous row length)
  uint32_t type = 0;         // ggml type
  uint64_t offset = 0;       // relative to the data start
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;      // 0 when the type's layout is unknown to qkv
  const uint8_t* data = nullptr;  // into the mapping (or the caller's buffer)
};

class GGUFFile {
 public:
  // Maps and validates the file. Throws qkv::Error naming the file and the problem.
  static GGUFFile open(const std::string& path);
  // Parses an in-memory image; `keep_alive` owns `data`. `name` is used in errors.
  static GGUFFile parse(const uint8_t* data, uint64_t size, const std::string& name,
                        std::shared_ptr<const void> keep_alive = nullptr);
  // True when the file at path starts with "GGUF" (false if unreadable or short).
  static bool has_magic(const std::string& path);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // start of the tensor data
  uint64_t file_size() const { return size_; }
  const std::shared_ptr<const void>& keep_alive() const { return keep_alive_; }
  // The whole image when open() mapped it from a file (read-only, private);
  // nullptr for an image parse() was given.
  const uint8_t* file_mapping() const { return file_mapping_; }

  // Metadata in file order.
  const std::vector<std::pair<std::string, GGUFValue>>& metadata() const { return kv_; }
  const GGUFValue* find(const std::string& key) const;  // nullptr if absent
  // The value of a required key; throws naming the key and the file when absent.
  const GGUFValue& get(const std::string& key) const;

  const std::vector<GGUFTensorInfo>& tensors() const { return tensors_; }
  const GGUFTensorInfo* find_tensor(const std::string& name) const;  // nullptr if absent

 private:
  std::string path_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  uint64_t size_ = 0;
  std::shared_ptr<const void> keep_alive_;
  const uint8_t* file_mapping_ = nullptr;
  std::vector<std::pair<std::string, GGUFValue>> kv_;
  std::map<std::string, size_t> kv_index_;
  std::vector<GGUFTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

// Builds a GGUF v3 file (or v2) from metadata and tensors and writes it.
// Tensor data is referenced, not copied: it must stay valid until write().
class GGUFWriter {
 public:
  explicit GGUFWriter(uint32_t version = 3, uint64_t alignment = 32);
  // Adds or replaces a key in place (general.alignment is written from the
  // alignment given above).
  void set(const std::string& key, GGUFValue value);
  // Removes a key if present.
  void remove(const std::string& key);
  // ne[0] innermost; n_bytes must match the type's layout when qkv knows it.
  // data may be nullptr for a file streamed with header() and padding().
  void add_tensor(const std::string& name, uint32_t ggml_type, const std::vector<uint64_t>& ne,
                  const void* data, uint64_t n_bytes);
  // Writes the file through an AtomicFile (whole or not at all). Throws on
  // I/O errors (a full disk included), naming the file.
  void write(const std::string& path) const;
  // The whole file as bytes (for small files and tests).
  std::vector<uint8_t> serialize() const;

  // Streaming: the bytes before the tensor data (padded), then each tensor's
  // n_bytes in add_tensor order, each followed by padding(n_bytes) zero bytes.
  std::vector<uint8_t> header() const;
  uint64_t padding(uint64_t n_bytes) const { return (n_bytes + alignment_ - 1) / alignment_ * alignment_ - n_bytes; }

 private:
  struct Tensor {
    std::string name;
    uint32_t type;
    std::vector<uint64_t> ne;
    const void* data;
    uint64_t n_bytes;
  };
  uint32_t version_;
  uint64_t alignment_;
  std::vector<std::pair<std::string, GGUFValue>> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace qkv

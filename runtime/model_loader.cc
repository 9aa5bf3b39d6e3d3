#include "runtime/model_loader.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/error.h"
#include "runtime/mapped_file.h"

namespace qkv {

namespace {

// Everything a loaded model's matrices point into: the file map plus any
// buffers made when a tensor had to be converted or realigned.
struct LoadedStorage {
  std::shared_ptr<const void> mapping;
  std::vector<std::shared_ptr<void>> owned;

  void* allocate(uint64_t bytes) {
    const size_t rounded = static_cast<size_t>((bytes + 63) / 64 * 64);
    void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (!p) fail("out of memory allocating ", bytes, " bytes for a weight copy");
    owned.emplace_back(p, std::free);
    return p;
  }
};

// Largest value a model dimension may take; keeps every product below 2^62.
constexpr int64_t kMaxDim = int64_t(1) << 24;
constexpr int64_t kMaxLayers = 4096;

size_t natural_alignment(DType t) { return t == DType::F32 ? 4 : 2; }

// "F32, F16, ..., IQ4_XS": every type qkv computes with.
std::string supported_types() {
  std::string s;
  for (int i = 0; i < kDTypeCount; ++i) s += std::string(i ? ", " : "") + kDTypeInfo[i].ggml_name;
  return s;
}

}  // namespace

void validate_model_config(const ModelConfig& c, const std::string& where) {
  auto in_range = [&](int64_t v, int64_t hi, const char* what) {
    if (v <= 0 || v > hi) fail("model '", where, "': ", what, " = ", v, " is out of range (1..", hi, ")");
  };
  in_range(c.dim, kMaxDim, "dim (embedding length)");
  in_range(c.hidden_dim, kMaxDim, "hidden_dim (feed-forward length)");
  in_range(c.n_layers, kMaxLayers, "n_layers (block count)");
  in_range(c.n_heads, c.dim, "n_heads");
  in_range(c.n_kv_heads, c.n_heads, "n_kv_heads");
  in_range(c.vocab_size, kMaxDim, "vocab_size");
  in_range(c.context_length, kMaxDim, "context_length");
  if (c.dim % c.n_heads != 0) fail("model '", where, "': dim ", c.dim, " is not a multiple of n_heads ", c.n_heads);
  if (c.n_heads % c.n_kv_heads != 0) {
    fail("model '", where, "': n_heads ", c.n_heads, " is not a multiple of n_kv_heads ", c.n_kv_heads);
  }
  if (c.head_dim != c.dim / c.n_heads) {
    fail("model '", where, "': head_dim ", c.head_dim, " is not dim / n_heads = ", c.dim / c.n_heads);
  }
  if (c.rope_dim <= 0 || c.rope_dim > c.head_dim || c.rope_dim % 2 != 0) {
    fail("model '", where, "': rope dimension ", c.rope_dim, " must be even and in 2..head_dim (", c.head_dim, ")");
  }
  if (!(c.rope_theta > 0.0f) || !(c.norm_eps > 0.0f) || !(c.norm_eps < 1.0f)) {
    fail("model '", where, "': rope freq base ", c.rope_theta, " and norm epsilon ", c.norm_eps,
         " must be positive (epsilon below 1)");
  }
}

ModelFormat detect_model_format(const std::string& path) {
  return GGUFFile::has_magic(path) ? ModelFormat::GGUF : ModelFormat::Llama2c;
}

Model load_model(const std::string& path) {
  if (detect_model_format(path) == ModelFormat::GGUF) return load_gguf_model(GGUFFile::open(path));
  return load_llama2c_model(path);
}

// ---------------------------------------------------------------- GGUF

namespace {

class GGUFModelReader {
 public:
  GGUFModelReader(const GGUFFile& g, LoadedStorage* storage) : g_(g), storage_(storage) {}

  int64_t get_int(const std::string& key, int64_t fallback, bool required) const {
    const GGUFValue* v = g_.find(key);
    if (!v) {
      if (required) fail("GGUF file '", g_.path(), "': required key '", key, "' is missing");
      return fallback;
    }
    if (!v->is_integer()) {
      fail("GGUF file '", g_.path(), "': key '", key, "' must be an integer, found a ", gguf_type_name(v->type));
    }
    if (v->type == GGUFType::UINT64 && v->bits > uint64_t(kMaxDim)) {
      fail("GGUF file '", g_.path(), "': key '", key, "' = ", v->bits, " is out of range");
    }
    const int64_t x = v->as_int();
    if (x <= 0 || x > kMaxDim) fail("GGUF file '", g_.path(), "': key '", key, "' = ", x, " is out of range");
    return x;
  }

  float get_float(const std::string& key, float fallback) const {
    const GGUFValue* v = g_.find(key);
    if (!v) return fallback;
    if (!v->is_number()) {
      fail("GGUF file '", g_.path(), "': key '", key, "' must be a number, found a ", gguf_type_name(v->type));
    }
    return static_cast<float>(v->as_double());
  }

  const GGUFTensorInfo& tensor(const std::string& name) const {
    // llama.cpp names weights "<name>.weight"; accept the bare name too.
    if (const GGUFTensorInfo* t = g_.find_tensor(name + ".weight")) return *t;
    if (const GGUFTensorInfo* t = g_.find_tensor(name)) return *t;
    fail("GGUF file '", g_.path(), "': required tensor '", name, ".weight' is missing");
  }

  // A [rows][cols] matrix (rows == 1 for a vector) checked against the config.
  Matrix matrix(const std::string& name, int64_t rows, int64_t cols, bool is_norm) const {
    const GGUFTensorInfo& t = tensor(name);
    // Logical shape: ne = [cols] for vectors, [cols, rows] for matrices; any
    // further dimensions must be 1.
    const size_t rank = is_norm ? 1 : 2;
    bool ok = t.ne.size() >= rank && t.ne[0] == uint64_t(cols) && (is_norm || t.ne[1] == uint64_t(rows));
    for (size_t d = rank; ok && d < t.ne.size(); ++d) ok = t.ne[d] == 1;
    if (!ok) {
      std::string shape;
      for (size_t d = 0; d < t.ne.size(); ++d) shape += (d ? ", " : "") + std::to_string(t.ne[d]);
      fail("GGUF file '", g_.path(), "': tensor '", t.name, "' has shape [", shape, "] but the config needs [",
           cols, is_norm ? "" : ", ", is_norm ? "" : std::to_string(rows), "]");
    }
    DType type;
    if (!dtype_from_ggml(t.type, &type)) {
      fail("GGUF file '", g_.path(), "': tensor '", t.name, "' has type ", ggml_type_name(t.type),
           ", which qkv cannot compute with (supported: ", supported_types(), ")");
    }
    Matrix m{t.data, type, rows, cols};
    const uint64_t bytes = uint64_t(rows) * dtype_row_bytes(type, size_t(cols));
    if (is_norm && type != DType::F32) {
      // The decoder takes norm weights as f32; widen the few that are not.
      float* dst = static_cast<float*>(storage_->allocate(uint64_t(cols) * 4));
      decode_row(type, t.data, size_t(cols), dst);
      return Matrix{dst, DType::F32, rows, cols};
    }
    if (reinterpret_cast<uintptr_t>(t.data) % natural_alignment(type) != 0) {
      // Only possible with a general.alignment below the element size.
      void* dst = storage_->allocate(bytes);
      std::memcpy(dst, t.data, bytes);
      m.data = dst;
    }
    return m;
  }

 private:
  const GGUFFile& g_;
  LoadedStorage* storage_;
};

}  // namespace

Model load_gguf_model(const GGUFFile& g) {
  const GGUFValue* arch = g.find("general.architecture");
  if (!arch) fail("GGUF file '", g.path(), "': key 'general.architecture' is missing");
  if (arch->type != GGUFType::STRING) fail("GGUF file '", g.path(), "': general.architecture is not a string");
  if (arch->str != "llama") {
    fail("GGUF file '", g.path(), "': architecture '", arch->str, "' is not supported (qkv runs 'llama')");
  }
  if (g.tensors().empty()) {
    fail("GGUF file '", g.path(), "' holds no tensors (a vocabulary-only file?); it cannot be run as a model");
  }
  auto storage = std::make_shared<LoadedStorage>();
  storage->mapping = g.keep_alive();
  GGUFModelReader r(g, storage.get());

  Model m;
  ModelConfig& c = m.config;
  c.architecture = "llama";
  c.dim = r.get_int("llama.embedding_length", 0, true);
  c.n_layers = r.get_int("llama.block_count", 0, true);
  c.hidden_dim = r.get_int("llama.feed_forward_length", 0, true);
  c.n_heads = r.get_int("llama.attention.head_count", 0, true);
  c.n_kv_heads = r.get_int("llama.attention.head_count_kv", c.n_heads, false);
  c.context_length = r.get_int("llama.context_length", 0, true);
  c.head_dim = c.n_heads > 0 ? c.dim / c.n_heads : 0;
  c.rope_dim = r.get_int("llama.rope.dimension_count", c.head_dim, false);
  c.rope_theta = r.get_float("llama.rope.freq_base", 10000.0f);
  c.norm_eps = r.get_float("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  // The vocabulary size is the embedding's row count (llama.vocab_size, when
  // present, must agree).
  const GGUFTensorInfo& embd = r.tensor("token_embd");
  if (embd.ne.size() < 2) fail("GGUF file '", g.path(), "': tensor '", embd.name, "' is not a matrix");
  if (embd.ne[1] > uint64_t(kMaxDim)) {
    fail("GGUF file '", g.path(), "': tensor '", embd.name, "' has ", embd.ne[1], " rows, too many for a vocabulary");
  }
  c.vocab_size = static_cast<int64_t>(embd.ne[1]);
  if (g.find("llama.vocab_size")) {
    const int64_t v = r.get_int("llama.vocab_size", 0, true);
    if (v != c.vocab_size) {
      fail("GGUF file '", g.path(), "': llama.vocab_size ", v, " disagrees with token_embd's ", c.vocab_size, " rows");
    }
  }
  validate_model_config(c, g.path());

  const int64_t dim = c.dim, kv = c.kv_dim(), hid = c.hidden_dim;
  m.token_embd = r.matrix("token_embd", c.vocab_size, dim, false);
  m.output_norm = r.matrix("output_norm", 1, dim, true);
  const bool has_output = g.find_tensor("output.weight") || g.find_tensor("output");
  m.output = has_output ? r.matrix("output", c.vocab_size, dim, false) : m.token_embd;
  if (has_output && m.output.type == m.token_embd.type &&
      std::memcmp(m.output.data, m.token_embd.data,
                  size_t(c.vocab_size) * dtype_row_bytes(m.output.type, size_t(dim))) == 0) {
    // Converters (convert-llama2c-to-ggml) store a shared classifier twice;
    // treating the copy as tied gives the same model as the llama2.c file and
    // one matrix to stream. memcmp stops at the first difference, so an
    // untied output costs next to nothing here.
    m.output = m.token_embd;
  }
  m.layers.resize(c.n_layers);
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    LayerWeights& l = m.layers[i];
    l.attn_norm = r.matrix(b + "attn_norm", 1, dim, true);
    l.wq = r.matrix(b + "attn_q", dim, dim, false);
    l.wk = r.matrix(b + "attn_k", kv, dim, false);
    l.wv = r.matrix(b + "attn_v", kv, dim, false);
    l.wo = r.matrix(b + "attn_output", dim, dim, false);
    l.ffn_norm = r.matrix(b + "ffn_norm", 1, dim, true);
    l.ffn_gate = r.matrix(b + "ffn_gate", hid, dim, false);
    l.ffn_up = r.matrix(b + "ffn_up", hid, dim, false);
    l.ffn_down = r.matrix(b + "ffn_down", dim, hid, false);
  }
  m.path = g.path();
  m.storage = storage;
  return m;
}

// ---------------------------------------------------------------- llama2.c

Model load_llama2c_model(const std::string& path) {
  MappedFile f = MappedFile::open(path);
  constexpr uint64_t kHeaderBytes = 7 * 4;
  if (f.size < kHeaderBytes) {
    fail("llama2.c checkpoint '", path, "' is truncated: ", f.size, " bytes, less than the 28-byte header");
  }
  int32_t h[7];
  std::memcpy(h, f.data, sizeof(h));
  if (std::memcmp(f.data, "ak42", 4) == 0) {
    fail("'", path, "' is a llama2.c version-1/2 export (magic \"ak42\"); qkv reads the legacy "
         "(version 0) format and GGUF");
  }
  const char* names[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
  for (int i = 0; i < 7; ++i) {
    if (i == 5) continue;  // vocab_size may be negative
    if (h[i] <= 0) fail("llama2.c checkpoint '", path, "': header field ", names[i], " = ", h[i], " must be positive");
  }
  if (h[5] == 0 || h[5] == INT32_MIN) fail("llama2.c checkpoint '", path, "': header vocab_size = ", h[5], " is invalid");
  const bool shared_classifier = h[5] > 0;

  Model m;
  ModelConfig& c = m.config;
  c.dim = h[0];
  c.hidden_dim = h[1];
  c.n_layers = h[2];
  c.n_heads = h[3];
  c.n_kv_heads = h[4];
  c.vocab_size = h[5] < 0 ? -int64_t(h[5]) : h[5];
  c.context_length = h[6];
  c.head_dim = c.dim / c.n_heads;
  c.rope_dim = c.head_dim;
  validate_model_config(c, path);

  // Sizes in floats; every factor is below 2^24 and the sums stay far below 2^63.
  const uint64_t dim = c.dim, hid = c.hidden_dim, L = c.n_layers, kv = c.kv_dim(), V = c.vocab_size;
  const uint64_t hs = c.head_dim;
  const uint64_t expected_floats = V * dim + L * dim + L * dim * dim + 2 * L * kv * dim + L * dim * dim +
                                   L * dim + 3 * L * hid * dim + dim + uint64_t(c.context_length) * hs +
                                   (shared_classifier ? 0 : V * dim);
  const uint64_t expected = kHeaderBytes + expected_floats * 4;
  if (f.size != expected) {
    fail("llama2.c checkpoint '", path, "' has ", f.size, " bytes but its header (dim ", dim, ", hidden ", hid,
         ", layers ", L, ", heads ", c.n_heads, ", kv heads ", c.n_kv_heads, ", vocab ", h[5], ", seq_len ",
         c.context_length, ") implies ", expected, f.size < expected ? " (truncated)" : " (trailing data)");
  }

  auto storage = std::make_shared<LoadedStorage>();
  storage->mapping = f.keep_alive;
  // The map is page aligned and the header is 28 bytes, so every array is
  // 4-byte aligned and used in place.
  const float* p = reinterpret_cast<const float*>(f.data + kHeaderBytes);
  auto take = [&](uint64_t rows, uint64_t cols) {
    Matrix mat{p, DType::F32, int64_t(rows), int64_t(cols)};
    p += rows * cols;
    return mat;
  };
  m.layers.resize(L);
  m.token_embd = take(V, dim);
  for (auto& l : m.layers) l.attn_norm = take(1, dim);
  for (auto& l : m.layers) l.wq = take(dim, dim);
  for (auto& l : m.layers) l.wk = take(kv, dim);
  for (auto& l : m.layers) l.wv = take(kv, dim);
  for (auto& l : m.layers) l.wo = take(dim, dim);
  for (auto& l : m.layers) l.ffn_norm = take(1, dim);
  for (auto& l : m.layers) l.ffn_gate = take(hid, dim);  // w1
  for (auto& l : m.layers) l.ffn_down = take(dim, hid);  // w2
  for (auto& l : m.layers) l.ffn_up = take(hid, dim);    // w3
  m.output_norm = take(1, dim);
  p += uint64_t(c.context_length) * hs;  // freq_cis_real and freq_cis_imag: unused
  m.output = shared_classifier ? m.token_embd : take(V, dim);
  m.path = path;
  m.storage = storage;
  return m;
}

}  // namespace qkv

#include "runtime/model_loader.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <vector>

#include "kernels/error.h"
#include "runtime/arch.h"
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
  if (c.n_heads % c.n_kv_heads != 0) {
    fail("model '", where, "': n_heads ", c.n_heads, " is not a multiple of n_kv_heads ", c.n_kv_heads);
  }
  in_range(c.head_dim, 1 << 16, "head_dim");
  in_range(c.q_dim(), kMaxDim, "n_heads * head_dim");
  if (c.rope_dim <= 0 || c.rope_dim > c.head_dim || c.rope_dim % 2 != 0) {
    fail("model '", where, "': rope dimension ", c.rope_dim, " must be even and in 2..head_dim (", c.head_dim, ")");
  }
  if (!(c.rope_theta > 0.0f) || !(c.norm_eps > 0.0f) || !(c.norm_eps < 1.0f)) {
    fail("model '", where, "': rope freq base ", c.rope_theta, " and norm epsilon ", c.norm_eps,
         " must be positive (epsilon below 1)");
  }
  auto finite_pos = [](float v) { return std::isfinite(v) && v > 0.0f; };
  if (!finite_pos(c.rope_freq_scale) || !finite_pos(c.rope_attn_factor) || !finite_pos(c.embed_scale) ||
      !(c.rope_theta_local >= 0.0f) || !(c.attn_scale >= 0.0f) || !std::isfinite(c.attn_scale)) {
    fail("model '", where, "': rope scaling (", c.rope_freq_scale, "), rope attention factor (", c.rope_attn_factor,
         "), local rope base (", c.rope_theta_local, "), embedding scale (", c.embed_scale, ") or score scale (",
         c.attn_scale, ") is not a positive finite number");
  }
  if (!(c.attn_softcap >= 0.0f) || !(c.final_softcap >= 0.0f) || !std::isfinite(c.attn_softcap) ||
      !std::isfinite(c.final_softcap)) {
    fail("model '", where, "': soft-caps (", c.attn_softcap, ", ", c.final_softcap, ") must be >= 0 and finite");
  }
  if (c.sliding_window < 0 || c.swa_period < 0 || c.rope_orig_context < 0) {
    fail("model '", where, "': sliding window ", c.sliding_window, ", its layer period ", c.swa_period,
         " and the original context ", c.rope_orig_context, " must be >= 0");
  }
  for (const std::vector<float>* f : {&c.rope_factors, &c.rope_factors_short}) {
    if (f->empty()) continue;
    if (int64_t(f->size()) != c.rope_dim / 2) {
      fail("model '", where, "': ", f->size(), " rope frequency factors for ", c.rope_dim / 2, " rotation pairs");
    }
    for (float v : *f) {
      if (!finite_pos(v)) fail("model '", where, "': rope frequency factor ", v, " is not a positive finite number");
    }
  }
  if (c.pooling_type < -1 || c.pooling_type > 4) {
    fail("model '", where, "': pooling type ", c.pooling_type, " is not one of 0..4 (none, mean, cls, last, rank)");
  }
  if (!c.rope_factors_short.empty() && c.rope_factors.empty()) {
    fail("model '", where, "': short rope factors without long ones");
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

  // A count that may be 0 (e.g. attention.sliding_window); fallback when absent.
  int64_t get_count(const std::string& key, int64_t fallback) const {
    const GGUFValue* v = g_.find(key);
    if (!v) return fallback;
    if (!v->is_integer() || v->as_int() < 0 || v->as_int() > kMaxDim) {
      fail("GGUF file '", g_.path(), "': key '", key, "' must be an integer in 0..", kMaxDim);
    }
    return v->as_int();
  }

  std::string get_string(const std::string& key) const {
    const GGUFValue* v = g_.find(key);
    if (!v) return "";
    if (v->type != GGUFType::STRING) fail("GGUF file '", g_.path(), "': key '", key, "' must be a string");
    return v->str;
  }

  const std::string& path() const { return g_.path(); }
  bool find(const std::string& exact_name) const { return g_.find_tensor(exact_name) != nullptr; }

  bool has_tensor(const std::string& name) const {
    return g_.find_tensor(name) != nullptr || g_.find_tensor(name + ".weight") != nullptr;
  }

  const GGUFTensorInfo& tensor(const std::string& name) const {
    // llama.cpp names weights "<name>.weight"; accept the bare name too.
    const bool suffixed = name.size() > 5 && (name.compare(name.size() - 5, 5, ".bias") == 0 ||
                                              (name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0));
    const GGUFTensorInfo* t = suffixed ? nullptr : g_.find_tensor(name + ".weight");
    if (!t) t = g_.find_tensor(name);
    if (!t) fail("GGUF file '", g_.path(), "': required tensor '", name, suffixed ? "" : ".weight", "' is missing");
    used_.insert(t->name);
    return *t;
  }

  // A tensor of the file that no part of the model used, or nullptr.
  const GGUFTensorInfo* unused_tensor() const {
    for (const GGUFTensorInfo& t : g_.tensors()) {
      if (!used_.count(t.name)) return &t;
    }
    return nullptr;
  }

  // An f32 vector of n values (rope frequency factors).
  std::vector<float> vector(const std::string& name, int64_t n) const {
    const Matrix m = matrix(name, 1, n, true);
    const float* p = static_cast<const float*>(m.data);
    return std::vector<float>(p, p + n);
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
  mutable std::set<std::string> used_;
};

// A decoder's output_norm and output (tied to token_embd when absent or a copy of it).
void load_decoder_output(const GGUFModelReader& r, const ArchSpec& spec, Model* model) {
  Model& m = *model;
  const ModelConfig& c = m.config;
  const int64_t dim = c.dim;
  auto bad = [&](const auto&... what) { fail("GGUF file '", r.path(), "': ", what...); };
  m.output_norm = r.matrix("output_norm", 1, dim, true);
  const bool has_output = r.has_tensor("output");
  if (has_output && spec.output == Presence::None) {
    bad("architecture '", spec.name, "' always ties its output to token_embd, but the file has output.weight");
  }
  if (!has_output && spec.output == Presence::Required) bad("required tensor 'output.weight' is missing");
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
}

// An encoder's input tensors (position_embd, token_types, token_embd_norm) and
// a rank model's classifier head; no output_norm or output.
void load_encoder_inputs(const GGUFModelReader& r, const ArchSpec& spec, Model* model) {
  Model& m = *model;
  ModelConfig& c = m.config;
  const int64_t dim = c.dim;
  auto bad = [&](const auto&... what) { fail("GGUF file '", r.path(), "': ", what...); };
  if (spec.learned_positions) m.position_embd = r.matrix("position_embd", c.context_length, dim, false);
  if (spec.token_types) {
    // Its row count is the vocabulary's token_type_count; only row 0 is read.
    const GGUFTensorInfo& t = r.tensor("token_types");
    if (t.ne.size() < 2 || t.ne[1] < 1 || t.ne[1] > 1024) {
      bad("tensor '", t.name, "' must be a matrix of 1..1024 token-type rows");
    }
    m.token_types = r.matrix("token_types", int64_t(t.ne[1]), dim, false);
  }
  m.token_embd_norm = r.matrix("token_embd_norm.weight", 1, dim, true);
  m.token_embd_norm_b = r.matrix("token_embd_norm.bias", 1, dim, true);
  c.rank_head = spec.rank_head != Presence::None && r.has_tensor("cls");
  if (c.rank_head) {
    m.cls = r.matrix("cls", dim, dim, false);
    m.cls_b = r.matrix("cls.bias", 1, dim, true);
    const bool out_w = r.has_tensor("cls.output"), out_b = r.find("cls.output.bias");
    if (out_w != out_b) bad("the rank head needs both cls.output.weight and cls.output.bias; the file has one");
    if (out_w) {
      m.cls_out = r.matrix("cls.output", 1, dim, false);
      m.cls_out_b = r.matrix("cls.output.bias", 1, 1, true);
    }
  }
  if (c.pooling_type == 4 && !c.rank_head) {
    bad("pooling_type 4 (rank) needs the classifier head cls.weight, which the file lacks");
  }
}

}  // namespace

Model load_gguf_model(const GGUFFile& g) {
  const GGUFValue* arch = g.find("general.architecture");
  if (!arch) fail("GGUF file '", g.path(), "': key 'general.architecture' is missing");
  if (arch->type != GGUFType::STRING) fail("GGUF file '", g.path(), "': general.architecture is not a string");
  const ArchSpec* spec = find_arch(arch->str);
  if (!spec) {
    fail("GGUF file '", g.path(), "': architecture '", arch->str, "' is not supported (qkv runs: ",
         known_arch_list(), ")");
  }
  if (g.tensors().empty()) {
    fail("GGUF file '", g.path(), "' holds no tensors (a vocabulary-only file?); it cannot be run as a model");
  }
  auto storage = std::make_shared<LoadedStorage>();
  storage->mapping = g.keep_alive();
  GGUFModelReader r(g, storage.get());
  const std::string a = std::string(spec->name) + ".";
  auto bad = [&](const auto&... what) { fail("GGUF file '", g.path(), "': ", what...); };

  Model m;
  ModelConfig& c = m.config;
  c.dim = r.get_int(a + "embedding_length", 0, true);
  apply_arch(*spec, &c);
  c.n_layers = r.get_int(a + "block_count", 0, true);
  c.hidden_dim = r.get_int(a + "feed_forward_length", 0, true);
  c.n_heads = r.get_int(a + "attention.head_count", 0, true);
  c.n_kv_heads = r.get_int(a + "attention.head_count_kv", c.n_heads, false);
  c.context_length = r.get_int(a + "context_length", 0, true);
  c.head_dim = r.get_int(a + "attention.key_length", c.n_heads > 0 ? c.dim / c.n_heads : 0, false);
  const int64_t v_len = r.get_int(a + "attention.value_length", c.head_dim, false);
  if (v_len != c.head_dim) bad(a, "attention.value_length ", v_len, " differs from key_length ", c.head_dim);
  c.rope_dim = r.get_int(a + "rope.dimension_count", c.head_dim, false);
  if (spec->rope_dim_is_head_dim && c.rope_dim != c.head_dim) {
    bad(a, "rope.dimension_count ", c.rope_dim, " differs from the head dim ", c.head_dim);
  }
  c.rope_theta = r.get_float(a + "rope.freq_base", 10000.0f);
  if (spec->layer_norm) {
    if (!g.find(a + "attention.layer_norm_epsilon")) bad("required key '", a, "attention.layer_norm_epsilon' is missing");
    c.norm_eps = r.get_float(a + "attention.layer_norm_epsilon", 0.0f);
  } else {
    c.norm_eps = r.get_float(a + "attention.layer_norm_rms_epsilon", 1e-5f);
  }
  if (!spec->causal) {
    if (const GGUFValue* v = g.find(a + "attention.causal")) {
      if (v->type != GGUFType::BOOL) bad("key '", a, "attention.causal' must be a bool, found a ", gguf_type_name(v->type));
      if (v->as_bool()) bad("'", spec->name, "' with causal attention (", a, "attention.causal true) is not supported");
    }
  }
  if (const GGUFValue* v = g.find(a + "pooling_type")) {
    if (!v->is_integer() || v->as_int() < 0 || v->as_int() > 4) {
      bad("key '", a, "pooling_type' must be an integer in 0..4 (none, mean, cls, last, rank)");
    }
    c.pooling_type = static_cast<int32_t>(v->as_int());
  }
  // RoPE scaling (llama.cpp: rope.scaling.factor, or the older rope.scale_linear).
  const std::string scaling = r.get_string(a + "rope.scaling.type");
  if (!scaling.empty() && scaling != "none" && scaling != "linear" && !(scaling == "longrope" && spec->longrope != Presence::None)) {
    bad("rope scaling type '", scaling, "' is not supported (qkv: none, linear", spec->longrope != Presence::None ? ", longrope" : "", ")");
  }
  float factor = r.get_float(a + "rope.scaling.factor", 0.0f);
  if (factor == 0.0f) factor = r.get_float(a + "rope.scale_linear", 0.0f);
  if (factor != 0.0f) {
    if (!(factor > 0.0f) || !std::isfinite(factor)) bad(a, "rope.scaling.factor ", factor, " must be positive");
    c.rope_freq_scale = 1.0f / factor;
  }
  c.rope_attn_factor = r.get_float(a + "rope.scaling.attn_factor", 1.0f);
  c.rope_orig_context = r.get_count(a + "rope.scaling.original_context_length", 0);
  if (spec->default_attn_softcap > 0) {
    c.attn_softcap = r.get_float(a + "attn_logit_softcapping", spec->default_attn_softcap);
    c.final_softcap = r.get_float(a + "final_logit_softcapping", spec->default_final_softcap);
  }
  if (spec->window_key == Presence::Required && !g.find(a + "attention.sliding_window")) {
    bad("required key '", a, "attention.sliding_window' is missing");
  }
  if (spec->window_key != Presence::None) c.sliding_window = r.get_count(a + "attention.sliding_window", c.sliding_window);

  // The vocabulary size is the embedding's row count (<arch>.vocab_size, when
  // present, must agree).
  const GGUFTensorInfo& embd = r.tensor("token_embd");
  if (embd.ne.size() < 2) bad("tensor '", embd.name, "' is not a matrix");
  if (embd.ne[1] > uint64_t(kMaxDim)) bad("tensor '", embd.name, "' has ", embd.ne[1], " rows, too many for a vocabulary");
  c.vocab_size = static_cast<int64_t>(embd.ne[1]);
  if (g.find(a + "vocab_size")) {
    const int64_t v = r.get_int(a + "vocab_size", 0, true);
    if (v != c.vocab_size) bad(a, "vocab_size ", v, " disagrees with token_embd's ", c.vocab_size, " rows");
  }
  // Tensors that switch parts of the family description on.
  const int64_t pairs = c.rope_dim / 2;
  if (spec->qkv_bias == Presence::Optional) c.qkv_bias = r.has_tensor("blk.0.attn_q.bias");
  if (spec->rope_freqs != Presence::None && r.has_tensor("rope_freqs")) c.rope_factors = r.vector("rope_freqs", pairs);
  if (spec->longrope != Presence::None) {
    const bool l = r.has_tensor("rope_factors_long"), s = r.has_tensor("rope_factors_short");
    if (l != s) bad("LongRoPE needs both rope_factors_long and rope_factors_short; the file has only one");
    if (l) {
      if (c.rope_orig_context <= 0) bad("LongRoPE factors without ", a, "rope.scaling.original_context_length");
      c.rope_factors = r.vector("rope_factors_long", pairs);
      c.rope_factors_short = r.vector("rope_factors_short", pairs);
    }
  }
  validate_model_config(c, g.path());

  const int64_t dim = c.dim;
  m.token_embd = r.matrix("token_embd", c.vocab_size, dim, false);
  if (spec->layer_norm) {
    load_encoder_inputs(r, *spec, &m);
  } else {
    load_decoder_output(r, *spec, &m);
  }
  const std::vector<LayerTensor> tensors = layer_tensors(*spec, c);
  m.layers.resize(c.n_layers);
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    LayerWeights& l = m.layers[i];
    for (const LayerTensor& t : tensors) {
      const Matrix w = r.matrix(b + t.name, extent(c, t.rows), extent(c, t.cols), t.vector);
      if (t.field) {
        l.*t.field = w;
      } else {
        split_fused(t, w, c, &l);
      }
    }
  }
  // llama.cpp refuses files with tensors its architecture does not use
  // ("wrong number of tensors"); so does qkv, naming one.
  if (const GGUFTensorInfo* t = r.unused_tensor()) {
    bad("tensor '", t->name, "' is not part of a '", spec->name, "' model with these settings");
  }
  m.path = g.path();
  m.storage = storage;
  if (g.file_mapping()) {
    m.file_mapping = g.file_mapping();
    m.file_mapping_bytes = g.file_size();
  }
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
  if (c.dim <= kMaxDim && c.dim % c.n_heads != 0) {
    fail("llama2.c checkpoint '", path, "': dim ", c.dim, " is not a multiple of n_heads ", c.n_heads);
  }
  c.head_dim = c.dim / c.n_heads;
  c.rope_dim = c.head_dim;
  validate_model_config(c, path);


  // Sizes in floats, in 128 bits: with every dimension up to 2^24 and 4096
  // layers the byte count passes 2^64, and a wrapped one could match a small file.
  using u128 = unsigned __int128;
  const u128 dim = c.dim, hid = c.hidden_dim, L = c.n_layers, kv = c.kv_dim(), V = c.vocab_size;
  const u128 hs = c.head_dim;
  const u128 expected_floats = V * dim + L * dim + L * dim * dim + 2 * L * kv * dim + L * dim * dim + L * dim +
                               3 * L * hid * dim + dim + u128(c.context_length) * hs +
                               (shared_classifier ? 0 : V * dim);
  const u128 expected = kHeaderBytes + expected_floats * 4;
  if (f.size != expected) {
    const std::string implied = expected > UINT64_MAX ? "more than 2^64" : std::to_string(uint64_t(expected));
    fail("llama2.c checkpoint '", path, "' has ", f.size, " bytes but its header (dim ", c.dim, ", hidden ",
         c.hidden_dim, ", layers ", c.n_layers, ", heads ", c.n_heads, ", kv heads ", c.n_kv_heads, ", vocab ", h[5],
         ", seq_len ", c.context_length, ") implies ", implied, f.size < expected ? " (truncated)" : " (trailing data)");
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
  m.layers.resize(static_cast<size_t>(c.n_layers));
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
  p += uint64_t(c.context_length) * c.head_dim;  // freq_cis_real and freq_cis_imag: unused
  m.output = shared_classifier ? m.token_embd : take(V, dim);
  m.path = path;
  m.storage = storage;
  m.file_mapping = f.data;
  m.file_mapping_bytes = f.size;
  return m;
}

}  // namespace qkv

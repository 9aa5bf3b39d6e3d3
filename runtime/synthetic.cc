#include "runtime/synthetic.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "kernels/error.h"
#include "kernels/quant/quantize.h"
#include "runtime/arch.h"
#include "runtime/gguf.h"
#include "runtime/huge_pages.h"
#include "runtime/model_loader.h"
#include "runtime/synthetic_encoder.h"

namespace qkv {

namespace {

ModelConfig make_config(int64_t dim, int64_t layers, int64_t heads, int64_t kv_heads, int64_t hidden,
                        int64_t vocab, int64_t ctx) {
  ModelConfig c;
  c.dim = dim;
  c.n_layers = layers;
  c.n_heads = heads;
  c.n_kv_heads = kv_heads;
  c.hidden_dim = hidden;
  c.vocab_size = vocab;
  c.context_length = ctx;
  c.head_dim = dim / heads;
  c.rope_dim = c.head_dim;
  return c;
}

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in [lo, hi) from a per-row stream, so rows fill independently.
void fill_row(uint64_t seed, uint64_t tensor, uint64_t row, float lo, float hi, float* out, int64_t n) {
  uint64_t state = seed ^ (tensor * 0x632be59bd9b4e019ull) ^ (row * 0xd6e8feb86659fd93ull);
  splitmix64(state);
  const float span = hi - lo;
  for (int64_t i = 0; i < n; ++i) {
    const float u = static_cast<float>(splitmix64(state) >> 40) * (1.0f / 16777216.0f);
    out[i] = lo + span * u;
  }
}

uint32_t ggml_of(DType t) { return dtype_ggml_id(t); }

uint64_t matrix_bytes(const Matrix& m) { return uint64_t(m.rows) * dtype_row_bytes(m.type, size_t(m.cols)); }

// The weights in huge-page memory: with 4 KiB pages, first-touch page faults
// dominate building a 1.1B model (they cost several times the random fill on
// this VM).
std::shared_ptr<const void> allocate_weights(uint64_t bytes, uint8_t** base) {
  QKV_CHECK(bytes <= std::numeric_limits<size_t>::max(), "a synthetic model of ", bytes, " bytes does not fit in memory");
  std::shared_ptr<uint8_t> p = allocate_huge_pages(static_cast<size_t>(bytes), "a synthetic model's weights");
  *base = p.get();
  return p;
}

// llama_ftype of a model whose matrices are all of one type (a K type as its _S preset).
constexpr struct {
  DType type;
  uint32_t file_type;
} kFileTypes[] = {{DType::F32, 0},     {DType::F16, 1},     {DType::BF16, 32},  {DType::Q8_0, 7},
                  {DType::Q4_0, 2},    {DType::Q4_1, 3},    {DType::Q5_0, 8},   {DType::Q5_1, 9},
                  {DType::Q2_K, 10},   {DType::Q3_K, 11},   {DType::Q4_K, 14},  {DType::Q5_K, 16},
                  {DType::Q6_K, 18},   {DType::IQ4_NL, 25}, {DType::IQ4_XS, 30}};

}  // namespace

uint32_t model_file_type(const Model& model) {
  if (model.file_type >= 0) return uint32_t(model.file_type);
  const DType main_type = model.layers.empty() ? model.token_embd.type : model.layers[0].wq.type;
  for (const auto& f : kFileTypes) {
    if (f.type == main_type) return f.file_type;
  }
  return 0;
}

std::shared_ptr<const void> fill_synthetic_tensors(const std::vector<SyntheticTensor>& tensors, uint64_t seed) {
  // One 64-byte-aligned allocation; each tensor starts on a 64-byte boundary.
  std::vector<uint64_t> offsets;
  uint64_t total = 0;
  for (const SyntheticTensor& t : tensors) {
    offsets.push_back(total);
    total += (matrix_bytes(*t.m) + 63) / 64 * 64;
  }
  uint8_t* base = nullptr;
  std::shared_ptr<const void> storage = allocate_weights(std::max<uint64_t>(total, 64), &base);

  // Work items of up to 64 rows over every tensor, handed out dynamically in
  // one parallel region: one barrier in all, and a thread the OS preempts
  // does not hold up the others.
  struct Chunk {
    size_t tensor;
    int64_t row_begin, row_end;
  };
  std::vector<Chunk> chunks;
  for (size_t ti = 0; ti < tensors.size(); ++ti) {
    Matrix& mat = *tensors[ti].m;
    mat.data = base + offsets[ti];
    for (int64_t r = 0; r < mat.rows; r += 64) chunks.push_back({ti, r, std::min<int64_t>(mat.rows, r + 64)});
  }
#pragma omp parallel
  {
    std::vector<float> row;
#pragma omp for schedule(dynamic, 1)
    for (int64_t ci = 0; ci < int64_t(chunks.size()); ++ci) {
      const Chunk& ch = chunks[size_t(ci)];
      const Matrix& mat = *tensors[ch.tensor].m;
      const SyntheticFill fill = tensors[ch.tensor].fill;
      const float a = std::sqrt(3.0f / static_cast<float>(mat.cols));  // variance 1/cols
      const size_t row_bytes = dtype_row_bytes(mat.type, size_t(mat.cols));
      row.resize(size_t(mat.cols));
      for (int64_t r = ch.row_begin; r < ch.row_end; ++r) {
        uint8_t* out = base + offsets[ch.tensor] + uint64_t(r) * row_bytes;
        // f32 rows are generated in place; other types through quantize_row.
        float* values = mat.type == DType::F32 ? reinterpret_cast<float*>(out) : row.data();
        switch (fill) {
          case SyntheticFill::Norm: fill_row(seed, ch.tensor, uint64_t(r), 0.9f, 1.1f, values, mat.cols); break;
          case SyntheticFill::Bias: fill_row(seed, ch.tensor, uint64_t(r), -0.1f, 0.1f, values, mat.cols); break;
          case SyntheticFill::Matrix: fill_row(seed, ch.tensor, uint64_t(r), -a, a, values, mat.cols); break;
        }
        if (mat.type != DType::F32) quantize_row(mat.type, values, size_t(mat.cols), out);
      }
    }
  }
  return storage;
}

std::vector<std::string> synthetic_preset_names() { return {"tiny", "143M", "1.1B"}; }

ModelConfig synthetic_preset(const std::string& name) {
  if (name == "tiny") return make_config(64, 2, 4, 2, 172, 512, 512);
  if (name == "143M") return make_config(576, 30, 9, 3, 1536, 32000, 8192);
  if (name == "1.1B") return make_config(2048, 22, 32, 4, 5632, 32000, 2048);
  std::string encoders;
  for (const std::string& n : synthetic_encoder_names()) encoders += (encoders.empty() ? "" : ", ") + n;
  fail("unknown synthetic model preset '", name, "' (known: tiny, 143M, 1.1B; encoders: ", encoders, ")");
}

bool parse_weight_format(const std::string& name, WeightFormat* out) {
  if (const QuantPreset* p = find_quant_preset(name)) {
    *out = WeightFormat{quant_preset_base(*p), p};
    return true;
  }
  DType t;
  if (!parse_dtype(name, &t)) return false;
  *out = WeightFormat{t, nullptr};
  return true;
}

std::string weight_format_name(const WeightFormat& f) {
  return f.preset ? quant_preset_name(*f.preset) : dtype_name(f.type);
}

Model make_synthetic_model(const ModelConfig& config, DType weight_type, uint64_t seed, bool tied_output) {
  return make_synthetic_model(config, WeightFormat{weight_type, nullptr}, seed, tied_output);
}

Model make_synthetic_model(const ModelConfig& config, const WeightFormat& format, uint64_t seed, bool tied_output) {
  validate_model_config(config, "synthetic");
  Model m;
  m.config = config;
  const int64_t dim = config.dim, V = config.vocab_size;
  const ArchSpec& spec = arch_spec(config.architecture);
  QuantModelInfo info;
  info.arch = spec.name;
  info.n_layers = config.n_layers;
  info.n_heads = config.n_heads;
  info.n_kv_heads = config.n_kv_heads;
  info.n_attention_wv = config.n_layers;  // one attn_v or attn_qkv per layer
  info.has_output = !tied_output;
  auto weight = [&](const std::string& name, int64_t rows, int64_t cols) {
    DType t = format.type;
    if (format.preset) t = plan_tensor(*format.preset, info, name, uint64_t(cols)).type;
    // Rows the type cannot hold (e.g. FFN 172 in Q8_0) are stored as F16.
    if (!dtype_row_ok(t, size_t(cols))) t = DType::F16;
    return Matrix{nullptr, t, rows, cols};
  };
  auto norm = [&] { return Matrix{nullptr, DType::F32, 1, dim}; };
  if (format.preset) m.file_type = int32_t(quant_preset_file_type(*format.preset));

  m.token_embd = weight("token_embd.weight", V, dim);
  m.output_norm = norm();
  if (!tied_output) m.output = weight("output.weight", V, dim);
  m.layers.resize(config.n_layers);
  const std::vector<LayerTensor> tensors = layer_tensors(spec, config);
  // Fused tensors are made whole, as a file holds them, and split into views below.
  std::vector<Matrix> fused(m.layers.size() * tensors.size());

  std::vector<SyntheticTensor> plan;
  auto add = [&](Matrix* mat, bool is_norm) {
    plan.push_back({mat, is_norm ? SyntheticFill::Norm : SyntheticFill::Matrix});
  };
  add(&m.token_embd, false);
  add(&m.output_norm, true);
  if (!tied_output) add(&m.output, false);
  for (size_t li = 0; li < m.layers.size(); ++li) {
    for (size_t ti = 0; ti < tensors.size(); ++ti) {
      const LayerTensor& t = tensors[ti];
      Matrix* mat = t.field ? &(m.layers[li].*t.field) : &fused[li * tensors.size() + ti];
      const int64_t rows = extent(config, t.rows), cols = extent(config, t.cols);
      *mat = t.vector ? Matrix{nullptr, DType::F32, 1, cols}
                      : weight("blk." + std::to_string(li) + "." + t.name, rows, cols);
      add(mat, t.vector);
    }
  }
  m.storage = fill_synthetic_tensors(plan, seed);
  if (tied_output) m.output = m.token_embd;
  for (size_t li = 0; li < m.layers.size(); ++li) {
    for (size_t ti = 0; ti < tensors.size(); ++ti) {
      if (tensors[ti].field) continue;
      split_fused(tensors[ti], fused[li * tensors.size() + ti], config, &m.layers[li]);
    }
  }
  return m;
}

ModelConfig with_arch(ModelConfig c, const std::string& arch) {
  const ArchSpec& spec = arch_spec(arch);
  if (!spec.causal) {
    std::string presets;
    for (const std::string& n : synthetic_encoder_names()) presets += (presets.empty() ? "" : ", ") + n;
    fail("'", arch, "' is an encoder family: its synthetic models are the encoder presets (", presets,
         "), not the decoder shapes");
  }
  apply_arch(spec, &c);
  // gemma3 files must state their window; 1024 is Gemma 3's (4B and up).
  if (c.swa_period > 0 && c.sliding_window == 0) c.sliding_window = 1024;
  if (c.rope_theta_local > 0) c.rope_theta = 1e6f;
  return c;
}

bool arch_output_tied(const std::string& arch, bool requested) {
  const ArchSpec& s = arch_spec(arch);
  return s.output == Presence::None ? true : s.output == Presence::Required ? false : requested;
}

Model convert_model(const Model& src, DType type) {
  Model m = src;
  m.file_type = -1;
  auto keep = std::make_shared<std::vector<std::shared_ptr<const void>>>();
  keep->push_back(src.storage);
  auto convert = [&](Matrix* w) {
    if (w->data == nullptr || w->rows == 1) return;  // norms, biases stay f32
    const DType t = dtype_row_ok(type, size_t(w->cols)) ? type : DType::F16;
    const size_t rb = dtype_row_bytes(t, size_t(w->cols));
    auto buf = std::shared_ptr<uint8_t>(static_cast<uint8_t*>(std::aligned_alloc(64, (w->rows * rb + 63) / 64 * 64)),
                                        std::free);
    if (!buf) fail("out of memory converting a ", w->rows, " x ", w->cols, " matrix");
    std::vector<float> row(size_t(w->cols));
    const size_t src_rb = dtype_row_bytes(w->type, size_t(w->cols));
    for (int64_t r = 0; r < w->rows; ++r) {
      decode_row(w->type, static_cast<const uint8_t*>(w->data) + r * src_rb, size_t(w->cols), row.data());
      encode_row(t, row.data(), size_t(w->cols), buf.get() + r * rb);
    }
    *w = Matrix{buf.get(), t, w->rows, w->cols};
    keep->push_back(buf);
  };
  const bool tied = src.output.data == src.token_embd.data;
  convert(&m.token_embd);
  if (tied) {
    m.output = m.token_embd;
  } else {
    convert(&m.output);
  }
  for (LayerWeights& l : m.layers) {
    for (Matrix* w : layer_matrices(l)) convert(w);
  }
  m.storage = keep;
  return m;
}

void write_gguf_model(const Model& model, const std::string& path, const Tokenizer* tokenizer) {
  const ModelConfig& c = model.config;
  validate_model_config(c, path);
  const ArchSpec& spec = arch_spec(c.architecture);
  if (!spec.causal) {
    if (tokenizer != nullptr) return write_gguf_encoder(model, path, *tokenizer);
    return write_gguf_encoder(model, path, synthetic_wordpiece(c.vocab_size));
  }
  const std::string a = std::string(spec.name) + ".";
  GGUFWriter w;
  auto u32 = [](int64_t v) { return GGUFValue::u32(static_cast<uint32_t>(v)); };
  w.set("general.architecture", GGUFValue::string(spec.name));
  w.set("general.name", GGUFValue::string(model.path.empty() ? "qkv synthetic" : model.path));
  // llama.cpp's LLAMA_FTYPE: the model's preset, else what most of the weights are (display only).
  w.set("general.file_type", GGUFValue::u32(model_file_type(model)));
  w.set(a + "context_length", u32(c.context_length));
  w.set(a + "embedding_length", u32(c.dim));
  w.set(a + "block_count", u32(c.n_layers));
  w.set(a + "feed_forward_length", u32(c.hidden_dim));
  w.set(a + "rope.dimension_count", u32(c.rope_dim));
  w.set(a + "attention.head_count", u32(c.n_heads));
  w.set(a + "attention.head_count_kv", u32(c.n_kv_heads));
  w.set(a + "attention.key_length", u32(c.head_dim));
  w.set(a + "attention.value_length", u32(c.head_dim));
  w.set(a + "attention.layer_norm_rms_epsilon", GGUFValue::f32(c.norm_eps));
  w.set(a + "rope.freq_base", GGUFValue::f32(c.rope_theta));
  w.set(a + "vocab_size", u32(c.vocab_size));
  if (c.rope_freq_scale != 1.0f) {
    w.set(a + "rope.scaling.type", GGUFValue::string("linear"));
    w.set(a + "rope.scaling.factor", GGUFValue::f32(1.0f / c.rope_freq_scale));
  }
  if (c.rope_attn_factor != 1.0f) w.set(a + "rope.scaling.attn_factor", GGUFValue::f32(c.rope_attn_factor));
  if (c.rope_orig_context > 0) w.set(a + "rope.scaling.original_context_length", u32(c.rope_orig_context));
  if (spec.window_key != Presence::None) w.set(a + "attention.sliding_window", u32(c.sliding_window));
  if (spec.default_attn_softcap > 0) {
    w.set(a + "attn_logit_softcapping", GGUFValue::f32(c.attn_softcap));
    w.set(a + "final_logit_softcapping", GGUFValue::f32(c.final_softcap));
  }
  // What the family's fixed description cannot express would not survive a reload.
  ModelConfig fixed = c;
  apply_arch(spec, &fixed);
  QKV_CHECK(fixed.rope_style == c.rope_style && fixed.activation == c.activation && fixed.qk_norm == c.qk_norm &&
                fixed.post_norms == c.post_norms && fixed.embed_scale == c.embed_scale &&
                fixed.swa_period == c.swa_period && fixed.rope_theta_local == c.rope_theta_local &&
                c.attn_scale == 0.0f && (c.qkv_bias == fixed.qkv_bias || spec.qkv_bias == Presence::Optional) &&
                (c.sliding_window == 0 || spec.window_key != Presence::None) &&
                (c.attn_softcap == 0 || spec.default_attn_softcap > 0),
            "write_gguf_model: the model's settings are not those of a '", spec.name, "' file");

  Tokenizer byte_vocab;
  if (!tokenizer && c.vocab_size >= 260) {
    byte_vocab = Tokenizer::byte_level(c.vocab_size);
    tokenizer = &byte_vocab;
  }
  if (tokenizer) {
    QKV_CHECK(tokenizer->vocab_size() == c.vocab_size, "write_gguf_model: the tokenizer has ",
              tokenizer->vocab_size(), " tokens but the model's vocabulary is ", c.vocab_size);
    std::vector<std::string> pieces;
    std::vector<float> scores;
    std::vector<int32_t> types;
    for (int32_t i = 0; i < tokenizer->vocab_size(); ++i) {
      pieces.push_back(tokenizer->piece(i));
      scores.push_back(tokenizer->score(i));
      types.push_back(tokenizer->token_type(i));
    }
    w.set("tokenizer.ggml.model", GGUFValue::string(tokenizer->is_bpe() ? "gpt2" : "llama"));
    w.set("tokenizer.ggml.tokens", GGUFValue::string_array(pieces));
    w.set("tokenizer.ggml.token_type", GGUFValue::i32_array(types));
    if (tokenizer->is_bpe()) {
      w.set("tokenizer.ggml.merges", GGUFValue::string_array(tokenizer->bpe_merges()));
      w.set("tokenizer.ggml.pre", GGUFValue::string(tokenizer->bpe_pre()));
    } else {
      w.set("tokenizer.ggml.scores", GGUFValue::f32_array(scores));
      w.set("tokenizer.ggml.unknown_token_id", GGUFValue::u32(uint32_t(tokenizer->unk_id())));
    }
    if (tokenizer->bos_id() >= 0) w.set("tokenizer.ggml.bos_token_id", GGUFValue::u32(uint32_t(tokenizer->bos_id())));
    if (tokenizer->eos_id() >= 0) w.set("tokenizer.ggml.eos_token_id", GGUFValue::u32(uint32_t(tokenizer->eos_id())));
    w.set("tokenizer.ggml.add_bos_token", GGUFValue::boolean(tokenizer->add_bos()));
    w.set("tokenizer.ggml.add_eos_token", GGUFValue::boolean(tokenizer->add_eos()));
  }

  auto tensor = [&](const std::string& name, const Matrix& m, int64_t rows, int64_t cols, bool is_vector = false) {
    QKV_CHECK(m.data && m.rows == rows && m.cols == cols, "write_gguf_model: tensor '", name, "' is [", m.rows,
              "][", m.cols, "], expected [", rows, "][", cols, "]");
    // GGUF shapes: ne[0] is the row length; norms are 1-D.
    const std::vector<uint64_t> ne = is_vector ? std::vector<uint64_t>{uint64_t(cols)}
                                               : std::vector<uint64_t>{uint64_t(cols), uint64_t(rows)};
    w.add_tensor(name, ggml_of(m.type), ne, m.data, matrix_bytes(m));
  };
  // Fused tensors whose parts are not adjacent in memory are joined here; the
  // buffers live until the file is written.
  std::vector<std::vector<uint8_t>> joined;
  auto fused = [&](const std::string& name, const std::vector<const Matrix*>& parts, int64_t rows, int64_t cols) {
    Matrix whole = *parts[0];
    bool adjacent = true;
    for (size_t i = 1; i < parts.size(); ++i) {
      QKV_CHECK(parts[i]->type == whole.type && parts[i]->cols == cols, "write_gguf_model: the parts of '", name,
                "' differ in type or width");
      adjacent = adjacent && parts[i]->data == static_cast<const uint8_t*>(parts[0]->data) + matrix_bytes(whole);
      whole.rows += parts[i]->rows;
    }
    if (!adjacent) {
      joined.emplace_back();
      for (const Matrix* p : parts) {
        const auto* b = static_cast<const uint8_t*>(p->data);
        joined.back().insert(joined.back().end(), b, b + matrix_bytes(*p));
      }
      whole.data = joined.back().data();
    }
    tensor(name, whole, rows, cols);
  };
  const int64_t dim = c.dim, V = c.vocab_size;
  QKV_CHECK(int64_t(model.layers.size()) == c.n_layers, "write_gguf_model: ", model.layers.size(),
            " layers but the config says ", c.n_layers);
  auto f32_vector = [&](const std::string& name, const std::vector<float>& v) {
    w.add_tensor(name, ggml_type::F32, {uint64_t(v.size())}, v.data(), v.size() * 4);
  };
  if (!c.rope_factors_short.empty()) {
    f32_vector("rope_factors_long.weight", c.rope_factors);
    f32_vector("rope_factors_short.weight", c.rope_factors_short);
  } else if (!c.rope_factors.empty()) {
    QKV_CHECK(spec.rope_freqs != Presence::None, "write_gguf_model: '", spec.name, "' files carry no rope_freqs");
    f32_vector("rope_freqs.weight", c.rope_factors);
  }
  tensor("token_embd.weight", model.token_embd, V, dim);
  tensor("output_norm.weight", model.output_norm, 1, dim, true);
  const bool tied = model.output.data == model.token_embd.data;
  QKV_CHECK(!(tied && spec.output == Presence::Required) && !(!tied && spec.output == Presence::None),
            "write_gguf_model: a '", spec.name, "' file ", tied ? "needs a separate" : "cannot have a separate",
            " output matrix");
  if (!tied) tensor("output.weight", model.output, V, dim);
  const std::vector<LayerTensor> tensors = layer_tensors(spec, c);
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    const LayerWeights& l = model.layers[i];
    for (const LayerTensor& t : tensors) {
      const int64_t rows = extent(c, t.rows), cols = extent(c, t.cols);
      if (t.field) {
        tensor(b + t.name, l.*t.field, rows, cols, t.vector);
      } else {
        fused(b + t.name, fused_parts(t, l), rows, cols);
      }
    }
  }
  w.write(path);
}

}  // namespace qkv

#include "runtime/synthetic.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>

#include "kernels/error.h"
#include "runtime/gguf.h"
#include "runtime/model_loader.h"

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

struct Planned {
  Matrix* m;
  bool is_norm;
  uint64_t offset;
};

uint32_t ggml_of(DType t) { return dtype_ggml_id(t); }

uint64_t matrix_bytes(const Matrix& m) { return uint64_t(m.rows) * dtype_row_bytes(m.type, size_t(m.cols)); }

// Anonymous memory for the weights, asking for transparent huge pages: with
// 4 KiB pages, first-touch page faults dominate building a 1.1B model (they
// cost several times the random fill on this VM).
std::shared_ptr<const void> allocate_weights(uint64_t bytes, uint8_t** base) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) fail("out of memory: a synthetic model needs ", bytes, " bytes");
  ::madvise(p, bytes, MADV_HUGEPAGE);  // advisory: fine if unsupported
  *base = static_cast<uint8_t*>(p);
  return std::shared_ptr<const void>(p, [bytes](const void* q) { ::munmap(const_cast<void*>(q), bytes); });
}

}  // namespace

std::vector<std::string> synthetic_preset_names() { return {"tiny", "143M", "1.1B"}; }

ModelConfig synthetic_preset(const std::string& name) {
  if (name == "tiny") return make_config(64, 2, 4, 2, 172, 512, 512);
  if (name == "143M") return make_config(576, 30, 9, 3, 1536, 32000, 8192);
  if (name == "1.1B") return make_config(2048, 22, 32, 4, 5632, 32000, 2048);
  fail("unknown synthetic model preset '", name, "' (known: tiny, 143M, 1.1B)");
}

Model make_synthetic_model(const ModelConfig& config, DType weight_type, uint64_t seed, bool tied_output) {
  validate_model_config(config, "synthetic");
  Model m;
  m.config = config;
  const int64_t dim = config.dim, kv = config.kv_dim(), hid = config.hidden_dim, V = config.vocab_size;
  auto weight = [&](int64_t rows, int64_t cols) {
    // Q8_0 needs whole blocks of 32 per row; other shapes use F16 instead.
    const DType t = dtype_row_ok(weight_type, size_t(cols)) ? weight_type : DType::F16;
    return Matrix{nullptr, t, rows, cols};
  };
  auto norm = [&] { return Matrix{nullptr, DType::F32, 1, dim}; };

  m.token_embd = weight(V, dim);
  m.output_norm = norm();
  if (!tied_output) m.output = weight(V, dim);
  m.layers.resize(config.n_layers);
  for (LayerWeights& l : m.layers) {
    l.attn_norm = norm();
    l.wq = weight(dim, dim);
    l.wk = weight(kv, dim);
    l.wv = weight(kv, dim);
    l.wo = weight(dim, dim);
    l.ffn_norm = norm();
    l.ffn_gate = weight(hid, dim);
    l.ffn_up = weight(hid, dim);
    l.ffn_down = weight(dim, hid);
  }

  // One 64-byte-aligned allocation; each tensor starts on a 64-byte boundary.
  std::vector<Planned> plan;
  uint64_t total = 0;
  auto add = [&](Matrix* mat, bool is_norm) {
    plan.push_back({mat, is_norm, total});
    total += (matrix_bytes(*mat) + 63) / 64 * 64;
  };
  add(&m.token_embd, false);
  add(&m.output_norm, true);
  if (!tied_output) add(&m.output, false);
  for (LayerWeights& l : m.layers) {
    add(&l.attn_norm, true);
    for (Matrix* w : {&l.wq, &l.wk, &l.wv, &l.wo}) add(w, false);
    add(&l.ffn_norm, true);
    for (Matrix* w : {&l.ffn_gate, &l.ffn_up, &l.ffn_down}) add(w, false);
  }
  uint8_t* base = nullptr;
  m.storage = allocate_weights(std::max<uint64_t>(total, 64), &base);

  // Work items of up to 64 rows over every tensor, handed out dynamically in
  // one parallel region: one barrier in all, and a thread the OS preempts
  // does not hold up the others.
  struct Chunk {
    size_t tensor;
    int64_t row_begin, row_end;
  };
  std::vector<Chunk> chunks;
  for (size_t ti = 0; ti < plan.size(); ++ti) {
    Matrix& mat = *plan[ti].m;
    mat.data = base + plan[ti].offset;
    for (int64_t r = 0; r < mat.rows; r += 64) chunks.push_back({ti, r, std::min<int64_t>(mat.rows, r + 64)});
  }
#pragma omp parallel
  {
    std::vector<float> row;
#pragma omp for schedule(dynamic, 1)
    for (int64_t ci = 0; ci < int64_t(chunks.size()); ++ci) {
      const Chunk& ch = chunks[size_t(ci)];
      const Matrix& mat = *plan[ch.tensor].m;
      const bool is_norm = plan[ch.tensor].is_norm;
      const float a = is_norm ? 0.0f : std::sqrt(3.0f / static_cast<float>(mat.cols));  // variance 1/cols
      const size_t row_bytes = dtype_row_bytes(mat.type, size_t(mat.cols));
      row.resize(size_t(mat.cols));
      for (int64_t r = ch.row_begin; r < ch.row_end; ++r) {
        uint8_t* out = base + plan[ch.tensor].offset + uint64_t(r) * row_bytes;
        // f32 rows are generated in place; other types through encode_row.
        float* values = mat.type == DType::F32 ? reinterpret_cast<float*>(out) : row.data();
        if (is_norm) {
          fill_row(seed, ch.tensor, uint64_t(r), 0.9f, 1.1f, values, mat.cols);
        } else {
          fill_row(seed, ch.tensor, uint64_t(r), -a, a, values, mat.cols);
        }
        if (mat.type != DType::F32) encode_row(mat.type, values, size_t(mat.cols), out);
      }
    }
  }
  if (tied_output) m.output = m.token_embd;
  return m;
}

void write_gguf_model(const Model& model, const std::string& path, const Tokenizer* tokenizer) {
  const ModelConfig& c = model.config;
  validate_model_config(c, path);
  GGUFWriter w;
  auto u32 = [](int64_t v) { return GGUFValue::u32(static_cast<uint32_t>(v)); };
  w.set("general.architecture", GGUFValue::string("llama"));
  w.set("general.name", GGUFValue::string(model.path.empty() ? "qkv synthetic" : model.path));
  // llama.cpp's LLAMA_FTYPE: what most of the weights are (display only).
  const DType main_type = model.layers.empty() ? model.token_embd.type : model.layers[0].wq.type;
  const uint32_t ftype = main_type == DType::F32 ? 0 : main_type == DType::F16 ? 1 : main_type == DType::Q8_0 ? 7 : 32;
  w.set("general.file_type", GGUFValue::u32(ftype));
  w.set("llama.context_length", u32(c.context_length));
  w.set("llama.embedding_length", u32(c.dim));
  w.set("llama.block_count", u32(c.n_layers));
  w.set("llama.feed_forward_length", u32(c.hidden_dim));
  w.set("llama.rope.dimension_count", u32(c.rope_dim));
  w.set("llama.attention.head_count", u32(c.n_heads));
  w.set("llama.attention.head_count_kv", u32(c.n_kv_heads));
  w.set("llama.attention.layer_norm_rms_epsilon", GGUFValue::f32(c.norm_eps));
  w.set("llama.rope.freq_base", GGUFValue::f32(c.rope_theta));
  w.set("llama.vocab_size", u32(c.vocab_size));

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

  auto tensor = [&](const std::string& name, const Matrix& m, int64_t rows, int64_t cols, bool is_norm = false) {
    QKV_CHECK(m.data && m.rows == rows && m.cols == cols, "write_gguf_model: tensor '", name, "' is [", m.rows,
              "][", m.cols, "], expected [", rows, "][", cols, "]");
    // GGUF shapes: ne[0] is the row length; norms are 1-D.
    const std::vector<uint64_t> ne = is_norm ? std::vector<uint64_t>{uint64_t(cols)}
                                             : std::vector<uint64_t>{uint64_t(cols), uint64_t(rows)};
    w.add_tensor(name, ggml_of(m.type), ne, m.data, matrix_bytes(m));
  };
  const int64_t dim = c.dim, kv = c.kv_dim(), hid = c.hidden_dim, V = c.vocab_size;
  QKV_CHECK(int64_t(model.layers.size()) == c.n_layers, "write_gguf_model: ", model.layers.size(),
            " layers but the config says ", c.n_layers);
  tensor("token_embd.weight", model.token_embd, V, dim);
  tensor("output_norm.weight", model.output_norm, 1, dim, true);
  if (model.output.data != model.token_embd.data) tensor("output.weight", model.output, V, dim);
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    const LayerWeights& l = model.layers[i];
    tensor(b + "attn_norm.weight", l.attn_norm, 1, dim, true);
    tensor(b + "attn_q.weight", l.wq, dim, dim);
    tensor(b + "attn_k.weight", l.wk, kv, dim);
    tensor(b + "attn_v.weight", l.wv, kv, dim);
    tensor(b + "attn_output.weight", l.wo, dim, dim);
    tensor(b + "ffn_norm.weight", l.ffn_norm, 1, dim, true);
    tensor(b + "ffn_gate.weight", l.ffn_gate, hid, dim);
    tensor(b + "ffn_up.weight", l.ffn_up, hid, dim);
    tensor(b + "ffn_down.weight", l.ffn_down, dim, hid);
  }
  w.write(path);
}

}  // namespace qkv

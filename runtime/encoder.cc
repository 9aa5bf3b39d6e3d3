// The bidirectional encoder of llama.cpp b4748's build_bert (bert, nomic-bert),
// over packed sequences:
//   x = LN_embd(token_embd[id] + token_types[0] (+ position_embd[pos]))
//   per layer: a = Wo·attention(Q, K, V) (+ bo), x = LN_attn(a + x)
//              f = down(act(up·x + b_up) (· gate)) (+ b_down), x = LN_out(f + x)
// Q, K, V = Wq·x, Wk·x, Wv·x (+ biases; RoPE on Q and K unless the positions
// are learned). Every token attends to every token of its own sequence.
#include "runtime/encoder.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/attention.h"
#include "kernels/error.h"
#include "kernels/linear.h"
#include "kernels/ops.h"
#include "kernels/quant/row_groups.h"

namespace qkv {

namespace {

const float* vec(const Matrix& m) { return static_cast<const float*>(m.data); }

// Row-wise steps over fewer floats than this stay on one thread.
constexpr int64_t kMinParallelFloats = int64_t{1} << 15;
// Sizes past these are refused before anything is allocated (every product
// of two of them stays far below 2^63).
constexpr int64_t kMaxTokens = int64_t{1} << 24;

// fn(lo, hi) over contiguous shares of n rows of `width` floats, on all of
// OpenMP's threads when the rows are worth it.
template <class Fn>
void each_share(int64_t n, int64_t width, Fn&& fn) {
  const int threads = omp_get_max_threads();
  if (threads == 1 || omp_in_parallel() || n < 2 || n * width < kMinParallelFloats) return fn(int64_t{0}, n);
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), k = omp_get_num_threads();
    const int64_t lo = n * t / k, hi = n * (t + 1) / k;
    if (lo < hi) fn(lo, hi);
  }
}

// y[m] += b for rows [lo, hi) of width n.
void add_bias(float* y, const Matrix& b, int64_t lo, int64_t hi, int64_t n) {
  for (int64_t m = lo; m < hi; ++m) add_inplace(&y[m * n], vec(b), static_cast<size_t>(n));
}

// Row `row` of an embedding table decoded to f32 into out.
void embedding_row(const Matrix& E, int64_t row, float* out) {
  const auto cols = static_cast<size_t>(E.cols);
  if (E.row_groups) {
    std::vector<uint8_t> gathered(dtype_row_bytes(E.type, cols));
    row_group_row(E.type, E.data, cols, static_cast<size_t>(row), gathered.data());
    decode_row(E.type, gathered.data(), cols, out);
    return;
  }
  const size_t row_bytes = dtype_row_bytes(E.type, cols);
  decode_row(E.type, static_cast<const uint8_t*>(E.data) + static_cast<size_t>(row) * row_bytes, cols, out);
}

// A tensor the encoder reads, checked present with the shape it needs
// (norm weights and biases, the `.bias` and `norm` ones, are f32 vectors).
void require(const Matrix& m, int64_t rows, int64_t cols, const std::string& what) {
  QKV_CHECK(m.data != nullptr, "encoder: the model lacks ", what);
  QKV_CHECK(m.rows == rows && m.cols == cols, "encoder: ", what, " is [", m.rows, "][", m.cols, "], expected [", rows,
            "][", cols, "]");
  const bool vector = what.find(".bias") != std::string::npos || what.find("norm") != std::string::npos;
  QKV_CHECK(!vector || m.type == DType::F32, "encoder: ", what, " must be an f32 vector");
}

}  // namespace

uint64_t Encoder::activation_bytes(const ModelConfig& c, int64_t max_tokens) {
  QKV_CHECK(max_tokens >= 1 && max_tokens <= kMaxTokens, "encoder: max_tokens ", max_tokens,
            " is out of range (1..", kMaxTokens, ")");
  // x_, xb_ (dim); q_, att_ (q_dim); k_, v_ (kv_dim); hb_, hb2_ (hidden); rope_cs_ (rope_dim).
  const uint64_t per_row = 2 * uint64_t(c.dim) + 2 * uint64_t(c.q_dim()) + 2 * uint64_t(c.kv_dim()) +
                           uint64_t(c.hidden_dim) * (c.ffn_gated ? 2 : 1) +
                           (c.learned_positions ? 0 : uint64_t(c.rope_dim));
  return uint64_t(max_tokens) * per_row * sizeof(float);
}

Encoder::Encoder(const Model& model, int64_t max_tokens) : model_(model), max_tokens_(max_tokens) {
  const ModelConfig& c = model.config;
  QKV_CHECK(!c.causal && c.layer_norm, "encoder: '", c.architecture,
            "' is a decoder family; an Encoder runs the bidirectional ones (bert, nomic-bert)");
  QKV_CHECK(c.n_layers >= 1 && c.dim >= 1 && c.n_heads >= 1 && c.head_dim >= 1 && c.n_kv_heads >= 1 &&
                c.n_heads % c.n_kv_heads == 0 && c.hidden_dim >= 1 && c.vocab_size >= 1 &&
                static_cast<int64_t>(model.layers.size()) == c.n_layers,
            "encoder: the model configuration is inconsistent");
  const int64_t dim = c.dim, q_dim = c.q_dim(), kv_dim = c.kv_dim(), hidden = c.hidden_dim;
  require(model.token_embd, c.vocab_size, dim, "token_embd");
  require(model.token_embd_norm, 1, dim, "token_embd_norm.weight");
  require(model.token_embd_norm_b, 1, dim, "token_embd_norm.bias");
  if (c.token_types) {
    QKV_CHECK(model.token_types.data != nullptr && model.token_types.rows >= 1 && model.token_types.cols == dim,
              "encoder: the model lacks token_types (at least one row of ", dim, ")");
  }
  if (c.learned_positions) require(model.position_embd, c.context_length, dim, "position_embd");
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& w = model.layers[l];
    const std::string b = "layer " + std::to_string(l) + " ";
    require(w.wq, q_dim, dim, b + "attn_q");
    require(w.wk, kv_dim, dim, b + "attn_k");
    require(w.wv, kv_dim, dim, b + "attn_v");
    require(w.wo, dim, q_dim, b + "attn_output");
    require(w.attn_out_norm, 1, dim, b + "attn_output_norm.weight");
    require(w.attn_out_norm_b, 1, dim, b + "attn_output_norm.bias");
    require(w.ffn_up, hidden, dim, b + "ffn_up");
    if (c.ffn_gated) require(w.ffn_gate, hidden, dim, b + "ffn_gate");
    require(w.ffn_down, dim, hidden, b + "ffn_down");
    require(w.layer_out_norm, 1, dim, b + "layer_output_norm.weight");
    require(w.layer_out_norm_b, 1, dim, b + "layer_output_norm.bias");
    if (c.qkv_bias) {
      require(w.bq, 1, q_dim, b + "attn_q.bias");
      require(w.bk, 1, kv_dim, b + "attn_k.bias");
      require(w.bv, 1, kv_dim, b + "attn_v.bias");
    }
    if (c.out_ffn_bias) {
      require(w.bo, 1, dim, b + "attn_output.bias");
      require(w.ffn_up_b, 1, hidden, b + "ffn_up.bias");
      require(w.ffn_down_b, 1, dim, b + "ffn_down.bias");
    }
  }
  if (c.rank_head) {
    require(model.cls, dim, dim, "cls.weight");
    require(model.cls_b, 1, dim, "cls.bias");
    if (model.cls_out.data != nullptr) {
      QKV_CHECK(model.cls_out.rows == 1 && model.cls_out.cols == dim, "encoder: cls.output is [", model.cls_out.rows,
                "][", model.cls_out.cols, "], expected [1][", dim, "]");
      require(model.cls_out_b, 1, 1, "cls.output.bias");
    }
  }
  // The kernels the FFN's activation needs: the table GELU is ungated (bert),
  // SiLU and the computed GELU-tanh gated.
  QKV_CHECK(c.ffn_gated != (c.activation == Activation::GeluTanhTable), "encoder: a ",
            c.ffn_gated ? "gated" : "plain", " FFN with this activation is not supported");
  activation_bytes(c, max_tokens);  // refuses a max_tokens out of range before anything is allocated
  const auto n = static_cast<size_t>(max_tokens);
  x_.resize(n * dim);
  xb_.resize(n * dim);
  q_.resize(n * q_dim);
  k_.resize(n * kv_dim);
  v_.resize(n * kv_dim);
  att_.resize(n * q_dim);
  hb_.resize(n * hidden);
  if (c.ffn_gated) hb2_.resize(n * hidden);
  if (!c.learned_positions) rope_cs_.resize(n * c.rope_dim);
}

bool Encoder::has_rank_head() const { return model_.config.rank_head; }

float Encoder::rank_score(const float* h_cls) const {
  QKV_CHECK(has_rank_head(), "rank_score: the model '", model_.config.architecture,
            "' has no classifier head (cls.weight); it embeds but does not rank");
  QKV_CHECK(h_cls != nullptr, "rank_score: null hidden state");
  const int64_t dim = model_.config.dim;
  std::vector<float> t(static_cast<size_t>(dim));
  matvec(model_.cls, h_cls, t.data());
  const float* b = vec(model_.cls_b);
  for (int64_t i = 0; i < dim; ++i) t[i] = std::tanh(t[i] + b[i]);
  // Without cls.output llama.cpp's score is the first value of tanh(cls·h + b).
  if (model_.cls_out.data == nullptr) return t[0];
  float score = 0.0f;
  matvec(model_.cls_out, t.data(), &score);
  return score + vec(model_.cls_out_b)[0];
}

void Encoder::forward(const int32_t* const* tokens, const int64_t* counts, int64_t n, float* hidden) {
  const ModelConfig& c = model_.config;
  QKV_CHECK(n >= 0, "encoder: negative sequence count ", n);
  if (n == 0) return;
  QKV_CHECK(tokens != nullptr && counts != nullptr && hidden != nullptr, "encoder: null tokens, counts or output");
  int64_t total = 0;
  for (int64_t s = 0; s < n; ++s) {
    QKV_CHECK(counts[s] >= 1, "encoder: sequence ", s, " is empty (", counts[s], " tokens); each needs at least one");
    if (counts[s] > c.context_length) {
      fail_as(ErrorKind::kContextOverflow, "encoder: sequence ", s, " has ", counts[s],
              " tokens, over the model's context of ", c.context_length);
    }
    total += counts[s];
    QKV_CHECK(total <= max_tokens_, "encoder: the ", s + 1 < n ? "first " + std::to_string(s + 1) + " " : "",
              "sequences hold ", total, " tokens, more than this encoder's ", max_tokens_, " per pass");
    QKV_CHECK(tokens[s] != nullptr, "encoder: sequence ", s, " has a null token array");
    for (int64_t i = 0; i < counts[s]; ++i) {
      const int32_t id = tokens[s][i];
      QKV_CHECK(id >= 0 && id < c.vocab_size, "encoder: token id ", id, " (sequence ", s, ", position ", i,
                ") is outside the vocabulary (size ", c.vocab_size, ")");
    }
  }
  const int64_t T = total, dim = c.dim, q_dim = c.q_dim(), kv_dim = c.kv_dim(), hid = c.hidden_dim;
  const int64_t hd = c.head_dim, rd = c.rope_dim;
  // Each row's sequence start and position.
  std::vector<int64_t> first(static_cast<size_t>(n) + 1, 0);
  for (int64_t s = 0; s < n; ++s) first[s + 1] = first[s] + counts[s];

  // Input: token + token type 0 (+ position), then the embedding LayerNorm.
  std::vector<float> type0(static_cast<size_t>(c.token_types ? dim : 0));
  if (c.token_types) embedding_row(model_.token_types, 0, type0.data());
  for (int64_t s = 0; s < n; ++s) {
    each_share(counts[s], dim, [&](int64_t lo, int64_t hi) {
      std::vector<float> pos_row(static_cast<size_t>(c.learned_positions ? dim : 0));
      for (int64_t p = lo; p < hi; ++p) {
        float* x = &x_[(first[s] + p) * dim];
        embedding_row(model_.token_embd, tokens[s][p], x);
        if (c.token_types) add_inplace(x, type0.data(), static_cast<size_t>(dim));
        if (c.learned_positions) {
          embedding_row(model_.position_embd, p, pos_row.data());
          add_inplace(x, pos_row.data(), static_cast<size_t>(dim));
        } else {
          RopeParams rp;
          rp.base = c.rope_theta;
          rp.freq_scale = c.rope_freq_scale;
          rope_angles(static_cast<size_t>(rd), p, rp, &rope_cs_[(first[s] + p) * rd]);
        }
      }
    });
  }
  each_share(T, dim, [&](int64_t lo, int64_t hi) {
    layernorm(&x_[lo * dim], vec(model_.token_embd_norm), vec(model_.token_embd_norm_b), &x_[lo * dim],
              static_cast<size_t>(dim), c.norm_eps, static_cast<size_t>(hi - lo));
  });

  for (int64_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& w = model_.layers[l];
    // Attention: x = LN_attn(Wo·attention(Q, K, V) (+ bo) + x).
    const Matrix qkv[3] = {w.wq, w.wk, w.wv};
    float* const qkv_out[3] = {q_.data(), k_.data(), v_.data()};
    matmul_multi(qkv, qkv_out, 3, x_.data(), T);
    each_share(T, q_dim + 2 * kv_dim, [&](int64_t lo, int64_t hi) {
      if (c.qkv_bias) {
        add_bias(q_.data(), w.bq, lo, hi, q_dim);
        add_bias(k_.data(), w.bk, lo, hi, kv_dim);
        add_bias(v_.data(), w.bv, lo, hi, kv_dim);
      }
      if (!c.learned_positions) {
        for (int64_t m = lo; m < hi; ++m) {
          rope_rotate(&q_[m * q_dim], c.n_heads, hd, rd, &rope_cs_[m * rd], c.rope_style);
          rope_rotate(&k_[m * kv_dim], c.n_kv_heads, hd, rd, &rope_cs_[m * rd], c.rope_style);
        }
      }
    });
    for (int64_t s = 0; s < n; ++s) {
      AttentionShape shape;
      shape.B = 1;
      shape.Hq = c.n_heads;
      shape.Hkv = c.n_kv_heads;
      shape.Lq = shape.Lk = counts[s];
      shape.d = hd;
      const int64_t r0 = first[s];
      const QueryView q{&q_[r0 * q_dim], 0, hd, q_dim};
      const KVView k{&k_[r0 * kv_dim], DType::F32, 0, hd * int64_t(sizeof(float)), kv_dim * int64_t(sizeof(float))};
      const KVView v{&v_[r0 * kv_dim], DType::F32, 0, hd * int64_t(sizeof(float)), kv_dim * int64_t(sizeof(float))};
      const OutputView out{&att_[r0 * q_dim], 0, hd, q_dim};
      AttentionMask mask;  // none: every key of the sequence
      AttentionOptions opts;
      opts.scale = c.attn_scale;
      attention(shape, q, k, v, mask, out, opts);
    }
    matmul(w.wo, att_.data(), T, xb_.data());
    each_share(T, dim, [&](int64_t lo, int64_t hi) {
      if (c.out_ffn_bias) add_bias(xb_.data(), w.bo, lo, hi, dim);
      add_inplace(&xb_[lo * dim], &x_[lo * dim], static_cast<size_t>((hi - lo) * dim));
      layernorm(&xb_[lo * dim], vec(w.attn_out_norm), vec(w.attn_out_norm_b), &x_[lo * dim], static_cast<size_t>(dim),
                c.norm_eps, static_cast<size_t>(hi - lo));
    });

    // Feed-forward: x = LN_out(down(act(up·x (+ b)) (* ...)) (+ b) + x).
    if (c.ffn_gated) {
      const Matrix gate_up[2] = {w.ffn_gate, w.ffn_up};
      float* const gate_up_out[2] = {hb_.data(), hb2_.data()};
      matmul_multi(gate_up, gate_up_out, 2, x_.data(), T);
    } else {
      matmul(w.ffn_up, x_.data(), T, hb_.data());
    }
    each_share(T, hid, [&](int64_t lo, int64_t hi) {
      float* h = &hb_[lo * hid];
      const auto count = static_cast<size_t>((hi - lo) * hid);
      if (c.out_ffn_bias) add_bias(hb_.data(), w.ffn_up_b, lo, hi, hid);
      if (c.ffn_gated) {
        if (c.activation == Activation::SiLU) {
          silu_mul(h, &hb2_[lo * hid], count);
        } else {
          gelu_tanh_mul(h, &hb2_[lo * hid], count);
        }
      } else {
        gelu_f16_table(h, count);
      }
    });
    matmul(w.ffn_down, hb_.data(), T, xb_.data());
    each_share(T, dim, [&](int64_t lo, int64_t hi) {
      if (c.out_ffn_bias) add_bias(xb_.data(), w.ffn_down_b, lo, hi, dim);
      add_inplace(&xb_[lo * dim], &x_[lo * dim], static_cast<size_t>((hi - lo) * dim));
      layernorm(&xb_[lo * dim], vec(w.layer_out_norm), vec(w.layer_out_norm_b), &x_[lo * dim],
                static_cast<size_t>(dim), c.norm_eps, static_cast<size_t>(hi - lo));
    });
  }
  std::copy(x_.begin(), x_.begin() + T * dim, hidden);
}

}  // namespace qkv

// A plain scalar forward pass in double precision, read straight off llama2.c's
// run.c structure and extended by each setting of the architecture description
// as llama.cpp's builders write it (biases, per-head QK-norm, NEOX RoPE and its
// factors, post-norms, GELU, soft-caps, sliding windows, embedding scale): the
// oracle the decoder's kernels are checked against.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/dtype.h"
#include "runtime/model.h"

namespace qkv::test {

inline std::vector<double> decode_matrix(const Matrix& m) {
  std::vector<float> row(static_cast<size_t>(m.cols));
  std::vector<double> out(static_cast<size_t>(m.rows * m.cols));
  const size_t rb = dtype_row_bytes(m.type, static_cast<size_t>(m.cols));
  for (int64_t r = 0; r < m.rows; ++r) {
    decode_row(m.type, static_cast<const uint8_t*>(m.data) + r * rb, static_cast<size_t>(m.cols), row.data());
    for (int64_t c = 0; c < m.cols; ++c) out[r * m.cols + c] = row[c];
  }
  return out;
}

class ReferenceForward {
 public:
  // context: the decoder's context (picks LongRoPE's factor set); 0: the model's.
  explicit ReferenceForward(const Model& model, int64_t context = 0) : m_(model), c_(model.config) {
    const int64_t ctx = context > 0 ? context : c_.context_length;
    factors_ = !c_.rope_factors_short.empty() && ctx <= c_.rope_orig_context ? c_.rope_factors_short : c_.rope_factors;
    embd_ = decode_matrix(model.token_embd);
    out_norm_ = decode_matrix(model.output_norm);
    out_ = decode_matrix(model.output);
    for (const LayerWeights& l : model.layers) {
      auto opt = [](const Matrix& m) { return m.data ? decode_matrix(m) : std::vector<double>(); };
      layers_.push_back({decode_matrix(l.attn_norm), decode_matrix(l.wq), decode_matrix(l.wk),
                         decode_matrix(l.wv), decode_matrix(l.wo), decode_matrix(l.ffn_norm),
                         decode_matrix(l.ffn_gate), decode_matrix(l.ffn_up), decode_matrix(l.ffn_down), opt(l.bq),
                         opt(l.bk), opt(l.bv), opt(l.q_norm), opt(l.k_norm), opt(l.post_attn_norm),
                         opt(l.post_ffn_norm)});
    }
    kcache_.resize(layers_.size());
    vcache_.resize(layers_.size());
  }

  // Logits for `token` at the next position.
  std::vector<double> step(int token) {
    const int64_t dim = c_.dim, hs = c_.head_dim, q_dim = c_.q_dim(), kv_dim = c_.kv_dim(), hidden = c_.hidden_dim;
    const int64_t pos = static_cast<int64_t>(kcache_[0].size()) / kv_dim;
    std::vector<double> x(embd_.begin() + token * dim, embd_.begin() + (token + 1) * dim);
    for (double& e : x) e *= c_.embed_scale;
    std::vector<double> xb(dim), q(q_dim), k(kv_dim), v(kv_dim), att(q_dim), hb(hidden), hb2(hidden);
    for (size_t l = 0; l < layers_.size(); ++l) {
      const Layer& w = layers_[l];
      const bool slides = c_.layer_slides(int64_t(l));
      rmsnorm(xb, x, w.attn_norm);
      matmul(q, xb, w.wq, q_dim, dim);
      matmul(k, xb, w.wk, kv_dim, dim);
      matmul(v, xb, w.wv, kv_dim, dim);
      if (!w.bq.empty()) {
        for (int64_t i = 0; i < q_dim; ++i) q[i] += w.bq[i];
        for (int64_t i = 0; i < kv_dim; ++i) k[i] += w.bk[i], v[i] += w.bv[i];
      }
      if (!w.q_norm.empty()) {
        head_norm(q, w.q_norm);
        head_norm(k, w.k_norm);
      }
      const double base = slides && c_.rope_theta_local > 0 ? c_.rope_theta_local : c_.rope_theta;
      const double fscale = slides && c_.rope_theta_local > 0 ? 1.0 : c_.rope_freq_scale;
      rope(q, pos, base, fscale);
      rope(k, pos, base, fscale);
      kcache_[l].insert(kcache_[l].end(), k.begin(), k.end());
      vcache_[l].insert(vcache_[l].end(), v.begin(), v.end());
      const int64_t group = c_.n_heads / c_.n_kv_heads;
      const double scale = c_.attn_scale > 0 ? c_.attn_scale : 1.0 / std::sqrt(static_cast<double>(hs));
      const int64_t first = slides ? std::max<int64_t>(0, pos - c_.sliding_window + 1) : 0;
      for (int64_t h = 0; h < c_.n_heads; ++h) {
        const int64_t kvh = h / group;
        std::vector<double> s(pos + 1, 0.0);
        double mx = -INFINITY;
        for (int64_t t = first; t <= pos; ++t) {
          double dot = 0;
          for (int64_t i = 0; i < hs; ++i) dot += q[h * hs + i] * kcache_[l][t * kv_dim + kvh * hs + i];
          s[t] = dot * scale;
          if (c_.attn_softcap > 0) s[t] = c_.attn_softcap * std::tanh(s[t] / c_.attn_softcap);
          mx = std::max(mx, s[t]);
        }
        double sum = 0;
        for (int64_t t = first; t <= pos; ++t) sum += s[t] = std::exp(s[t] - mx);
        for (int64_t i = 0; i < hs; ++i) {
          double a = 0;
          for (int64_t t = first; t <= pos; ++t) a += s[t] / sum * vcache_[l][t * kv_dim + kvh * hs + i];
          att[h * hs + i] = a;
        }
      }
      matmul(xb, att, w.wo, dim, q_dim);
      if (!w.post_attn.empty()) rmsnorm(xb, std::vector<double>(xb), w.post_attn);
      for (int64_t i = 0; i < dim; ++i) x[i] += xb[i];
      rmsnorm(xb, x, w.ffn_norm);
      matmul(hb, xb, w.gate, hidden, dim);
      matmul(hb2, xb, w.up, hidden, dim);
      for (int64_t i = 0; i < hidden; ++i) {
        const double z = hb[i];
        const double act = c_.activation == Activation::SiLU
                               ? z / (1.0 + std::exp(-z))
                               : 0.5 * z * (1.0 + std::tanh(0.7978845608028654 * (z + 0.044715 * z * z * z)));
        hb[i] = act * hb2[i];
      }
      matmul(xb, hb, w.down, dim, hidden);
      if (!w.post_ffn.empty()) rmsnorm(xb, std::vector<double>(xb), w.post_ffn);
      for (int64_t i = 0; i < dim; ++i) x[i] += xb[i];
    }
    rmsnorm(xb, x, out_norm_);
    std::vector<double> logits(c_.vocab_size);
    matmul(logits, xb, out_, c_.vocab_size, dim);
    if (c_.final_softcap > 0) {
      for (double& z : logits) z = c_.final_softcap * std::tanh(z / c_.final_softcap);
    }
    return logits;
  }

 private:
  struct Layer {
    std::vector<double> attn_norm, wq, wk, wv, wo, ffn_norm, gate, up, down, bq, bk, bv, q_norm, k_norm, post_attn,
        post_ffn;
  };

  void rmsnorm(std::vector<double>& out, const std::vector<double>& x, const std::vector<double>& w) const {
    double ss = 0;
    for (double e : x) ss += e * e;
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + c_.norm_eps);
    for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] * inv * w[i];
  }
  static void matmul(std::vector<double>& y, const std::vector<double>& x, const std::vector<double>& W,
                     int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
      double acc = 0;
      for (int64_t i = 0; i < cols; ++i) acc += W[r * cols + i] * x[i];
      y[r] = acc;
    }
  }
  // Per-head RMSNorm (QK-norm), each head_dim slice with the same weights.
  void head_norm(std::vector<double>& x, const std::vector<double>& w) const {
    const int64_t hs = c_.head_dim;
    for (size_t h = 0; h < x.size() / hs; ++h) {
      std::vector<double> part(x.begin() + h * hs, x.begin() + (h + 1) * hs), out(hs);
      rmsnorm(out, part, w);
      std::copy(out.begin(), out.end(), x.begin() + h * hs);
    }
  }
  void rope(std::vector<double>& x, int64_t pos, double base, double freq_scale) const {
    const int64_t hs = c_.head_dim, half = c_.rope_dim / 2;
    const bool neox = c_.rope_style == RopeStyle::Neox;
    for (size_t h = 0; h < x.size() / hs; ++h) {
      for (int64_t k = 0; k < half; ++k) {
        double theta = pos * std::pow(base, -2.0 * k / c_.rope_dim) * freq_scale;
        if (!factors_.empty()) theta /= factors_[k];
        const double m = c_.rope_attn_factor;
        double& a = x[h * hs + (neox ? k : 2 * k)];
        double& b = x[h * hs + (neox ? k + half : 2 * k + 1)];
        const double a0 = a, b0 = b;
        a = (a0 * std::cos(theta) - b0 * std::sin(theta)) * m;
        b = (a0 * std::sin(theta) + b0 * std::cos(theta)) * m;
      }
    }
  }

  const Model& m_;
  const ModelConfig& c_;
  std::vector<double> embd_, out_norm_, out_;
  std::vector<float> factors_;
  std::vector<Layer> layers_;
  std::vector<std::vector<double>> kcache_, vcache_;  // [layer][pos*kv_dim]
};

}  // namespace qkv::test

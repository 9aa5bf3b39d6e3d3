// A plain scalar llama forward pass in double precision, read straight off
// llama2.c's run.c structure: the oracle the decoder's kernels are checked against.
#pragma once

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
  explicit ReferenceForward(const Model& model) : m_(model), c_(model.config) {
    embd_ = decode_matrix(model.token_embd);
    out_norm_ = decode_matrix(model.output_norm);
    out_ = decode_matrix(model.output);
    for (const LayerWeights& l : model.layers) {
      layers_.push_back({decode_matrix(l.attn_norm), decode_matrix(l.wq), decode_matrix(l.wk),
                         decode_matrix(l.wv), decode_matrix(l.wo), decode_matrix(l.ffn_norm),
                         decode_matrix(l.ffn_gate), decode_matrix(l.ffn_up), decode_matrix(l.ffn_down)});
    }
    kcache_.resize(layers_.size());
    vcache_.resize(layers_.size());
  }

  // Logits for `token` at the next position.
  std::vector<double> step(int token) {
    const int64_t dim = c_.dim, hs = c_.head_dim, kv_dim = c_.kv_dim(), hidden = c_.hidden_dim;
    const int64_t pos = static_cast<int64_t>(kcache_[0].size()) / kv_dim;
    std::vector<double> x(embd_.begin() + token * dim, embd_.begin() + (token + 1) * dim);
    std::vector<double> xb(dim), q(dim), k(kv_dim), v(kv_dim), att(dim), hb(hidden), hb2(hidden);
    for (size_t l = 0; l < layers_.size(); ++l) {
      const Layer& w = layers_[l];
      rmsnorm(xb, x, w.attn_norm);
      matmul(q, xb, w.wq, dim, dim);
      matmul(k, xb, w.wk, kv_dim, dim);
      matmul(v, xb, w.wv, kv_dim, dim);
      rope(q, pos);
      rope(k, pos);
      kcache_[l].insert(kcache_[l].end(), k.begin(), k.end());
      vcache_[l].insert(vcache_[l].end(), v.begin(), v.end());
      const int64_t group = c_.n_heads / c_.n_kv_heads;
      for (int64_t h = 0; h < c_.n_heads; ++h) {
        const int64_t kvh = h / group;
        std::vector<double> s(pos + 1);
        double mx = -INFINITY;
        for (int64_t t = 0; t <= pos; ++t) {
          double dot = 0;
          for (int64_t i = 0; i < hs; ++i) dot += q[h * hs + i] * kcache_[l][t * kv_dim + kvh * hs + i];
          s[t] = dot / std::sqrt(static_cast<double>(hs));
          mx = std::max(mx, s[t]);
        }
        double sum = 0;
        for (double& e : s) sum += e = std::exp(e - mx);
        for (int64_t i = 0; i < hs; ++i) {
          double a = 0;
          for (int64_t t = 0; t <= pos; ++t) a += s[t] / sum * vcache_[l][t * kv_dim + kvh * hs + i];
          att[h * hs + i] = a;
        }
      }
      matmul(xb, att, w.wo, dim, dim);
      for (int64_t i = 0; i < dim; ++i) x[i] += xb[i];
      rmsnorm(xb, x, w.ffn_norm);
      matmul(hb, xb, w.gate, hidden, dim);
      matmul(hb2, xb, w.up, hidden, dim);
      for (int64_t i = 0; i < hidden; ++i) hb[i] = hb[i] / (1.0 + std::exp(-hb[i])) * hb2[i];
      matmul(xb, hb, w.down, dim, hidden);
      for (int64_t i = 0; i < dim; ++i) x[i] += xb[i];
    }
    rmsnorm(xb, x, out_norm_);
    std::vector<double> logits(c_.vocab_size);
    matmul(logits, xb, out_, c_.vocab_size, dim);
    return logits;
  }

 private:
  struct Layer {
    std::vector<double> attn_norm, wq, wk, wv, wo, ffn_norm, gate, up, down;
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
  void rope(std::vector<double>& x, int64_t pos) const {
    const int64_t hs = c_.head_dim;
    for (size_t h = 0; h < x.size() / hs; ++h) {
      for (int64_t k = 0; 2 * k < c_.rope_dim; ++k) {
        const double theta = pos * std::pow(static_cast<double>(c_.rope_theta), -2.0 * k / c_.rope_dim);
        double& a = x[h * hs + 2 * k];
        double& b = x[h * hs + 2 * k + 1];
        const double a0 = a, b0 = b;
        a = a0 * std::cos(theta) - b0 * std::sin(theta);
        b = a0 * std::sin(theta) + b0 * std::cos(theta);
      }
    }
  }

  const Model& m_;
  const ModelConfig& c_;
  std::vector<double> embd_, out_norm_, out_;
  std::vector<Layer> layers_;
  std::vector<std::vector<double>> kcache_, vcache_;  // [layer][pos*kv_dim]
};

}  // namespace qkv::test

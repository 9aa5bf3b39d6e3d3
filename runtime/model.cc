#include "runtime/model.h"

namespace qkv {

namespace {

uint64_t matrix_bytes(const Matrix& m) {
  return static_cast<uint64_t>(m.rows) * dtype_row_bytes(m.type, static_cast<size_t>(m.cols));
}
uint64_t matrix_params(const Matrix& m) { return static_cast<uint64_t>(m.rows) * m.cols; }

// Calls f on every distinct weight matrix; a tied output (same data as the
// embedding) is visited once.
template <typename F>
void for_each_weight(const Model& m, F f) {
  f(m.token_embd);
  f(m.output_norm);
  if (m.output.data != m.token_embd.data) f(m.output);
  for (const LayerWeights& l : m.layers) {
    for (const Matrix* w : layer_matrices(l)) f(*w);
  }
}

template <typename L, typename M>
std::vector<M*> present(L& l) {
  std::vector<M*> out;
  for (M* w : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_norm, &l.ffn_gate, &l.ffn_up, &l.ffn_down, &l.bq,
               &l.bk, &l.bv, &l.q_norm, &l.k_norm, &l.post_attn_norm, &l.post_ffn_norm}) {
    if (w->data != nullptr) out.push_back(w);
  }
  return out;
}

}  // namespace

std::vector<const Matrix*> layer_matrices(const LayerWeights& l) { return present<const LayerWeights, const Matrix>(l); }
std::vector<Matrix*> layer_matrices(LayerWeights& l) { return present<LayerWeights, Matrix>(l); }

uint64_t Model::weight_bytes() const {
  uint64_t total = 0;
  for_each_weight(*this, [&](const Matrix& w) { total += matrix_bytes(w); });
  return total;
}

uint64_t Model::parameter_count() const {
  uint64_t total = 0;
  for_each_weight(*this, [&](const Matrix& w) { total += matrix_params(w); });
  return total;
}

}  // namespace qkv

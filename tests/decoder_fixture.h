// Shared by the decoder suites: a small GQA model shape and the logit
// comparison they state their tolerances in.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "runtime/model.h"

namespace qkv::testing {

// 3 layers, 8 query heads on 2 KV heads of 8, FFN a multiple of 32 (so Q8_0
// applies to every matrix), vocabulary 300, context 128.
inline ModelConfig small_gqa_config() {
  ModelConfig c;
  c.dim = 64;
  c.hidden_dim = 192;
  c.n_layers = 3;
  c.n_heads = 8;
  c.n_kv_heads = 2;
  c.head_dim = 8;
  c.rope_dim = 8;
  c.vocab_size = 300;
  c.context_length = 128;
  return c;
}

// Largest |a - b| relative to b's largest |logit|.
inline double rel_diff(const float* a, const float* b, int64_t n) {
  double d = 0, s = 0;
  for (int64_t i = 0; i < n; ++i) {
    d = std::max(d, std::fabs(double(a[i]) - b[i]));
    s = std::max(s, std::fabs(double(b[i])));
  }
  return d / std::max(s, 1e-30);
}

}  // namespace qkv::testing

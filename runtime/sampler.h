// Picks the next token from logits: greedy at temperature 0, otherwise
// temperature, then top-k, top-p (nucleus) and min-p filters, then a draw from a
// seeded generator (the same seed gives the same tokens).
#pragma once

#include <cstdint>
#include <vector>

namespace qkv {

struct SamplerOptions {
  float temperature = 0.8f;  // <= 0: greedy (argmax, first index on ties)
  int32_t top_k = 40;        // <= 0: off
  float top_p = 0.95f;       // >= 1: off
  float min_p = 0.05f;       // <= 0: off (relative to the most likely token)
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplerOptions& options);
  // logits has n entries; may be modified (scaled in place).
  int32_t sample(float* logits, int64_t n);
  const SamplerOptions& options() const { return options_; }

 private:
  double next_uniform();  // [0, 1)
  int32_t sample_unordered(const float* logits, int64_t n);

  SamplerOptions options_;
  uint64_t state_;
  std::vector<std::pair<float, int32_t>> candidates_;
};

// Index of the largest value (the first one on ties).
int32_t argmax(const float* x, int64_t n);

}  // namespace qkv

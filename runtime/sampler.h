// Picks the next token from logits. First the logit edits: logit bias, then
// the repetition penalties over the recent tokens (llama.cpp's order and
// formulas: repeat penalty divides a positive logit and multiplies a negative
// one; frequency subtracts count x penalty, presence subtracts the penalty once).
// Then greedy at temperature 0, otherwise temperature, top-k, top-p (nucleus)
// and min-p filters and a draw from a seeded generator (the same seed gives the
// same tokens).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace qkv {

struct SamplerOptions {
  float temperature = 0.8f;  // <= 0: greedy (argmax, first index on ties)
  int32_t top_k = 40;        // <= 0: off
  float top_p = 0.95f;       // >= 1: off
  float min_p = 0.05f;       // <= 0: off (relative to the most likely token)
  uint64_t seed = 0;
  float repeat_penalty = 1.0f;     // 1 (or <= 0): off
  int64_t repeat_last_n = 64;      // recent tokens the penalties look at; 0: off, -1: all given
  float presence_penalty = 0.0f;   // 0: off
  float frequency_penalty = 0.0f;  // 0: off
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token, added to its logit); -inf bans it
};

// log-softmax of logits at one token, and the n_top most likely (token, logprob)
// in order (ties: lower id first).
struct TokenLogprobs {
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;
};
TokenLogprobs token_logprobs(const float* logits, int64_t n, int32_t token, int64_t n_top);

class Sampler {
 public:
  explicit Sampler(const SamplerOptions& options);
  // logits has n entries; may be modified (edited and scaled in place).
  // recent: the sequence's tokens so far (the penalties use its last
  // repeat_last_n), may be null when n_recent is 0.
  int32_t sample(float* logits, int64_t n, const int32_t* recent = nullptr, int64_t n_recent = 0);
  // The logit bias and penalties alone, in place (what sample applies first).
  void apply_penalties(float* logits, int64_t n, const int32_t* recent, int64_t n_recent);
  // The distribution sample() draws from, over all n tokens (0 for the ones
  // the filters drop; at temperature <= 0 all mass on the argmax): logits are
  // edited as sample() edits them. No random draw (speculative sampling's
  // acceptance test needs the target's probabilities, runtime/speculative.h).
  void probabilities(float* logits, int64_t n, const int32_t* recent, int64_t n_recent, std::vector<double>* p);
  const SamplerOptions& options() const { return options_; }

 private:
  double next_uniform();  // [0, 1)
  int32_t sample_unordered(const float* logits, int64_t n);
  // The sorted path of sample(): candidates_ sorted by logit and cut to
  // top-k, probs their softmax at the temperature; returns how many of them
  // min-p and top-p keep.
  size_t sorted_probabilities(const float* logits, int64_t n, std::vector<double>* probs);

  SamplerOptions options_;
  uint64_t state_;
  std::vector<std::pair<float, int32_t>> candidates_;
  std::vector<std::pair<int32_t, int32_t>> counts_;  // (token, count) scratch for the penalties
};

// Index of the largest value (the first one on ties).
int32_t argmax(const float* x, int64_t n);

}  // namespace qkv

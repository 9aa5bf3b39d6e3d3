// Perplexity and KL divergence as llama-perplexity computes them (see
// ../shared/notes.md): chunks of n_ctx tokens, each from an empty cache with
// its first token set to BOS, positions n_ctx/2 .. n_ctx-2 scored against the
// next token. The statistics are the C API's qkv_perplexity_stats.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "qkv.h"
#include "runtime/model.h"

namespace qkv {

struct PerplexityConfig {
  int64_t n_ctx = 512;   // 0 with kld_read: the file's
  int64_t batch = 0;     // 0 or > n_ctx: n_ctx
  int64_t chunks = 0;    // <= 0: all
  DType kv_type = DType::F16;
  std::string kld_write, kld_read;
};

// The quantile fractions of qkv_perplexity_stats' arrays (QKV_EVAL_QUANTILES).
extern const double kEvalQuantiles[QKV_EVAL_QUANTILES];
// The value at fraction f of sorted values, interpolating linearly.
double quantile_of_sorted(const std::vector<double>& sorted, double f);

// tokens: the whole text's tokens (BOS first when the vocabulary adds one);
// ignored when config.kld_read is set (the file's tokens are used). progress
// gets the running statistics after each chunk and returns false to stop.
qkv_perplexity_stats evaluate_perplexity(const Model& model, int32_t bos_id, const std::vector<int32_t>& tokens,
                                         const PerplexityConfig& config,
                                         const std::function<bool(const qkv_perplexity_stats&)>& progress);

}  // namespace qkv

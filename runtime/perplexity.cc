#include "runtime/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>

#include "kernels/error.h"
#include "runtime/decoder.h"
#include "runtime/kld_file.h"

namespace qkv {

const double kEvalQuantiles[QKV_EVAL_QUANTILES] = {1.0, 0.999, 0.99, 0.95, 0.90, 0.75, 0.5,
                                                   0.25, 0.10, 0.05, 0.01, 0.001, 0.0};

double quantile_of_sorted(const std::vector<double>& v, double f) {
  if (v.empty()) return 0.0;
  if (f <= 0) return v.front();
  if (f >= 1) return v.back();
  const double p = f * static_cast<double>(v.size() - 1);
  const auto i = static_cast<size_t>(p);
  const double t = p - static_cast<double>(i);
  return (1 - t) * v[i] + t * v[std::min(i + 1, v.size() - 1)];
}

namespace {

// Mean and its standard error from a sum and a sum of squares over n values.
struct MeanErr {
  double mean = 0, err = 0;
};
MeanErr mean_err(double sum, double sum2, int64_t n) {
  MeanErr r;
  if (n <= 0) return r;
  const double nn = static_cast<double>(n);
  r.mean = sum / nn;
  const double var = sum2 / nn - r.mean * r.mean;
  r.err = n > 1 ? std::sqrt(std::max(0.0, var) / (nn - 1)) : 0.0;
  return r;
}

// Log-softmax of one row of logits: the row's max and log(sum exp(x - max)).
struct LogSoftmax {
  double max = 0, lse = 0;
  int64_t argmax = 0;
  LogSoftmax(const float* x, int64_t n) {
    float m = x[0];
    for (int64_t i = 1; i < n; ++i) {
      if (x[i] > m) {
        m = x[i];
        argmax = i;
      }
    }
    max = m;
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += std::exp(static_cast<double>(x[i]) - max);
    lse = std::log(s);
  }
  double log_prob(const float* x, int64_t i) const { return static_cast<double>(x[i]) - max - lse; }
};

// Running sums of everything the statistics need.
struct Accumulator {
  int64_t n = 0;
  double nll = 0, nll2 = 0;
  // Against a base file.
  double base_nll = 0, base_nll2 = 0, cross = 0;  // cross: sum nll * base_nll
  double kld = 0, kld2 = 0, dp = 0, dp2 = 0, dp4 = 0;
  int64_t same_top = 0;
  std::vector<double> klds, dps;

  void fill(qkv_perplexity_stats& s, bool with_base) const {
    const MeanErr q = mean_err(nll, nll2, n);
    s.scored_tokens = n;
    s.ppl = std::exp(q.mean);
    s.ppl_err = q.err * s.ppl;
    if (!with_base) return;
    s.has_kld = 1;
    const MeanErr b = mean_err(base_nll, base_nll2, n);
    s.base_ppl = std::exp(b.mean);
    s.base_ppl_err = b.err * s.base_ppl;
    const double nn = static_cast<double>(std::max<int64_t>(n, 1));
    const double cov = cross / nn - q.mean * b.mean;
    const double var_q = nll2 / nn - q.mean * q.mean, var_b = base_nll2 / nn - b.mean * b.mean;
    s.ppl_correlation = var_q > 0 && var_b > 0 ? cov / std::sqrt(var_q * var_b) : 0.0;
    // ln(PPL(Q)/PPL(base)) is the mean of the per-token differences.
    const double d_sum = nll - base_nll;
    const double d_sum2 = nll2 - 2 * cross + base_nll2;
    const MeanErr d = mean_err(d_sum, d_sum2, n);
    s.ln_ppl_ratio = d.mean;
    s.ln_ppl_ratio_err = d.err;
    s.ppl_ratio = std::exp(d.mean);
    s.ppl_ratio_err = s.ppl_ratio * d.err;
    s.ppl_diff = s.ppl - s.base_ppl;
    // Error of a difference of correlated estimates (covariance of the means).
    const double cov_means = n > 1 ? cov / (nn - 1) : 0.0;
    const double vd = s.ppl_err * s.ppl_err + s.base_ppl_err * s.base_ppl_err - 2 * s.ppl * s.base_ppl * cov_means;
    s.ppl_diff_err = std::sqrt(std::max(0.0, vd));
    const MeanErr k = mean_err(kld, kld2, n);
    s.kld = k.mean;
    s.kld_err = k.err;
    const MeanErr p = mean_err(dp, dp2, n);
    s.dp_mean = p.mean;
    s.dp_mean_err = p.err;
    const MeanErr p2 = mean_err(dp2, dp4, n);  // mean of dp^2 and its error
    s.dp_rms = std::sqrt(std::max(0.0, p2.mean));
    s.dp_rms_err = s.dp_rms > 0 ? p2.err / (2 * s.dp_rms) : 0.0;
    s.same_top = static_cast<double>(same_top) / nn;
    s.same_top_err = n > 1 ? std::sqrt(s.same_top * (1 - s.same_top) / (nn - 1)) : 0.0;
  }
};

}  // namespace

qkv_perplexity_stats evaluate_perplexity(const Model& model, int32_t bos_id, const std::vector<int32_t>& text_tokens,
                                         const PerplexityConfig& config,
                                         const std::function<bool(const qkv_perplexity_stats&)>& progress) {
  const int64_t vocab = model.config.vocab_size;
  std::optional<KldBaseFile> base;
  std::vector<int32_t> tokens;
  int64_t n_ctx = config.n_ctx;
  if (!config.kld_read.empty()) {
    base = KldBaseFile::open(config.kld_read);
    if (n_ctx > 0 && n_ctx != base->n_ctx()) {
      fail("the KL-divergence base file was made with n_ctx ", base->n_ctx(), ", not ", n_ctx,
           " (leave -c out to use the file's)");
    }
    n_ctx = base->n_ctx();
    if (base->n_vocab() != vocab) {
      fail_as(ErrorKind::kFormat, config.kld_read, ": the base file has a vocabulary of ", base->n_vocab(),
              " tokens but the model has ", vocab);
    }
    tokens = base->tokens();
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] < 0 || tokens[i] >= vocab) {
        fail_as(ErrorKind::kFormat, config.kld_read, ": token ", i, " of the base file (", tokens[i],
                ") is outside the vocabulary of ", vocab);
      }
    }
  } else {
    tokens = text_tokens;
  }
  QKV_CHECK(n_ctx >= 4, "the context (-c) must be at least 4 tokens (got ", n_ctx, ")");
  const auto n_tokens = static_cast<int64_t>(tokens.size());
  if (n_tokens < 2 * n_ctx) {
    fail("the text has ", n_tokens, " tokens, but perplexity needs at least 2 * n_ctx = ", 2 * n_ctx,
         " tokens with a context of ", n_ctx, ": use a longer text or a smaller -c");
  }
  int64_t n_chunk = n_tokens / n_ctx;
  if (config.chunks > 0) n_chunk = std::min(n_chunk, config.chunks);
  const int64_t first = n_ctx / 2;
  const int64_t scored = kld_scored_per_chunk(n_ctx);

  DecoderOptions d;
  d.context = n_ctx;
  d.kv_type = config.kv_type;
  d.n_seqs = 1;
  d.prefill_batch = config.batch > 0 ? std::min(config.batch, n_ctx) : n_ctx;
  Decoder decoder(model, d);

  std::unique_ptr<KldBaseWriter> writer;
  if (!config.kld_write.empty()) {
    writer = std::make_unique<KldBaseWriter>(config.kld_write, n_ctx, vocab, n_chunk, tokens.data());
  }

  std::vector<float> logits(static_cast<size_t>(n_ctx * vocab));
  std::vector<int32_t> chunk_tokens(static_cast<size_t>(n_ctx));
  Accumulator acc;
  qkv_perplexity_stats stats{};
  stats.n_chunks = n_chunk;
  stats.n_ctx = n_ctx;
  stats.text_tokens = n_tokens;
  const auto t0 = std::chrono::steady_clock::now();

  for (int64_t c = 0; c < n_chunk; ++c) {
    std::copy_n(tokens.begin() + c * n_ctx, n_ctx, chunk_tokens.begin());
    if (bos_id >= 0) chunk_tokens[0] = bos_id;
    decoder.cache().clear(0);
    decoder.prefill_all_logits(0, chunk_tokens.data(), n_ctx, logits.data());
    for (int64_t j = 0; j < scored; ++j) {
      const int64_t pos = first + j;
      const float* row = &logits[static_cast<size_t>(pos * vocab)];
      const int32_t target = tokens[static_cast<size_t>(c * n_ctx + pos + 1)];
      const LogSoftmax ls(row, vocab);
      const double lp = ls.log_prob(row, target);
      acc.nll -= lp;
      acc.nll2 += lp * lp;
      ++acc.n;
      if (writer) writer->add_row(row);
      if (base) {
        const KldRow br = base->row(c, j);
        double kld = 0;
        int64_t base_top = 0;
        for (int64_t i = 0; i < vocab; ++i) {
          // As llama.cpp: a base log-probability at or below -16 is the 16-bit
          // format's floor, not a value, and adds nothing.
          const double lb = br.log_prob(i);
          if (lb > -16.0) kld += std::exp(lb) * (lb - ls.log_prob(row, i));
          if (br.q[i] > br.q[base_top]) base_top = i;
        }
        const double base_lp = br.log_prob(target);
        const double dp = std::exp(lp) - std::exp(base_lp);
        acc.base_nll -= base_lp;
        acc.base_nll2 += base_lp * base_lp;
        acc.cross += lp * base_lp;
        acc.kld += kld;
        acc.kld2 += kld * kld;
        acc.dp += dp;
        acc.dp2 += dp * dp;
        acc.dp4 += dp * dp * dp * dp;
        acc.same_top += base_top == ls.argmax;
        acc.klds.push_back(kld);
        acc.dps.push_back(dp);
      }
    }
    stats.chunk = c + 1;
    stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    acc.fill(stats, base.has_value());
    if (progress && !progress(stats)) {
      stats.n_chunks = c + 1;
      writer.reset();  // a stopped run leaves no partial base file
      return stats;
    }
  }
  if (writer) writer->finish();
  if (base) {
    std::sort(acc.klds.begin(), acc.klds.end());
    std::sort(acc.dps.begin(), acc.dps.end());
    for (int i = 0; i < QKV_EVAL_QUANTILES; ++i) {
      stats.kld_quantiles[i] = quantile_of_sorted(acc.klds, kEvalQuantiles[i]);
      stats.dp_quantiles[i] = quantile_of_sorted(acc.dps, kEvalQuantiles[i]);
    }
    stats.has_quantiles = 1;
  }
  return stats;
}

}  // namespace qkv

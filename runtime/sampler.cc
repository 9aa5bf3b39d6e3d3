#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>

#include "kernels/error.h"
#include "qkv.h"

namespace qkv {

int32_t argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (x[i] > x[best]) best = i;
  }
  return static_cast<int32_t>(best);
}

Sampler::Sampler(const SamplerOptions& options) : options_(options), state_(options.seed) {
  QKV_CHECK(std::isfinite(options.temperature), "temperature must be a finite number");
  QKV_CHECK(options.top_p > 0.0f, "top-p must be positive (1 turns it off)");
  QKV_CHECK(options.min_p < 1.0f, "min-p must be below 1 (0 turns it off)");
  QKV_CHECK(std::isfinite(options.repeat_penalty), "repeat penalty must be a finite number");
  QKV_CHECK(options.repeat_last_n >= -1, "repeat-last-n must be -1 (all), 0 (off) or a count");
  QKV_CHECK(std::isfinite(options.presence_penalty) && std::isfinite(options.frequency_penalty),
            "presence and frequency penalties must be finite numbers");
  for (const auto& [token, bias] : options.logit_bias) {
    QKV_CHECK(token >= 0, "logit bias for a negative token id ", token);
    QKV_CHECK(!std::isnan(bias) && bias != INFINITY, "logit bias for token ", token, " must be a number or -inf");
  }
}

void Sampler::apply_penalties(float* logits, int64_t n, const int32_t* recent, int64_t n_recent) {
  for (const auto& [token, bias] : options_.logit_bias) {
    QKV_CHECK(token < n, "logit bias for token ", token, " but the vocabulary has ", n, " tokens");
    logits[token] += bias;
  }
  const bool repeat = options_.repeat_penalty > 0.0f && options_.repeat_penalty != 1.0f;
  if (!repeat && options_.presence_penalty == 0.0f && options_.frequency_penalty == 0.0f) return;
  if (options_.repeat_last_n == 0 || n_recent <= 0 || recent == nullptr) return;
  const int64_t window = options_.repeat_last_n < 0 ? n_recent : std::min(n_recent, options_.repeat_last_n);
  counts_.clear();
  for (int64_t i = n_recent - window; i < n_recent; ++i) counts_.push_back({recent[i], 0});
  std::sort(counts_.begin(), counts_.end());
  size_t w = 0;  // run-length the sorted ids into (token, count)
  for (size_t r = 0; r < counts_.size(); ++r) {
    if (w > 0 && counts_[w - 1].first == counts_[r].first) {
      ++counts_[w - 1].second;
    } else {
      counts_[w++] = {counts_[r].first, 1};
    }
  }
  counts_.resize(w);
  for (const auto& [token, count] : counts_) {
    if (token < 0 || token >= n) continue;  // not a token of this vocabulary: nothing to penalize
    float& l = logits[token];
    if (repeat) l = l > 0 ? l / options_.repeat_penalty : l * options_.repeat_penalty;
    l -= static_cast<float>(count) * options_.frequency_penalty + options_.presence_penalty;
  }
}

TokenLogprobs token_logprobs(const float* logits, int64_t n, int32_t token, int64_t n_top) {
  QKV_CHECK(n >= 1 && token >= 0 && token < n, "logprobs of token ", token, " among ", n, " logits");
  const float top = logits[argmax(logits, n)];
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - top);
  const double log_z = top + std::log(sum);
  TokenLogprobs out;
  out.logprob = static_cast<float>(logits[token] - log_z);
  n_top = std::clamp<int64_t>(n_top, 0, n);
  if (n_top > 0) {
    std::vector<std::pair<float, int32_t>> c(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) c[i] = {logits[i], static_cast<int32_t>(i)};
    std::partial_sort(c.begin(), c.begin() + n_top, c.end(), [](const auto& a, const auto& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    });
    for (int64_t i = 0; i < n_top; ++i) out.top.push_back({c[i].second, static_cast<float>(c[i].first - log_z)});
  }
  return out;
}

// splitmix64: a small, well-mixed generator whose whole state is the seed.
double Sampler::next_uniform() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

// Temperature (and min-p, a threshold relative to the largest logit) need no
// sorting: one pass for the normaliser, one for the draw in index order.
int32_t Sampler::sample_unordered(const float* logits, int64_t n) {
  const float top = logits[argmax(logits, n)];
  const double inv_t = 1.0 / options_.temperature;
  // p_i >= min_p * p_max  <=>  logit_i >= top + T * ln(min_p)
  const double cut = options_.min_p > 0.0f ? top + options_.temperature * std::log(options_.min_p) : -INFINITY;
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (logits[i] >= cut) total += std::exp((logits[i] - top) * inv_t);
  }
  double r = next_uniform() * total;
  int32_t last = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (logits[i] < cut) continue;
    last = static_cast<int32_t>(i);
    r -= std::exp((logits[i] - top) * inv_t);
    if (r < 0) return last;
  }
  return last;
}

size_t Sampler::sorted_probabilities(const float* logits, int64_t n, std::vector<double>* probs) {
  // Candidates sorted by logit, cut to top-k.
  candidates_.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) candidates_[i] = {logits[i], static_cast<int32_t>(i)};
  auto by_logit = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t keep = candidates_.size();
  if (options_.top_k > 0 && static_cast<size_t>(options_.top_k) < keep) {
    keep = static_cast<size_t>(options_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + keep, candidates_.end(), by_logit);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }
  candidates_.resize(keep);

  // Softmax at the temperature, in double (probabilities of the kept candidates).
  const double inv_t = 1.0 / options_.temperature;
  const double top = candidates_[0].first;
  std::vector<double>& p = *probs;
  p.assign(keep, 0.0);
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) sum += p[i] = std::exp((candidates_[i].first - top) * inv_t);
  for (double& x : p) x /= sum;

  // min-p: drop candidates below min_p times the most likely one's probability.
  if (options_.min_p > 0.0f) {
    size_t k = 1;
    while (k < keep && p[k] >= options_.min_p * p[0]) ++k;
    keep = k;
  }
  // top-p: the smallest prefix whose mass reaches top_p.
  if (options_.top_p < 1.0f) {
    double mass = 0;
    size_t k = 0;
    while (k < keep) {
      mass += p[k++];
      if (mass >= options_.top_p) break;
    }
    keep = k;
  }
  return keep;
}

int32_t Sampler::sample(float* logits, int64_t n, const int32_t* recent, int64_t n_recent) {
  QKV_CHECK(n >= 1 && logits != nullptr, "sampling needs at least one logit");
  apply_penalties(logits, n, recent, n_recent);
  if (options_.temperature <= 0.0f) return argmax(logits, n);
  const bool needs_order = (options_.top_k > 0 && options_.top_k < n) || options_.top_p < 1.0f;
  if (!needs_order) return sample_unordered(logits, n);

  std::vector<double> p;
  const size_t keep = sorted_probabilities(logits, n, &p);
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += p[i];
  double r = next_uniform() * total;
  for (size_t i = 0; i < keep; ++i) {
    r -= p[i];
    if (r < 0) return candidates_[i].second;
  }
  return candidates_[keep - 1].second;
}

void Sampler::probabilities(float* logits, int64_t n, const int32_t* recent, int64_t n_recent,
                            std::vector<double>* p) {
  QKV_CHECK(n >= 1 && logits != nullptr, "sampling needs at least one logit");
  apply_penalties(logits, n, recent, n_recent);
  p->assign(static_cast<size_t>(n), 0.0);
  if (options_.temperature <= 0.0f) {
    (*p)[static_cast<size_t>(argmax(logits, n))] = 1.0;
    return;
  }
  const double inv_t = 1.0 / options_.temperature;
  const bool needs_order = (options_.top_k > 0 && options_.top_k < n) || options_.top_p < 1.0f;
  if (!needs_order) {  // sample_unordered's weights
    const float top = logits[argmax(logits, n)];
    const double cut = options_.min_p > 0.0f ? top + options_.temperature * std::log(options_.min_p) : -INFINITY;
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (logits[i] >= cut) total += (*p)[i] = std::exp((logits[i] - top) * inv_t);
    }
    for (double& x : *p) x /= total;
    return;
  }
  // sample()'s sorted path: top-k, softmax, min-p, top-p, in that order.
  std::vector<double> q;
  const size_t keep = sorted_probabilities(logits, n, &q);
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += q[i];
  for (size_t i = 0; i < keep; ++i) (*p)[static_cast<size_t>(candidates_[i].second)] = q[i] / total;
}

}  // namespace qkv

// The C API's sampler defaults are the SamplerOptions defaults (here, beside
// them, so code that reads sampler options needs no more of the library).
void qkv_sampler_options_init(qkv_sampler_options* options) {
  if (!options) return;
  const qkv::SamplerOptions d;
  options->temperature = d.temperature;
  options->top_k = d.top_k;
  options->top_p = d.top_p;
  options->min_p = d.min_p;
  options->seed = d.seed;
  options->repeat_penalty = d.repeat_penalty;
  options->repeat_last_n = d.repeat_last_n;
  options->presence_penalty = d.presence_penalty;
  options->frequency_penalty = d.frequency_penalty;
}

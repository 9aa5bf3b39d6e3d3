// Greedy decoding two ways for the speculative decoding tests: plain (prefill,
// then argmax and step) and through a Speculator with a drafter, both
// returning the generated tokens.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/decoder.h"
#include "runtime/sampler.h"
#include "runtime/speculative.h"

namespace qkv::test {

inline std::vector<int32_t> plain_greedy(Decoder& dec, const std::vector<int32_t>& prompt, int64_t n_new) {
  const float* logits = dec.prefill(0, prompt.data(), static_cast<int64_t>(prompt.size()));
  std::vector<int32_t> out;
  while (static_cast<int64_t>(out.size()) < n_new) {
    out.push_back(argmax(logits, dec.vocab_size()));
    if (static_cast<int64_t>(out.size()) < n_new) logits = dec.step(0, out.back());
  }
  return out;
}

// The generate() loop's use of a Speculator: pending tokens first, else a
// sample from the last plain logits; the cache ends holding what plain
// decoding's would (prompt and every generated token but the last).
inline std::vector<int32_t> speculative_tokens(Decoder& dec, Drafter& drafter, const std::vector<int32_t>& prompt,
                                               int64_t n_new, const SamplerOptions& sampling, int64_t draft_max,
                                               SpeculativeStats* stats = nullptr, bool adaptive = true) {
  const int64_t start = dec.position(0);
  const float* logits = dec.prefill(0, prompt.data(), static_cast<int64_t>(prompt.size()));
  SpeculativeOptions so;
  so.drafter = &drafter;
  so.draft_max = draft_max;
  so.adaptive = adaptive;
  Speculator spec(dec, 0, so, sampling);
  Sampler sampler(sampling);
  std::vector<int32_t> history = prompt, out;
  std::vector<float> scratch(static_cast<size_t>(dec.vocab_size()));
  while (static_cast<int64_t>(out.size()) < n_new) {
    int32_t next = 0;
    if (spec.has_pending()) {
      next = spec.take_pending();
    } else {
      std::copy(logits, logits + scratch.size(), scratch.begin());
      next = sampler.sample(scratch.data(), dec.vocab_size(), history.data(), static_cast<int64_t>(history.size()));
    }
    out.push_back(next);
    history.push_back(next);
    const auto left = n_new - static_cast<int64_t>(out.size());
    if (left == 0) break;
    if (!spec.has_pending()) logits = spec.advance(history, left - 1);
  }
  dec.cache().truncate(0, start + static_cast<int64_t>(prompt.size() + out.size()) - 1);
  if (stats) *stats = spec.stats();
  return out;
}

}  // namespace qkv::test

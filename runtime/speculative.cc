#include "runtime/speculative.h"

#include <algorithm>

#include "kernels/error.h"

namespace qkv {

void check_speculative_options(const SpeculativeOptions& options) {
  QKV_CHECK(options.draft_max >= 1 && options.draft_max <= SpeculativeOptions::kMaxDraft,
            "the tokens drafted per pass (--draft-max) must be 1 .. ", SpeculativeOptions::kMaxDraft, " (got ", options.draft_max, ")");
  QKV_CHECK(options.draft_min >= 0 && options.draft_min <= options.draft_max, "the fewest drafted tokens worth verifying (--draft-min) must be 0 .. --draft-max (",
            options.draft_max, ") (got ", options.draft_min, ")");
}

double SpeculativeRandom::next_uniform() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

DraftLength::DraftLength(const SpeculativeOptions& options)
    : draft_max_(options.draft_max),
      floor_(std::max<int64_t>(1, options.draft_min)),
      adaptive_(options.adaptive),
      cap_(options.draft_max) {}

int64_t DraftLength::next() {
  if (skip_ > 0) {
    --skip_;
    return 0;
  }
  return cap_;
}

void DraftLength::adapt(int64_t accepted, int64_t drafted) {
  if (!adaptive_) return;
  if (accepted == drafted) {
    cap_ = std::min(draft_max_, cap_ + 2);
  } else {
    cap_ = std::max(floor_, accepted + 1);
  }
  if (accepted > 0) {
    backoff_ = 1;
  } else if (drafted <= floor_) {
    skip_ = backoff_;
    backoff_ = std::min<int64_t>(2 * backoff_, kMaxBackoff);
  }
}

int64_t accept_drafts(Sampler& sampler, float* logits, int64_t vocab, const int32_t* draft, int64_t k,
                      std::vector<int32_t>* recent, SpeculativeRandom& random, std::vector<double>* p,
                      std::vector<int32_t>* decided) {
  for (int64_t i = 0; i <= k; ++i) {
    float* row = logits + i * vocab;
    sampler.probabilities(row, vocab, recent->data(), static_cast<int64_t>(recent->size()), p);
    std::vector<double>& q = *p;
    if (i < k) {
      const int32_t d = draft[i];
      QKV_CHECK(d >= 0 && d < vocab, "speculative decoding: drafted token ", d, " is outside the vocabulary of ", vocab);
      if (random.next_uniform() < q[static_cast<size_t>(d)]) {  // accept with probability p(d)
        decided->push_back(d);
        recent->push_back(d);
        continue;
      }
      q[static_cast<size_t>(d)] = 0.0;  // the residual: p without d
    }
    // The target's own token: from p, or from the residual after a rejection.
    double total = 0;
    for (double x : q) total += x;
    QKV_CHECK(total > 0.0, "speculative decoding: the target's distribution has no mass left at position ", i);
    double r = random.next_uniform() * total;
    int32_t chosen = -1;
    for (int64_t t = 0; t < vocab; ++t) {
      if (q[static_cast<size_t>(t)] <= 0.0) continue;
      chosen = static_cast<int32_t>(t);
      r -= q[static_cast<size_t>(t)];
      if (r < 0) break;
    }
    decided->push_back(chosen);
    return i;
  }
  return k;  // not reached: row k always decides
}

Speculator::Speculator(Decoder& target, int64_t seq, const SpeculativeOptions& options, const SamplerOptions& sampler)
    : target_(target),
      seq_(seq),
      options_(options),
      sampler_(sampler),
      random_(sampler.seed),
      length_(options) {
  QKV_CHECK(options.drafter != nullptr, "speculative decoding needs a drafter");
  check_speculative_options(options);
}

int32_t Speculator::take_pending() {
  QKV_CHECK(!pending_.empty(), "speculative decoding: no pending token to take");
  const int32_t t = pending_.front();
  pending_.pop_front();
  return t;
}

const float* Speculator::advance(const std::vector<int32_t>& history, int64_t max_draft) {
  QKV_CHECK(!history.empty(), "speculative decoding: an empty history");
  QKV_CHECK(pending_.empty(), "speculative decoding: tokens of the last verify pass are still pending");
  const int32_t token = history.back();
  const int64_t k_max = std::min(length_.next(), max_draft);
  draft_.clear();
  if (k_max >= 1) options_.drafter->draft(history, k_max, &draft_);
  if (static_cast<int64_t>(draft_.size()) > k_max) draft_.resize(static_cast<size_t>(k_max));
  const auto k = static_cast<int64_t>(draft_.size());
  if (k == 0 || k < options_.draft_min) {
    ++stats_.plain_steps;
    return target_.step(seq_, token);
  }

  // One pass over the fed token and the drafts: logits of positions 0 .. k.
  const int64_t start = target_.position(seq_);
  const int64_t vocab = target_.vocab_size();
  tokens_.assign(1, token);
  tokens_.insert(tokens_.end(), draft_.begin(), draft_.end());
  logits_.resize(static_cast<size_t>((k + 1) * vocab));
  target_.prefill_all_logits(seq_, tokens_.data(), k + 1, logits_.data());
  ++stats_.verify_passes;
  stats_.drafted += k;

  recent_ = history;  // the penalties' look-back, extended by each accepted draft
  decided_.clear();
  const int64_t accepted =
      accept_drafts(sampler_, logits_.data(), vocab, draft_.data(), k, &recent_, random_, &p_, &decided_);
  pending_.assign(decided_.begin(), decided_.end());
  stats_.accepted += accepted;
  length_.adapt(accepted, k);
  // The cache keeps the fed token and the accepted drafts.
  target_.cache().truncate(seq_, start + 1 + accepted);
  return nullptr;
}

}  // namespace qkv

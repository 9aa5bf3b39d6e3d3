// Speculative decoding: a drafter (runtime/speculative_drafters.h) guesses the
// next k tokens; the target model runs the token it is about to be fed plus
// the k guesses in one pass (Decoder::prefill_all_logits over k + 1
// positions, each weight read once) and keeps the longest prefix it agrees
// with, then one token of its own after it. Its KV cache is truncated past
// what it kept.
//
// Agreement is speculative sampling with a point-mass draft (both drafters
// are deterministic): draft token d at a position where the target's sampling
// distribution is p (Sampler::probabilities: logit bias, penalties over the
// history up to that position, temperature and filters) is accepted with
// probability p(d); at the first rejection the target's token is drawn from p
// with d removed, renormalized. Each emitted token therefore has exactly the
// distribution plain sampling gives it; at temperature <= 0, p is the argmax,
// so the output is plain greedy decoding's token for token (as far as the
// verify pass's logits equal a decode step's).
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "runtime/decoder.h"
#include "runtime/sampler.h"
#include "runtime/speculative_drafters.h"

namespace qkv {

struct SpeculativeOptions {
  Drafter* drafter = nullptr;  // not owned; null: plain decoding
  int64_t draft_max = 16;      // tokens drafted per round (llama.cpp's --draft-max), 1 .. kMaxDraft
  int64_t draft_min = 0;       // a round with fewer drafted tokens runs a plain step (--draft-min)
  // Draft length that follows the acceptance: each fully accepted round allows
  // 2 more tokens (up to draft_max), a rejection after i accepted ones caps the
  // next round at i + 1 (at least max(1, draft_min)), and a rejected single
  // token skips drafting for 1, 2, 4 ... 32 steps until a draft is accepted
  // again. A drafter that is never right then costs a few verify passes over
  // a whole reply instead of one per token (tinystories-3M on text it does
  // not copy: n-gram lookup accepted 4% of its drafts, and fixed rounds of 8
  // ran at 0.31x plain decoding's tokens/s). The choice depends only on past
  // rounds, so the output's distribution stays the target's.
  bool adaptive = true;

  static constexpr int64_t kMaxDraft = 256;
};

// Fails (qkv::Error) naming the flag when draft_max or draft_min is out of range.
void check_speculative_options(const SpeculativeOptions& options);

struct SpeculativeStats {
  int64_t drafted = 0;        // tokens drafted and verified
  int64_t accepted = 0;       // of those, accepted by the target
  int64_t verify_passes = 0;  // target passes over k + 1 positions
  int64_t plain_steps = 0;    // target steps of one position (too few tokens drafted)
};

class Speculator {
 public:
  Speculator(Decoder& target, int64_t seq, const SpeculativeOptions& options, const SamplerOptions& sampler);

  // Tokens decided by the last verify pass and not yet taken, in order. All but
  // the last are in the target's cache already.
  bool has_pending() const { return !pending_.empty(); }
  int32_t take_pending();

  // Feeds the last token of history (not yet in the target's cache). With at
  // least max(1, draft_min) tokens drafted (at most max_draft, the room the
  // caller's limits leave) it runs a verify pass, leaves the accepted drafts
  // and the target's next token pending and returns null; otherwise it runs
  // one decode step and returns its logits (the caller samples as usual).
  const float* advance(const std::vector<int32_t>& history, int64_t max_draft);

  const SpeculativeStats& stats() const { return stats_; }

 private:
  double next_uniform();  // [0, 1), splitmix64 over its own state
  // The next round's draft length after a round that kept `accepted` of
  // `drafted` tokens (SpeculativeOptions::adaptive).
  void adapt(int64_t accepted, int64_t drafted);
  static constexpr int64_t kMaxBackoff = 32;

  Decoder& target_;
  int64_t seq_;
  SpeculativeOptions options_;
  Sampler sampler_;  // the penalties and filters only; it draws nothing
  uint64_t state_;
  int64_t draft_cap_;         // the adaptive draft length (options_.draft_max when not adaptive)
  int64_t backoff_ = 1;       // plain steps after the next fully rejected single-token round
  int64_t skip_ = 0;          // plain steps left before the next draft
  std::deque<int32_t> pending_;
  std::vector<int32_t> draft_, tokens_, recent_;
  std::vector<float> logits_;
  std::vector<double> p_;
  SpeculativeStats stats_;
};

}  // namespace qkv

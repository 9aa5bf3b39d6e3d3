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

// The draws of speculative sampling: splitmix64, a stream of its own (seeded
// from the sampler's seed, apart from the sampler's draws).
class SpeculativeRandom {
 public:
  explicit SpeculativeRandom(uint64_t seed) : state_(seed ^ 0x5bd1e9955bd1e995ull) {}
  double next_uniform();  // [0, 1)

 private:
  uint64_t state_;
};

// The draft length of each round (SpeculativeOptions::adaptive): one per
// stream, told each round's outcome.
class DraftLength {
 public:
  explicit DraftLength(const SpeculativeOptions& options);
  // Tokens the next round may draft; 0 while a backoff skips drafting (each
  // such call is one skipped round).
  int64_t next();
  // After a verify pass that kept `accepted` of `drafted` tokens.
  void adapt(int64_t accepted, int64_t drafted);

 private:
  static constexpr int64_t kMaxBackoff = 32;
  int64_t draft_max_, floor_;
  bool adaptive_;
  int64_t cap_;          // the adaptive draft length (draft_max when not adaptive)
  int64_t backoff_ = 1;  // plain steps after the next fully rejected single-token round
  int64_t skip_ = 0;     // plain steps left before the next draft
};

// Judges one verify pass: logits holds the target's rows [k + 1][vocab] for
// the fed token and the k drafts (edited in place), recent the history the
// penalties see at row 0 (the fed token last; each accepted draft is
// appended). Appends the accepted drafts and then the target's own token to
// *decided and returns how many drafts were accepted. The one acceptance rule
// of qkv_generate and the server's slots (qkv_speculate_batch).
int64_t accept_drafts(Sampler& sampler, float* logits, int64_t vocab, const int32_t* draft, int64_t k,
                      std::vector<int32_t>* recent, SpeculativeRandom& random, std::vector<double>* p,
                      std::vector<int32_t>* decided);

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
  Decoder& target_;
  int64_t seq_;
  SpeculativeOptions options_;
  Sampler sampler_;  // the penalties and filters only; it draws nothing
  SpeculativeRandom random_;
  DraftLength length_;
  std::deque<int32_t> pending_;
  std::vector<int32_t> draft_, tokens_, recent_, decided_;
  std::vector<float> logits_;
  std::vector<double> p_;
  SpeculativeStats stats_;
};

}  // namespace qkv

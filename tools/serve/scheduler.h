// Continuous batching over the slots (sequences) of one qkv_context.
//
// One thread owns the context. Each step it admits queued jobs into free
// slots (the slot whose cached tokens share the longest prefix with the
// prompt, so only the rest is prefilled), advances every generating slot by
// its sampled token with one qkv_step_batch (each weight read once for all)
// and samples their next tokens at once, then prefills at most one chunk of
// waiting prompts, so running streams keep flowing while a new prompt is read.
// A prompt samples its first token as soon as its last chunk is in. The last
// few tokens of a prompt (all of them when chunks are one token) ride in the
// batched step. Jobs beyond the slots wait in a bounded queue. Cancelled
// (client gone) and timed-out jobs free their slot at the next step.
//
// Speculative decoding (tools/serve/scheduler_speculate.cc): with a drafter,
// each generating slot drafts on its own; one qkv_speculate_batch verifies
// every drafting slot's guesses at once, and each slot's accepted tokens go
// out through the same path as sampled ones. The slots without a draft this
// step (none guessed, a grammar, "speculative": false) take the plain batched
// step in the same iteration.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "qkv.h"
#include "runtime/speculative.h"
#include "runtime/stop_strings.h"
#include "tools/serve/compute_turns.h"
#include "tools/serve/metrics.h"
#include "tools/serve/slot_drafters.h"
#include "tools/serve/spec_options.h"

namespace qkv::serve {

using Clock = std::chrono::steady_clock;

struct TopToken {
  int32_t id = 0;
  float logprob = 0;
  std::string text;
};

struct TokenOut {
  int32_t id = 0;
  std::string text;  // the token's own bytes
  float logprob = 0;
  std::vector<TopToken> top;  // top_logprobs
};

// What a job produced since the consumer last looked.
struct JobEvents {
  std::string text;
  std::vector<std::string> pieces;  // text split as it was produced (one token's worth each)
  std::vector<TokenOut> tokens;
  bool done = false;
};

struct Job {
  // Input, set before submit.
  std::vector<int32_t> prompt;
  int64_t max_tokens = -1;  // capped by the context at admission
  qkv_sampler_options sampler{};
  std::vector<std::pair<int32_t, float>> logit_bias;
  std::vector<std::string> stop;
  bool logprobs = false;
  int64_t top_logprobs = 0;
  std::shared_ptr<qkv_grammar> grammar;  // constrained output; null: none
  std::vector<std::string> triggers;     // non-empty: the grammar waits for one of these in the output
  bool special_text = false;  // control tokens give their text (tool-call and thinking markers)
  Clock::time_point deadline = Clock::time_point::max();
  Clock::time_point arrival = Clock::now();
  SpeculativeRequest speculative;

  std::atomic<bool> cancelled{false};  // the client went away

  // Output, under mu.
  std::mutex mu;
  std::condition_variable cv;
  std::string text;  // not yet taken
  std::vector<std::string> pieces;  // the same text, per emit
  std::vector<TokenOut> tokens;
  bool done = false;
  std::string finish_reason;  // "stop", "length", "cancelled", "timeout", "error"
  std::string stop_matched;   // the stop string that ended the text ("" when none did)
  std::string error;
  int64_t prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0;
  Clock::time_point first_token_at{};  // when the first token was sampled (epoch: none yet)
  // Speculative decoding: whether the slot drafted for this job, its tokens
  // drafted and verified, and of those accepted.
  bool speculated = false;
  int64_t draft_tokens = 0, draft_accepted = 0;

  // Waits up to `wait` for output or the end; takes what there is.
  JobEvents take(std::chrono::milliseconds wait);
};

class Scheduler {
 public:
  struct Options {
    int64_t prefill_chunk = 256;  // prompt tokens per step while other slots generate
    int64_t prefill_batch = 512;  // prompt tokens per pass while no slot generates (>= prefill_chunk)
    size_t max_queue = 64;
    ComputeTurns* turns = nullptr;  // shared with the embedding worker; null: passes run when they come
    SpeculativeServe speculative;           // no drafter: plain decoding
    qkv_type draft_kv_type = QKV_TYPE_F16;  // the draft model's cache
    int draft_threads = 0;
  };
  // Fails (qkv::Error) when the draft model cannot draft for the model.
  Scheduler(qkv_model* model, qkv_context* context, int n_slots, int64_t slot_context, Options options,
            Metrics& metrics);
  ~Scheduler();

  enum class Submit { kOk, kQueueFull, kStopping };
  Submit submit(const std::shared_ptr<Job>& job);
  // Stops admitting; running and queued jobs may finish until `grace` has
  // passed, then they are cancelled. Returns when the scheduler is idle.
  void drain(std::chrono::milliseconds grace);

  size_t queue_depth();
  int busy_slots();
  int slots() const { return static_cast<int>(slots_.size()); }

 private:
  enum class Phase { kIdle, kPrefill, kGenerate };
  struct Slot {
    qkv_session* session = nullptr;
    std::vector<int32_t> tokens;  // what its KV cache holds
    std::shared_ptr<Job> job;
    Phase phase = Phase::kIdle;
    size_t prefill_at = 0;  // next prompt token to prefill
    int64_t generated = 0;
    int64_t limit = 0;  // max new tokens
    int32_t pending = -1;  // a sampled token to step
    StopMatcher stops;
    std::string utf8_hold;  // an incomplete UTF-8 sequence at the end of the text
    Clock::time_point last_token;
    uint64_t last_used = 0;
    // Speculative decoding of its job (no draft_length: it decodes token by token).
    std::optional<DraftLength> draft_length;
    int64_t draft_min = 0;
    float draft_p_min = 0;
    bool speculated = false;
    int64_t drafted = 0, accepted = 0;
    std::vector<int32_t> history;  // tokens and pending, what the drafter reads
  };

  void loop();
  void admit_locked();
  void finish(Slot& slot, const std::string& reason, const std::string& error = "");
  void emit(Slot& slot, const std::string& text, TokenOut* token);
  bool sample(Slot& slot);  // false when the job finished
  bool joins_batch(const Slot& slot) const;
  static constexpr size_t kJoinBatchTokens = 4;
  void step_generating();
  void prefill_some();
  void setup_speculation(Slot& slot);  // at admission
  // Drafts for the slots that speculate this step, verifies them in one pass
  // and emits what each accepted; returns the slots it advanced.
  std::vector<Slot*> speculate();
  void emit_decided(Slot& slot, int64_t accepted);

  qkv_model* model_;
  qkv_context* context_;
  int64_t slot_context_;
  Options options_;
  Metrics& metrics_;
  int32_t bos_ = -1;
  int64_t vocab_ = 0;
  std::vector<Slot> slots_;
  uint64_t use_counter_ = 0;
  std::unique_ptr<SlotDrafters> drafters_;  // null: no speculative decoding
  bool draft_failed_ = false;                // a draft pass failed (reported once)

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool accepting_ = true;
  bool quit_ = false;
  Clock::time_point cancel_at_ = Clock::time_point::max();
  int busy_ = 0;
  std::thread thread_;
};

}  // namespace qkv::serve

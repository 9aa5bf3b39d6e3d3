#include "tools/serve/scheduler.h"

#include <algorithm>

namespace qkv::serve {

namespace {

// Bytes of s up to the end of its last complete UTF-8 sequence.
size_t complete_utf8(const std::string& s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= std::min<size_t>(4, n); ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return back >= need ? n : n - back;
  }
  return n;  // only continuation bytes: nothing to wait for
}

std::string piece(const qkv_model* model, int32_t prev, int32_t token, int flags = 0) {
  char buf[256];
  int64_t n = 0;
  if (qkv_token_piece(model, prev, token, flags, buf, sizeof buf, &n) == QKV_OK) return std::string(buf, n);
  if (n <= 0) return {};
  std::string big(static_cast<size_t>(n) + 1, '\0');
  if (qkv_token_piece(model, prev, token, flags, big.data(), n + 1, &n) != QKV_OK) return {};
  big.resize(static_cast<size_t>(n));
  return big;
}

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

}  // namespace

JobEvents Job::take(std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> lock(mu);
  cv.wait_for(lock, wait, [&] { return done || !text.empty() || !tokens.empty(); });
  JobEvents e;
  e.text.swap(text);
  e.pieces.swap(pieces);
  e.tokens.swap(tokens);
  e.done = done;
  return e;
}

Scheduler::Scheduler(qkv_model* model, qkv_context* context, int n_slots, int64_t slot_context, Options options,
                     Metrics& metrics)
    : model_(model), context_(context), slot_context_(slot_context), options_(options), metrics_(metrics) {
  qkv_model_info info;
  qkv_model_get_info(model, &info);
  bos_ = info.bos_id;
  vocab_ = info.vocab_size;
  slots_.resize(static_cast<size_t>(n_slots));
  for (int i = 0; i < n_slots; ++i) qkv_context_session(context_, i, &slots_[i].session);
  if (options_.speculative.enabled()) {
    drafters_ = std::make_unique<SlotDrafters>(options_.speculative, model, n_slots, slot_context,
                                               options_.draft_kv_type, options_.draft_threads);
  }
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
    accepting_ = false;
    cancel_at_ = Clock::now();
  }
  cv_.notify_all();
  thread_.join();
}

Scheduler::Submit Scheduler::submit(const std::shared_ptr<Job>& job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!accepting_) return Submit::kStopping;
    // Jobs not yet admitted wait for the free slots first, then the queue's places.
    if (static_cast<size_t>(busy_) + queue_.size() >= slots_.size() + options_.max_queue) return Submit::kQueueFull;
    queue_.push_back(job);
  }
  cv_.notify_all();
  return Submit::kOk;
}

void Scheduler::drain(std::chrono::milliseconds grace) {
  std::unique_lock<std::mutex> lock(mu_);
  accepting_ = false;
  cancel_at_ = Clock::now() + grace;
  cv_.notify_all();
  cv_.wait(lock, [&] { return busy_ == 0 && queue_.empty(); });
}

// Jobs waiting for a slot (not those a free slot takes at the next step).
size_t Scheduler::queue_depth() {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t free_slots = slots_.size() - static_cast<size_t>(busy_);
  return queue_.size() > free_slots ? queue_.size() - free_slots : 0;
}

int Scheduler::busy_slots() {
  std::lock_guard<std::mutex> lock(mu_);
  return busy_;
}

void Scheduler::emit(Slot& slot, const std::string& text, TokenOut* token) {
  Job& job = *slot.job;
  {
    std::lock_guard<std::mutex> lock(job.mu);
    job.text += text;
    if (!text.empty()) job.pieces.push_back(text);
    if (token) job.tokens.push_back(std::move(*token));
  }
  job.cv.notify_all();
}

void Scheduler::finish(Slot& slot, const std::string& reason, const std::string& error) {
  std::shared_ptr<Job> job = std::move(slot.job);
  // What the stop strings and the UTF-8 check held back ends the text
  // (nothing after a stop string).
  std::string rest;
  if (reason == "stop" || reason == "length") rest = slot.stops.feed(slot.utf8_hold) + slot.stops.flush();
  const int64_t generated = slot.generated;
  if (!error.empty()) {  // the slot's state is unknown: forget it
    qkv_session_truncate(slot.session, 0);
    slot.tokens.clear();
  }
  slot.phase = Phase::kIdle;
  slot.pending = -1;
  slot.last_used = ++use_counter_;
  {
    // The slot is free before the client hears the end, so whoever it tells sees it free.
    std::lock_guard<std::mutex> lock(mu_);
    --busy_;
  }
  cv_.notify_all();
  metrics_.tokens(job->prompt_tokens, job->cached_tokens, generated);
  {
    std::lock_guard<std::mutex> lock(job->mu);
    job->text += rest;
    if (!rest.empty()) job->pieces.push_back(rest);
    job->done = true;
    job->finish_reason = reason;
    job->stop_matched = slot.stops.stopped() ? slot.stops.matched() : std::string();
    job->error = error;
    job->completion_tokens = generated;
    job->speculated = slot.speculated;
    job->draft_tokens = slot.drafted;
    job->draft_accepted = slot.accepted;
  }
  job->cv.notify_all();
}

// Under mu_: free slots take queued jobs, each the slot sharing the longest
// prefix with its prompt (then the least recently used).
void Scheduler::admit_locked() {
  while (!queue_.empty()) {
    std::shared_ptr<Job> job = queue_.front();
    Slot* best = nullptr;
    size_t best_prefix = 0;
    for (Slot& s : slots_) {
      if (s.phase != Phase::kIdle) continue;
      const size_t p = common_prefix(s.tokens, job->prompt);
      if (!best || p > best_prefix || (p == best_prefix && s.last_used < best->last_used)) {
        best = &s;
        best_prefix = p;
      }
    }
    if (!best) return;
    queue_.pop_front();
    ++busy_;
    Slot& s = *best;
    // Keep the shared prefix, but always prefill at least one token: its logits start the generation.
    const size_t keep = std::min(best_prefix, job->prompt.size() - 1);
    s.job = job;
    s.generated = 0;
    s.pending = -1;
    s.utf8_hold.clear();
    s.stops = StopMatcher(job->stop);
    s.prefill_at = keep;
    job->prompt_tokens = static_cast<int64_t>(job->prompt.size());
    job->cached_tokens = static_cast<int64_t>(keep);
    const int64_t room = slot_context_ - static_cast<int64_t>(job->prompt.size());
    s.limit = job->max_tokens < 0 ? room : std::min(job->max_tokens, room);
    qkv_status st = qkv_session_truncate(s.session, static_cast<int64_t>(keep));
    if (st == QKV_OK) st = qkv_session_set_sampler(s.session, &job->sampler);
    if (st == QKV_OK && job->grammar && !job->triggers.empty()) {
      std::vector<const char*> triggers;
      for (const std::string& t : job->triggers) triggers.push_back(t.c_str());
      st = qkv_session_set_grammar_lazy(s.session, job->grammar.get(), triggers.data(),
                                        static_cast<int64_t>(triggers.size()));
    } else if (st == QKV_OK) {
      st = qkv_session_set_grammar(s.session, job->grammar.get());
    }
    if (st == QKV_OK) {
      std::vector<int32_t> ids;
      std::vector<float> biases;
      for (const auto& [id, b] : job->logit_bias) {
        ids.push_back(id);
        biases.push_back(b);
      }
      st = qkv_session_set_logit_bias(s.session, ids.data(), biases.data(), static_cast<int64_t>(ids.size()));
    }
    s.tokens.resize(keep);
    s.phase = Phase::kPrefill;
    setup_speculation(s);
    if (st != QKV_OK) {
      const std::string msg = qkv_last_error();
      mu_.unlock();
      finish(s, "error", msg);
      mu_.lock();
    }
  }
}

// Samples the slot's next token and passes its text on; false when the job ended.
bool Scheduler::sample(Slot& slot) {
  Job& job = *slot.job;
  if (slot.generated >= slot.limit) {
    finish(slot, "length");
    return false;
  }
  int32_t token = -1;
  if (qkv_session_sample(slot.session, &token) != QKV_OK) {
    finish(slot, "error", qkv_last_error());
    return false;
  }
  const auto now = Clock::now();
  if (slot.generated == 0) {
    metrics_.first_token(std::chrono::duration<double>(now - job.arrival).count());
    std::lock_guard<std::mutex> lock(job.mu);
    job.first_token_at = now;
  } else {
    metrics_.inter_token(std::chrono::duration<double>(now - slot.last_token).count());
  }
  slot.last_token = now;
  ++slot.generated;
  if (qkv_is_eog(model_, token) || token == bos_) {
    finish(slot, "stop");
    return false;
  }
  const int32_t prev = slot.tokens.empty() ? -1 : slot.tokens.back();
  TokenOut out;
  out.id = token;
  out.text = piece(model_, prev, token, job.special_text ? QKV_TOKENIZE_PARSE_SPECIAL : 0);
  if (job.logprobs) {
    std::vector<int32_t> ids(static_cast<size_t>(job.top_logprobs));
    std::vector<float> lps(ids.size());
    int64_t n = 0;
    qkv_session_logprobs(slot.session, token, &out.logprob, job.top_logprobs, ids.data(), lps.data(), &n);
    for (int64_t i = 0; i < n; ++i) out.top.push_back({ids[i], lps[i], piece(model_, prev, ids[i])});
  }
  slot.utf8_hold += out.text;
  const size_t ready = complete_utf8(slot.utf8_hold);
  const std::string text = slot.stops.feed(slot.utf8_hold.substr(0, ready));
  slot.utf8_hold.erase(0, ready);
  emit(slot, text, &out);
  if (slot.stops.stopped()) {
    finish(slot, "stop");
    return false;
  }
  if (slot.generated >= slot.limit) {
    finish(slot, "length");
    return false;
  }
  slot.pending = token;
  return true;
}

// A prompt with this few tokens left (or any, when chunks are one token) joins
// the batched step one token at a time instead of a prefill pass of its own.
bool Scheduler::joins_batch(const Slot& s) const {
  if (s.phase != Phase::kPrefill) return false;
  const size_t left = s.job->prompt.size() - s.prefill_at;
  return options_.prefill_chunk <= 1 || left <= kJoinBatchTokens;
}

// Steps every slot holding a sampled token, and prompts near their end, in one
// batched pass; each then samples its next token at once, so its text goes out
// before any prefill the loop does next.
void Scheduler::step_generating() {
  const std::vector<Slot*> verified = drafters_ ? speculate() : std::vector<Slot*>{};
  std::vector<Slot*> batch;
  std::vector<int32_t> tokens;
  for (Slot& s : slots_) {
    if (std::find(verified.begin(), verified.end(), &s) != verified.end()) continue;
    if (s.phase == Phase::kGenerate && s.pending >= 0) {
      batch.push_back(&s);
      tokens.push_back(s.pending);
    } else if (joins_batch(s)) {
      batch.push_back(&s);
      tokens.push_back(s.job->prompt[s.prefill_at]);
    }
  }
  if (batch.empty()) return;
  std::vector<qkv_session*> sessions;
  for (Slot* s : batch) sessions.push_back(s->session);
  qkv_status stepped;
  {
    ComputeTurns::Turn turn(options_.turns);
    stepped = qkv_step_batch(sessions.data(), tokens.data(), static_cast<int64_t>(batch.size()), nullptr, 0);
  }
  if (stepped != QKV_OK) {
    const std::string msg = qkv_last_error();
    for (Slot* s : batch) finish(*s, "error", msg);
    return;
  }
  int64_t generating = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    Slot& s = *batch[i];
    s.tokens.push_back(tokens[i]);
    s.pending = -1;
    if (s.phase == Phase::kGenerate) {
      ++generating;
    } else if (++s.prefill_at == s.job->prompt.size()) {
      s.phase = Phase::kGenerate;
    }
    if (s.phase == Phase::kGenerate) sample(s);
  }
  if (generating > 0) metrics_.step_tokens(generating);
}

// The waiting prompts' next chunks in one qkv_prefill_batch (each weight read
// once for all of them); a prompt that ends samples its first token at once.
// A pass stalls the generating streams for its length. While they are at
// least as many as the waiting prompts, a step prefills at most prefill_chunk
// tokens, with a decode step between, so they keep flowing; otherwise (a burst)
// a pass takes up to prefill_batch tokens: the burst costs one pass instead of
// several, each followed by a decode step of the few slots done.
void Scheduler::prefill_some() {
  std::vector<Slot*> batch;
  std::vector<qkv_session*> sessions;
  std::vector<const int32_t*> tokens;
  std::vector<int64_t> counts;
  const auto count = [&](auto pred) { return std::count_if(slots_.begin(), slots_.end(), pred); };
  const auto generating = count([](const Slot& s) { return s.phase == Phase::kGenerate; });
  const auto waiting = count([&](const Slot& s) { return s.phase == Phase::kPrefill && !joins_batch(s); });
  int64_t budget = generating >= waiting ? options_.prefill_chunk : std::max(options_.prefill_chunk, options_.prefill_batch);
  for (Slot& s : slots_) {
    if (budget <= 0) break;
    if (s.phase != Phase::kPrefill || joins_batch(s)) continue;
    const std::vector<int32_t>& p = s.job->prompt;
    const int64_t n = std::min(static_cast<int64_t>(p.size() - s.prefill_at), budget);
    batch.push_back(&s);
    sessions.push_back(s.session);
    tokens.push_back(p.data() + s.prefill_at);
    counts.push_back(n);
    budget -= n;
  }
  if (batch.empty()) return;
  const auto n = static_cast<int64_t>(batch.size());
  std::vector<std::string> errors;  // per prompt: why it ran alone and failed
  {
    ComputeTurns::Turn turn(options_.turns);
    if (qkv_prefill_batch(sessions.data(), tokens.data(), counts.data(), n, nullptr, 0) != QKV_OK) {
      // The batch was refused before it ran: each prompt alone, so that only
      // the one at fault ends.
      errors.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        if (qkv_session_prefill(sessions[i], tokens[i], counts[i], nullptr, 0) != QKV_OK) {
          errors[static_cast<size_t>(i)] = qkv_last_error();
          counts[i] = 0;
        }
      }
    }
  }
  for (size_t i = 0; i < errors.size(); ++i) {
    if (counts[i] == 0) finish(*batch[i], "error", errors[i]);
  }
  for (int64_t i = 0; i < n; ++i) {
    if (counts[i] == 0) continue;
    Slot& s = *batch[i];
    s.tokens.insert(s.tokens.end(), tokens[i], tokens[i] + counts[i]);
    s.prefill_at += static_cast<size_t>(counts[i]);
    if (s.prefill_at == s.job->prompt.size()) {
      s.phase = Phase::kGenerate;
      sample(s);  // the first token goes out now, not after the next step
    }
  }
}

void Scheduler::loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      auto idle = [&] { return busy_ == 0 && queue_.empty(); };
      if (quit_ && idle()) return;
      if (idle()) {
        cv_.wait_for(lock, std::chrono::milliseconds(100));
        continue;
      }
      const auto now = Clock::now();
      // After the grace period queued jobs end unanswered, as cancelled.
      if (now >= cancel_at_) {
        for (auto& j : queue_) {
          std::lock_guard<std::mutex> jl(j->mu);
          j->done = true;
          j->finish_reason = "cancelled";
          j->cv.notify_all();
        }
        queue_.clear();
      }
      // Queued jobs whose client left or whose time ran out leave the queue.
      for (auto it = queue_.begin(); it != queue_.end();) {
        Job& j = **it;
        const bool gone = j.cancelled.load() || now >= j.deadline;
        if (gone) {
          std::lock_guard<std::mutex> jl(j.mu);
          j.done = true;
          j.finish_reason = j.cancelled.load() ? "cancelled" : "timeout";
          j.cv.notify_all();
          it = queue_.erase(it);
        } else {
          ++it;
        }
      }
      admit_locked();
    }
    const auto now = Clock::now();
    bool past_grace;
    {
      std::lock_guard<std::mutex> lock(mu_);
      past_grace = now >= cancel_at_;
    }
    for (Slot& s : slots_) {
      if (s.phase == Phase::kIdle) continue;
      if (s.job->cancelled.load() || past_grace) {
        finish(s, "cancelled");
      } else if (now >= s.job->deadline) {
        finish(s, "timeout");
      }
    }
    step_generating();
    prefill_some();
  }
}

}  // namespace qkv::serve

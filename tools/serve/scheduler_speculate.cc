// The scheduler's speculative decoding: each generating slot drafts from its
// own history (prompt lookup, or its own sequence of the draft model's
// context), one qkv_speculate_batch verifies every slot's draft in one pass
// (each weight read once for all of them; the acceptance is runtime's
// accept_drafts, the rule qkv_generate uses), and the accepted tokens and the
// model's own next one go out through sample(), as sampled tokens do: stop
// strings, end-of-generation tokens, logprobs and max_tokens cut the reply
// wherever they fall among them.
#include <algorithm>
#include <cstdio>

#include "kernels/error.h"
#include "tools/serve/scheduler.h"

namespace qkv::serve {

// A job speculates when the server has a drafter, the request did not turn it
// off and it has no grammar (drafted tokens would skip the grammar's mask: it
// decodes token by token). Its draft lengths are the server's unless the
// request sets them (n_min clamped to n_max, as llama-server does).
void Scheduler::setup_speculation(Slot& s) {
  s.draft_length.reset();
  s.speculated = false;
  s.drafted = s.accepted = 0;
  const Job& job = *s.job;
  if (!drafters_ || !job.speculative.enabled || job.grammar) return;
  const SpeculativeServe& server = options_.speculative;
  SpeculativeOptions o;
  o.draft_max = job.speculative.n_max > 0 ? job.speculative.n_max : server.draft_max;
  o.draft_min = std::min(job.speculative.n_min >= 0 ? job.speculative.n_min : server.draft_min, o.draft_max);
  s.draft_min = o.draft_min;
  s.draft_p_min = job.speculative.p_min >= 0 ? static_cast<float>(job.speculative.p_min) : server.p_min;
  s.draft_length.emplace(o);
}

std::vector<Scheduler::Slot*> Scheduler::speculate() {
  std::vector<Slot*> drafting;
  std::vector<SlotDrafters::Want> wants;
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if (s.phase != Phase::kGenerate || s.pending < 0 || !s.draft_length) continue;
    // Room for the drafts and the model's own token after them: in the reply
    // (max_tokens) and in the slot's context.
    const int64_t reply_room = s.limit - s.generated - 1;
    const int64_t context_room = slot_context_ - static_cast<int64_t>(s.tokens.size()) - 1;
    const int64_t k_max = std::min({s.draft_length->next(), reply_room, context_room});
    if (k_max < 1) continue;
    s.history = s.tokens;
    s.history.push_back(s.pending);
    s.speculated = true;
    wants.push_back({static_cast<int>(i), &s.history, k_max, s.draft_p_min});
    drafting.push_back(&s);
  }
  if (drafting.empty()) return {};
  std::vector<std::vector<int32_t>> drafts;
  try {
    ComputeTurns::Turn turn(options_.turns);
    drafters_->draft(wants, &drafts);
  } catch (const qkv::Error& e) {
    // The slots decode token by token this step; the replies stay right.
    if (!draft_failed_) std::fprintf(stderr, "qkv serve: drafting failed (plain steps this time): %s\n", e.what());
    draft_failed_ = true;
    return {};
  }

  std::vector<Slot*> batch;
  std::vector<qkv_session*> sessions;
  std::vector<int32_t> fed;
  std::vector<const int32_t*> draft_ptrs;
  std::vector<int64_t> counts;
  for (size_t j = 0; j < drafting.size(); ++j) {
    Slot& s = *drafting[j];
    std::vector<int32_t>& d = drafts[j];
    if (static_cast<int64_t>(d.size()) > wants[j].max_tokens) d.resize(static_cast<size_t>(wants[j].max_tokens));
    const auto k = static_cast<int64_t>(d.size());
    if (k == 0 || k < s.draft_min) continue;  // a plain step
    batch.push_back(&s);
    sessions.push_back(s.session);
    fed.push_back(s.pending);
    draft_ptrs.push_back(d.data());
    counts.push_back(k);
  }
  if (batch.empty()) return {};
  const auto n = static_cast<int64_t>(batch.size());
  std::vector<int64_t> accepted(batch.size());
  qkv_status st;
  {
    ComputeTurns::Turn turn(options_.turns);
    st = qkv_speculate_batch(sessions.data(), fed.data(), draft_ptrs.data(), counts.data(), n, accepted.data());
  }
  if (st != QKV_OK) {
    const std::string msg = qkv_last_error();
    for (Slot* s : batch) finish(*s, "error", msg);
    return batch;
  }
  int64_t drafted = 0, kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    Slot& s = *batch[static_cast<size_t>(i)];
    s.drafted += counts[static_cast<size_t>(i)];
    s.accepted += accepted[static_cast<size_t>(i)];
    drafted += counts[static_cast<size_t>(i)];
    kept += accepted[static_cast<size_t>(i)];
    s.draft_length->adapt(accepted[static_cast<size_t>(i)], counts[static_cast<size_t>(i)]);
  }
  metrics_.verified(drafted, kept);
  int64_t emitted = 0;
  for (int64_t i = 0; i < n; ++i) {
    Slot& s = *batch[static_cast<size_t>(i)];
    const int64_t before = s.generated;
    emit_decided(s, accepted[static_cast<size_t>(i)]);
    emitted += s.generated - before;
  }
  metrics_.step_tokens(emitted);
  return batch;
}

// The verify pass put the fed token and `accepted` drafts in the slot's
// cache and decided accepted + 1 tokens; each goes out through sample(), the
// first ones already in the cache, the last one pending as a sampled token.
// When the reply ends among them, the cache forgets what the reply did not take.
void Scheduler::emit_decided(Slot& s, int64_t accepted) {
  s.tokens.push_back(s.pending);
  s.pending = -1;
  for (int64_t j = 0; j <= accepted; ++j) {
    if (!sample(s)) break;
    if (j < accepted) {
      s.tokens.push_back(s.pending);
      s.pending = -1;
    }
  }
  if (s.phase == Phase::kIdle && !s.tokens.empty()) {
    qkv_session_truncate(s.session, static_cast<int64_t>(s.tokens.size()));
  }
}

}  // namespace qkv::serve

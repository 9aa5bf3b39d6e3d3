// Speculative decoding over the slots of one context (qkv_speculate_batch):
// one verify pass (Decoder::prefill_multi_all_logits) for every session's fed
// token and drafts, judged per session by runtime/speculative.h's
// accept_drafts with the session's sampler; and the draft model check.
#include <algorithm>
#include <string>
#include <vector>

#include "qkv.h"
#include "runtime/c_api_internal.h"
#include "runtime/speculative.h"
#include "runtime/speculative_drafters.h"

using namespace qkv::capi;

extern "C" {

qkv_status qkv_speculate_batch(qkv_session* const* sessions, const int32_t* tokens, const int32_t* const* drafts,
                               const int64_t* n_drafts, int64_t n, int64_t* n_accepted) {
  QKV_REQUIRE(sessions);
  QKV_REQUIRE(tokens);
  QKV_REQUIRE(drafts);
  QKV_REQUIRE(n_drafts);
  QKV_REQUIRE(n_accepted);
  const std::string fn = __func__;
  if (n < 1) return set_error(QKV_ERR_INVALID_ARGUMENT, fn + ": needs at least one session");
  for (int64_t i = 0; i < n; ++i) {
    const std::string who = fn + ": sessions[" + std::to_string(i) + "]";
    if (!sessions[i]) return set_error(QKV_ERR_INVALID_ARGUMENT, who + " is NULL");
    if (sessions[i]->context != sessions[0]->context) {
      return set_error(QKV_ERR_INVALID_ARGUMENT, who + " belongs to another context than sessions[0]; a batched call "
                                                       "runs slots of one context (qkv_context_session)");
    }
    for (int64_t j = 0; j < i; ++j) {
      if (sessions[j] == sessions[i]) return set_error(QKV_ERR_INVALID_ARGUMENT, who + " appears twice");
    }
    if (n_drafts[i] < 1 || n_drafts[i] > qkv::SpeculativeOptions::kMaxDraft || !drafts[i]) {
      return set_error(QKV_ERR_INVALID_ARGUMENT,
                       who + " needs 1 .. " + std::to_string(qkv::SpeculativeOptions::kMaxDraft) +
                           " drafted tokens (got " + std::to_string(n_drafts[i]) + (drafts[i] ? ")" : ", NULL drafts)"));
    }
    if (sessions[i]->matcher || sessions[i]->lazy_grammar) {
      return set_error(QKV_ERR_INVALID_ARGUMENT, who + " has a grammar: drafted tokens would skip its mask (sample "
                                                       "it token by token)");
    }
    if (sessions[i]->decided_at < sessions[i]->decided.size()) {
      return set_error(QKV_ERR_INVALID_ARGUMENT, who + " still has tokens of its last verify pass to hand out "
                                                       "(qkv_session_sample)");
    }
  }
  qkv_context* ctx = sessions[0]->context;
  return guarded([&] {
    ThreadScope threads(ctx->threads);
    qkv::Decoder& dec = *ctx->decoder;
    const int64_t vocab = dec.vocab_size();
    // Each session's run: the fed token, then its drafts.
    std::vector<std::vector<int32_t>> runs(static_cast<size_t>(n));
    std::vector<const int32_t*> run_ptrs(static_cast<size_t>(n));
    std::vector<int64_t> seqs(static_cast<size_t>(n)), counts(static_cast<size_t>(n)), starts(static_cast<size_t>(n));
    std::vector<size_t> first_row(static_cast<size_t>(n));
    size_t rows = 0;
    for (int64_t i = 0; i < n; ++i) {
      std::vector<int32_t>& run = runs[static_cast<size_t>(i)];
      run.assign(1, tokens[i]);
      run.insert(run.end(), drafts[i], drafts[i] + n_drafts[i]);
      run_ptrs[static_cast<size_t>(i)] = run.data();
      seqs[static_cast<size_t>(i)] = sessions[i]->seq;
      counts[static_cast<size_t>(i)] = static_cast<int64_t>(run.size());
      starts[static_cast<size_t>(i)] = dec.position(sessions[i]->seq);
      first_row[static_cast<size_t>(i)] = rows;
      rows += run.size();
    }
    // rows <= n * 257 and n <= the context's slots: the buffer's size is checked before it is made.
    const std::optional<int64_t> floats = checked_product({static_cast<int64_t>(rows), vocab});
    QKV_CHECK(floats.has_value(), fn, ": the verify pass's logits do not fit in memory");
    std::vector<float> logits(static_cast<size_t>(*floats));
    dec.prefill_multi_all_logits(seqs.data(), run_ptrs.data(), counts.data(), n, logits.data());
    std::vector<int64_t> accepted(static_cast<size_t>(n));
    std::vector<std::vector<int32_t>> decided(static_cast<size_t>(n));
    try {
      std::vector<float> scratch;
      std::vector<double> p;
      for (int64_t i = 0; i < n; ++i) {
        qkv_session& s = *sessions[i];
        if (!s.sampler) {
          qkv::SamplerOptions so;
          so.logit_bias = s.logit_bias;
          s.sampler.emplace(so);
        }
        if (!s.spec_random) s.spec_random.emplace(s.sampler->options().seed);
        const float* rows_i = logits.data() + first_row[static_cast<size_t>(i)] * static_cast<size_t>(vocab);
        scratch.assign(rows_i, rows_i + counts[static_cast<size_t>(i)] * vocab);  // accept_drafts edits them
        std::vector<int32_t> recent = s.fed;
        recent.push_back(tokens[i]);
        accepted[static_cast<size_t>(i)] = qkv::accept_drafts(*s.sampler, scratch.data(), vocab, drafts[i], n_drafts[i],
                                                              &recent, *s.spec_random, &p, &decided[static_cast<size_t>(i)]);
      }
    } catch (...) {
      // The sessions as they were: the pass's positions forgotten.
      for (int64_t i = 0; i < n; ++i) dec.cache().truncate(seqs[static_cast<size_t>(i)], starts[static_cast<size_t>(i)]);
      throw;
    }
    for (int64_t i = 0; i < n; ++i) {
      qkv_session& s = *sessions[i];
      const auto k = static_cast<size_t>(accepted[static_cast<size_t>(i)]);
      // The cache and the penalties' history keep the fed token and the accepted drafts.
      dec.cache().truncate(s.seq, starts[static_cast<size_t>(i)] + 1 + static_cast<int64_t>(k));
      s.fed.push_back(tokens[i]);
      s.fed.insert(s.fed.end(), drafts[i], drafts[i] + k);
      s.decided = std::move(decided[static_cast<size_t>(i)]);
      const float* rows_i = logits.data() + first_row[static_cast<size_t>(i)] * static_cast<size_t>(vocab);
      s.decided_logits.assign(rows_i, rows_i + (k + 1) * static_cast<size_t>(vocab));
      s.decided_at = 0;
      s.last_logits.clear();
      n_accepted[i] = static_cast<int64_t>(k);
    }
    return QKV_OK;
  });
}

qkv_status qkv_model_check_draft(const qkv_model* target, const qkv_model* draft) {
  QKV_REQUIRE(target);
  QKV_REQUIRE(draft);
  return guarded([&] {
    QKV_CHECK(draft->model.config.causal, "the draft model is an encoder; it does not generate");
    qkv::check_same_vocabulary(target->model, tokenizer_of(target), draft->model, tokenizer_of(draft));
    return QKV_OK;
  });
}

}  // extern "C"

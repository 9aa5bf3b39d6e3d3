#include "tools/serve/slot_drafters.h"

#include <algorithm>
#include <cmath>

#include "kernels/error.h"

namespace qkv::serve {

namespace {

// softmax(logits)[top] for the argmax token top: 1 / sum exp(l - l_top).
float top_probability(const float* logits, int64_t n, int32_t top) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - logits[top]);
  return static_cast<float>(1.0 / sum);
}

int32_t argmax_of(const float* x, int64_t n) {
  return static_cast<int32_t>(std::max_element(x, x + n) - x);  // the first on ties
}

void check(qkv_status st, const char* what) {
  if (st != QKV_OK) fail(what, ": ", qkv_last_error());
}

}  // namespace

SlotDrafters::SlotDrafters(const SpeculativeServe& options, const qkv_model* target, int n_slots, int64_t slot_context,
                           qkv_type kv_type, int threads) {
  QKV_CHECK(options.enabled(), "speculative decoding needs a drafter (-md FILE or --spec-type ngram)");
  if (options.ngram) {
    ngram_ = std::make_unique<NgramDrafter>(options.ngram_size);
    return;
  }
  if (qkv_model_load(options.draft_path.c_str(), nullptr, &model_) != QKV_OK) {
    model_ = nullptr;
    fail("loading the draft model: ", qkv_last_error());
  }
  try {
    check(qkv_model_check_draft(target, model_), "the draft model");
    qkv_model_info info;
    qkv_model_get_info(model_, &info);
    vocab_ = info.vocab_size;
    qkv_context_options copts;
    qkv_context_options_init(&copts);
    copts.context = std::min(options.draft_context > 0 ? options.draft_context : slot_context, info.context_length);
    copts.kv_type = kv_type;
    copts.threads = threads;
    check(qkv_context_create(model_, n_slots, &copts, &context_), "creating the draft model's context");
    // Its prompt passes' GEMM kernels built now, not inside the first requests.
    check(qkv_context_prepare(context_, nullptr), "preparing the draft model's context");
    context_positions_ = copts.context;
    sessions_.resize(static_cast<size_t>(n_slots));
    cached_.resize(static_cast<size_t>(n_slots));
    for (int i = 0; i < n_slots; ++i) check(qkv_context_session(context_, i, &sessions_[i]), "a draft slot");
  } catch (...) {
    qkv_context_free(context_);
    qkv_model_free(model_);
    throw;
  }
}

SlotDrafters::~SlotDrafters() {
  qkv_context_free(context_);
  qkv_model_free(model_);
}

void SlotDrafters::draft(const std::vector<Want>& wants, std::vector<std::vector<int32_t>>* out) {
  out->assign(wants.size(), {});
  if (ngram_) {
    for (size_t i = 0; i < wants.size(); ++i) ngram_->draft(*wants[i].history, wants[i].max_tokens, &(*out)[i]);
    return;
  }
  try {
    draft_with_model(wants, out);
  } catch (...) {
    // The draft caches' state is unknown: they start over.
    for (const Want& w : wants) {
      cached_[static_cast<size_t>(w.slot)].clear();
      qkv_session_truncate(sessions_[static_cast<size_t>(w.slot)], 0);
    }
    out->assign(wants.size(), {});
    throw;
  }
}

// Each slot keeps the draft-cache prefix its history still shares (less the
// history's last token, whose logits are needed), prefills the rest, then
// drafts the argmax token by token until one is below p_min or max_tokens
// are drafted; the slots go through each pass together.
void SlotDrafters::draft_with_model(const std::vector<Want>& wants, std::vector<std::vector<int32_t>>* out) {
  std::vector<size_t> live;  // indexes into wants
  std::vector<int64_t> max_tokens(wants.size());
  std::vector<qkv_session*> sessions;
  std::vector<const int32_t*> rests;
  std::vector<int64_t> counts;
  for (size_t i = 0; i < wants.size(); ++i) {
    const Want& w = wants[i];
    const std::vector<int32_t>& h = *w.history;
    const auto n = static_cast<int64_t>(h.size());
    // The history and every drafted token but the last pass through the draft's cache.
    max_tokens[i] = std::min(w.max_tokens, context_positions_ - n + 1);
    if (max_tokens[i] <= 0 || n == 0) continue;
    std::vector<int32_t>& cached = cached_[static_cast<size_t>(w.slot)];
    const auto limit = static_cast<size_t>(n - 1);
    size_t common = 0;
    while (common < std::min(cached.size(), limit) && cached[common] == h[common]) ++common;
    check(qkv_session_truncate(sessions_[static_cast<size_t>(w.slot)], static_cast<int64_t>(common)),
          "the draft model's cache");
    cached.assign(h.begin(), h.end());
    live.push_back(i);
    sessions.push_back(sessions_[static_cast<size_t>(w.slot)]);
    rests.push_back(h.data() + common);
    counts.push_back(n - static_cast<int64_t>(common));
  }
  if (live.empty()) return;
  logits_.resize(live.size() * static_cast<size_t>(vocab_));
  check(qkv_prefill_batch(sessions.data(), rests.data(), counts.data(), static_cast<int64_t>(live.size()),
                          logits_.data(), static_cast<int64_t>(logits_.size())),
        "the draft model's prefill");
  std::vector<int32_t> tops;
  while (!live.empty()) {
    std::vector<size_t> next_live;
    std::vector<qkv_session*> next_sessions;
    tops.clear();
    for (size_t j = 0; j < live.size(); ++j) {
      const size_t i = live[j];
      const float* row = logits_.data() + j * static_cast<size_t>(vocab_);
      const int32_t top = argmax_of(row, vocab_);
      if (top_probability(row, vocab_, top) < wants[i].p_min) continue;
      (*out)[i].push_back(top);
      if (static_cast<int64_t>((*out)[i].size()) == max_tokens[i]) continue;
      next_live.push_back(i);
      next_sessions.push_back(sessions_[static_cast<size_t>(wants[i].slot)]);
      tops.push_back(top);
      cached_[static_cast<size_t>(wants[i].slot)].push_back(top);
    }
    live.swap(next_live);
    if (live.empty()) break;
    check(qkv_step_batch(next_sessions.data(), tops.data(), static_cast<int64_t>(live.size()), logits_.data(),
                         static_cast<int64_t>(logits_.size())),
          "the draft model's step");
  }
}

}  // namespace qkv::serve

// The drafters of the server's slots for speculative decoding: prompt lookup
// over each slot's own history (runtime's NgramDrafter), or a draft model
// with a context of as many slots as the target's, each slot drafting in its
// own sequence. The draft model's passes batch the slots together: one
// qkv_prefill_batch for what each slot's draft cache lacks, then one
// qkv_step_batch per drafted position over the slots still drafting.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qkv.h"
#include "runtime/speculative_drafters.h"
#include "tools/serve/spec_options.h"

namespace qkv::serve {

class SlotDrafters {
 public:
  // Loads the draft model (checked against the target's vocabulary) or sets
  // up prompt lookup; fails (qkv::Error) naming the problem.
  SlotDrafters(const SpeculativeServe& options, const qkv_model* target, int n_slots, int64_t slot_context,
               qkv_type kv_type, int threads);
  ~SlotDrafters();
  SlotDrafters(const SlotDrafters&) = delete;
  SlotDrafters& operator=(const SlotDrafters&) = delete;

  struct Want {
    int slot = 0;
    const std::vector<int32_t>* history = nullptr;  // the whole sequence, its last token not yet in the target's cache
    int64_t max_tokens = 0;
    float p_min = 0;  // the draft model's
  };
  // Drafts for each want into (*out)[i] (fewer tokens, or none, when the
  // drafter has no guess). Fails (qkv::Error) when a draft pass fails.
  void draft(const std::vector<Want>& wants, std::vector<std::vector<int32_t>>* out);

 private:
  void draft_with_model(const std::vector<Want>& wants, std::vector<std::vector<int32_t>>* out);

  std::unique_ptr<NgramDrafter> ngram_;
  qkv_model* model_ = nullptr;  // the draft model
  qkv_context* context_ = nullptr;
  std::vector<qkv_session*> sessions_;
  std::vector<std::vector<int32_t>> cached_;  // per slot: the tokens in its draft cache
  int64_t context_positions_ = 0;
  int64_t vocab_ = 0;
  std::vector<float> logits_;
};

}  // namespace qkv::serve

// Drafters for speculative decoding (runtime/speculative.h): cheap guesses of
// the tokens that follow a sequence, which the target model then checks in one
// pass. Both drafters here are deterministic (the same history gives the same
// draft), so the verification treats a draft as a point mass.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/decoder.h"
#include "runtime/model.h"
#include "runtime/tokenizer.h"

namespace qkv {

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Up to max_tokens tokens guessed to follow history (the whole sequence so
  // far, its last token included) into *out (cleared first); fewer or none
  // when the drafter has no guess.
  virtual void draft(const std::vector<int32_t>& history, int64_t max_tokens, std::vector<int32_t>* out) = 0;
};

// Prompt lookup (llama.cpp's llama-lookup idea, one table-free rule): the
// last n tokens of the history are looked for earlier in it, the most recent
// occurrence first, and the tokens that followed that occurrence are the
// draft. n runs from ngram_size down to 1; the first n with a match wins, so a
// long match is preferred to a recent short one. No match at any n: no draft.
class NgramDrafter : public Drafter {
 public:
  explicit NgramDrafter(int64_t ngram_size);  // 1 .. kMaxNgramSize
  void draft(const std::vector<int32_t>& history, int64_t max_tokens, std::vector<int32_t>* out) override;

  static constexpr int64_t kMaxNgramSize = 64;

 private:
  int64_t ngram_size_;
};

// A smaller model of the same vocabulary, decoding greedily with its own
// one-sequence KV cache. Each call keeps the cached prefix the history still
// shares (drafts the target rejected are truncated away), prefills the rest,
// then drafts the argmax token by token, stopping before a token whose
// probability is below p_min (llama.cpp's --draft-p-min) or at max_tokens.
class DraftModelDrafter : public Drafter {
 public:
  // context: positions of the draft's cache (at most the draft model's context).
  DraftModelDrafter(const Model& draft, float p_min, int64_t context, DType kv_type = DType::F16);
  void draft(const std::vector<int32_t>& history, int64_t max_tokens, std::vector<int32_t>* out) override;

 private:
  Decoder decoder_;
  float p_min_;
  std::vector<int32_t> cached_;  // the tokens in the draft's cache, in order
};

// Fails (qkv::Error) unless the two models can share drafts: the same
// vocabulary size in the models and the tokenizers, and the same piece for
// every token id (the first difference is named).
void check_same_vocabulary(const Model& target, const Tokenizer& target_vocab, const Model& draft,
                           const Tokenizer& draft_vocab);

}  // namespace qkv

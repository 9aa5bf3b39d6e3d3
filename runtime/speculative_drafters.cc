#include "runtime/speculative_drafters.h"

#include <algorithm>
#include <cmath>

#include "kernels/error.h"
#include "runtime/sampler.h"

namespace qkv {

NgramDrafter::NgramDrafter(int64_t ngram_size) : ngram_size_(ngram_size) {
  QKV_CHECK(ngram_size >= 1 && ngram_size <= kMaxNgramSize, "the n-gram size must be 1 .. ", kMaxNgramSize,
            " (got ", ngram_size, ")");
}

void NgramDrafter::draft(const std::vector<int32_t>& history, int64_t max_tokens, std::vector<int32_t>* out) {
  out->clear();
  const auto n = static_cast<int64_t>(history.size());
  if (max_tokens <= 0 || n < 2) return;
  for (int64_t size = std::min(ngram_size_, n - 1); size >= 1; --size) {
    const int32_t* key = history.data() + (n - size);
    // An occurrence starting at j ends before the key does and has a follower.
    for (int64_t j = n - size - 1; j >= 0; --j) {
      if (!std::equal(key, key + size, history.data() + j)) continue;
      const int64_t from = j + size, to = std::min(n, from + max_tokens);
      out->assign(history.begin() + from, history.begin() + to);
      return;
    }
  }
}

namespace {

DecoderOptions draft_decoder_options(const Model& draft, int64_t context, DType kv_type) {
  QKV_CHECK(context >= 1, "the draft model's cache needs at least one position (got ", context, ")");
  DecoderOptions o;
  o.kv_type = kv_type;
  o.context = std::min<int64_t>(context, draft.config.context_length);
  return o;
}

// softmax(logits)[token] for the argmax token: 1 / sum exp(l - l_max).
float top_probability(const float* logits, int64_t n, int32_t top) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - logits[top]);
  return static_cast<float>(1.0 / sum);
}

}  // namespace

DraftModelDrafter::DraftModelDrafter(const Model& draft, float p_min, int64_t context, DType kv_type)
    : decoder_(draft, draft_decoder_options(draft, context, kv_type)), p_min_(p_min) {
  QKV_CHECK(p_min >= 0.0f && p_min <= 1.0f, "the draft's minimum probability (--draft-p-min) must be in [0, 1] (got ",
            p_min, ")");
}

void DraftModelDrafter::draft(const std::vector<int32_t>& history, int64_t max_tokens, std::vector<int32_t>* out) {
  out->clear();
  const auto n = static_cast<int64_t>(history.size());
  // The history and every drafted token but the last pass through the cache.
  max_tokens = std::min(max_tokens, decoder_.context() - n + 1);
  if (max_tokens <= 0 || n == 0) return;
  // Keep the cached prefix the history shares, less its last token (whose
  // logits are needed, and a cache returns none for what it holds).
  const auto limit = static_cast<size_t>(n - 1);
  size_t common = 0;
  while (common < std::min(cached_.size(), limit) && cached_[common] == history[common]) ++common;
  decoder_.cache().truncate(0, static_cast<int64_t>(common));
  cached_.assign(history.begin(), history.end());
  const float* logits = decoder_.prefill(0, history.data() + common, n - static_cast<int64_t>(common));
  const int64_t vocab = decoder_.vocab_size();
  for (int64_t i = 0; i < max_tokens; ++i) {
    const int32_t top = argmax(logits, vocab);
    if (top_probability(logits, vocab, top) < p_min_) break;
    out->push_back(top);
    if (i + 1 == max_tokens) break;
    logits = decoder_.step(0, top);
    cached_.push_back(top);
  }
}

void check_same_vocabulary(const Model& target, const Tokenizer& target_vocab, const Model& draft,
                           const Tokenizer& draft_vocab) {
  const int64_t nt = target.config.vocab_size, nd = draft.config.vocab_size;
  QKV_CHECK(nt == nd, "the draft model's vocabulary has ", nd, " tokens but the target model's has ", nt,
            ": a draft model must share the target's vocabulary");
  QKV_CHECK(target_vocab.vocab_size() == draft_vocab.vocab_size(), "the draft model's tokenizer has ",
            draft_vocab.vocab_size(), " tokens but the target's has ", target_vocab.vocab_size(),
            ": a draft model must share the target's vocabulary");
  for (int32_t id = 0; id < static_cast<int32_t>(target_vocab.vocab_size()); ++id) {
    QKV_CHECK(target_vocab.piece(id) == draft_vocab.piece(id), "the draft model's vocabulary differs from the target's at token ",
              id, ": '", draft_vocab.piece(id), "' in the draft, '", target_vocab.piece(id),
              "' in the target; a draft model must share the target's vocabulary");
  }
}

}  // namespace qkv

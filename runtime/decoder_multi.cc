// Decoder::prefill_multi: the prompts of several sequences in one forward pass
// (and speculative decoding's verify pass over several sequences).
// Their rows are packed one sequence after another into passes of up to
// prefill_batch rows (a sequence may continue into the next pass); forward()
// runs each pass's GEMMs over all its rows and attention per sequence run.
#include <algorithm>

#include "kernels/error.h"
#include "kernels/threads/cores.h"
#include "runtime/decoder.h"

namespace qkv {

const float* Decoder::prefill_multi(const int64_t* seqs, const int32_t* const* tokens, const int64_t* counts,
                                    int64_t n) {
  return prefill_multi_impl(seqs, tokens, counts, n, nullptr, nullptr);
}

void Decoder::prefill_multi_all_logits(const int64_t* seqs, const int32_t* const* tokens, const int64_t* counts,
                                       int64_t n, float* all_logits) {
  QKV_CHECK(all_logits != nullptr, "prefill_multi_all_logits: null logits buffer");
  prefill_multi_impl(seqs, tokens, counts, n, all_logits, nullptr);
}

void Decoder::prefill_hidden_multi(const int64_t* seqs, const int32_t* const* tokens, const int64_t* counts, int64_t n,
                                   float* hidden) {
  QKV_CHECK(hidden != nullptr, "prefill_hidden_multi: null hidden-state buffer");
  prefill_multi_impl(seqs, tokens, counts, n, nullptr, hidden);
}

// all_logits and hidden null: the logits of each sequence's last row; else
// every row's logits or final normed hidden state, in order (not both).
const float* Decoder::prefill_multi_impl(const int64_t* seqs, const int32_t* const* tokens, const int64_t* counts,
                                         int64_t n, float* all_logits, float* hidden) {
  const OmpThreadsScope batch_threads(options_.threads_batch);
  QKV_CHECK(n >= 1 && seqs != nullptr && tokens != nullptr && counts != nullptr,
            "a multi-sequence prefill needs at least one sequence");
  QKV_CHECK(n <= options_.n_seqs, "a multi-sequence prefill of ", n, " sequences, but the decoder has ",
            options_.n_seqs);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < i; ++j) QKV_CHECK(seqs[i] != seqs[j], "sequence ", seqs[i], " appears twice in one prefill");
    QKV_CHECK(seqs[i] >= 0 && seqs[i] < options_.n_seqs, "sequence ", seqs[i], " is not one of the decoder's ",
              options_.n_seqs);
    QKV_CHECK(counts[i] >= 1, "prefill needs at least one token (sequence ", seqs[i], " has ", counts[i], ")");
    check_tokens(tokens[i], counts[i]);
    const int64_t start = cache_.length(seqs[i]);
    if (counts[i] > context() - start) {
      fail_as(ErrorKind::kContextOverflow, "context overflow: sequence ", seqs[i], ": ", start, " + ", counts[i],
              " tokens exceed the context of ", context(), " positions");
    }
  }
  const int64_t vocab = vocab_size();
  std::vector<int32_t> toks;
  std::vector<int64_t> row_seq, row_pos, last_rows;
  int64_t i = 0, done = 0;  // sequence i's first `done` tokens ran in earlier passes
  int64_t written = 0;      // rows of all_logits or hidden written
  while (i < n) {
    toks.clear();
    row_seq.clear();
    row_pos.clear();
    last_rows.clear();
    const int64_t first = i;  // the first sequence whose logits this pass gives
    while (i < n && static_cast<int64_t>(toks.size()) < options_.prefill_batch) {
      const int64_t rows = static_cast<int64_t>(toks.size());
      const int64_t take = std::min(counts[i] - done, options_.prefill_batch - rows);
      const int64_t pos0 = cache_.length(seqs[i]);
      for (int64_t t = 0; t < take; ++t) {
        toks.push_back(tokens[i][done + t]);
        row_seq.push_back(seqs[i]);
        row_pos.push_back(pos0 + t);
      }
      done += take;
      if (done < counts[i]) break;  // the pass is full; sequence i goes on in the next
      last_rows.push_back(rows + take - 1);
      ++i;
      done = 0;
    }
    const int64_t M = static_cast<int64_t>(toks.size());
    ensure_rows(M);
    embed(toks.data(), M);
    forward(M, row_seq.data(), row_pos.data());
    if (all_logits) {
      logits_for(0, M, all_logits + written * vocab);
      written += M;
      continue;
    }
    if (hidden) {
      hidden_for(0, M, hidden + written * model_.config.dim);
      written += M;
      continue;
    }
    // The finished sequences' last rows to the front (row k <= last_rows[k], and
    // rows are moved in order, so no source is overwritten before it is read).
    const int64_t dim = model_.config.dim;
    const auto finished = static_cast<int64_t>(last_rows.size());
    for (int64_t k = 0; k < finished; ++k) {
      if (last_rows[k] != k) std::copy_n(&x_[last_rows[k] * dim], dim, &x_[k * dim]);
    }
    if (finished > 0) logits_for(0, finished, logits_.data() + first * vocab);
  }
  return logits_.data();
}

}  // namespace qkv

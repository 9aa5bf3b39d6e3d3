// llama.cpp's KL-divergence base file (llama-perplexity --kl-divergence-base).
//
// Little endian: "_logits_"; int32 n_ctx, n_vocab, n_chunk; int32
// tokens[n_chunk * n_ctx] (the text's tokens, before the per-chunk BOS); then
// for each chunk, for each of its n_ctx - 1 - n_ctx/2 scored positions, a row
// of 2 * ((n_vocab + 1) / 2) + 4 uint16: two float32 (scale, min_log_prob) and
// n_vocab uint16 q, where a log-probability reads back as min_log_prob + scale * q.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/atomic_file.h"
#include "runtime/mapped_file.h"

namespace qkv {

// Positions scored per chunk (first = n_ctx / 2 .. n_ctx - 2 predict the next token).
inline int64_t kld_scored_per_chunk(int64_t n_ctx) { return n_ctx - 1 - n_ctx / 2; }
// uint16 per row: the 4 of the two floats, n_vocab values and an even-padding one.
inline int64_t kld_row_u16(int64_t n_vocab) { return 2 * ((n_vocab + 1) / 2) + 4; }

// One stored row: log-probabilities as min_log_prob + scale * q[i].
struct KldRow {
  float scale = 0, min_log_prob = 0;
  const uint16_t* q = nullptr;  // n_vocab values
  double log_prob(int64_t i) const { return static_cast<double>(min_log_prob) + static_cast<double>(scale) * q[i]; }
};

// A base file read back, memory-mapped. open() checks every size against the
// file's before anything is indexed.
class KldBaseFile {
 public:
  static KldBaseFile open(const std::string& path);

  int64_t n_ctx() const { return n_ctx_; }
  int64_t n_vocab() const { return n_vocab_; }
  int64_t n_chunk() const { return n_chunk_; }
  std::vector<int32_t> tokens() const;  // n_chunk * n_ctx
  // Row of scored position j (0 <= j < kld_scored_per_chunk(n_ctx)) of chunk c.
  KldRow row(int64_t chunk, int64_t j) const;

 private:
  MappedFile file_;
  int64_t n_ctx_ = 0, n_vocab_ = 0, n_chunk_ = 0;
  uint64_t rows_offset_ = 0;
};

// Writes a base file to a temporary file as the chunks are evaluated, renamed
// to path only when finish() is called; otherwise the partial file is removed.
class KldBaseWriter {
 public:
  KldBaseWriter(const std::string& path, int64_t n_ctx, int64_t n_vocab, int64_t n_chunk,
                const int32_t* tokens);
  KldBaseWriter(const KldBaseWriter&) = delete;
  KldBaseWriter& operator=(const KldBaseWriter&) = delete;

  // One scored position's logits [n_vocab], encoded as llama.cpp encodes them.
  void add_row(const float* logits);
  void finish();

 private:
  AtomicFile out_;
  int64_t n_vocab_ = 0;
  uint64_t rows_left_ = 0;
  std::vector<uint16_t> row_;
};

// Encodes one row of logits into out[kld_row_u16(n_vocab)] (exposed for tests).
void kld_encode_row(const float* logits, int64_t n_vocab, uint16_t* out);

}  // namespace qkv

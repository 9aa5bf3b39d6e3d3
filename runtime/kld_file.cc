#include "runtime/kld_file.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/error.h"

namespace qkv {

namespace {

constexpr char kMagic[8] = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};
constexpr uint64_t kHeaderBytes = 8 + 3 * 4;

int32_t read_i32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// a * b, failing with a format error when it would not fit in 64 bits.
uint64_t mul(const std::string& path, uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) fail_as(ErrorKind::kFormat, path, ": KL-divergence header sizes overflow");
  return r;
}

}  // namespace

KldBaseFile KldBaseFile::open(const std::string& path) {
  KldBaseFile k;
  k.file_ = MappedFile::open(path);
  const uint64_t size = k.file_.size;
  const uint8_t* d = k.file_.data;
  if (size < kHeaderBytes || std::memcmp(d, kMagic, 8) != 0) {
    fail_as(ErrorKind::kFormat, path, ": not a KL-divergence base file (no \"_logits_\" header)");
  }
  const int32_t n_ctx = read_i32(d + 8), n_vocab = read_i32(d + 12), n_chunk = read_i32(d + 16);
  if (n_ctx < 4 || n_vocab < 1 || n_chunk < 1) {
    fail_as(ErrorKind::kFormat, path, ": impossible KL-divergence header (n_ctx ", n_ctx, ", n_vocab ", n_vocab,
            ", n_chunk ", n_chunk, ")");
  }
  const uint64_t tokens_bytes = mul(path, mul(path, static_cast<uint64_t>(n_chunk), static_cast<uint64_t>(n_ctx)), 4);
  const uint64_t row_bytes = mul(path, static_cast<uint64_t>(kld_row_u16(n_vocab)), 2);
  const uint64_t rows = mul(path, static_cast<uint64_t>(n_chunk), static_cast<uint64_t>(kld_scored_per_chunk(n_ctx)));
  const uint64_t rows_bytes = mul(path, rows, row_bytes);
  uint64_t expected = kHeaderBytes;
  if (__builtin_add_overflow(expected, tokens_bytes, &expected) ||
      __builtin_add_overflow(expected, rows_bytes, &expected)) {
    fail_as(ErrorKind::kFormat, path, ": KL-divergence header sizes overflow");
  }
  if (expected != size) {
    fail_as(ErrorKind::kFormat, path, ": a KL-divergence file of n_ctx ", n_ctx, ", n_vocab ", n_vocab, ", ", n_chunk,
            " chunks holds ", expected, " bytes, but the file has ", size);
  }
  k.n_ctx_ = n_ctx;
  k.n_vocab_ = n_vocab;
  k.n_chunk_ = n_chunk;
  k.rows_offset_ = kHeaderBytes + tokens_bytes;
  return k;
}

std::vector<int32_t> KldBaseFile::tokens() const {
  std::vector<int32_t> t(static_cast<size_t>(n_chunk_ * n_ctx_));
  std::memcpy(t.data(), file_.data + kHeaderBytes, t.size() * 4);
  return t;
}

KldRow KldBaseFile::row(int64_t chunk, int64_t j) const {
  const int64_t per = kld_scored_per_chunk(n_ctx_);
  QKV_CHECK(chunk >= 0 && chunk < n_chunk_ && j >= 0 && j < per, "KL-divergence row ", chunk, "/", j, " out of range");
  const uint64_t row_bytes = static_cast<uint64_t>(kld_row_u16(n_vocab_)) * 2;
  const uint8_t* p = file_.data + rows_offset_ + static_cast<uint64_t>(chunk * per + j) * row_bytes;
  KldRow r;
  std::memcpy(&r.scale, p, 4);
  std::memcpy(&r.min_log_prob, p + 4, 4);
  if (!std::isfinite(r.scale) || !std::isfinite(r.min_log_prob) || r.scale < 0) {
    fail_as(ErrorKind::kFormat, file_.path, ": row ", j, " of chunk ", chunk, " has a bad scale (", r.scale,
            ") or minimum log-probability (", r.min_log_prob, ")");
  }
  // The mapping is page-aligned and every offset is even: uint16 reads are aligned.
  r.q = reinterpret_cast<const uint16_t*>(p + 8);
  return r;
}

void kld_encode_row(const float* logits, int64_t n_vocab, uint16_t* out) {
  float max_logit = logits[0], min_logit = logits[0];
  for (int64_t i = 1; i < n_vocab; ++i) {
    max_logit = std::max(max_logit, logits[i]);
    min_logit = std::min(min_logit, logits[i]);
  }
  min_logit = std::max(min_logit, max_logit - 16.0f);
  double sum_exp = 0;
  for (int64_t i = 0; i < n_vocab; ++i) sum_exp += std::exp(static_cast<double>(logits[i] - max_logit));
  const float log_sum_exp = static_cast<float>(std::log(sum_exp));
  const float scale = (max_logit - min_logit) / 65535.0f;
  const float min_log_prob = min_logit - max_logit - log_sum_exp;
  std::memcpy(out, &scale, 4);
  std::memcpy(out + 2, &min_log_prob, 4);
  const float inv = scale > 0 ? 1.0f / scale : 0.0f;
  for (int64_t i = 0; i < n_vocab; ++i) {
    const float v = logits[i] - min_logit;
    out[4 + i] = v > 0 ? static_cast<uint16_t>(std::min(65535.0f, std::nearbyint(v * inv))) : uint16_t{0};
  }
  const int64_t nv = kld_row_u16(n_vocab);
  for (int64_t i = 4 + n_vocab; i < nv; ++i) out[i] = 0;
}

namespace {
void check_shape(int64_t n_ctx, int64_t n_vocab, int64_t n_chunk) {
  QKV_CHECK(n_ctx >= 4 && n_ctx <= std::numeric_limits<int32_t>::max() && n_vocab >= 1 &&
                n_vocab <= std::numeric_limits<int32_t>::max() && n_chunk >= 1 &&
                n_chunk <= std::numeric_limits<int32_t>::max(),
            "KL-divergence base: impossible shape (n_ctx ", n_ctx, ", n_vocab ", n_vocab, ", ", n_chunk, " chunks)");
}
}  // namespace

KldBaseWriter::KldBaseWriter(const std::string& path, int64_t n_ctx, int64_t n_vocab, int64_t n_chunk,
                             const int32_t* tokens)
    : out_((check_shape(n_ctx, n_vocab, n_chunk), path)), n_vocab_(n_vocab) {
  rows_left_ = static_cast<uint64_t>(n_chunk) * static_cast<uint64_t>(kld_scored_per_chunk(n_ctx));
  row_.resize(static_cast<size_t>(kld_row_u16(n_vocab)));
  const int32_t header[3] = {static_cast<int32_t>(n_ctx), static_cast<int32_t>(n_vocab),
                             static_cast<int32_t>(n_chunk)};
  out_.write(kMagic, 8);
  out_.write(header, sizeof header);
  out_.write(tokens, static_cast<size_t>(n_chunk * n_ctx) * 4);
}

void KldBaseWriter::add_row(const float* logits) {
  QKV_CHECK(rows_left_ > 0, "KL-divergence base: more rows than the header states");
  kld_encode_row(logits, n_vocab_, row_.data());
  out_.write(row_.data(), row_.size() * 2);
  --rows_left_;
}

void KldBaseWriter::finish() {
  QKV_CHECK(rows_left_ == 0, "KL-divergence base: ", rows_left_, " rows missing");
  out_.commit();
}

}  // namespace qkv

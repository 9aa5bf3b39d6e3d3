// The target-independent scheduling of the small-batch matmul: how rows are
// cut into column chunks, the inputs packed chunk by chunk, and a range of a
// work queue's row blocks split into per-matrix segments.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/linear_internal.h"

namespace qkv {
namespace matmul_small {

// At most this many columns per chunk. 1024 measured better than 256 or 512
// (each chunk restarts every tile's accumulators, which costs as much as a few
// column steps) and than whole rows of 2048 or more.
constexpr size_t kChunk = 1024;

// Columns per chunk: the row split into ceil(cols / kChunk) near-equal chunks
// of whole 32-column blocks (1536 columns: 768 + 768, not 1024 + 512), so that
// the next chunk, which each chunk prefetches, is about as long as this one.
inline size_t ChunkWidth(size_t cols) {
  const size_t n = std::max<size_t>(1, (cols + kChunk - 1) / kChunk);
  return std::max<size_t>(32, ((cols + n - 1) / n + 31) / 32 * 32);
}

// X rearranged for the chunked path: chunk k (columns [k * width, ...)) of
// input m at k * M * kXStride + m * kXStride. The inputs of a chunk are then
// one contiguous stretch at compile-time offsets, and the padding keeps rows
// whose stride is a multiple of 4 KB (2048-column inputs) from all falling
// into the same L1 sets.
constexpr size_t kXStride = kChunk + 64 / sizeof(float);

inline size_t PackedXFloats(size_t M, size_t cols) {
  const size_t width = ChunkWidth(cols);
  return (cols + width - 1) / width * M * kXStride;
}

// X (M x cols) rearranged into chunks (see kXStride).
inline void PackX(const float* X, size_t M, size_t cols, float* Xp) {
  const size_t width = ChunkWidth(cols);
  for (size_t c0 = 0; c0 < cols; c0 += width) {
    const size_t n = std::min(cols, c0 + width) - c0;
    float* chunk = Xp + (c0 / width) * M * kXStride;
    for (size_t m = 0; m < M; ++m) std::memcpy(chunk + m * kXStride, X + m * cols + c0, n * sizeof(float));
  }
}

// Rows [r0, r1) of matrix i: one matrix's piece of a range of row blocks.
struct Segment {
  int i;
  int64_t r0, r1;
};

// The segments of blocks [b0, b1) of a queue that numbers the `count`
// matrices' blocks of `block` rows one after the other (at most one segment
// per matrix) into out; returns how many.
inline int SplitRange(const Matrix* Ws, int count, int64_t block, int64_t b0, int64_t b1, Segment* out) {
  int n = 0;
  int64_t first = 0;  // global index of matrix i's first block
  for (int i = 0; i < count && first < b1; ++i) {
    const int64_t nb = (Ws[i].rows + block - 1) / block;
    const int64_t lo = std::max(b0, first), hi = std::min(b1, first + nb);
    if (lo < hi) out[n++] = Segment{i, (lo - first) * block, std::min(Ws[i].rows, (hi - first) * block)};
    first += nb;
  }
  return n;
}

}  // namespace matmul_small
}  // namespace qkv

// Small-batch matmul (batched decode): Y[m][r] = dot(W[r], X[m]) for 2 <= M <=
// kMatmulSmallMaxM inputs.
//
// Three paths. On CPUs with AVX512_BF16, non-F32 weights take the bf16 path
// (further down: bf16 dot products, twice the f32 FMA rate on AMD Zen 5, the
// precision of the oneDNN bf16 GEMM that prefill uses; measured 1.8x the f32
// path at M = 16 on the 143M shapes, bench_linear matmul_small), and on CPUs
// with AMX-BF16 the same precision on AMX tiles (the AMX path, at the end).
// Everything else takes the f32 path described here, whose products are exact.
//
// At M = 16 every weight feeds 16 FMAs, so the work is compute bound and the
// kernel must keep the FMA units busy while still reading each weight from
// memory once per call:
//  - Rows go in blocks of kRows, columns in chunks of up to kChunk. The inputs
//    go in groups of up to kMaxInputs; a group times the block is a tile of
//    kRows x group accumulators held in registers (24 of AVX-512's 32), so
//    each weight load feeds `group` FMAs and each input load kRows FMAs.
//  - The first group of a chunk converts the weights (F16/BF16/Q8_0 -> f32) in
//    registers as it multiplies and leaves them in a scratch that the other
//    groups read from L1: each weight is converted once per call, and the
//    conversion overlaps the FMAs. F32 weights, and F16/BF16 weights when all
//    inputs fit one group, are used straight from memory.
//  - X is copied per call into chunk-major order with padded rows, so a
//    chunk's inputs are one contiguous stretch (no 4 KB-stride rows competing
//    for the same L1 sets) at compile-time offsets. Between chunks a tile's
//    accumulators wait in a small buffer.
//  - The accumulators (lanes along the columns) are summed horizontally with a
//    transpose-add tree, one vector of sums per Lanes() accumulators, instead of
//    a full horizontal reduction each (which costs as much as the dot products
//    themselves on 576-wide rows).
//  - The first group's tile also prefetches the weights of the next chunk (or
//    the next block), spread over its steps, so the weight stream arrives from
//    DRAM ahead of use.
// Rows are split over threads in contiguous ranges of whole row blocks (the
// remainder rows, fewer than a block, are the matrix's last rows), and each
// output's arithmetic depends only on its row, M and the shape, so 1 and 2
// threads give bit-identical results.
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/error.h"
#include "kernels/linear_internal.h"

// Target-independent layout of the inputs, shared by every target's kernel
// and the threading code (this file is compiled once per target).
#ifndef QKV_KERNELS_MATMUL_SMALL_SHARED_
#define QKV_KERNELS_MATMUL_SMALL_SHARED_
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
#endif  // QKV_KERNELS_MATMUL_SMALL_SHARED_

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matmul_small.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/aligned_allocator.h"
#include "hwy/highway.h"
#include "kernels/weights-inl.h"

HWY_BEFORE_NAMESPACE();
namespace qkv {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
constexpr size_t kLanes = HWY_LANES(float);

// Tile shape: kRows x kMaxInputs accumulators plus the group's inputs and one
// weight vector must fit the register file (32 vectors on AVX-512, 16 below).
#if HWY_TARGET <= HWY_AVX3
// 6 x 4 measured faster than 4 x 6 (fewer input loads per FMA, and the
// input loads come from L2 for long rows), and faster than 3 x 8 tiles that
// convert the weights in registers in every group with no scratch (which run
// at the FMA peak in isolation, but then load 8 inputs per step from L2).
constexpr size_t kRows = 6;
constexpr size_t kMaxInputs = 4;  // 24 accumulators + 4 inputs + 1 weight
#elif HWY_TARGET == HWY_SCALAR
constexpr size_t kRows = 4;
constexpr size_t kMaxInputs = 4;
#else
constexpr size_t kRows = 4;
constexpr size_t kMaxInputs = 2;  // 8 accumulators + 2 inputs + 1 weight
#endif

// Chunk widths are multiples of 32 (ChunkWidth), hence of every target's lanes
// and of the Q8_0 block, so only the last chunk of a row can have a column tail.
using matmul_small::kChunk;
using matmul_small::kXStride;
static_assert(kChunk % kQ8BlockSize == 0 && kChunk / kQ8BlockSize % kLanes == 0,
              "chunks hold whole blocks, and whole vectors of block scales");

// The f32 block scales of columns [c0, c1) of a Q8_0 row (c0, c1 multiples
// of 32, c1 - c0 <= kChunk) through one vector f16 -> f32 conversion: a scalar
// conversion per block would cost as much as the block's decoding.
HWY_INLINE void ChunkScales(const uint8_t* HWY_RESTRICT row, size_t c0, size_t c1, float* HWY_RESTRICT scale) {
  const DF df;
  const hn::Rebind<hwy::float16_t, DF> dh;
  constexpr size_t kMaxBlocks = kChunk / kQ8BlockSize;
  const size_t b0 = c0 / kQ8BlockSize, nb = (c1 - c0) / kQ8BlockSize;
  HWY_ALIGN uint16_t half[kMaxBlocks] = {};
  for (size_t k = 0; k < nb; ++k) std::memcpy(&half[k], row + (b0 + k) * sizeof(BlockQ8_0), 2);
  for (size_t k = 0; k < kMaxBlocks; k += kLanes) {
    hn::Store(hn::PromoteTo(df, hn::Load(dh, reinterpret_cast<const hwy::float16_t*>(half) + k)), df, scale + k);
  }
}

// Lanes() weights of a row from column c0 + i as f32 (c0 a multiple of 32;
// for Q8_0, scale holds the block scales from column c0 on). Exact: F16, BF16
// and Q8_0's d * q are all representable in f32.
template <DType T>
HWY_INLINE VF DecodeWeights(DF df, const uint8_t* HWY_RESTRICT row, const float* HWY_RESTRICT scale, size_t c0,
                            size_t i) {
  if constexpr (T == DType::Q8_0) {
    const hn::Rebind<int8_t, DF> d8;
    const hn::Rebind<int32_t, DF> di;
    const size_t col = c0 + i;
    const int8_t* qs = reinterpret_cast<const int8_t*>(row + col / kQ8BlockSize * sizeof(BlockQ8_0) + 2) +
                       col % kQ8BlockSize;
    const VF q = hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, qs)));
    return hn::Mul(hn::Set(df, scale[i / kQ8BlockSize]), q);
  } else {
    (void)scale;
    return LoadWeights<T>(df, row, c0 + i);
  }
}

// What a tile prefetches, spread over its steps: the weights needed next, R
// row pieces of `bytes` bytes at p (row stride `stride`); p == nullptr: none.
struct Prefetch {
  const uint8_t* p;
  size_t stride;
  size_t bytes;
};

// acc[r][m] += w[r] . x[m] over columns [0, n) (n a multiple of Lanes), w[r]
// the f32 weights at column i given by load(r, i); x rows at stride ldx. Each
// step also prefetches the same span of the next piece of weights, spread
// over the work so the loads stream in while the FMAs run.
template <size_t R, size_t MB, size_t kLdx = 0, class LoadW>
HWY_INLINE void TileSteps(const LoadW& load, const float* HWY_RESTRICT x, size_t ldx_runtime, size_t n,
                          const Prefetch& pf, VF (&acc)[R][MB]) {
  const DF df;
  const size_t ldx = kLdx != 0 ? kLdx : ldx_runtime;
  if (pf.p != nullptr && n != 0) {
    const size_t step_bytes = (pf.bytes + n / kLanes - 1) / (n / kLanes);
    for (size_t i = 0; i < n; i += kLanes) {
      const size_t off = i / kLanes * step_bytes;
      for (size_t r = 0; r < R; ++r) __builtin_prefetch(pf.p + r * pf.stride + off, 0, 3);
      VF xv[MB];
      for (size_t m = 0; m < MB; ++m) xv[m] = hn::LoadU(df, x + m * ldx + i);
      for (size_t r = 0; r < R; ++r) {
        const VF wv = load(r, i);
        for (size_t m = 0; m < MB; ++m) acc[r][m] = hn::MulAdd(wv, xv[m], acc[r][m]);
      }
    }
    return;
  }
  for (size_t i = 0; i < n; i += kLanes) {
    VF xv[MB];
    for (size_t m = 0; m < MB; ++m) xv[m] = hn::LoadU(df, x + m * ldx + i);
    for (size_t r = 0; r < R; ++r) {
      const VF wv = load(r, i);
      for (size_t m = 0; m < MB; ++m) acc[r][m] = hn::MulAdd(wv, xv[m], acc[r][m]);
    }
  }
}

// Horizontal sums of Lanes() vectors at once: lane k of the result is the sum
// of all lanes of v[k]. Pairs are added in a transpose tree (interleave 32-bit,
// then 64-bit halves of each 128-bit block, then across blocks), Lanes() - 1
// vector additions in all instead of a full reduction per vector.
template <class D>
HWY_INLINE hn::Vec<D> SumsOfLanes(D d, const hn::Vec<D>* HWY_RESTRICT v) {
  constexpr size_t N = HWY_LANES(float);
  static_assert(N == 1 || N == 4 || N == 8 || N == 16, "whole 128-bit blocks");
#if HWY_TARGET == HWY_SCALAR
  // One lane: nothing to add (and the SCALAR target has no interleave ops).
  (void)d;
  return v[0];
#else
  {
    using V = hn::Vec<D>;
    const hn::Repartition<double, D> dd;
    // Level 1: lanes (in each block) [a0+a2, b0+b2, a1+a3, b1+b3] for a, b = v[2i], v[2i+1].
    V s1[N / 2];
    for (size_t i = 0; i < N / 2; ++i) {
      s1[i] = hn::Add(hn::InterleaveLower(d, v[2 * i], v[2 * i + 1]), hn::InterleaveUpper(d, v[2 * i], v[2 * i + 1]));
    }
    // Level 2: lane k of each block holds that block's sum of v[4i + k].
    V s2[N / 4];
    for (size_t i = 0; i < N / 4; ++i) {
      const auto a = hn::BitCast(dd, s1[2 * i]), b = hn::BitCast(dd, s1[2 * i + 1]);
      s2[i] = hn::Add(hn::BitCast(d, hn::InterleaveLower(dd, a, b)), hn::BitCast(d, hn::InterleaveUpper(dd, a, b)));
    }
    if constexpr (N == 4) {
      return s2[0];
    } else if constexpr (N == 8) {
      // Add the two blocks: lanes 0-3 sum v[0..3], lanes 4-7 sum v[4..7].
      return hn::Add(hn::ConcatLowerLower(d, s2[1], s2[0]), hn::ConcatUpperUpper(d, s2[1], s2[0]));
    } else {
      // Add the two halves of (s2[0], s2[2]) and of (s2[1], s2[3]): blocks hold
      // partial sums [P0, P0, P8, P8] and [P4, P4, P12, P12] (Pj: v[j..j+3]) ...
      const V h0 = hn::Add(hn::ConcatLowerLower(d, s2[2], s2[0]), hn::ConcatUpperUpper(d, s2[2], s2[0]));
      const V h1 = hn::Add(hn::ConcatLowerLower(d, s2[3], s2[1]), hn::ConcatUpperUpper(d, s2[3], s2[1]));
      // ... then adjacent blocks, and pick blocks 0, 2 of h0 and 1, 3 of h1: [S0, S4, S8, S12].
      return hn::OddEvenBlocks(hn::Add(h1, hn::SwapAdjacentBlocks(h1)), hn::Add(h0, hn::SwapAdjacentBlocks(h0)));
    }
  }
#endif
}

// Writes a finished R x MB tile: Y[m * ldy + r] = sum of acc[r][m] + tail[r][m].
template <size_t R, size_t MB>
HWY_INLINE void StoreTile(const VF (&acc)[R][MB], const float (&tail)[R][MB], float* HWY_RESTRICT Y, size_t ldy) {
  const DF df;
  constexpr size_t kCount = R * MB;
  constexpr size_t kGroups = (kCount + kLanes - 1) / kLanes;
  VF flat[kGroups * kLanes];
  for (size_t r = 0; r < R; ++r) {
    for (size_t m = 0; m < MB; ++m) flat[r * MB + m] = acc[r][m];
  }
  for (size_t k = kCount; k < kGroups * kLanes; ++k) flat[k] = hn::Zero(df);
  HWY_ALIGN float sums[kGroups * kLanes];
  for (size_t g = 0; g < kGroups; ++g) hn::Store(SumsOfLanes(df, flat + g * kLanes), df, sums + g * kLanes);
  for (size_t r = 0; r < R; ++r) {
    for (size_t m = 0; m < MB; ++m) Y[m * ldy + r] = sums[r * MB + m] + tail[r][m];
  }
}

// Q8_0 block scales of one row's chunk.
constexpr size_t kScalesPerRow = kChunk / kQ8BlockSize;

// What one block of R rows works on.
struct BlockArgs {
  const uint8_t* w;    // the block's first row
  size_t row_bytes;    // row stride of W
  size_t cols;
  size_t chunk;        // columns per chunk (ChunkWidth)
  const float* X;      // M x cols, row stride cols
  const float* Xp;     // X rearranged by chunks (chunked path only)
  size_t M;
  float* Y;            // the block's first output of input 0 (row stride ldy)
  size_t ldy;
  float* scratch;      // kRows x kXStride floats, vector aligned: one decoded chunk
  float* saved;        // kRows * kMatmulSmallMaxM vectors, vector aligned: accumulators between chunks
  const uint8_t* next; // the weights of the block after this one (prefetched during this one)
};

// Column tail (cols % Lanes, F32/F16/BF16 only): summed in scalar from the raw rows.
template <DType T, size_t R, size_t MB>
HWY_INLINE void TailSums(const BlockArgs& a, const float* X, size_t from, float (&tail)[R][MB]) {
  for (size_t r = 0; r < R; ++r) {
    for (size_t m = 0; m < MB; ++m) {
      float s = 0.0f;
      if constexpr (T != DType::Q8_0) {
        for (size_t j = from; j < a.cols; ++j) s += LoadWeight<T>(a.w + r * a.row_bytes, j) * X[m * a.cols + j];
      }
      tail[r][m] = s;
    }
  }
}

// One group of MB inputs (X, Y offset to the group) times the block, all
// columns at once: F32 rows in place, or F16/BF16 converted in registers.
template <DType T, size_t R, size_t MB>
HWY_INLINE void GroupDirect(const BlockArgs& a, const float* X, float* Y, bool prefetch) {
  const DF df;
  VF acc[R][MB];
  for (size_t r = 0; r < R; ++r)
    for (size_t m = 0; m < MB; ++m) acc[r][m] = hn::Zero(df);
  const size_t body = a.cols / kLanes * kLanes;
  const uint8_t* w = a.w;
  const size_t stride = a.row_bytes;
  const auto load = [&](size_t r, size_t i) HWY_ATTR { return LoadWeights<T>(df, w + r * stride, i); };
  TileSteps<R, MB>(load, X, a.cols, body, Prefetch{prefetch ? a.next : nullptr, stride, stride}, acc);
  float tail[R][MB];
  TailSums<T, R, MB>(a, X, body, tail);
  StoreTile<R, MB>(acc, tail, Y, a.ldy);
}

// One group of MB inputs (Xc: their chunk in Xp) times decoded columns
// [c0, c1) in scratch; the accumulators start from (and, unless this is the
// last chunk, return to) saved, or from zero on the first chunk.
template <DType T, size_t R, size_t MB, bool kDecode>
HWY_INLINE void GroupChunk(const BlockArgs& a, const float* Xc, size_t m0, float* HWY_RESTRICT saved, size_t c0,
                           size_t c1, const float* HWY_RESTRICT scales, const Prefetch& pf) {
  const DF df;
  VF acc[R][MB];
  for (size_t r = 0; r < R; ++r) {
    for (size_t m = 0; m < MB; ++m) acc[r][m] = c0 == 0 ? hn::Zero(df) : hn::Load(df, saved + (r * MB + m) * kLanes);
  }
  const size_t body = (c1 - c0) / kLanes * kLanes;
  float* HWY_RESTRICT w = a.scratch;
  if constexpr (kDecode) {
    // The chunk's first group converts the weights in registers as it goes
    // and leaves them in scratch for the others, so the conversion overlaps
    // the FMAs instead of running as a pass of its own.
    const uint8_t* HWY_RESTRICT raw = a.w;
    const size_t stride = a.row_bytes;
    const auto load = [&](size_t r, size_t i) HWY_ATTR {
      const VF v = DecodeWeights<T>(df, raw + r * stride, scales + r * kScalesPerRow, c0, i);
      hn::Store(v, df, w + r * kXStride + i);
      return v;
    };
    TileSteps<R, MB, kXStride>(load, Xc, kXStride, body, pf, acc);
  } else {
    (void)scales;
    const auto load = [&](size_t r, size_t i) HWY_ATTR { return hn::Load(df, w + r * kXStride + i); };
    TileSteps<R, MB, kXStride>(load, Xc, kXStride, body, pf, acc);
  }
  if (c1 < a.cols) {
    for (size_t r = 0; r < R; ++r)
      for (size_t m = 0; m < MB; ++m) hn::Store(acc[r][m], df, saved + (r * MB + m) * kLanes);
    return;
  }
  float tail[R][MB];
  TailSums<T, R, MB>(a, a.X + m0 * a.cols, c0 + body, tail);
  StoreTile<R, MB>(acc, tail, a.Y + m0 * a.ldy, a.ldy);
}

template <size_t MB>
using InputsTag = std::integral_constant<size_t, MB>;

// Calls f(InputsTag<mb>()) for a run-time group size 1 <= mb <= kMaxInputs
// (the bf16 path: a number of quads).
template <class F>
HWY_INLINE void WithGroupSize(size_t mb, const F& f) {
  switch (mb) {
    case 1: return f(InputsTag<1>());
    case 2: return f(InputsTag<2>());
    case 3: if constexpr (kMaxInputs >= 3) return f(InputsTag<3>()); break;
    case 4: if constexpr (kMaxInputs >= 4) return f(InputsTag<4>()); break;
    case 5: if constexpr (kMaxInputs >= 5) return f(InputsTag<5>()); break;
    case 6: if constexpr (kMaxInputs >= 6) return f(InputsTag<6>()); break;
  }
}
static_assert(kMaxInputs >= 2 && kMaxInputs <= 6, "WithGroupSize covers 1..6 inputs per group");

// The M inputs split into ceil(M / kMaxInputs) groups of near-equal size (16
// on AVX-512: 6, 5, 5): calls f(first input, group size, group index) for each.
template <class F>
HWY_INLINE void ForEachGroup(size_t M, const F& f) {
  const size_t groups = (M + kMaxInputs - 1) / kMaxInputs;
  size_t m0 = 0;
  for (size_t g = 0; g < groups; ++g) {
    const size_t mb = M / groups + (g < M % groups ? 1 : 0);
    f(m0, mb, g);
    m0 += mb;
  }
}

// Whether Block decodes the weights into scratch (and reads X from Xp): when
// there is more than one group of inputs to reuse them, and always for Q8_0.
template <DType T>
HWY_INLINE bool Chunked(size_t M) {
  return T == DType::Q8_0 || (T != DType::F32 && M > kMaxInputs);
}

// Y for a block of R rows and all M inputs.
template <DType T, size_t R>
HWY_INLINE void Block(const BlockArgs& a) {
  if constexpr (T != DType::Q8_0) {
    if (!Chunked<T>(a.M)) {
      ForEachGroup(a.M, [&](size_t m0, size_t mb, size_t g) {
        WithGroupSize(mb, [&](auto tag) {
          // F32 rows (twice the bytes per FMA) measured faster without it.
          GroupDirect<T, R, decltype(tag)::value>(a, a.X + m0 * a.cols, a.Y + m0 * a.ldy,
                                                  g == 0 && T != DType::F32);
        });
      });
      return;
    }
  }
  for (size_t c0 = 0; c0 < a.cols; c0 += a.chunk) {
    const size_t c1 = std::min(a.cols, c0 + a.chunk);
    HWY_ALIGN float scales[R * kScalesPerRow];
    if constexpr (T == DType::Q8_0) {
      for (size_t r = 0; r < R; ++r) ChunkScales(a.w + r * a.row_bytes, c0, c1, scales + r * kScalesPerRow);
    }
    // The first group prefetches the next chunk of these rows, or after the
    // last chunk the first chunk of the next block.
    const bool last = c1 == a.cols;
    const uint8_t* next = last ? a.next : a.w + dtype_row_bytes(T, c1);
    const size_t next_bytes = dtype_row_bytes(T, last ? std::min(a.cols, a.chunk) : std::min(a.cols, c1 + a.chunk) - c1);
    const float* Xc = a.Xp + (c0 / a.chunk) * a.M * kXStride;
    float* saved = a.saved;
    ForEachGroup(a.M, [&](size_t m0, size_t mb, size_t g) {
      WithGroupSize(mb, [&](auto tag) {
        constexpr size_t MB = decltype(tag)::value;
        const Prefetch pf{g == 0 ? next : nullptr, a.row_bytes, next_bytes};
        if (g == 0) {
          GroupChunk<T, R, MB, true>(a, Xc + m0 * kXStride, m0, saved, c0, c1, scales, pf);
        } else {
          GroupChunk<T, R, MB, false>(a, Xc + m0 * kXStride, m0, saved, c0, c1, scales, pf);
        }
        saved += R * MB * kLanes;
      });
    });
  }
}

template <DType T>
void MatmulRangeT(const Matrix& W, const float* X, const float* Xp, size_t M, float* Y, int64_t r0, int64_t r1) {
  HWY_ALIGN float scratch[kRows * kXStride];
  HWY_ALIGN float saved[kRows * kMatmulSmallMaxM * kLanes];
  BlockArgs a;
  a.cols = static_cast<size_t>(W.cols);
  a.row_bytes = dtype_row_bytes(T, a.cols);
  a.X = X;
  a.Xp = Xp;
  a.M = M;
  a.ldy = static_cast<size_t>(W.rows);
  a.scratch = scratch;
  a.saved = saved;
  a.chunk = matmul_small::ChunkWidth(a.cols);
  const uint8_t* base = static_cast<const uint8_t*>(W.data);
  const size_t block_bytes = kRows * a.row_bytes;
  int64_t r = r0;
  for (; r + static_cast<int64_t>(kRows) <= r1; r += kRows) {
    a.w = base + r * a.row_bytes;
    a.Y = Y + r;
    a.next = a.w + block_bytes;  // the rows of a block are contiguous
    Block<T, kRows>(a);
  }
  for (; r < r1; ++r) {  // the matrix's last rows, fewer than a block
    a.w = base + r * a.row_bytes;
    a.Y = Y + r;
    a.next = nullptr;
    Block<T, 1>(a);
  }
}

// Y[m][r] for rows [r0, r1) (r0 a multiple of kRows) and every m < M; Xp is
// X packed by matmul_small::PackX (used unless W is F32).
void MatmulSmallRange(const Matrix& W, const float* X, const float* Xp, int64_t M, float* Y, int64_t r0,
                      int64_t r1) {
  const size_t m = static_cast<size_t>(M);
  switch (W.type) {
    case DType::F32: return MatmulRangeT<DType::F32>(W, X, Xp, m, Y, r0, r1);
    case DType::F16: return MatmulRangeT<DType::F16>(W, X, Xp, m, Y, r0, r1);
    case DType::BF16: return MatmulRangeT<DType::BF16>(W, X, Xp, m, Y, r0, r1);
    case DType::Q8_0: return MatmulRangeT<DType::Q8_0>(W, X, Xp, m, Y, r0, r1);
  }
}

#if HWY_TARGET == HWY_AVX3_DL
// The bf16 path (CPUs with AVX512_BF16, on the AVX3_DL target): weights and
// inputs rounded to bf16 (nearest even), products by vdpbf16ps, which
// multiplies 32 bf16 pairs and adds them pairwise into 16 f32 sums: twice the
// multiply-adds per instruction of an f32 FMA. The same precision as the
// oneDNN bf16 GEMM that prefill uses for non-F32 weights (each product within
// about 2^-8 relative). Highway 1.0.3 only emulates bf16 dot products, hence
// the intrinsics.
//
// Each thread takes its rows in blocks of kRowsBF16 (4). One tile computes a
// block against every input, with its accumulators in registers throughout,
// from the block's rows decoded to bf16 in a scratch that stays in L1. The
// decoding is pipelined: while a tile runs, each of its steps decodes the
// same 32 columns of the next block (into a second scratch) and prefetches
// the block after that. The conversions then overlap the dot products (alone,
// they cost a quarter of the tile's time), and the loads they wait for were
// prefetched a whole tile earlier. Rows wider than kPassColsBF16 go in passes
// of columns, so that the inputs of a pass stay in L1 too.
//
// Lanes: a vector holds 4 inputs x 8 columns (one 128-bit block per input),
// and a weight row's 8 columns are broadcast to all four blocks. Lane (j, c)
// of accumulator acc[r][q] then sums row r times input 4q + j over the column
// pairs c, c + 4, c + 8, ... of the row, so at the end only 4 lanes per output
// are left to add: an in-block transpose of 4 rows, 6 shuffles and 3 adds per
// 16 outputs. (Accumulators with all 16 lanes along the columns of one input
// need a full transpose-add tree per input and row; at 576 columns that tree
// and its scattered stores took a quarter of the tile's time.)
//
// Both operands are stored per step of 32 columns, so that every load in the
// loop is at a compile-time offset from one pointer per operand:
//  - weights (the scratch): step t, row r: 32 bf16 at (t * kRowsBF16 + r) * 32;
//  - inputs: step t, quad q, sub-step s (8 columns), input 4q + j: 8 bf16 at
//    (((t * Q + q) * 4 + s) * 4 + j) * 8, Q = ceil(M / 4), missing inputs zero.
#define QKV_BF16_TARGET __attribute__((target("avx512bf16,prfchw")))

constexpr size_t kRowsBF16 = 4;   // rows per block: 4 x 4 quads = 16 accumulators
constexpr size_t kBF16Step = 32;  // columns per step
constexpr size_t kQuad = 4;       // inputs per vector
constexpr size_t kSub = 8;        // columns of one input per vector
constexpr size_t kQuadStep = kQuad * kBF16Step;  // bf16 values of one quad per step

inline size_t StepsBF16(size_t cols) { return (cols + kBF16Step - 1) / kBF16Step; }

// Two f32 vectors (columns i .. i+15 in lo, i+16 .. i+31 in hi) as 32 bf16.
QKV_BF16_TARGET HWY_INLINE __m512i PackBF16(__m512 lo, __m512 hi) {
  return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
}

// Columns [32t, 32t + 32) of row `row` (values of type T, all within the row)
// as 32 bf16 at out (64-byte aligned).
template <DType T>
QKV_BF16_TARGET HWY_INLINE void DecodeStepBF16(const uint8_t* HWY_RESTRICT row, size_t t, uint16_t* HWY_RESTRICT out) {
  const size_t i = t * kBF16Step;
  if constexpr (T == DType::Q8_0) {
    static_assert(kBF16Step == kQ8BlockSize, "a step is one Q8_0 block");
    const uint8_t* blk = row + t * sizeof(BlockQ8_0);
    uint16_t h;
    std::memcpy(&h, blk, 2);
    const __m512 d = _mm512_set1_ps(_cvtsh_ss(h));
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
    const __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q)));
    const __m512 hi = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1)));
    _mm512_store_si512(out, PackBF16(_mm512_mul_ps(d, lo), _mm512_mul_ps(d, hi)));
  } else {
    const DF df;
    const VF lo = LoadWeights<T>(df, row, i), hi = LoadWeights<T>(df, row, i + kLanes);
    _mm512_store_si512(out, PackBF16(lo.raw, hi.raw));
  }
}

// The steps of a row that DecodeStepBF16 cannot take: the last one, if the
// row ends inside it (its padding zero).
template <DType T>
QKV_BF16_TARGET HWY_INLINE void DecodeTailBF16(const uint8_t* HWY_RESTRICT row, size_t cols,
                                               uint16_t* HWY_RESTRICT out, size_t stride) {
  for (size_t i = cols / kBF16Step * kBF16Step; i < StepsBF16(cols) * kBF16Step; ++i) {
    uint16_t v = 0;  // Q8_0 rows are whole 32-column blocks: no tail
    if constexpr (T != DType::Q8_0) v = i < cols ? f32_to_bf16(LoadWeight<T>(row, i)) : 0;
    out[i / kBF16Step * stride + i % kBF16Step] = v;
  }
}

// Row `row` (cols values of type T) as bf16, step t's 32 columns at
// out + t * stride (64-byte aligned), the padding after the last column zero.
template <DType T>
QKV_BF16_TARGET HWY_INLINE void DecodeRowBF16(const uint8_t* HWY_RESTRICT row, size_t cols,
                                              uint16_t* HWY_RESTRICT out, size_t stride) {
  for (size_t t = 0; t < cols / kBF16Step; ++t) DecodeStepBF16<T>(row, t, out + t * stride);
  DecodeTailBF16<T>(row, cols, out, stride);
}

// The weight rows a tile decodes for the next tile while it runs (its step t
// decodes their step t, so the conversions overlap the dot products): the
// first `steps` whole steps of kRowsBF16 rows at `row` (stride `stride`) into
// `out` (the scratch layout); row == nullptr: none.
struct NextRows {
  const uint8_t* row;
  size_t stride;
  size_t steps;
  uint16_t* out;
};

// Y[m * ldy + r] = w[r] . x[m] (or += if `add`) for r < R and m < M <= 4Q,
// over `steps` steps of 32 columns, w and xq laid out as above. Each step
// also decodes its step of `own` (w's own rows, when the caller has not
// decoded them: the first block of a range) and of `next`, and prefetches its
// share of pf (see Prefetch), spread over the steps so that the weights
// arrive while the dot products run.
template <DType T, size_t R, size_t Q>
QKV_BF16_TARGET HWY_INLINE void DotTileBF16(const uint16_t* HWY_RESTRICT w, const uint16_t* HWY_RESTRICT xq,
                                            size_t steps, size_t M, const NextRows& own, const NextRows& next,
                                            const Prefetch& pf, bool add, float* HWY_RESTRICT Y, size_t ldy,
                                            float* y_ahead = nullptr) {
  // With few quads the sub-steps alternate between S sets of accumulators,
  // so that at least 12 dot products are independent (vdpbf16ps: two per
  // cycle, several cycles of latency).
  constexpr size_t S = Q == 1 ? 4 : Q == 2 ? 2 : 1;
  __m512 acc[S][R][Q];
  for (size_t s = 0; s < S; ++s)
    for (size_t r = 0; r < R; ++r)
      for (size_t q = 0; q < Q; ++q) acc[s][r][q] = _mm512_setzero_ps();
  // Line k of pf's `lines` per row goes out at step k * steps / lines.
  const size_t lines = pf.p != nullptr ? (pf.bytes + 63) / 64 : 0;
  const size_t own_steps = own.row != nullptr ? own.steps : 0, next_steps = next.row != nullptr ? next.steps : 0;
  size_t line = 0, ym = 0;
  for (size_t t = 0; t < steps; ++t) {
    for (; line < lines && line * steps <= t * lines; ++line) {
      for (size_t r = 0; r < kRowsBF16; ++r) __builtin_prefetch(pf.p + r * pf.stride + line * 64, 0, 3);
    }
    // The outputs of the block after next, for writing (see MatmulRangeBF16).
    for (; y_ahead != nullptr && ym < M && ym * steps <= t * M; ++ym) _m_prefetchw(y_ahead + ym * ldy);
    if (t < own_steps) {
      for (size_t k = 0; k < kRowsBF16; ++k) {
        DecodeStepBF16<T>(own.row + k * own.stride, t, own.out + (t * kRowsBF16 + k) * kBF16Step);
      }
    }
    if (t < next_steps) {
      for (size_t k = 0; k < kRowsBF16; ++k) {
        DecodeStepBF16<T>(next.row + k * next.stride, t, next.out + (t * kRowsBF16 + k) * kBF16Step);
      }
    }
    const uint16_t* HWY_RESTRICT wt = w + t * kRowsBF16 * kBF16Step;
    const uint16_t* HWY_RESTRICT xt = xq + t * Q * kQuadStep;
    // Unrolled: as a loop, GCC kept the accumulators in memory.
#pragma GCC unroll 4
    for (size_t s = 0; s < kBF16Step / kSub; ++s) {
      __m512i xv[Q];
      for (size_t q = 0; q < Q; ++q) xv[q] = _mm512_load_si512(xt + (q * 4 + s) * kQuad * kSub);
      for (size_t r = 0; r < R; ++r) {
        const __m512i wv =
            _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(wt + r * kBF16Step + s * kSub)));
        for (size_t q = 0; q < Q; ++q) {
          acc[s % S][r][q] = _mm512_dpbf16_ps(acc[s % S][r][q], reinterpret_cast<__m512bh>(wv),
                                              reinterpret_cast<__m512bh>(xv[q]));
        }
      }
    }
  }
  for (size_t s = 1; s < S; ++s)
    for (size_t r = 0; r < R; ++r)
      for (size_t q = 0; q < Q; ++q) acc[0][r][q] = _mm512_add_ps(acc[0][r][q], acc[s][r][q]);
  // Rows in fours: an in-block transpose adds each block's 4 lanes, leaving
  // in block j the sums of rows r0 .. r0 + 3 for input 4q + j.
  for (size_t q = 0; q < Q; ++q) {
    for (size_t r0 = 0; r0 < R; r0 += 4) {
      __m512 a[4];
      for (size_t k = 0; k < 4; ++k) a[k] = r0 + k < R ? acc[0][r0 + k][q] : _mm512_setzero_ps();
      const __m512 s01 = _mm512_add_ps(_mm512_unpacklo_ps(a[0], a[1]), _mm512_unpackhi_ps(a[0], a[1]));
      const __m512 s23 = _mm512_add_ps(_mm512_unpacklo_ps(a[2], a[3]), _mm512_unpackhi_ps(a[2], a[3]));
      const __m512d lo = _mm512_unpacklo_pd(_mm512_castps_pd(s01), _mm512_castps_pd(s23));
      const __m512d hi = _mm512_unpackhi_pd(_mm512_castps_pd(s01), _mm512_castps_pd(s23));
      HWY_ALIGN float sums[16];
      _mm512_store_ps(sums, _mm512_add_ps(_mm512_castpd_ps(lo), _mm512_castpd_ps(hi)));
      const __mmask8 rows = static_cast<__mmask8>((1u << std::min<size_t>(4, R - r0)) - 1);
      for (size_t j = 0; j < kQuad && q * kQuad + j < M; ++j) {
        float* y = Y + (q * kQuad + j) * ldy + r0;
        const __m128 v = _mm_load_ps(sums + j * 4);
        _mm_mask_storeu_ps(y, rows, add ? _mm_add_ps(_mm_maskz_loadu_ps(rows, y), v) : v);
      }
    }
  }
}

// WithGroupSize (1 .. kMaxInputs) also picks the number of quads.
static_assert(kMatmulSmallMaxM <= kMaxInputs * kQuad, "every quad count has a tile");

// At most this many columns per pass over a range of rows: a pass's inputs
// (16 x 768 bf16, 24 KB) and its two blocks of decoded weights then stay in
// L1. Wider rows go in passes of near-equal whole steps, each adding to Y.
constexpr size_t kPassColsBF16 = 768;

// Steps per pass (the last pass may have fewer).
inline size_t PassStepsBF16(size_t cols) {
  const size_t passes = (cols + kPassColsBF16 - 1) / kPassColsBF16;
  return (StepsBF16(cols) + passes - 1) / passes;
}

// The block of kRowsBF16 rows at row r of W, over the pass that starts at
// column c0, as a Prefetch; none if the block does not end by r_end.
inline Prefetch PassBlockBF16(const Matrix& W, size_t c0, int64_t r, int64_t r_end) {
  if (r + static_cast<int64_t>(kRowsBF16) > r_end) return Prefetch{nullptr, 0, 0};
  const size_t cols = static_cast<size_t>(W.cols), row_bytes = dtype_row_bytes(W.type, cols);
  const size_t n = std::min(cols - c0, PassStepsBF16(cols) * kBF16Step);
  return Prefetch{static_cast<const uint8_t*>(W.data) + dtype_row_bytes(W.type, c0) + r * static_cast<int64_t>(row_bytes),
                  row_bytes, dtype_row_bytes(W.type, n)};
}

// Y for rows [r0, r1) and all M inputs, from xq (the inputs, laid out above).
// scratch holds two blocks of decoded rows: the tile of one block decodes the
// next block into the other. follow(k) says where block k (0 or 1) of what the
// thread computes after this range starts (a Prefetch of its first pass; p null
// if nothing follows or that block is partial): the range's last two tiles
// prefetch it, as every tile prefetches the block after next, so the next
// range (or pass) does not start by waiting for DRAM.
//
// Each tile also asks for the output lines of the block after next in the
// exclusive state (prefetchw): a tile's masked stores go to M lines, which
// the other thread has usually just read (every thread reads all of Y as the
// next call's input), and waiting for that ownership at the stores cost up
// to a sixth of the 2-thread GEMM with the weights in cache
// (bench_linear matmul_small/f16/1536x576/16/2: 50 us with the stores
// removed, 61 with them, 57 with prefetchw).
template <DType T, class Follow>
QKV_BF16_TARGET void MatmulRangeBF16(const Matrix& W, const uint16_t* HWY_RESTRICT xq, size_t M,
                                     uint16_t* HWY_RESTRICT scratch, float* Y, int64_t r0, int64_t r1,
                                     const Follow& follow) {
  const size_t cols = static_cast<size_t>(W.cols), steps = StepsBF16(cols);
  const size_t pass_steps = PassStepsBF16(cols);
  const size_t row_bytes = dtype_row_bytes(T, cols), ldy = static_cast<size_t>(W.rows);
  const auto rows_at = [&](int64_t r) {
    return static_cast<size_t>(std::min<int64_t>(kRowsBF16, std::max<int64_t>(0, r1 - r)));
  };
  WithGroupSize((M + kQuad - 1) / kQuad, [&](auto tag) QKV_BF16_TARGET HWY_ATTR {
    constexpr size_t Q = decltype(tag)::value;
    for (size_t t0 = 0; t0 < steps; t0 += pass_steps) {
      // Columns [c0, c0 + n) of every row.
      const size_t c0 = t0 * kBF16Step, n = std::min(cols - c0, pass_steps * kBF16Step);
      const size_t nsteps = StepsBF16(n), full = n / kBF16Step, bytes = dtype_row_bytes(T, n);
      const uint8_t* base = static_cast<const uint8_t*>(W.data) + dtype_row_bytes(T, c0);
      const uint16_t* xp = xq + t0 * Q * kQuadStep;
      const auto row_at = [&](int64_t r) { return base + r * static_cast<int64_t>(row_bytes); };
      const bool add = c0 > 0;
      // Block k of what follows this pass: the next pass's first blocks, or
      // after the last pass, the caller's follow(k).
      const size_t next_c0 = c0 + n;
      const auto follow_block = [&](size_t k) -> Prefetch {
        if (next_c0 >= cols) return follow(k);
        return PassBlockBF16(W, next_c0, r0 + static_cast<int64_t>(k * kRowsBF16), r1);
      };
      uint16_t* cur = scratch;
      uint16_t* nxt = scratch + nsteps * kRowsBF16 * kBF16Step;
      // Nothing has fetched the range's first two blocks: their loads go out
      // now, and the first tile decodes its own rows step by step as they
      // arrive (and the second block's, as every tile decodes the next one).
      // From there on each tile prefetches the block after next.
      for (int64_t r = r0; r < std::min(r1, r0 + 2 * static_cast<int64_t>(kRowsBF16)); ++r) {
        for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(row_at(r) + off, 0, 3);
      }
      // What no tile decodes of the block at row r, into out: a whole
      // block's partial last step (a tile decodes its whole steps), or every
      // row of a partial block.
      const auto decode_rest = [&](int64_t r, uint16_t* out) {
        const size_t rows = rows_at(r);
        for (size_t k = 0; k < rows; ++k) {
          const uint8_t* row = row_at(r + static_cast<int64_t>(k));
          if (rows == kRowsBF16) {
            DecodeTailBF16<T>(row, n, out + k * kBF16Step, kRowsBF16 * kBF16Step);
          } else {
            DecodeRowBF16<T>(row, n, out + k * kBF16Step, kRowsBF16 * kBF16Step);
          }
        }
      };
      const bool own_first = rows_at(r0) == kRowsBF16;
      decode_rest(r0, cur);
      for (int64_t r = r0; r < r1; r += static_cast<int64_t>(kRowsBF16)) {
        const size_t R = rows_at(r);
        const int64_t next = r + static_cast<int64_t>(kRowsBF16), after = next + static_cast<int64_t>(kRowsBF16);
        const size_t next_rows = rows_at(next);
        if (R == kRowsBF16) {
          // The tile decodes the next block if it is whole (else it is
          // decoded here after the tile), and prefetches the one after it.
          const NextRows nr{next_rows == kRowsBF16 ? row_at(next) : nullptr, row_bytes, full, nxt};
          const Prefetch pf = rows_at(after) == kRowsBF16 ? Prefetch{row_at(after), row_bytes, bytes}
                              : after >= r1 ? follow_block(static_cast<size_t>(after - r1) / kRowsBF16)
                                            : Prefetch{nullptr, 0, 0};
          const NextRows own{own_first && r == r0 ? row_at(r) : nullptr, row_bytes, full, cur};
          DotTileBF16<T, kRowsBF16, Q>(cur, xp, nsteps, M, own, nr, pf, add, Y + r, ldy,
                                       after < r1 ? Y + after : nullptr);
          decode_rest(next, nxt);
        } else {  // the last block (nothing follows it)
          const NextRows none_next{nullptr, 0, 0, nullptr};
          const Prefetch none{nullptr, 0, 0};
          for (size_t k = 0; k < R; ++k) {
            DotTileBF16<T, 1, Q>(cur + k * kBF16Step, xp, nsteps, M, none_next, none_next, none, add,
                                 Y + r + static_cast<int64_t>(k), ldy);
          }
        }
        std::swap(cur, nxt);
      }
    }
  });
}

// One thread's share of count matrices that share X: lays X out in bf16 (its
// own copy), then computes the row blocks (of `block` rows) it takes from the
// queue, which numbers the matrices' blocks one after the other.
QKV_BF16_TARGET void MatmulSmallBF16(const Matrix* Ws, float* const* Ys, int count, const float* X, int64_t M,
                                     detail::BlockQueue* queue, int64_t block) {
  const size_t cols = static_cast<size_t>(Ws[0].cols), steps = StepsBF16(cols);
  const size_t m = static_cast<size_t>(M), quads = (m + kQuad - 1) / kQuad;
  static thread_local hwy::AlignedFreeUniquePtr<uint16_t[]> xq, scratch;
  static thread_local size_t xq_size = 0, scratch_size = 0;
  const auto reserve = [](hwy::AlignedFreeUniquePtr<uint16_t[]>& p, size_t& size, size_t need) {
    if (need > size) {
      p = hwy::AllocateAligned<uint16_t>(need);
      size = need;
    }
  };
  reserve(xq, xq_size, steps * quads * kQuadStep);
  reserve(scratch, scratch_size, 2 * steps * kRowsBF16 * kBF16Step);
  // X in the tiles' layout: input k = 4q + j, step t: 4 pieces of 8 columns
  // at xq + (t * quads + q) * kQuadStep + s * 32 + j * 8, s = 0..3.
  if (m % kQuad != 0) std::fill(xq.get(), xq.get() + steps * quads * kQuadStep, uint16_t{0});
  for (size_t k = 0; k < m; ++k) {
    const float* x = X + k * cols;
    const size_t q = k / kQuad, j = k % kQuad;
    uint16_t* dst = xq.get() + q * kQuadStep + j * kSub;
    for (size_t t = 0; t < cols / kBF16Step; ++t, dst += quads * kQuadStep) {
      const __m512i v = PackBF16(_mm512_loadu_ps(x + t * kBF16Step), _mm512_loadu_ps(x + t * kBF16Step + kLanes));
      _mm_store_si128(reinterpret_cast<__m128i*>(dst), _mm512_castsi512_si128(v));
      _mm_store_si128(reinterpret_cast<__m128i*>(dst + 1 * kQuad * kSub), _mm512_extracti32x4_epi32(v, 1));
      _mm_store_si128(reinterpret_cast<__m128i*>(dst + 2 * kQuad * kSub), _mm512_extracti32x4_epi32(v, 2));
      _mm_store_si128(reinterpret_cast<__m128i*>(dst + 3 * kQuad * kSub), _mm512_extracti32x4_epi32(v, 3));
    }
    for (size_t i = cols / kBF16Step * kBF16Step; i < steps * kBF16Step; ++i) {  // the last, partial step
      const size_t t = i / kBF16Step, c = i % kBF16Step;
      xq[(t * quads + q) * kQuadStep + c / kSub * kQuad * kSub + j * kSub + c % kSub] =
          i < cols ? f32_to_bf16(x[i]) : uint16_t{0};
    }
  }
  // The thread's work is a sequence of segments (rows [r0, r1) of matrix i):
  // the pieces of each range it takes from the queue. The next range is taken
  // only when the current one's last tiles ask what follows it (so the queue
  // still balances the threads at the end), to prefetch its first blocks.
  using matmul_small::Segment;
  // A range has at most one segment per matrix. (Kept per thread, like the
  // buffers above: no allocation per call once they are large enough.)
  static thread_local std::vector<Segment> cur, next;
  if (cur.size() < static_cast<size_t>(count)) {
    cur.resize(static_cast<size_t>(count));
    next.resize(static_cast<size_t>(count));
  }
  int ncur = 0, nnext = 0, at = 0;
  bool taken = false;  // whether `next` holds the next range (nnext == 0: the queue is empty)
  const auto take_next = [&] {
    if (taken) return;
    int64_t b0, b1;
    nnext = queue->take(&b0, &b1) ? matmul_small::SplitRange(Ws, count, block, b0, b1, next.data()) : 0;
    taken = true;
  };
  for (;;) {
    if (at == ncur) {
      take_next();
      if (nnext == 0) break;
      std::swap(cur, next);
      ncur = nnext;
      at = 0;
      taken = false;
    }
    const Segment seg = cur[at++];
    // Block k of the segment after this one, for its first pass.
    const auto follow = [&](size_t k) -> Prefetch {
      const Segment* f = nullptr;
      if (at < ncur) {
        f = &cur[at];
      } else {
        take_next();
        if (nnext > 0) f = &next[0];
      }
      if (f == nullptr) return Prefetch{nullptr, 0, 0};
      return PassBlockBF16(Ws[f->i], 0, f->r0 + static_cast<int64_t>(k * kRowsBF16), f->r1);
    };
    const Matrix& W = Ws[seg.i];
    float* Y = Ys[seg.i];
    switch (W.type) {
      case DType::F32: break;  // F32 weights keep the f32 path (see matmul_small_precision)
      case DType::F16: MatmulRangeBF16<DType::F16>(W, xq.get(), m, scratch.get(), Y, seg.r0, seg.r1, follow); break;
      case DType::BF16: MatmulRangeBF16<DType::BF16>(W, xq.get(), m, scratch.get(), Y, seg.r0, seg.r1, follow); break;
      case DType::Q8_0: MatmulRangeBF16<DType::Q8_0>(W, xq.get(), m, scratch.get(), Y, seg.r0, seg.r1, follow); break;
    }
  }
}

// The AMX path (CPUs with AMX-BF16: Xeon Sapphire Rapids and later). Same
// precision as the bf16 path above (weights and inputs rounded to bf16, f32
// sums), but each TDPBF16PS multiplies a 16 x 32 tile of weights by 32 x 16
// inputs: 8192 multiply-adds per instruction. On the Intel Xeon (2 cores)
// where this was written, the bf16 path above ran no faster than the f32 one
// (bench_linear matmul_small/{bf16,f32}/1536x576/16/1: 86 and 89 GFLOP/s,
// about 40% of the FMA peak); on AMX the products cost less than decoding the
// weights. Measured there (bench_linear matmul_small(_stream)(_noamx)): 2.9x
// the bf16 path with the weights in cache, 1.9-2.0x streamed from DRAM, where
// it reads about 60% of the probed bandwidth.
//
// A tile is one block of kRowsAMX rows against all inputs (up to 16):
//  - A (weights): the block's rows decoded to bf16 into a scratch, row-major
//    with a padded stride, tile t = columns [32t, 32t + 32) of 16 rows.
//  - B (inputs): X in AMX's pair-interleaved layout, laid out once per call:
//    step t, row i, column m holds the bf16 pair (X[m][32t + 2i], X[m][32t + 2i + 1]).
//  - C: 16 rows x 16 inputs of f32 sums, kept in 4 tile registers that take
//    the steps in turn (independent accumulations overlap), added at the end.
// The block's rows are contiguous in memory, so the decoding reads one
// sequential stream; it prefetches the next block as it goes.
#define QKV_AMX_TARGET __attribute__((target("avx512bf16,prfchw,amx-tile,amx-bf16")))

constexpr size_t kRowsAMX = 16;  // rows per tile: AMX's 16 tile rows
constexpr size_t kAccAMX = 4;    // C tiles that take the steps in turn
static_assert(kMatmulSmallMaxM <= 16, "a B tile holds 16 inputs");

// The tile registers: C in 0..3, A in 4, B in 5, all 16 rows of 64 bytes
// (palette 1).
struct alignas(64) TileConfigAMX {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16};
};
static_assert(sizeof(TileConfigAMX) == 64, "the LDTILECFG memory layout");

// The permutations of one round of Transpose16x16 (distance d): row i takes
// its own lanes j without bit d and row i + d's lanes j - d; row i + d takes
// row i's lanes j + d and its own lanes with bit d. (Indices >= 16: the
// second operand of vpermt2d.)
struct TransposeRoundIdx {
  int32_t lo[16], hi[16];
};
constexpr TransposeRoundIdx MakeTransposeRoundIdx(int d) {
  TransposeRoundIdx x{};
  for (int j = 0; j < 16; ++j) {
    x.lo[j] = (j & d) ? 16 + j - d : j;
    x.hi[j] = (j & d) ? 16 + j : j + d;
  }
  return x;
}

template <int d>
QKV_AMX_TARGET HWY_INLINE void TransposeRound(__m512i (&v)[16]) {
  alignas(64) static constexpr TransposeRoundIdx kIdx = MakeTransposeRoundIdx(d);
  const __m512i lo = _mm512_load_si512(kIdx.lo), hi = _mm512_load_si512(kIdx.hi);
  for (int i = 0; i < 16; ++i) {
    if (i & d) continue;
    const __m512i a = v[i], b = v[i + d];
    v[i] = _mm512_permutex2var_epi32(a, lo, b);
    v[i + d] = _mm512_permutex2var_epi32(a, hi, b);
  }
}

// v[i] lane j <- v[j] lane i, for 16 x 16 32-bit values: for each bit d of
// the index, swap the off-diagonal d x d blocks of every 2d x 2d block.
QKV_AMX_TARGET HWY_INLINE void Transpose16x16(__m512i (&v)[16]) {
  TransposeRound<8>(v);
  TransposeRound<4>(v);
  TransposeRound<2>(v);
  TransposeRound<1>(v);
}

// X (M x cols f32) as B tiles: steps x 16 rows x 16 pairs (see above),
// inputs m >= M and columns past cols zero.
QKV_AMX_TARGET void LayOutInputsAMX(const float* X, size_t M, size_t cols, uint32_t* HWY_RESTRICT xb) {
  const size_t steps = StepsBF16(cols);
  for (size_t t = 0; t < steps; ++t) {
    const size_t c0 = t * kBF16Step, n = std::min(kBF16Step, cols - c0);
    const __mmask16 mlo = static_cast<__mmask16>(n >= 16 ? 0xFFFF : (1u << n) - 1);
    const __mmask16 mhi = static_cast<__mmask16>(n >= 32 ? 0xFFFF : n <= 16 ? 0 : (1u << (n - 16)) - 1);
    __m512i v[16];
    for (size_t m = 0; m < 16; ++m) {
      if (m >= M) {
        v[m] = _mm512_setzero_si512();
        continue;
      }
      const float* x = X + m * cols + c0;
      v[m] = PackBF16(_mm512_maskz_loadu_ps(mlo, x), _mm512_maskz_loadu_ps(mhi, x + 16));
    }
    Transpose16x16(v);  // row i: pair i of every input
    for (size_t i = 0; i < 16; ++i) _mm512_store_si512(xb + (t * 16 + i) * 16, v[i]);
  }
}

// How far ahead of its decoding the AMX path prefetches a range's weights
// (into L2), in bytes of the range's one contiguous stream. 4 KiB measured
// best on an Intel Xeon with AMX (2 threads: 1-2 KiB, 8-32 KiB and
// prefetches into L1 no faster; bench_linear matmul_small_stream).
constexpr size_t kPrefetchAMX = 4096;

// Row k of the block at row r of W (R <= kRowsAMX rows) as bf16 into
// out + k * stride (an A tile row; rows k >= R zero, so that their unstored
// sums stay finite). end: the end of the range's weights (no prefetch past it).
template <DType T>
QKV_AMX_TARGET HWY_INLINE void DecodeRowAMX(const Matrix& W, int64_t r, size_t R, size_t k, const uint8_t* end,
                                            uint16_t* HWY_RESTRICT out, size_t stride) {
  const size_t cols = static_cast<size_t>(W.cols);
  uint16_t* o = out + k * stride;
  if (k >= R) {
    std::fill(o, o + StepsBF16(cols) * kBF16Step, 0);
    return;
  }
  const size_t row_bytes = dtype_row_bytes(T, cols), step_bytes = dtype_row_bytes(T, kBF16Step);
  const uint8_t* row = static_cast<const uint8_t*>(W.data) + (r + static_cast<int64_t>(k)) * static_cast<int64_t>(row_bytes);
  for (size_t t = 0; t < cols / kBF16Step; ++t) {
    const uint8_t* ahead = row + t * step_bytes + kPrefetchAMX;
    if (ahead < end) __builtin_prefetch(ahead, 0, 2);
    DecodeStepBF16<T>(row, t, o + t * kBF16Step);
  }
  DecodeTailBF16<T>(row, cols, o, kBF16Step);
}

// C tile t % 4 += A tile t (columns [32t, 32t + 32) of the 16 rows at a, row
// stride a_bytes) times B tile t of xb. Four accumulators, so that
// consecutive products do not wait for each other.
QKV_AMX_TARGET HWY_INLINE void ProductStepAMX(const uint16_t* a, size_t a_bytes, const uint32_t* xb, size_t t) {
  _tile_loadd(4, a + t * kBF16Step, a_bytes);
  _tile_loadd(5, xb + t * 256, 64);
  switch (t % kAccAMX) {
    case 0: _tile_dpbf16ps(0, 4, 5); break;
    case 1: _tile_dpbf16ps(1, 4, 5); break;
    case 2: _tile_dpbf16ps(2, 4, 5); break;
    default: _tile_dpbf16ps(3, 4, 5); break;
  }
}

// Y[m * ldy + k] = the sum of C tiles 0..3 at (k, m), for k < R and m < M.
QKV_AMX_TARGET HWY_INLINE void StoreTilesAMX(float* Y, size_t ldy, size_t R, size_t M) {
  HWY_ALIGN float c[kAccAMX][16 * 16];
  _tile_stored(0, c[0], 64);
  _tile_stored(1, c[1], 64);
  _tile_stored(2, c[2], 64);
  _tile_stored(3, c[3], 64);
  __m512i v[16];  // row k of the block: its 16 sums, one per input
  for (size_t k = 0; k < 16; ++k) {
    const __m512 s01 = _mm512_add_ps(_mm512_load_ps(c[0] + k * 16), _mm512_load_ps(c[1] + k * 16));
    const __m512 s23 = _mm512_add_ps(_mm512_load_ps(c[2] + k * 16), _mm512_load_ps(c[3] + k * 16));
    v[k] = _mm512_castps_si512(_mm512_add_ps(s01, s23));
  }
  Transpose16x16(v);  // v[m]: input m's sums for the block's rows
  const __mmask16 rows = static_cast<__mmask16>(R >= 16 ? 0xFFFF : (1u << R) - 1);
  for (size_t m = 0; m < M; ++m) _mm512_mask_storeu_ps(Y + m * ldy, rows, _mm512_castsi512_ps(v[m]));
}

// Y rows [r0, r1) of one matrix for all M inputs, from xb (LayOutInputsAMX).
// scratch: two blocks of kRowsAMX rows of `stride` bf16 (64-byte aligned).
// Software-pipelined: while a block's tile products run, the next block is
// decoded into the other half of scratch, a block row at a time with the
// block's product steps spread between the rows. (Decoding a whole block and
// then running its products left the weight stream idle during the products:
// 1.14x slower, bench_linear matmul_small_stream/f16/1536x576/16/2.)
template <DType T>
QKV_AMX_TARGET void MatmulRangeAMX(const Matrix& W, const uint32_t* HWY_RESTRICT xb, size_t M,
                                   uint16_t* HWY_RESTRICT scratch, size_t stride, float* Y, int64_t r0, int64_t r1) {
  const size_t steps = StepsBF16(static_cast<size_t>(W.cols)), ldy = static_cast<size_t>(W.rows);
  const size_t a_bytes = stride * sizeof(uint16_t);
  const auto rows_at = [&](int64_t r) {
    return static_cast<size_t>(std::max<int64_t>(0, std::min<int64_t>(kRowsAMX, r1 - r)));
  };
  const uint8_t* end =
      static_cast<const uint8_t*>(W.data) + r1 * static_cast<int64_t>(dtype_row_bytes(T, static_cast<size_t>(W.cols)));
  constexpr int64_t kBlock = static_cast<int64_t>(kRowsAMX);
  uint16_t* cur = scratch;
  uint16_t* nxt = scratch + kRowsAMX * stride;
  for (size_t k = 0; k < kRowsAMX; ++k) DecodeRowAMX<T>(W, r0, rows_at(r0), k, end, cur, stride);
  for (int64_t r = r0; r < r1; r += kBlock) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    const int64_t next = r + kBlock;
    size_t t = 0;
    for (size_t k = 0; k < kRowsAMX; ++k) {
      if (next < r1) DecodeRowAMX<T>(W, next, rows_at(next), k, end, nxt, stride);
      for (const size_t t_end = (k + 1) * steps / kRowsAMX; t < t_end; ++t) ProductStepAMX(cur, a_bytes, xb, t);
    }
    StoreTilesAMX(Y + r, ldy, rows_at(r), M);
    std::swap(cur, nxt);
  }
}

// One thread's share of count matrices that share X, as MatmulSmallBF16 but
// on AMX tiles (blocks of kRowsAMX rows).
QKV_AMX_TARGET void MatmulSmallAMX(const Matrix* Ws, float* const* Ys, int count, const float* X, int64_t M,
                                   detail::BlockQueue* queue, int64_t block) {
  const size_t cols = static_cast<size_t>(Ws[0].cols), steps = StepsBF16(cols);
  const size_t m = static_cast<size_t>(M);
  // A rows padded by one line so that strides of 4 KiB (2048 columns) do not
  // put all 16 rows of a tile in the same L1 sets.
  const size_t stride = steps * kBF16Step + (steps * kBF16Step * sizeof(uint16_t) % 4096 == 0 ? 32 : 0);
  static thread_local hwy::AlignedFreeUniquePtr<uint32_t[]> xb;
  static thread_local hwy::AlignedFreeUniquePtr<uint16_t[]> scratch;
  static thread_local size_t xb_size = 0, scratch_size = 0;
  if (steps * 256 > xb_size) {
    xb_size = steps * 256;
    xb = hwy::AllocateAligned<uint32_t>(xb_size);
  }
  if (2 * kRowsAMX * stride > scratch_size) {
    scratch_size = 2 * kRowsAMX * stride;
    scratch = hwy::AllocateAligned<uint16_t>(scratch_size);
  }
  LayOutInputsAMX(X, m, cols, xb.get());
  static const TileConfigAMX config;
  _tile_loadconfig(&config);
  static thread_local std::vector<matmul_small::Segment> segs;  // at most one per matrix
  if (segs.size() < static_cast<size_t>(count)) segs.resize(static_cast<size_t>(count));
  int64_t b0, b1;
  while (queue->take(&b0, &b1)) {
    const int n = matmul_small::SplitRange(Ws, count, block, b0, b1, segs.data());
    for (int k = 0; k < n; ++k) {
      const Matrix& W = Ws[segs[k].i];
      float* Y = Ys[segs[k].i];
      const int64_t r0 = segs[k].r0, r1 = segs[k].r1;
      switch (W.type) {
        case DType::F32: break;  // F32 weights keep the f32 path (see matmul_small_precision)
        case DType::F16: MatmulRangeAMX<DType::F16>(W, xb.get(), m, scratch.get(), stride, Y, r0, r1); break;
        case DType::BF16: MatmulRangeAMX<DType::BF16>(W, xb.get(), m, scratch.get(), stride, Y, r0, r1); break;
        case DType::Q8_0: MatmulRangeAMX<DType::Q8_0>(W, xb.get(), m, scratch.get(), stride, Y, r0, r1); break;
      }
    }
  }
  _tile_release();
}

// AMX needs the CPU's AMX-BF16 and the kernel's permission to use the tile
// state (Linux 5.16+: arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)),
// asked once for the process.
bool HasAMXPath() {
  if (!__builtin_cpu_supports("amx-bf16") || !__builtin_cpu_supports("avx512bf16")) return false;
  constexpr long kReqXcompPerm = 0x1023, kXtileData = 18;
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0;
}

bool HasBF16Path() { return __builtin_cpu_supports("avx512bf16"); }
// Rows per block of the bf16 path (the threads share its rows in whole blocks).
int64_t MatmulSmallRowsBF16() { return static_cast<int64_t>(kRowsBF16); }
#else
// Other targets have no bf16 dot product; HasBF16Path() keeps this unused.
void MatmulSmallBF16(const Matrix*, float* const*, int, const float*, int64_t, detail::BlockQueue*, int64_t) {
  QKV_CHECK(false, "matmul_small: the bf16 path needs AVX512_BF16");
}
bool HasBF16Path() { return false; }
int64_t MatmulSmallRowsBF16() { return 1; }
void MatmulSmallAMX(const Matrix*, float* const*, int, const float*, int64_t, detail::BlockQueue*, int64_t) {
  QKV_CHECK(false, "matmul_small: the AMX path needs AMX-BF16");
}
bool HasAMXPath() { return false; }
#endif

// Rows per block for this target (threads split the rows in whole blocks).
int64_t MatmulSmallRows() { return static_cast<int64_t>(kRows); }

}  // namespace HWY_NAMESPACE
}  // namespace qkv
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qkv {
HWY_EXPORT(MatmulSmallRange);
HWY_EXPORT(MatmulSmallRows);
HWY_EXPORT(MatmulSmallBF16);
HWY_EXPORT(HasBF16Path);
HWY_EXPORT(MatmulSmallRowsBF16);
HWY_EXPORT(MatmulSmallAMX);
HWY_EXPORT(HasAMXPath);

namespace detail {

namespace {

// The f32 path for one matrix.
void matmul_small_f32(const Matrix& W, const float* X, int64_t M, float* Y) {
  const int64_t block = HWY_DYNAMIC_DISPATCH(MatmulSmallRows)();
  const int64_t blocks = (W.rows + block - 1) / block;
  const size_t cols = static_cast<size_t>(W.cols);
  auto* const kernel = HWY_DYNAMIC_DISPATCH(MatmulSmallRange);
  // One contiguous range of whole row blocks per thread: every row is
  // computed by the same code whichever thread has it. (Handing out smaller
  // pieces dynamically measured no better end to end for this path.)
  auto body = [&](int parts, int part) {
    // Each thread packs its own copy of X: M x cols floats against its share
    // of rows x M x cols FMAs, and no thread waits for another.
    static thread_local hwy::AlignedFreeUniquePtr<float[]> packed;
    static thread_local size_t packed_size = 0;
    const float* Xp = nullptr;
    const int64_t b0 = blocks * part / parts, b1 = blocks * (part + 1) / parts;
    if (b0 >= b1) return;
    if (W.type != DType::F32) {
      const size_t need = matmul_small::PackedXFloats(static_cast<size_t>(M), cols);
      if (need > packed_size) {
        packed = hwy::AllocateAligned<float>(need);
        packed_size = need;
      }
      matmul_small::PackX(X, static_cast<size_t>(M), cols, packed.get());
      Xp = packed.get();
    }
    kernel(W, X, Xp, M, Y, b0 * block, std::min(W.rows, b1 * block));
  };
  if (Team* team = current_team()) {
    body(team->size(), team->thread());
    team->sync();
    return;
  }
#pragma omp parallel if (go_parallel(static_cast<size_t>(W.rows) * dtype_row_bytes(W.type, cols)))
  body(omp_get_num_threads(), omp_get_thread_num());
}

}  // namespace

void matmul_small(const Matrix& W, const float* X, int64_t M, float* Y) {
  float* const ys[1] = {Y};
  matmul_small_multi(&W, ys, 1, X, M);
}

void matmul_small_multi(const Matrix* Ws, float* const* Ys, int count, const float* X, int64_t M) {
  QKV_CHECK(M >= 1 && M <= kMatmulSmallMaxM, "matmul_small: ", M, " inputs (at most ", kMatmulSmallMaxM, ")");
  // Matrices on the f32 path (and empty ones) go one by one; the others share
  // one bf16 pass.
  std::vector<Matrix> fused;
  std::vector<float*> fused_y;
  Team* const team = current_team();
  for (int i = 0; i < count; ++i) {
    if (Ws[i].cols == 0) {  // empty dot products
      if (team == nullptr || team->thread() == 0) std::fill(Ys[i], Ys[i] + M * Ws[i].rows, 0.0f);
      if (team != nullptr) team->sync();
    } else if (matmul_small_precision(Ws[i].type) == GemmPrecision::kBF16) {
      fused.push_back(Ws[i]);
      fused_y.push_back(Ys[i]);
    } else {
      matmul_small_f32(Ws[i], X, M, Ys[i]);
    }
  }
  if (fused.empty()) return;
  Ws = fused.data();
  Ys = fused_y.data();
  count = static_cast<int>(fused.size());
  // bf16: one parallel pass over every matrix's row blocks, taken from a
  // queue at least kMinChunkBytes of weights at a time, on AMX tiles where
  // the CPU has them.
  const bool amx = matmul_small_uses_amx();
  const int64_t block = amx ? 16 /* kRowsAMX: an A tile's rows */ : HWY_DYNAMIC_DISPATCH(MatmulSmallRowsBF16)();
  const size_t cols = static_cast<size_t>(Ws[0].cols);
  int64_t blocks = 0;
  size_t bytes = 0;
  for (int i = 0; i < count; ++i) {
    blocks += (Ws[i].rows + block - 1) / block;
    bytes += static_cast<size_t>(Ws[i].rows) * dtype_row_bytes(Ws[i].type, cols);
  }
  if (blocks == 0) return;
  const int64_t grain = std::max<int64_t>(
      1, static_cast<int64_t>(kMinChunkBytes / std::max<size_t>(1, block * dtype_row_bytes(Ws[0].type, cols))));
  auto* const kernel = amx ? HWY_DYNAMIC_DISPATCH(MatmulSmallAMX) : HWY_DYNAMIC_DISPATCH(MatmulSmallBF16);
  share_blocks(blocks, grain, bytes >= kMinParallelBytes,
               [&](BlockQueue& queue) { kernel(Ws, Ys, count, X, M, &queue, block); });
}

namespace {
bool g_small_bf16_allowed = true;
bool g_small_amx_allowed = true;
}

bool matmul_small_uses_amx() {
  static const bool has_amx = HWY_DYNAMIC_DISPATCH(HasAMXPath)();
  return g_small_amx_allowed && has_amx;
}

void set_matmul_small_amx(bool allowed) { g_small_amx_allowed = allowed; }

GemmPrecision matmul_small_precision(DType t) {
  static const bool has_bf16 = HWY_DYNAMIC_DISPATCH(HasBF16Path)();
  return g_small_bf16_allowed && has_bf16 && t != DType::F32 ? GemmPrecision::kBF16 : GemmPrecision::kF32;
}

void set_matmul_small_bf16(bool allowed) { g_small_bf16_allowed = allowed; }

}  // namespace detail

const char* matmul_small_kernel_name(DType t) {
  if (detail::matmul_small_precision(t) == detail::GemmPrecision::kF32) return "f32 FMA";
  return detail::matmul_small_uses_amx() ? "AMX bf16 tiles" : "AVX512_BF16 dot products";
}

}  // namespace qkv
#endif  // HWY_ONCE

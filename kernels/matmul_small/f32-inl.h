// The f32 path of the small-batch matmul (every target; F32 weights, and
// every weight type on CPUs without AVX512_BF16).
//
// A Highway "-inl" header of the small-batch matmul:
// kernels/matmul_small/matmul_small.cc includes it once per SIMD target
// (foreach_target), after hwy/highway.h.
#if defined(QKV_KERNELS_MATMUL_SMALL_F32_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef QKV_KERNELS_MATMUL_SMALL_F32_INL_H_
#undef QKV_KERNELS_MATMUL_SMALL_F32_INL_H_
#else
#define QKV_KERNELS_MATMUL_SMALL_F32_INL_H_
#endif

#include "hwy/highway.h"
#include "kernels/matmul_small/common-inl.h"
#include "kernels/weights-inl.h"

HWY_BEFORE_NAMESPACE();
namespace qkv {
namespace HWY_NAMESPACE {
// The f32 path, whose products are exact.
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
    default: break;  // the ggml block types go input by input through linear.cc's matvec
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace qkv
HWY_AFTER_NAMESPACE();

#endif  // QKV_KERNELS_MATMUL_SMALL_F32_INL_H_

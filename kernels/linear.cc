// Linear layers y = W·x for every weight type (F32, F16, BF16, the ggml block types).
//
// Decode (matvec) is memory bound: one templated Highway kernel converts weights
// in registers and works on 4 output rows per pass, with independent
// accumulators. The 4 rows of a pass lie far apart, one in each quarter of the
// thread's rows, and the passes walk down the quarters: each thread reads 4 long
// sequential streams, the access pattern the hardware prefetcher follows best
// (the machine probe reaches the DRAM bandwidth with just that). Each stream
// also prefetches a little ahead of itself in software.
// Small batches (matmul with M <= 16, batched decode) are kernels/matmul_small/;
// large batches (prefill) go to oneDNN (kernels/gemm_onednn.cc). Batches of
// the ggml block types take the integer block GEMM (kernels/block_gemm.cc)
// instead where the CPU has AVX-512 VNNI (detail::block_gemm_type).
//
// Threads: one OpenMP region per call; rows are split in contiguous ranges of
// whole 4-row blocks, so every row is computed by the same code whatever the
// thread count (1 and 2 threads give bit-identical results). Called from inside a
// parallel region, the call runs serially on the calling thread.
#include "kernels/linear.h"
#include "kernels/quant/row_groups.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/batch_activations.h"
#include "kernels/error.h"
#include "kernels/linear_internal.h"
#include "kernels/quant/vec_dot.h"
#include "kernels/threads/team.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/linear.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/weights-inl.h"
#include "hwy/cache_control.h"  // Prefetch

HWY_BEFORE_NAMESPACE();
namespace qkv {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Prefetches the cache lines holding bytes [p, p + n), n > 0. Prefetches never
// fault, so addresses past the end of the weights are harmless.
HWY_INLINE void PrefetchBytes(const uint8_t* p, size_t n) {
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + n;
  for (uintptr_t a = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{63}; a < end; a += 64) {
    hwy::Prefetch(reinterpret_cast<const uint8_t*>(a));
  }
}

HWY_INLINE float Q8Scale(const uint8_t* block) {
  uint16_t d;
  std::memcpy(&d, block, 2);  // blocks are 34 bytes: the scale may be unaligned
  return f16_to_f32(d);
}

// Q8_0 block scales are converted a group at a time with one vector f16 -> f32
// conversion (a scalar conversion per block costs as much as the block's dot
// product); for int8 activations the activation block scale is folded in too.
constexpr size_t kScaleGroup = 16;
static_assert(kScaleGroup <= detail::kQ8ScalePadding, "quantized x is padded for whole scale groups");

// Scales of blocks [b0, b0 + nb) of one row (nb <= kScaleGroup), times xd[b]
// when xd is given (xd is padded so that reading kScaleGroup values is safe).
HWY_INLINE void RowScales(const uint8_t* HWY_RESTRICT row, size_t b0, size_t nb, const float* HWY_RESTRICT xd,
                          float* HWY_RESTRICT out) {
  HWY_ALIGN uint16_t h[kScaleGroup] = {};
  for (size_t k = 0; k < nb; ++k) std::memcpy(&h[k], row + (b0 + k) * sizeof(BlockQ8_0), 2);
  const hn::CappedTag<float, kScaleGroup> df;  // within the group on any vector length
  const hn::Rebind<hwy::float16_t, decltype(df)> dh;
  const size_t N = hn::Lanes(df);
  for (size_t k = 0; k < kScaleGroup; k += N) {
    auto sc = hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(h) + k));
    if (xd != nullptr) sc = hn::Mul(sc, hn::LoadU(df, xd + b0 + k));
    hn::StoreU(sc, df, out + k);
  }
}

// Row passes of R = 1 or 4 rows keep one accumulator per row in named vectors
// (a0..a3): SVE's sizeless vectors cannot form arrays. f(r, acc_r) runs for
// each row in order; it is inlined with r a constant, so the code is that of
// the unrolled loop over an array (rows past R are dead and disappear).
#define QKV_ROW_BODY __attribute__((always_inline))
template <size_t R, class V, class F>
HWY_INLINE void ForRows(const F& f, V& a0, V& a1, V& a2, V& a3) {
  static_assert(R == 1 || R == 4, "row passes of 1 or 4 rows");
  f(size_t{0}, a0);
  if constexpr (R == 4) {
    f(size_t{1}, a1);
    f(size_t{2}, a2);
    f(size_t{3}, a3);
  }
}
// The same with two accumulators per row (a_r, b_r).
template <size_t R, class V, class F>
HWY_INLINE void ForRowPairs(const F& f, V& a0, V& a1, V& a2, V& a3, V& b0, V& b1, V& b2, V& b3) {
  static_assert(R == 1 || R == 4, "row passes of 1 or 4 rows");
  f(size_t{0}, a0, b0);
  if constexpr (R == 4) {
    f(size_t{1}, a1, b1);
    f(size_t{2}, a2, b2);
    f(size_t{3}, a3, b3);
  }
}

// Q8_0 weights dotted with x quantized the same way (per 32-block, int8 values
// kept as int16 so each row pass only widens the weights): integer products
// summed exactly per block, then one FMA with the product of the two scales.
struct QuantizedX {
  const int16_t* q;     // cols values, each in [-127, 127]
  const float* d;       // cols / 32 block scales, then kScaleGroup zeros of padding
  const int8_t* q8;     // the same values as int8 (for VNNI)
  const int32_t* corr;  // cols / 4 values: -128 * (sum of q over 4 consecutive values)
};

template <size_t R, bool kPrefetch>
HWY_INLINE void DotRowsQ8Int(const uint8_t* HWY_RESTRICT w, size_t stride, size_t cols, QuantizedX xq,
                             size_t prefetch, float* HWY_RESTRICT y, size_t ys) {
  const hn::CappedTag<int16_t, kQ8BlockSize> d16;  // a whole block per vector on AVX-512
  const hn::Rebind<int8_t, decltype(d16)> d8;
  const hn::Repartition<int32_t, decltype(d16)> d32;
  const hn::Repartition<float, decltype(d16)> df;
  using V = hn::Vec<decltype(df)>;
  const size_t N16 = hn::Lanes(d16);
  V a0 = hn::Zero(df), a1 = a0, a2 = a0, a3 = a0;
  HWY_ALIGN float scale[R][kScaleGroup];
  const size_t blocks = cols / kQ8BlockSize;
  for (size_t g = 0; g < blocks; g += kScaleGroup) {
    const size_t nb = std::min(kScaleGroup, blocks - g);
    for (size_t r = 0; r < R; ++r) {
      if (kPrefetch) {
        PrefetchBytes(w + r * stride + g * sizeof(BlockQ8_0) + prefetch, nb * sizeof(BlockQ8_0));
      }
      RowScales(w + r * stride, g, nb, xq.d, scale[r]);
    }
    for (size_t k = 0; k < nb; ++k) {
      const size_t b = g + k;
      const int16_t* HWY_RESTRICT xb = xq.q + b * kQ8BlockSize;
      ForRows<R>(
          [&](size_t r, V& acc) QKV_ROW_BODY {
            const int8_t* qs = reinterpret_cast<const int8_t*>(w + r * stride + b * sizeof(BlockQ8_0) + 2);
            auto s0 = hn::Zero(d32), s1 = hn::Zero(d32);
            for (size_t j = 0; j < kQ8BlockSize; j += N16) {
              s0 = hn::ReorderWidenMulAccumulate(d32, hn::PromoteTo(d16, hn::LoadU(d8, qs + j)),
                                                 hn::LoadU(d16, xb + j), s0, s1);
            }
            s0 = hn::RearrangeToOddPlusEven(s0, s1);
            acc = hn::MulAdd(hn::ConvertTo(df, s0), hn::Set(df, scale[r][k]), acc);
          },
          a0, a1, a2, a3);
    }
  }
  ForRows<R>([&](size_t r, V& acc) QKV_ROW_BODY { y[r * ys] = hn::GetLane(hn::SumOfLanes(df, acc)); }, a0, a1, a2,
             a3);
}

// y[r * ys] = dot(row r, x) for R rows `stride` bytes apart starting at w; with
// kPrefetch, each row stream prefetches `prefetch` bytes ahead.
template <DType T, size_t R, bool kPrefetch>
HWY_INLINE void DotRows(const uint8_t* HWY_RESTRICT w, size_t stride, size_t cols,
                        const float* HWY_RESTRICT x, size_t prefetch, float* HWY_RESTRICT y, size_t ys) {
  const DF df;
  VF a0 = hn::Zero(df), a1 = a0, a2 = a0, a3 = a0;
  if constexpr (T == DType::Q8_0) {
    // Dequantize in registers: int8 -> f32, dot with x over the block, then one
    // FMA with the block scale. Weights enter exactly (d*q is exact in f32).
    // dq: vectors within one block on any vector length (SVE's reach 64
    // floats); the same type as VF, and the whole vector on fixed-width targets.
    const hn::CappedTag<float, kQ8BlockSize> dq;
    const hn::Rebind<int8_t, decltype(dq)> d8;
    const hn::Rebind<int32_t, decltype(dq)> di;
    const size_t NQ = hn::Lanes(dq);
    HWY_ALIGN float scale[R][kScaleGroup];
    const size_t blocks = cols / kQ8BlockSize;
    for (size_t g = 0; g < blocks; g += kScaleGroup) {
      const size_t nb = std::min(kScaleGroup, blocks - g);
      for (size_t r = 0; r < R; ++r) {
        if (kPrefetch) {
          PrefetchBytes(w + r * stride + g * sizeof(BlockQ8_0) + prefetch, nb * sizeof(BlockQ8_0));
        }
        RowScales(w + r * stride, g, nb, nullptr, scale[r]);
      }
      for (size_t k = 0; k < nb; ++k) {
        const size_t b = g + k;
        const float* HWY_RESTRICT xb = x + b * kQ8BlockSize;
        ForRows<R>(
            [&](size_t r, VF& acc) QKV_ROW_BODY {
              const int8_t* qs = reinterpret_cast<const int8_t*>(w + r * stride + b * sizeof(BlockQ8_0) + 2);
              VF s = hn::Zero(df);
              for (size_t j = 0; j < kQ8BlockSize; j += NQ) {
                const VF q = hn::ConvertTo(dq, hn::PromoteTo(di, hn::LoadU(d8, qs + j)));
                s = hn::MulAdd(q, hn::LoadU(dq, xb + j), s);
              }
              acc = hn::MulAdd(hn::Set(df, scale[r][k]), s, acc);
            },
            a0, a1, a2, a3);
      }
    }
    ForRows<R>([&](size_t r, VF& acc) QKV_ROW_BODY { y[r * ys] = hn::GetLane(hn::SumOfLanes(df, acc)); }, a0, a1,
               a2, a3);
  } else {
    // Two column steps per iteration: 2R independent FMA chains (a_r, b_r).
    const size_t N = hn::Lanes(df);
    VF b0 = hn::Zero(df), b1 = b0, b2 = b0, b3 = b0;
    constexpr size_t kBytes = T == DType::F32 ? 4 : 2;  // per weight
    const size_t step_bytes = 2 * N * kBytes;
    size_t i = 0;
    for (; i + 2 * N <= cols; i += 2 * N) {
      const VF x0 = hn::LoadU(df, x + i);
      const VF x1 = hn::LoadU(df, x + i + N);
      if (kPrefetch) {
        // A row's stream runs on into the next row (see InStreams), so the point
        // `prefetch` bytes ahead is simply further along in memory. Once per line
        // when a step reads whole lines (AVX2 F16 steps read half lines).
        const uint8_t* ahead = w + i * kBytes + prefetch;
        for (size_t r = 0; r < R; ++r) {
          for (size_t b = 0; b < step_bytes; b += 64) hwy::Prefetch(ahead + r * stride + b);
        }
      }
      ForRowPairs<R>(
          [&](size_t r, VF& acc, VF& acc2) QKV_ROW_BODY {
            acc = hn::MulAdd(LoadWeights<T>(df, w + r * stride, i), x0, acc);
            acc2 = hn::MulAdd(LoadWeights<T>(df, w + r * stride, i + N), x1, acc2);
          },
          a0, a1, a2, a3, b0, b1, b2, b3);
    }
    for (; i + N <= cols; i += N) {
      const VF x0 = hn::LoadU(df, x + i);
      ForRows<R>([&](size_t r, VF& acc)
                     QKV_ROW_BODY { acc = hn::MulAdd(LoadWeights<T>(df, w + r * stride, i), x0, acc); },
                 a0, a1, a2, a3);
    }
    ForRowPairs<R>(
        [&](size_t r, VF& acc, VF& acc2) QKV_ROW_BODY {
          float s = hn::GetLane(hn::SumOfLanes(df, hn::Add(acc, acc2)));
          for (size_t j = i; j < cols; ++j) s += LoadWeight<T>(w + r * stride, j) * x[j];
          y[r * ys] = s;
        },
        a0, a1, a2, a3, b0, b1, b2, b3);
  }
}

#if HWY_TARGET == HWY_AVX3_DL
// AVX-512 VNNI version of DotRowsQ8Int: vpdpbusd multiplies 64 unsigned by 64
// signed bytes into 16 int32 sums of 4 products, i.e. two Q8_0 blocks per
// instruction (lanes 0-7 block b, 8-15 block b+1). Weights are made unsigned by
// flipping their sign bit (w + 128); the extra 128 * sum(x) is removed by
// starting each sum at the precomputed correction. Same integer block sums as
// DotRowsQ8Int, in half the instructions. Highway 1.0.3 exposes no such op and
// its AVX3_DL target does not enable avx512vnni (which every AVX3_DL CPU has,
// since Highway requires VNNI to select AVX3_DL), hence the intrinsics.
//
// A group's block scales (up to 16 f16 values 34 bytes apart) are assembled
// with one masked 16-bit broadcast from memory per scale, in two independent
// chains (even and odd blocks), then converted as one vector. A 16-lane gather
// did the same in one instruction but cost about 45% of the kernel's time
// (its latency sat on the critical path of every row); copying the scales out
// one by one and reloading them as a vector cost a store-forwarding stall.
// Measured with the hot 1536x576 matvec on 1 thread: 1.8x faster than the gather.
HWY_INLINE __m512 GroupScalesVnni(const uint8_t* blocks, size_t nb, const float* xd) {
  const auto scale_bits = [blocks](size_t j) {
    int16_t h;
    std::memcpy(&h, blocks + j * sizeof(BlockQ8_0), sizeof(h));
    return h;
  };
  __m256i even = _mm256_setzero_si256(), odd = _mm256_setzero_si256();
  size_t j = 0;
  for (; j + 2 <= nb; j += 2) {
    even = _mm256_mask_set1_epi16(even, static_cast<__mmask16>(1u << j), scale_bits(j));
    odd = _mm256_mask_set1_epi16(odd, static_cast<__mmask16>(2u << j), scale_bits(j + 1));
  }
  if (j < nb) even = _mm256_mask_set1_epi16(even, static_cast<__mmask16>(1u << j), scale_bits(j));
  const __m512 d = _mm512_cvtph_ps(_mm256_or_si256(even, odd));
  return _mm512_mul_ps(d, _mm512_loadu_ps(xd));  // xd has kScaleGroup values of padding
}

// The attribute names the target's whole feature set: clang replaces the
// region's target features with a function's own (g++ adds them).
template <size_t R, bool kPrefetch>
__attribute__((target(HWY_TARGET_STR ",avx512vnni"))) void DotRowsQ8Vnni(const uint8_t* HWY_RESTRICT w,
                                                                         size_t stride, size_t cols,
                                                                         QuantizedX xq, size_t prefetch,
                                                                         float* HWY_RESTRICT y, size_t ys) {
  static_assert(kScaleGroup == 16, "one vector of 16 scales per group");
  __m512 acc[R];
  float tail[R];
  for (size_t r = 0; r < R; ++r) {
    acc[r] = _mm512_setzero_ps();
    tail[r] = 0.0f;
  }
  HWY_ALIGN float scale[R][kScaleGroup];
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i first_pair = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  const size_t blocks = cols / kQ8BlockSize;
  for (size_t g = 0; g < blocks; g += kScaleGroup) {
    const size_t nb = std::min(kScaleGroup, blocks - g);
    __m512 sv[R];
    for (size_t r = 0; r < R; ++r) {
      const uint8_t* group = w + r * stride + g * sizeof(BlockQ8_0);
      if (kPrefetch) {
        PrefetchBytes(w + r * stride + g * sizeof(BlockQ8_0) + prefetch, nb * sizeof(BlockQ8_0));
      }
      sv[r] = GroupScalesVnni(group, nb, xq.d + g);
    }
    size_t k = 0;
    for (; k + 2 <= nb; k += 2) {
      const size_t b = g + k;  // even
      const __m512i idx = _mm512_add_epi32(first_pair, _mm512_set1_epi32(static_cast<int>(k)));
      const __m512i xv = _mm512_loadu_si512(xq.q8 + b * kQ8BlockSize);
      const __m512i corr = _mm512_loadu_si512(xq.corr + b * kQ8BlockSize / 4);
      for (size_t r = 0; r < R; ++r) {
        const uint8_t* blk = w + r * stride + b * sizeof(BlockQ8_0) + 2;
        const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk));
        const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + sizeof(BlockQ8_0)));
        const __m512i wv = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), flip);
        const __m512i sum = _mm512_dpbusd_epi32(corr, wv, xv);
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_permutexvar_ps(idx, sv[r]), acc[r]);
      }
    }
    if (k < nb) {  // an odd block count leaves one block
      const size_t b = g + k;
      for (size_t r = 0; r < R; ++r) {
        _mm512_store_ps(scale[r], sv[r]);
        const int8_t* qs = reinterpret_cast<const int8_t*>(w + r * stride + b * sizeof(BlockQ8_0) + 2);
        int32_t s = 0;
        for (size_t j = 0; j < kQ8BlockSize; ++j) s += int32_t(qs[j]) * xq.q8[b * kQ8BlockSize + j];
        tail[r] += static_cast<float>(s) * scale[r][k];
      }
    }
  }
  for (size_t r = 0; r < R; ++r) y[r * ys] = _mm512_reduce_add_ps(acc[r]) + tail[r];
}
#endif

// Rows [r, r1) in passes of R rows that lie L = (r1 - r) / R rows apart: pass k
// takes row k of each of R contiguous stretches. Each stretch is then read front
// to back, so the pass's R weight streams are long and sequential, like a plain
// array read (which the hardware prefetcher follows best), instead of R
// neighbouring rows whose streams each end after one row. dot(row, stride, ys)
// computes rows row, row + L, ... (stride = L rows in bytes, ys = L outputs).
// Returns the first row left over (fewer than R).
template <size_t R, class Dot>
HWY_INLINE int64_t InStreams(int64_t r, int64_t r1, size_t row_bytes, const Dot& dot) {
  const int64_t L = (r1 - r) / static_cast<int64_t>(R);
  for (int64_t k = 0; k < L; ++k) dot(r + k, static_cast<size_t>(L) * row_bytes, static_cast<size_t>(L));
  return r + static_cast<int64_t>(R) * L;
}

template <DType T, bool kPrefetch>
void MatvecRangeT(const Matrix& W, const float* x, const QuantizedX* xq, size_t prefetch, float* y, int64_t r0,
                  int64_t r1) {
  const size_t cols = static_cast<size_t>(W.cols);
  const size_t rb = dtype_row_bytes(T, cols);
  const uint8_t* base = static_cast<const uint8_t*>(W.data);
  // 4 long streams per thread (InStreams), each continuing into its next row:
  // measured faster than 4 or 8 neighbouring rows per pass (bench_linear,
  // 1.3x at 5632x2048 F16 on 2 threads), and as many streams as the machine
  // probe needs to reach the DRAM bandwidth. Rows left over go one at a time.
  // Each row's arithmetic is the same whatever the pass, so results do not
  // depend on where a thread's range starts.
  int64_t r = r0;
  if (T == DType::Q8_0 && xq != nullptr) {
#if HWY_TARGET == HWY_AVX3_DL
    r = InStreams<4>(r, r1, rb, [&](int64_t row, size_t stride, size_t ys) {
      DotRowsQ8Vnni<4, kPrefetch>(base + row * rb, stride, cols, *xq, prefetch, y + row, ys);
    });
    for (; r < r1; ++r) DotRowsQ8Vnni<1, kPrefetch>(base + r * rb, rb, cols, *xq, prefetch, y + r, 1);
#endif
    r = InStreams<4>(r, r1, rb, [&](int64_t row, size_t stride, size_t ys) {
      DotRowsQ8Int<4, kPrefetch>(base + row * rb, stride, cols, *xq, prefetch, y + row, ys);
    });
    for (; r < r1; ++r) DotRowsQ8Int<1, kPrefetch>(base + r * rb, rb, cols, *xq, prefetch, y + r, 1);
    return;
  }
  r = InStreams<4>(r, r1, rb, [&](int64_t row, size_t stride, size_t ys) {
    DotRows<T, 4, kPrefetch>(base + row * rb, stride, cols, x, prefetch, y + row, ys);
  });
  for (; r < r1; ++r) DotRows<T, 1, kPrefetch>(base + r * rb, rb, cols, x, prefetch, y + r, 1);
}

template <DType T>
void MatvecRangePrefetch(const Matrix& W, const float* x, const QuantizedX* xq, size_t prefetch, float* y,
                         int64_t r0, int64_t r1) {
  if (prefetch == 0) return MatvecRangeT<T, false>(W, x, xq, 0, y, r0, r1);
  MatvecRangeT<T, true>(W, x, xq, prefetch, y, r0, r1);
}

// y[r] for rows [r0, r1) of W. Q8_0 uses integer dot products when xq (x
// quantized per block) is given, dequantizes in registers otherwise.
void MatvecRange(const Matrix& W, const float* x, const int16_t* xq, const float* xd, const int8_t* xq8,
                 const int32_t* xcorr, size_t prefetch, float* y, int64_t r0, int64_t r1) {
  const QuantizedX q{xq, xd, xq8, xcorr};
  const QuantizedX* qp = xq != nullptr ? &q : nullptr;
  switch (W.type) {
    case DType::F32: return MatvecRangePrefetch<DType::F32>(W, x, qp, prefetch, y, r0, r1);
    case DType::F16: return MatvecRangePrefetch<DType::F16>(W, x, qp, prefetch, y, r0, r1);
    case DType::BF16: return MatvecRangePrefetch<DType::BF16>(W, x, qp, prefetch, y, r0, r1);
    case DType::Q8_0: return MatvecRangePrefetch<DType::Q8_0>(W, x, qp, prefetch, y, r0, r1);
    default: break;  // check_matrix admits only the four types above
  }
}

// Converts one weight row of n values to f32.
template <DType T>
HWY_INLINE void DecodeRowT(const uint8_t* HWY_RESTRICT row, size_t n, float* HWY_RESTRICT out) {
  const DF df;
  const size_t N = hn::Lanes(df);
  if constexpr (T == DType::Q8_0) {
    const hn::Rebind<int8_t, DF> d8;
    const hn::Rebind<int32_t, DF> di;
    for (size_t b = 0; b < n / kQ8BlockSize; ++b) {
      const uint8_t* blk = row + b * sizeof(BlockQ8_0);
      const int8_t* qs = reinterpret_cast<const int8_t*>(blk + 2);
      const VF d = hn::Set(df, Q8Scale(blk));
      for (size_t j = 0; j < kQ8BlockSize; j += N) {
        const VF q = hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, qs + j)));
        hn::StoreU(hn::Mul(d, q), df, out + b * kQ8BlockSize + j);
      }
    }
  } else {
    size_t i = 0;
    for (; i + N <= n; i += N) hn::StoreU(LoadWeights<T>(df, row, i), df, out + i);
    for (; i < n; ++i) out[i] = LoadWeight<T>(row, i);
  }
}

// Rows [r0, r1) of W decoded to f32, row after row (ld = cols).
void DecodeRows(const Matrix& W, int64_t r0, int64_t r1, float* out) {
  const size_t cols = static_cast<size_t>(W.cols);
  const size_t row_bytes = dtype_row_bytes(W.type, cols);
  const uint8_t* base = static_cast<const uint8_t*>(W.data);
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = base + r * row_bytes;
    float* o = out + (r - r0) * cols;
    switch (W.type) {
      case DType::F32: DecodeRowT<DType::F32>(row, cols, o); break;
      case DType::F16: DecodeRowT<DType::F16>(row, cols, o); break;
      case DType::BF16: DecodeRowT<DType::BF16>(row, cols, o); break;
      case DType::Q8_0: DecodeRowT<DType::Q8_0>(row, cols, o); break;
      default: decode_row(W.type, row, cols, o); break;
    }
  }
}

// x (n % 32 == 0) quantized per 32-block for the integer Q8_0 dot products:
// d[b] = max|x in block b| / 127, q = round(x * 127 / max) in [-127, 127] (ties
// to even, as std::nearbyint), stored as int16 (q) and int8 (q8). Vectorized:
// the scalar loop cost ~5% of a 143M Q8_0 decode step, on one thread.
void QuantizeX(const float* HWY_RESTRICT x, size_t n, int16_t* HWY_RESTRICT q, int8_t* HWY_RESTRICT q8,
               float* HWY_RESTRICT d) {
  const DF df;
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<int16_t, DF> d16;
  const hn::Rebind<int8_t, DF> d8;
  const size_t N = hn::Lanes(df);
  for (size_t b = 0; b < n / kQ8BlockSize; ++b) {
    const float* xb = x + b * kQ8BlockSize;
    VF mx = hn::Zero(df);
    for (size_t i = 0; i < kQ8BlockSize; i += N) mx = hn::Max(mx, hn::Abs(hn::LoadU(df, xb + i)));
    const float amax = hn::GetLane(hn::MaxOfLanes(df, mx));
    d[b] = amax / 127.0f;
    const VF id = hn::Set(df, amax > 0.0f ? 127.0f / amax : 0.0f);
    for (size_t i = 0; i < kQ8BlockSize; i += N) {
      const hn::Vec<decltype(di)> qi = hn::NearestInt(hn::Mul(hn::LoadU(df, xb + i), id));
      hn::StoreU(hn::DemoteTo(d16, qi), d16, q + b * kQ8BlockSize + i);
      hn::StoreU(hn::DemoteTo(d8, qi), d8, q8 + b * kQ8BlockSize + i);
    }
  }
}

// f32 -> bf16 with round to nearest even (DemoteTo would truncate); NaN stays NaN.
void RoundToBF16(const float* HWY_RESTRICT in, size_t n, uint16_t* HWY_RESTRICT out) {
  const DF df;
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<uint16_t, DF> d16;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const VF v = hn::LoadU(df, in + i);
    auto u = hn::BitCast(du, v);
    const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
    auto rounded = hn::ShiftRight<16>(hn::Add(u, hn::Add(hn::Set(du, 0x7fffu), lsb)));
    const auto quiet = hn::Or(hn::ShiftRight<16>(u), hn::Set(du, 0x40u));
    rounded = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), quiet, rounded);
    hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, rounded)), d16, out + i);
  }
  for (; i < n; ++i) out[i] = f32_to_bf16(in[i]);
}

}  // namespace HWY_NAMESPACE
}  // namespace qkv
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qkv {
HWY_EXPORT(MatvecRange);
HWY_EXPORT(DecodeRows);
HWY_EXPORT(RoundToBF16);
HWY_EXPORT(QuantizeX);

namespace {

// Rows are handed out in blocks of this many (the kernel's rows per pass).
constexpr int64_t kRowBlock = 4;

void check_matrix(const Matrix& W, const char* what) {
  QKV_CHECK(W.rows >= 0 && W.cols >= 0, what, ": negative shape ", W.rows, "x", W.cols);
  QKV_CHECK(static_cast<int>(W.type) >= 0 && static_cast<int>(W.type) < kDTypeCount, what, ": unknown dtype ",
            static_cast<int>(W.type));
  QKV_CHECK(dtype_row_ok(W.type, static_cast<size_t>(W.cols)), what, ": ", W.cols, " columns cannot be ",
            dtype_name(W.type), " rows (needs a multiple of ", dtype_block_values(W.type), ")");
  QKV_CHECK(W.cols <= (int64_t{1} << 32) && W.rows <= (int64_t{1} << 40), what, ": implausible shape ",
            W.rows, "x", W.cols);
  QKV_CHECK(W.data != nullptr || W.rows == 0 || W.cols == 0, what, ": null weight data for a ", W.rows,
            "x", W.cols, " matrix");
  QKV_CHECK(!W.row_groups || (row_groups_layout(W.type) && W.rows % int64_t(kRowGroup) == 0), what,
            ": ", W.rows, " rows of ", dtype_name(W.type), " cannot be row groups");
}

size_t weight_bytes(const Matrix& W) {
  return static_cast<size_t>(W.rows) * dtype_row_bytes(W.type, static_cast<size_t>(W.cols));
}

using detail::BlockQueue;

// Types whose matvec is kernels/quant/vec_dot (ggml's block arithmetic on
// quantized activations); F32/F16/BF16/Q8_0 have the kernels of this file.
bool ggml_dot_type(DType t) { return dtype_is_quantized(t) && t != DType::Q8_0; }
// Batches of the ggml block types take the GEMMs of the other weight types:
// weights decoded tile by tile (to f32 for oneDNN above kMatmulSmallMaxM
// inputs, to bf16 for the small-batch kernel's AVX512_BF16 / AMX path up to
// it), each weight read once per batch. Where the small-batch kernel has no bf16 path (its f32 path
// has no block decoders), batches of up to kMatmulSmallMaxM inputs, and larger
// ones inside a parallel region or team (which oneDNN cannot join), go input
// by input through ggml's arithmetic (quantized activations) instead.
// Accuracy: bf16 inputs and weights (each within 2^-9 relative) against
// ggml's 8-bit activation blocks; the KL divergence from llama.cpp's logits
// stays far below the 10% of each preset's own (docs/design.md, quantized
// weights).
bool ggml_batch_per_input(DType t, int64_t M) {
  if (!ggml_dot_type(t)) return false;
  // Below the packed kernel's batches (kernels/quant/vec_dot.h) on CPUs that have it.
  if (quant_gemm_available(t) && static_cast<size_t>(M) < kQuantGemmPackedMinInputs) return true;
  if (detail::matmul_small_precision(t) == detail::GemmPrecision::kBF16) return false;
  // Without oneDNN nothing else dequantizes a block type for a larger batch.
  return M <= kMatmulSmallMaxM || omp_in_parallel() || current_team() != nullptr || !QKV_HAVE_ONEDNN;
}

// x quantized once per activation block type that the matrices need.
struct QuantizedActivations {
  std::vector<uint8_t> buf[3];  // indexed by ActType
  const void* for_type(DType t) const { return buf[static_cast<int>(act_type(t))].data(); }
  void prepare(const Matrix* Ws, int count, const float* x) {
    bool done[3] = {false, false, false};
    for (int i = 0; i < count; ++i) {
      if (!ggml_dot_type(Ws[i].type) && !Ws[i].row_groups) continue;
      const int a = static_cast<int>(act_type(Ws[i].type));
      if (done[a]) continue;
      const size_t cols = static_cast<size_t>(Ws[i].cols);
      buf[a].resize(act_bytes(Ws[i].type, cols));
      quantize_activation(Ws[i].type, x, cols, buf[a].data());
      done[a] = true;
    }
  }
};


}  // namespace

void matvec(const Matrix& W, const float* x, float* y) {
  matvec_multi(&W, &y, 1, x);
}

void matvec_multi(const Matrix* Ws, float* const* ys, int count, const float* x) {
  QKV_CHECK(count >= 0, "matvec_multi: negative count ", count);
  if (count == 0) return;
  QKV_CHECK(Ws != nullptr && ys != nullptr, "matvec_multi: null matrix or output list");
  size_t bytes = 0;
  int64_t blocks = 0;
  for (int i = 0; i < count; ++i) {
    check_matrix(Ws[i], "matvec");
    QKV_CHECK(Ws[i].cols == Ws[0].cols, "matvec_multi: matrix ", i, " has ", Ws[i].cols,
              " columns but matrix 0 has ", Ws[0].cols, " (they share one input)");
    QKV_CHECK(ys[i] != nullptr || Ws[i].rows == 0, "matvec: null output for matrix ", i);
    bytes += weight_bytes(Ws[i]);
    const int64_t unit = Ws[i].row_groups ? int64_t(kRowGroup) : kRowBlock;  // whole groups per block
    blocks += (Ws[i].rows + unit - 1) / unit;
  }
  QKV_CHECK(x != nullptr || Ws[0].cols == 0, "matvec: null input vector");
  if (blocks == 0) return;
  // Q8_0 integer dot products need x quantized once, shared by all threads.
  bool any_q8 = false;
  for (int i = 0; i < count; ++i) any_q8 |= Ws[i].type == DType::Q8_0 && !Ws[i].row_groups;
  const int16_t* xq = nullptr;
  const float* xd = nullptr;
  const int8_t* xq8 = nullptr;
  const int32_t* xcorr = nullptr;
  static thread_local std::vector<int16_t> xq_buf;
  static thread_local std::vector<float> xd_buf;
  static thread_local std::vector<int8_t> xq8_buf;
  static thread_local std::vector<int32_t> corr_buf;
  if (any_q8 && detail::q8_matvec_mode() == detail::Q8Dot::kInt8) {
    const size_t cols = static_cast<size_t>(Ws[0].cols);
    xq_buf.resize(cols);
    xd_buf.assign(cols / kQ8BlockSize + detail::kQ8ScalePadding, 0.0f);
    xq8_buf.resize(cols);
    corr_buf.resize(cols / 4);
    detail::quantize_x_q8(x, cols, xq_buf.data(), xq8_buf.data(), xd_buf.data());
    // The activation scale as ggml stores it in its Q8_0 blocks: f16.
    for (float& d : xd_buf) d = f16_to_f32(f32_to_f16(d));
    for (size_t i = 0; i < cols / 4; ++i) {
      corr_buf[i] = -128 * (xq_buf[4 * i] + xq_buf[4 * i + 1] + xq_buf[4 * i + 2] + xq_buf[4 * i + 3]);
    }
    xq = xq_buf.data();
    xd = xd_buf.data();
    xq8 = xq8_buf.data();
    xcorr = corr_buf.data();
  }
  static thread_local QuantizedActivations xa_buf;
  xa_buf.prepare(Ws, count, x);
  const QuantizedActivations& xa = xa_buf;  // the caller's copy, read by every thread
  auto* const kernel = HWY_DYNAMIC_DISPATCH(MatvecRange);
  // The matrices' row blocks form one sequence, handed out in shrinking ranges.
  const int64_t min_blocks = std::max<int64_t>(
      1, static_cast<int64_t>(detail::kMinChunkBytes / std::max<size_t>(1, kRowBlock * dtype_row_bytes(Ws[0].type, static_cast<size_t>(Ws[0].cols)))));
  detail::share_blocks(blocks, min_blocks, bytes >= detail::kMinParallelBytes, [&](BlockQueue& queue) {
    int64_t b0, b1;
    while (queue.take(&b0, &b1)) {
      int64_t first = 0;  // global index of matrix i's first block
      for (int i = 0; i < count && first < b1; ++i) {
        const int64_t unit = Ws[i].row_groups ? int64_t(kRowGroup) : kRowBlock;
        const int64_t nb = (Ws[i].rows + unit - 1) / unit;
        const int64_t lo = std::max(b0, first), hi = std::min(b1, first + nb);
        if (lo < hi && Ws[i].row_groups) {
          const size_t cols = static_cast<size_t>(Ws[i].cols);
          const int64_t r0 = (lo - first) * unit;
          row_group_dot(Ws[i].type, static_cast<const uint8_t*>(Ws[i].data) + r0 * dtype_row_bytes(Ws[i].type, cols),
                        cols, xa.for_type(Ws[i].type), ys[i] + r0, static_cast<size_t>(hi - lo));
        } else if (lo < hi && ggml_dot_type(Ws[i].type)) {
          const int64_t r0 = (lo - first) * kRowBlock, r1 = std::min(Ws[i].rows, (hi - first) * kRowBlock);
          const size_t cols = static_cast<size_t>(Ws[i].cols);
          quant_dot_rows(Ws[i].type, static_cast<const uint8_t*>(Ws[i].data) + r0 * dtype_row_bytes(Ws[i].type, cols),
                         cols, xa.for_type(Ws[i].type), ys[i] + r0, static_cast<size_t>(r1 - r0));
        } else if (lo < hi) {
          kernel(Ws[i], x, xq, xd, xq8, xcorr, detail::matvec_prefetch_bytes(Ws[i].type), ys[i],
                 (lo - first) * kRowBlock, std::min(Ws[i].rows, (hi - first) * kRowBlock));
        }
        first += nb;
      }
    }
  });
}

namespace {

// Whether matmul gives W's batches of M > kMatmulSmallMaxM rows to oneDNN.
bool takes_onednn(const Matrix& W, int64_t M) {
  return QKV_HAVE_ONEDNN && W.cols > 0 && !W.row_groups && !detail::block_gemm_type(W.type, M);
}

// The precision of W's oneDNN GEMM. Quantized weights decode to f32, not
// bf16: block values d * q rounded to bf16 err the same way across a block (a
// scale error per block, which does not average out over a row as the
// independent rounding errors of F16 weights do): mean KLD of tinystories-3M
// Q6_K from llama.cpp's logits (first chunk of 128) 1.2e-4 in bf16, 7.3e-5 in
// f32 (input by input: 2.4e-6).
detail::GemmPrecision onednn_precision(const Matrix& W) {
  return dtype_is_quantized(W.type) && ggml_dot_type(W.type) ? detail::GemmPrecision::kF32
                                                             : detail::default_gemm_precision(W.type);
}

}  // namespace

int64_t prepare_matmul(const Matrix& W, int64_t max_rows) {
  check_matrix(W, "prepare_matmul");
  if (max_rows <= kMatmulSmallMaxM || !takes_onednn(W, max_rows)) return 0;
  return detail::prepare_matmul_onednn(W, max_rows, onednn_precision(W));
}

void matmul(const Matrix& W, const float* X, int64_t M, float* Y, const QuantizedInputs* xq) {
  check_matrix(W, "matmul");
  QKV_CHECK(M >= 0, "matmul: negative batch size ", M);
  if (M == 0 || W.rows == 0) return;
  QKV_CHECK(X != nullptr || W.cols == 0, "matmul: null input");
  QKV_CHECK(Y != nullptr, "matmul: null output");
  if (M == 1) return matvec(W, X, Y);
  if (M > kMatmulSmallMaxM && !omp_in_parallel() && current_team() == nullptr && takes_onednn(W, M)) {
    if (dtype_is_quantized(W.type)) {
      static thread_local std::vector<float> xr;
      xr.resize(static_cast<size_t>(M * W.cols));
      detail::activation_round_trip(W.type, X, M, static_cast<size_t>(W.cols), xr.data());
      return detail::matmul_onednn(W, xr.data(), M, Y, onednn_precision(W));
    }
    return detail::matmul_onednn(W, X, M, Y, onednn_precision(W));
  }
  matmul_multi(&W, &Y, 1, X, M, xq);
}

namespace {

// The small-batch kernel for M <= kMatmulSmallMaxM, else (inside a parallel
// region or a team, where oneDNN cannot run) on near-equal slices of at most
// kMatmulSmallMaxM inputs (at least 2 each).
void matmul_small_or_sliced(const Matrix* Ws, float* const* Ys, int count, const float* X, int64_t M) {
  if (M <= kMatmulSmallMaxM) return detail::matmul_small_multi(Ws, Ys, count, X, M);
  const int64_t slices = (M + kMatmulSmallMaxM - 1) / kMatmulSmallMaxM;
  std::vector<float*> ys(static_cast<size_t>(count));
  for (int64_t s = 0, m0 = 0; s < slices; ++s) {
    const int64_t m = M / slices + (s < M % slices ? 1 : 0);
    for (int i = 0; i < count; ++i) ys[i] = Ys[i] + m0 * Ws[i].rows;
    detail::matmul_small_multi(Ws, ys.data(), count, X + m0 * Ws[0].cols, m);
    m0 += m;
  }
}

}  // namespace

void matmul_multi(const Matrix* Ws, float* const* Ys, int count, const float* X, int64_t M,
                  const QuantizedInputs* xq) {
  QKV_CHECK(M >= 0, "matmul: negative batch size ", M);
  if (M == 1) return matvec_multi(Ws, Ys, count, X);
  QKV_CHECK(count >= 0, "matmul_multi: negative matrix count ", count);
  if (count == 0 || M == 0) return;
  QKV_CHECK(Ws != nullptr && Ys != nullptr, "matmul_multi: null matrix or output list");
  for (int i = 0; i < count; ++i) {
    check_matrix(Ws[i], "matmul");
    QKV_CHECK(Ws[i].cols == Ws[0].cols, "matmul_multi: matrix ", i, " has ", Ws[i].cols,
              " columns but matrix 0 has ", Ws[0].cols, " (they share one input)");
    QKV_CHECK(Ys[i] != nullptr || Ws[i].rows == 0, "matmul: null output for matrix ", i);
  }
  QKV_CHECK(X != nullptr || Ws[0].cols == 0, "matmul: null input");
  auto gemm_for = [&](const Matrix& W) { return detail::matmul_takes_block_gemm(W, M); };
  auto per_input_for = [&](const Matrix& W) { return W.row_groups ? !gemm_for(W) : ggml_batch_per_input(W.type, M); };
  bool any_gemm = false;
  for (int i = 0; i < count; ++i) any_gemm |= gemm_for(Ws[i]);
  if (any_gemm && Ws[0].cols > 0) {
    // The integer block GEMM (kernels/block_gemm.cc) for the block types, the
    // usual paths for the others.
    std::vector<Matrix> gw, ow;
    std::vector<float*> gy, oy;
    for (int i = 0; i < count; ++i) {
      const bool gemm = gemm_for(Ws[i]);
      (gemm ? gw : ow).push_back(Ws[i]);
      (gemm ? gy : oy).push_back(Ys[i]);
    }
    if (!ow.empty()) matmul_multi(ow.data(), oy.data(), static_cast<int>(ow.size()), X, M);
    detail::matmul_block_gemm(gw.data(), gy.data(), static_cast<int>(gw.size()), X, M, xq);
    return;
  }
  bool any_per_input = false;
  for (int i = 0; i < count; ++i) any_per_input |= per_input_for(Ws[i]);
  if (any_per_input) {
    // Block types without a batch kernel here: each input quantized and
    // dotted as in decode. The other matrices take their usual path.
    std::vector<Matrix> qw, ow;
    std::vector<float*> qy, oy;
    for (int i = 0; i < count; ++i) {
      const bool per_input = per_input_for(Ws[i]);
      (per_input ? qw : ow).push_back(Ws[i]);
      (per_input ? qy : oy).push_back(Ys[i]);
    }
    if (!ow.empty()) matmul_multi(ow.data(), oy.data(), static_cast<int>(ow.size()), X, M);
    std::vector<float*> ys(qw.size());
    for (int64_t m = 0; m < M; ++m) {
      for (size_t i = 0; i < qw.size(); ++i) ys[i] = qy[i] + m * qw[i].rows;
      matvec_multi(qw.data(), ys.data(), static_cast<int>(qw.size()), X + m * Ws[0].cols);
    }
    return;
  }
  // Each matrix to oneDNN (built without it, matmul would come back here:
  // the small-batch kernel on slices below takes the batch instead).
  if (QKV_HAVE_ONEDNN && M > kMatmulSmallMaxM && !omp_in_parallel() && current_team() == nullptr) {
    for (int i = 0; i < count; ++i) matmul(Ws[i], X, M, Ys[i]);
    return;
  }
  bool any_block = false;
  for (int i = 0; i < count; ++i) any_block |= dtype_is_quantized(Ws[i].type);
  if (!any_block) return matmul_small_or_sliced(Ws, Ys, count, X, M);
  // Block types, Q8_0 included, take X as ggml's activation blocks hold it
  // (batch_activations.h; Q8_0's mean KLD from llama.cpp's logits on
  // tinystories-3M, 20 chunks of 128: 4.8e-5 with X as is, 2.4e-5 so):
  // the matrices in groups of one activation type each, the others with X.
  std::vector<Matrix> gw;
  std::vector<float*> gy;
  static thread_local std::vector<float> xr;
  for (int group = -1; group < 3; ++group) {
    gw.clear();
    gy.clear();
    for (int i = 0; i < count; ++i) {
      const int g = dtype_is_quantized(Ws[i].type) ? static_cast<int>(act_type(Ws[i].type)) : -1;
      if (g != group) continue;
      gw.push_back(Ws[i]);
      gy.push_back(Ys[i]);
    }
    if (gw.empty()) continue;
    const float* x = X;
    if (group >= 0) {
      xr.resize(static_cast<size_t>(M * Ws[0].cols));
      detail::activation_round_trip(gw[0].type, X, M, static_cast<size_t>(Ws[0].cols), xr.data());
      x = xr.data();
    }
    matmul_small_or_sliced(gw.data(), gy.data(), static_cast<int>(gw.size()), x, M);
  }
}

void matmul_reference(const Matrix& W, const float* X, int64_t M, float* Y) {
  check_matrix(W, "matmul_reference");
  QKV_CHECK(M >= 0, "matmul_reference: negative batch size ", M);
  if (M == 0 || W.rows == 0) return;
  QKV_CHECK(X != nullptr || W.cols == 0, "matmul_reference: null input");
  QKV_CHECK(Y != nullptr, "matmul_reference: null output");
  const size_t cols = static_cast<size_t>(W.cols);
  const size_t row_bytes = dtype_row_bytes(W.type, cols);
  std::vector<float> row(cols);
  for (int64_t r = 0; r < W.rows; ++r) {
    decode_row(W.type, static_cast<const uint8_t*>(W.data) + r * row_bytes, cols, row.data());
    for (int64_t m = 0; m < M; ++m) {
      double s = 0;
      for (size_t i = 0; i < cols; ++i) s += double(row[i]) * double(X[m * cols + i]);
      Y[m * W.rows + r] = static_cast<float>(s);
    }
  }
}

namespace detail {

namespace {
Q8Dot g_q8_mode = Q8Dot::kInt8;
// Indexed by DType.
// (The block types of kernels/quant take theirs from the hardware prefetcher for now.)
size_t g_prefetch_bytes[kDTypeCount] = {kDefaultMatvecPrefetchBytes, kDefaultMatvecPrefetchBytes,
                                        kDefaultMatvecPrefetchBytes, kDefaultMatvecPrefetchBytesQ8};
}  // namespace

bool go_parallel(size_t bytes) {
  return !omp_in_parallel() && omp_get_max_threads() > 1 && bytes >= kMinParallelBytes;
}

Q8Dot q8_matvec_mode() { return g_q8_mode; }
void set_q8_matvec_mode(Q8Dot mode) { g_q8_mode = mode; }

size_t matvec_prefetch_bytes(DType t) {
  QKV_CHECK(static_cast<int>(t) >= 0 && static_cast<int>(t) < kDTypeCount, "unknown dtype ", static_cast<int>(t));
  return g_prefetch_bytes[static_cast<int>(t)];
}
void set_matvec_prefetch_bytes(DType t, size_t bytes) {
  QKV_CHECK(static_cast<int>(t) >= 0 && static_cast<int>(t) < kDTypeCount, "unknown dtype ", static_cast<int>(t));
  QKV_CHECK(bytes <= (size_t{1} << 20), "matvec prefetch distance ", bytes, " bytes is implausible (max 1 MB)");
  g_prefetch_bytes[static_cast<int>(t)] = bytes;
}

void quantize_x_q8(const float* x, size_t n, int16_t* q, int8_t* q8, float* d) {
  HWY_DYNAMIC_DISPATCH(QuantizeX)(x, n, q, q8, d);
}

void decode_rows_f32(const Matrix& W, int64_t r0, int64_t r1, float* out) {
  HWY_DYNAMIC_DISPATCH(DecodeRows)(W, r0, r1, out);
}

void round_to_bf16(const float* in, size_t n, uint16_t* out) {
  HWY_DYNAMIC_DISPATCH(RoundToBF16)(in, n, out);
}

}  // namespace detail
}  // namespace qkv
#endif  // HWY_ONCE

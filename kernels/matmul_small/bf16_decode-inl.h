// bf16 steps of 32 columns and the conversion of weight rows of every
// non-F32 type to them (AVX3_DL target only), shared by the AVX512_BF16 and AMX paths.
//
// A Highway "-inl" header of the small-batch matmul:
// kernels/matmul_small/matmul_small.cc includes it once per SIMD target
// (foreach_target), after hwy/highway.h.
#if defined(QKV_KERNELS_MATMUL_SMALL_BF16_DECODE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef QKV_KERNELS_MATMUL_SMALL_BF16_DECODE_INL_H_
#undef QKV_KERNELS_MATMUL_SMALL_BF16_DECODE_INL_H_
#else
#define QKV_KERNELS_MATMUL_SMALL_BF16_DECODE_INL_H_
#endif

#include <type_traits>

#include "hwy/highway.h"
#include "kernels/matmul_small/common-inl.h"
#include "kernels/matmul_small/quant_decode-inl.h"

// Only AVX3_DL has code here: another target's region would be empty (clang warns).
#if HWY_TARGET == HWY_AVX3_DL
HWY_BEFORE_NAMESPACE();
namespace qkv {
namespace HWY_NAMESPACE {
// The target's whole feature set plus these: clang replaces the region's
// target features with a function's own (g++ adds them).
#define QKV_BF16_TARGET __attribute__((target(HWY_TARGET_STR ",avx512bf16,prfchw")))

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
// as 32 bf16 at out.
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
    _mm512_storeu_si512(out, PackBF16(_mm512_mul_ps(d, lo), _mm512_mul_ps(d, hi)));
  } else if constexpr (IsQuantStepType(T)) {
    const StepValues v = DecodeQuantStep<T>(row, t);
    _mm512_storeu_si512(out, PackBF16(v.lo, v.hi));
  } else {
    const DF df;
    const VF lo = LoadWeights<T>(df, row, i), hi = LoadWeights<T>(df, row, i + kLanes);
    _mm512_storeu_si512(out, PackBF16(lo.raw, hi.raw));
  }
}

// The steps of a row that DecodeStepBF16 cannot take: the last one, if the
// row ends inside it (its padding zero).
template <DType T>
QKV_BF16_TARGET HWY_INLINE void DecodeTailBF16(const uint8_t* HWY_RESTRICT row, size_t cols,
                                               uint16_t* HWY_RESTRICT out, size_t stride) {
  for (size_t i = cols / kBF16Step * kBF16Step; i < StepsBF16(cols) * kBF16Step; ++i) {
    uint16_t v = 0;  // block-type rows are whole 32-column blocks: no tail
    if constexpr (!dtype_is_quantized(T)) v = i < cols ? f32_to_bf16(LoadWeight<T>(row, i)) : 0;
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

template <DType T>
using WeightTag = std::integral_constant<DType, T>;

// Calls f(WeightTag<t>()) for a run-time non-F32 weight type t (the types the
// bf16 paths decode).
template <class F>
HWY_INLINE void WithBF16Type(DType t, const F& f) {
  switch (t) {
    case DType::F32: break;  // F32 weights keep the f32 path (see matmul_small_precision)
    case DType::F16: return f(WeightTag<DType::F16>());
    case DType::BF16: return f(WeightTag<DType::BF16>());
    case DType::Q8_0: return f(WeightTag<DType::Q8_0>());
    case DType::Q4_0: return f(WeightTag<DType::Q4_0>());
    case DType::Q4_1: return f(WeightTag<DType::Q4_1>());
    case DType::Q5_0: return f(WeightTag<DType::Q5_0>());
    case DType::Q5_1: return f(WeightTag<DType::Q5_1>());
    case DType::Q2_K: return f(WeightTag<DType::Q2_K>());
    case DType::Q3_K: return f(WeightTag<DType::Q3_K>());
    case DType::Q4_K: return f(WeightTag<DType::Q4_K>());
    case DType::Q5_K: return f(WeightTag<DType::Q5_K>());
    case DType::Q6_K: return f(WeightTag<DType::Q6_K>());
    case DType::IQ4_NL: return f(WeightTag<DType::IQ4_NL>());
    case DType::IQ4_XS: return f(WeightTag<DType::IQ4_XS>());
  }
}
}  // namespace HWY_NAMESPACE
}  // namespace qkv
HWY_AFTER_NAMESPACE();
#endif  // HWY_TARGET == HWY_AVX3_DL

#endif  // QKV_KERNELS_MATMUL_SMALL_BF16_DECODE_INL_H_

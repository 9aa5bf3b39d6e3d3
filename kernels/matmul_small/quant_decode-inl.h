// The ggml block types (Q4_0 .. Q6_K, IQ4_NL, IQ4_XS) decoded 32 values at a
// time to f32 in AVX-512 registers (AVX3_DL target only): the step decoder of
// the bf16 paths (bf16_decode-inl.h), which round the values to bf16.
//
// Step t of a row is values [32t, 32t + 32): one whole block of the 32-value
// types, sub-block t % 8 of super-block t / 8 of the 256-value ones. Each
// decoder yields the step's values 0..15 in lo and 16..31 in hi as
// (d * sc) * q - (dmin * m) in f32 with ggml's factors (kernels/quant/blocks.h
// documents every layout), the integers q unpacked with vector shifts and
// masks and the 16-entry IQ4 table looked up with one permute.
//
// A Highway "-inl" header of the small-batch matmul:
// kernels/matmul_small/matmul_small.cc includes it once per SIMD target
// (foreach_target), after hwy/highway.h.
#if defined(QKV_KERNELS_MATMUL_SMALL_QUANT_DECODE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef QKV_KERNELS_MATMUL_SMALL_QUANT_DECODE_INL_H_
#undef QKV_KERNELS_MATMUL_SMALL_QUANT_DECODE_INL_H_
#else
#define QKV_KERNELS_MATMUL_SMALL_QUANT_DECODE_INL_H_
#endif

#include <cstring>

#include "hwy/highway.h"
#include "kernels/dtype.h"

HWY_BEFORE_NAMESPACE();
namespace qkv {
namespace HWY_NAMESPACE {
#if HWY_TARGET == HWY_AVX3_DL

// Whether DecodeQuantStep handles T (every ggml block type but Q8_0, which
// bf16_decode-inl.h decodes itself).
constexpr bool IsQuantStepType(DType t) { return dtype_is_quantized(t) && t != DType::Q8_0; }

// The 32 values of one step: lo = values 0..15, hi = 16..31.
struct StepValues {
  __m512 lo, hi;
};

namespace quant_step {

HWY_INLINE float H(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}
HWY_INLINE uint32_t U32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
HWY_INLINE __m128i Load16(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
HWY_INLINE __m512i Widen(__m128i bytes) { return _mm512_cvtepu8_epi32(bytes); }
HWY_INLINE __m128i LowNibbles(__m128i v) { return _mm_and_si128(v, _mm_set1_epi8(15)); }
HWY_INLINE __m128i HighNibbles(__m128i v) { return _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(15)); }
// Bits (v >> shift) & mask of 16 bytes (shift < 8; epi16 shifts carry the next
// byte's bits in, the mask removes them).
HWY_INLINE __m128i Bits(__m128i v, int shift, int mask) {
  return _mm_and_si128(_mm_srl_epi16(v, _mm_cvtsi32_si128(shift)), _mm_set1_epi8(static_cast<char>(mask)));
}
// a * q - b for int32 q.
HWY_INLINE __m512 Affine(__m512i q, float a, float b) {
  return _mm512_sub_ps(_mm512_mul_ps(_mm512_set1_ps(a), _mm512_cvtepi32_ps(q)), _mm512_set1_ps(b));
}
HWY_INLINE __m512 Scaled(__m512i q, float a) { return _mm512_mul_ps(_mm512_set1_ps(a), _mm512_cvtepi32_ps(q)); }
// 16 int32 plus 16 where the bit of `bits` is set (the fifth bit of Q5 values).
HWY_INLINE __m512i AddBit4(__m512i q, uint32_t bits) {
  return _mm512_mask_add_epi32(q, static_cast<__mmask16>(bits & 0xFFFF), q, _mm512_set1_epi32(16));
}
// The IQ4 levels of 16 nibbles (as int32 indices).
HWY_INLINE __m512i IQ4Levels(__m512i idx) {
  const __m512i table = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4NLValues)));
  return _mm512_permutexvar_epi32(idx, table);
}

}  // namespace quant_step

// Step t of the row at `row` (the row's first block), values as documented above.
template <DType T>
HWY_INLINE StepValues DecodeQuantStep(const uint8_t* HWY_RESTRICT row, size_t t) {
  using namespace quant_step;  // NOLINT: the helpers above
  if constexpr (dtype_block_values(T) == 32) {
    const uint8_t* b = row + t * dtype_block_bytes(T);
    if constexpr (T == DType::Q4_0 || T == DType::IQ4_NL) {
      const __m128i qs = Load16(b + 2);
      __m512i lo = Widen(LowNibbles(qs)), hi = Widen(HighNibbles(qs));
      const float d = H(b);
      if constexpr (T == DType::IQ4_NL) return {Scaled(IQ4Levels(lo), d), Scaled(IQ4Levels(hi), d)};
      const __m512i eight = _mm512_set1_epi32(8);
      return {Scaled(_mm512_sub_epi32(lo, eight), d), Scaled(_mm512_sub_epi32(hi, eight), d)};
    } else if constexpr (T == DType::Q4_1) {
      const __m128i qs = Load16(b + 4);
      const float d = H(b), m = H(b + 2);
      return {Affine(Widen(LowNibbles(qs)), d, -m), Affine(Widen(HighNibbles(qs)), d, -m)};
    } else {  // Q5_0 (d, qh, qs) and Q5_1 (d, m, qh, qs)
      constexpr size_t kQh = T == DType::Q5_0 ? 2 : 4;
      const uint32_t qh = U32(b + kQh);
      const __m128i qs = Load16(b + kQh + 4);
      const __m512i lo = AddBit4(Widen(LowNibbles(qs)), qh), hi = AddBit4(Widen(HighNibbles(qs)), qh >> 16);
      const float d = H(b);
      const __m512i sixteen = _mm512_set1_epi32(16);
      if constexpr (T == DType::Q5_0) {
        return {Scaled(_mm512_sub_epi32(lo, sixteen), d), Scaled(_mm512_sub_epi32(hi, sixteen), d)};
      } else {
        const float m = H(b + 2);
        return {Affine(lo, d, -m), Affine(hi, d, -m)};
      }
    }
  } else {
    static_assert(dtype_block_values(T) == kQK, "256-value super-blocks");
    const uint8_t* b = row + t / 8 * dtype_block_bytes(T);
    const int j = static_cast<int>(t % 8);  // 32-value sub-block
    if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
      const uint8_t* blk = b;
      const float d = H(blk), dmin = H(blk + 2);
      const uint8_t* scales = blk + 4;
      uint8_t sc, m;
      k4_scale_min(scales, j, &sc, &m);
      const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
      const uint8_t* qs = blk + (T == DType::Q4_K ? 16 : 48) + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      __m512i lo = Widen(Bits(Load16(qs), shift, 15)), hi = Widen(Bits(Load16(qs + 16), shift, 15));
      if constexpr (T == DType::Q5_K) {
        // Bit j of qh[l] is value l's fifth bit: moved to bit 7 of each byte, then a byte mask.
        const __m256i qh = _mm256_sll_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16)), _mm_cvtsi32_si128(7 - j));
        const uint32_t bits = static_cast<uint32_t>(_mm256_movemask_epi8(qh));
        lo = AddBit4(lo, bits);
        hi = AddBit4(hi, bits >> 16);
      }
      return {Affine(lo, d1, m1), Affine(hi, d1, m1)};
    } else if constexpr (T == DType::Q2_K || T == DType::Q3_K) {
      // The 2-bit field of value l: qs[32 * (j / 4) + l] >> (2 * (j % 4)).
      const uint8_t* qs = b + (T == DType::Q2_K ? 16 : 32) + 32 * (j / 4);
      const int shift = 2 * (j % 4);
      __m512i lo = Widen(Bits(Load16(qs), shift, 3)), hi = Widen(Bits(Load16(qs + 16), shift, 3));
      if constexpr (T == DType::Q2_K) {
        const float d = H(b + 80), dmin = H(b + 82);
        const uint8_t s0 = b[2 * j], s1 = b[2 * j + 1];
        return {Affine(lo, d * static_cast<float>(s0 & 15), dmin * static_cast<float>(s0 >> 4)),
                Affine(hi, d * static_cast<float>(s1 & 15), dmin * static_cast<float>(s1 >> 4))};
      } else {
        // Values whose hmask bit j is clear lose 4.
        const __m256i hm = _mm256_sll_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)), _mm_cvtsi32_si128(7 - j));
        const uint32_t set = static_cast<uint32_t>(_mm256_movemask_epi8(hm));
        const __m512i four = _mm512_set1_epi32(4);
        lo = _mm512_mask_sub_epi32(lo, static_cast<__mmask16>(~set & 0xFFFF), lo, four);
        hi = _mm512_mask_sub_epi32(hi, static_cast<__mmask16>((~set >> 16) & 0xFFFF), hi, four);
        const float d = H(b + 108);
        const uint8_t* scales = b + 96;
        return {Scaled(lo, d * static_cast<float>(q3k_scale(scales, 2 * j))),
                Scaled(hi, d * static_cast<float>(q3k_scale(scales, 2 * j + 1)))};
      }
    } else if constexpr (T == DType::Q6_K) {
      // Value l of sub-block j: h = j / 4, quarter p = j % 4;
      // low 4 bits ql[64h + 32 (p % 2) + l] >> 4 (p / 2), high 2 bits qh[32h + l] >> 2p.
      const int h = j / 4, p = j % 4;
      const uint8_t* ql = b + 64 * h + 32 * (p % 2);
      const uint8_t* qh = b + 128 + 32 * h;
      const auto q6 = [&](int half) {
        const __m128i low = Bits(Load16(ql + 16 * half), 4 * (p / 2), 15);
        const __m128i high = _mm_slli_epi16(Bits(Load16(qh + 16 * half), 2 * p, 3), 4);  // no carry: values < 4
        return _mm512_sub_epi32(Widen(_mm_or_si128(low, high)), _mm512_set1_epi32(32));
      };
      const float d = H(b + 208);
      const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
      return {Scaled(q6(0), d * static_cast<float>(sc[2 * j])), Scaled(q6(1), d * static_cast<float>(sc[2 * j + 1]))};
    } else {
      static_assert(T == DType::IQ4_XS, "the block types");
      BlockIQ4_XS head;  // d, scales_h, scales_l (the values are read in place)
      std::memcpy(&head, b, offsetof(BlockIQ4_XS, qs));
      const float dl = H(b) * static_cast<float>(iq4xs_scale(head, j));
      const __m128i qs = Load16(b + offsetof(BlockIQ4_XS, qs) + 16 * j);
      return {Scaled(IQ4Levels(Widen(LowNibbles(qs))), dl), Scaled(IQ4Levels(Widen(HighNibbles(qs))), dl)};
    }
  }
}

#endif  // HWY_TARGET == HWY_AVX3_DL
}  // namespace HWY_NAMESPACE
}  // namespace qkv
HWY_AFTER_NAMESPACE();

#endif  // QKV_KERNELS_MATMUL_SMALL_QUANT_DECODE_INL_H_

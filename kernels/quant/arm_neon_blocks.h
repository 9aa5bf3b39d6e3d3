// NEON decoders of the ggml block types' weights into int8 values, and the
// SDOT kernels' f32 lanes (Acc, Dot16), shared by the Armv8 SDOT matvec
// (vec_dot_arm_dotprod.cc), the SDOT GEMM (gemm_arm_dotprod.cc) and the i8mm
// GEMM (gemm_arm_i8mm.cc). Each decoder yields the int8 values the scalar
// reference's Values() / K4Values / Q6Values give (kernels/quant/vec_dot.cc: offsets
// applied where ggml applies them to the weights: Q4_0 -8, Q5_0 -16, Q3_K -4,
// Q6_K -32, the IQ4 table), so the integer sums over them are the
// reference's exactly.
//
// Only those files include this header, on aarch64 only; everything here
// has internal linkage (an anonymous namespace), so the copies compiled with
// their -march flags stay theirs and the linker never picks one of them for
// code that must run on an Armv8.0 core.
#pragma once

#if !defined(__aarch64__)
#error "arm_neon_blocks.h is for the aarch64 kernel files only"
#endif

#include <arm_neon.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/dtype.h"
#include "kernels/quant/blocks.h"

namespace qkv {
namespace {

// An IEEE half to float: exact, as f16_to_f32 (ACLE's __fp16: one scalar
// load and fcvt).
inline float Half(const uint8_t* p) {
  __fp16 h;
  std::memcpy(&h, p, 2);
  return h;
}

inline int8x16_t Low(uint8x16_t q) { return vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(15))); }
inline int8x16_t High(uint8x16_t q) { return vreinterpretq_s8_u8(vshrq_n_u8(q, 4)); }

// Q5_0/Q5_1's fifth bits (bit k of the 32-bit qh for value k) as 16 in
// bytes 0-15 (*h0) and 16-31 (*h1), else 0.
inline void FifthBits(const uint8_t* qh_bytes, uint8x16_t* h0, uint8x16_t* h1) {
  static const uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  const uint8x8_t q = vcreate_u8(qh);
  const uint8x16_t bit = vld1q_u8(kBit), sixteen = vdupq_n_u8(16);
  *h0 = vandq_u8(vtstq_u8(vcombine_u8(vdup_lane_u8(q, 0), vdup_lane_u8(q, 1)), bit), sixteen);
  *h1 = vandq_u8(vtstq_u8(vcombine_u8(vdup_lane_u8(q, 2), vdup_lane_u8(q, 3)), bit), sixteen);
}

// A 32-value block's weights as int8, values 0-15 in *w0 and 16-31 in *w1.
template <class B>
void Decode32(const uint8_t* b, int8x16_t* w0, int8x16_t* w1);
template <>
inline void Decode32<BlockQ8_0>(const uint8_t* b, int8x16_t* w0, int8x16_t* w1) {
  const auto* qs = reinterpret_cast<const int8_t*>(b + offsetof(BlockQ8_0, qs));
  *w0 = vld1q_s8(qs);
  *w1 = vld1q_s8(qs + 16);
}
template <>
inline void Decode32<BlockQ4_0>(const uint8_t* b, int8x16_t* w0, int8x16_t* w1) {
  const uint8x16_t q = vld1q_u8(b + offsetof(BlockQ4_0, qs));
  *w0 = vsubq_s8(Low(q), vdupq_n_s8(8));
  *w1 = vsubq_s8(High(q), vdupq_n_s8(8));
}
template <>
inline void Decode32<BlockQ4_1>(const uint8_t* b, int8x16_t* w0, int8x16_t* w1) {
  const uint8x16_t q = vld1q_u8(b + offsetof(BlockQ4_1, qs));
  *w0 = Low(q);
  *w1 = High(q);
}
template <>
inline void Decode32<BlockQ5_0>(const uint8_t* b, int8x16_t* w0, int8x16_t* w1) {
  const uint8x16_t q = vld1q_u8(b + offsetof(BlockQ5_0, qs));
  uint8x16_t h0, h1;
  FifthBits(b + offsetof(BlockQ5_0, qh), &h0, &h1);
  *w0 = vsubq_s8(vorrq_s8(Low(q), vreinterpretq_s8_u8(h0)), vdupq_n_s8(16));
  *w1 = vsubq_s8(vorrq_s8(High(q), vreinterpretq_s8_u8(h1)), vdupq_n_s8(16));
}
template <>
inline void Decode32<BlockQ5_1>(const uint8_t* b, int8x16_t* w0, int8x16_t* w1) {
  const uint8x16_t q = vld1q_u8(b + offsetof(BlockQ5_1, qs));
  uint8x16_t h0, h1;
  FifthBits(b + offsetof(BlockQ5_1, qh), &h0, &h1);
  *w0 = vorrq_s8(Low(q), vreinterpretq_s8_u8(h0));
  *w1 = vorrq_s8(High(q), vreinterpretq_s8_u8(h1));
}
template <>
inline void Decode32<BlockIQ4_NL>(const uint8_t* b, int8x16_t* w0, int8x16_t* w1) {
  const int8x16_t table = vld1q_s8(kIQ4NLValues);
  const uint8x16_t q = vld1q_u8(b + offsetof(BlockIQ4_NL, qs));
  *w0 = vqtbl1q_s8(table, vandq_u8(q, vdupq_n_u8(15)));
  *w1 = vqtbl1q_s8(table, vshrq_n_u8(q, 4));
}

// The 32-value types whose activations are Q8_1 and whose dot product adds
// the min term m * s (ggml's Q4_1/Q5_1 kernels).
template <class B>
constexpr bool kHasMin = false;
template <>
constexpr bool kHasMin<BlockQ4_1> = true;
template <>
constexpr bool kHasMin<BlockQ5_1> = true;

// One K-quant / IQ4_XS super-block's weights, decoded: 256 int8 values, the
// integer scale of each 16-value sub-block (sc[2j] == sc[2j + 1] for the
// types with sub-blocks of 32), the integer min of each (mn, Q2_K/Q4_K/Q5_K)
// and the f16 scales d and dmin as f32.
struct KRow {
  alignas(16) int8_t w[kQK];
  int32_t sc[16];
  int32_t mn[16];
  float d, dmin;
};

// How the reference adds a K-quant's min terms (ggml's kernels differ): none;
// Q2_K into the 8 f32 lanes before the block's scale; Q4_K in 4 f32 lanes of
// pairs of sub-blocks; Q5_K in one f32.
enum class KMins { kNone, kLanes, kPairs, kTotal };
template <class B>
constexpr KMins kKMins = KMins::kNone;
template <>
constexpr KMins kKMins<BlockQ2_K> = KMins::kLanes;
template <>
constexpr KMins kKMins<BlockQ4_K> = KMins::kPairs;
template <>
constexpr KMins kKMins<BlockQ5_K> = KMins::kTotal;

// The 2-bit fields (q >> shift) & 3 of 16 bytes.
inline uint8x16_t Bits2(uint8x16_t q, int shift) {
  return vandq_u8(vshlq_u8(q, vdupq_n_s8(static_cast<int8_t>(-shift))), vdupq_n_u8(3));
}

template <class B>
void DecodeK(const uint8_t* b, KRow* k);
template <>
inline void DecodeK<BlockQ2_K>(const uint8_t* b, KRow* k) {
  const uint8_t* scales = b + offsetof(BlockQ2_K, scales);
  const uint8_t* qs = b + offsetof(BlockQ2_K, qs);
  for (int j = 0; j < 16; ++j) {
    k->sc[j] = scales[j] & 15;
    k->mn[j] = scales[j] >> 4;
  }
  for (int h = 0; h < 2; ++h) {
    const uint8x16_t q0 = vld1q_u8(qs + 32 * h), q1 = vld1q_u8(qs + 32 * h + 16);
    for (int sh = 0; sh < 4; ++sh) {
      vst1q_u8(reinterpret_cast<uint8_t*>(k->w + 128 * h + 32 * sh), Bits2(q0, 2 * sh));
      vst1q_u8(reinterpret_cast<uint8_t*>(k->w + 128 * h + 32 * sh + 16), Bits2(q1, 2 * sh));
    }
  }
  k->d = Half(b + offsetof(BlockQ2_K, d));
  k->dmin = Half(b + offsetof(BlockQ2_K, dmin));
}
template <>
inline void DecodeK<BlockQ3_K>(const uint8_t* b, KRow* k) {
  const uint8_t* qs = b + offsetof(BlockQ3_K, qs);
  const uint8_t* hmask = b + offsetof(BlockQ3_K, hmask);
  for (int j = 0; j < 16; ++j) k->sc[j] = q3k_scale(b + offsetof(BlockQ3_K, scales), j);
  const uint8x16_t m0 = vld1q_u8(hmask), m1 = vld1q_u8(hmask + 16);
  const uint8x16_t one = vdupq_n_u8(1);
  const int8x16_t four = vdupq_n_s8(4);
  for (int h = 0; h < 2; ++h) {
    const uint8x16_t q0 = vld1q_u8(qs + 32 * h), q1 = vld1q_u8(qs + 32 * h + 16);
    for (int sh = 0; sh < 4; ++sh) {
      // low | high bit << 2, minus 4: low - 4 + 4 * high bit.
      const int8x16_t shift = vdupq_n_s8(static_cast<int8_t>(-(4 * h + sh)));
      const uint8x16_t hb0 = vshlq_n_u8(vandq_u8(vshlq_u8(m0, shift), one), 2);
      const uint8x16_t hb1 = vshlq_n_u8(vandq_u8(vshlq_u8(m1, shift), one), 2);
      vst1q_s8(k->w + 128 * h + 32 * sh, vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(Bits2(q0, 2 * sh), hb0)), four));
      vst1q_s8(k->w + 128 * h + 32 * sh + 16, vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(Bits2(q1, 2 * sh), hb1)), four));
    }
  }
  k->d = Half(b + offsetof(BlockQ3_K, d));
  k->dmin = 0.0f;
}

// Q4_K (kFifth false) and Q5_K: chunk c of 64 values holds the low nibbles
// of bytes 32c..32c+31, then their high nibbles (Q5_K: bits 2c and 2c + 1 of
// qh above them).
template <class B, bool kFifth>
inline void DecodeK4(const uint8_t* b, KRow* k) {
  const uint8_t* qs = b + offsetof(B, qs);
  for (int j = 0; j < 8; ++j) {
    uint8_t s, m;
    k4_scale_min(b + offsetof(B, scales), j, &s, &m);
    k->sc[2 * j] = k->sc[2 * j + 1] = s;
    k->mn[2 * j] = k->mn[2 * j + 1] = m;
  }
  uint8x16_t qh0 = vdupq_n_u8(0), qh1 = vdupq_n_u8(0);
  if constexpr (kFifth) {
    qh0 = vld1q_u8(b + offsetof(BlockQ5_K, qh));
    qh1 = vld1q_u8(b + offsetof(BlockQ5_K, qh) + 16);
  }
  const uint8x16_t one = vdupq_n_u8(1);
  for (int c = 0; c < 4; ++c) {
    const uint8x16_t q0 = vld1q_u8(qs + 32 * c), q1 = vld1q_u8(qs + 32 * c + 16);
    uint8x16_t v[4] = {vandq_u8(q0, vdupq_n_u8(15)), vandq_u8(q1, vdupq_n_u8(15)), vshrq_n_u8(q0, 4), vshrq_n_u8(q1, 4)};
    if constexpr (kFifth) {
      const int8x16_t lo = vdupq_n_s8(static_cast<int8_t>(-2 * c)), hi = vdupq_n_s8(static_cast<int8_t>(-2 * c - 1));
      v[0] = vorrq_u8(v[0], vshlq_n_u8(vandq_u8(vshlq_u8(qh0, lo), one), 4));
      v[1] = vorrq_u8(v[1], vshlq_n_u8(vandq_u8(vshlq_u8(qh1, lo), one), 4));
      v[2] = vorrq_u8(v[2], vshlq_n_u8(vandq_u8(vshlq_u8(qh0, hi), one), 4));
      v[3] = vorrq_u8(v[3], vshlq_n_u8(vandq_u8(vshlq_u8(qh1, hi), one), 4));
    }
    for (int p = 0; p < 4; ++p) vst1q_u8(reinterpret_cast<uint8_t*>(k->w + 64 * c + 16 * p), v[p]);
  }
  k->d = Half(b + offsetof(B, d));
  k->dmin = Half(b + offsetof(B, dmin));
}
template <>
inline void DecodeK<BlockQ4_K>(const uint8_t* b, KRow* k) {
  DecodeK4<BlockQ4_K, false>(b, k);
}
template <>
inline void DecodeK<BlockQ5_K>(const uint8_t* b, KRow* k) {
  DecodeK4<BlockQ5_K, true>(b, k);
}

// Q6_K: in half h, value l of the four 32-value chunks takes bits of
// ql[64h + l] (chunks 0, 2), ql[64h + 32 + l] (chunks 1, 3) and qh[32h + l].
template <>
inline void DecodeK<BlockQ6_K>(const uint8_t* b, KRow* k) {
  const uint8_t* ql = b + offsetof(BlockQ6_K, ql);
  const uint8_t* qh = b + offsetof(BlockQ6_K, qh);
  const auto* sc = reinterpret_cast<const int8_t*>(b + offsetof(BlockQ6_K, scales));
  for (int j = 0; j < 16; ++j) k->sc[j] = sc[j];
  const uint8x16_t m4 = vdupq_n_u8(15), m2 = vdupq_n_u8(3 << 4);
  const int8x16_t off = vdupq_n_s8(32);
  for (int h = 0; h < 2; ++h) {
    for (int o = 0; o < 32; o += 16) {
      const uint8x16_t q0 = vld1q_u8(ql + 64 * h + o), q1 = vld1q_u8(ql + 64 * h + 32 + o);
      const uint8x16_t hb = vld1q_u8(qh + 32 * h + o);
      const uint8x16_t v[4] = {
          vorrq_u8(vandq_u8(q0, m4), vandq_u8(vshlq_n_u8(hb, 4), m2)),
          vorrq_u8(vandq_u8(q1, m4), vandq_u8(vshlq_n_u8(hb, 2), m2)),
          vorrq_u8(vshrq_n_u8(q0, 4), vandq_u8(hb, m2)),
          vorrq_u8(vshrq_n_u8(q1, 4), vandq_u8(vshrq_n_u8(hb, 2), m2)),
      };
      for (int c = 0; c < 4; ++c) vst1q_s8(k->w + 128 * h + 32 * c + o, vsubq_s8(vreinterpretq_s8_u8(v[c]), off));
    }
  }
  k->d = Half(b + offsetof(BlockQ6_K, d));
  k->dmin = 0.0f;
}
template <>
inline void DecodeK<BlockIQ4_XS>(const uint8_t* b, KRow* k) {
  const auto& blk = *reinterpret_cast<const BlockIQ4_XS*>(b);
  for (int j = 0; j < 8; ++j) k->sc[2 * j] = k->sc[2 * j + 1] = iq4xs_scale(blk, j);
  const int8x16_t table = vld1q_s8(kIQ4NLValues);
  const uint8_t* qs = b + offsetof(BlockIQ4_XS, qs);
  for (int j = 0; j < 8; ++j) {
    const uint8x16_t q = vld1q_u8(qs + 16 * j);
    vst1q_s8(k->w + 32 * j, vqtbl1q_s8(table, vandq_u8(q, vdupq_n_u8(15))));
    vst1q_s8(k->w + 32 * j + 16, vqtbl1q_s8(table, vshrq_n_u8(q, 4)));
  }
  k->d = Half(b + offsetof(BlockIQ4_XS, d));
  k->dmin = 0.0f;
}

// The scalar kernels' 8 f32 lanes (Acc8 in vec_dot.cc) of one (row, input)
// as two vectors: lo holds lanes 0-3, hi lanes 4-7.
struct Acc {
  float32x4_t lo = vdupq_n_f32(0.0f), hi = vdupq_n_f32(0.0f);
  // lane = fma(d, float(int lane), lane), one rounding, as std::fma.
  void fma(float d, int32x4_t l0, int32x4_t l1) {
    const float32x4_t dv = vdupq_n_f32(d);
    lo = vfmaq_f32(lo, vcvtq_f32_s32(l0), dv);
    hi = vfmaq_f32(hi, vcvtq_f32_s32(l1), dv);
  }
  // (a0 + a4 + a2 + a6) + (a1 + a5 + a3 + a7) pairwise, as Acc8::sum.
  float sum() const {
    const float32x4_t h = vaddq_f32(hi, lo);
    return (vgetq_lane_f32(h, 0) + vgetq_lane_f32(h, 2)) + (vgetq_lane_f32(h, 1) + vgetq_lane_f32(h, 3));
  }
};

#if defined(__ARM_FEATURE_DOTPROD)
// SDOT lane i = sum of w[4i..4i+3] * a[4i..4i+3]: the scalar kernels' lane i
// of a 16-value half.
inline int32x4_t Dot16(int8x16_t w, int8x16_t a) { return vdotq_s32(vdupq_n_s32(0), w, a); }
#endif

// The reference's integer min term of lane l (0..7) of a super-block for
// the activation sums bsums: mn[2l] * bsums[2l] + mn[2l + 1] * bsums[2l + 1].
// Q2_K's mins[l]; for Q4_K/Q5_K (mn[2j] == mn[2j + 1]) msum[j].
inline void MinTerms(const KRow& k, const int16_t* bsums, int32_t* out) {
  for (int l = 0; l < 8; ++l) out[l] = k.mn[2 * l] * bsums[2 * l] + k.mn[2 * l + 1] * bsums[2 * l + 1];
}

// The batch kernels' table of block types: run32(Block{}, Act{}) for the
// 32-value types (activations Q8_0 or Q8_1), runk(Block{}) for the 256-value
// ones (activations Q8_K); false for the others.
template <class Run32, class RunK>
bool for_block_type(DType t, Run32&& run32, RunK&& runk) {
  switch (t) {
    case DType::Q8_0: return run32(BlockQ8_0{}, BlockQ8_0{});
    case DType::Q4_0: return run32(BlockQ4_0{}, BlockQ8_0{});
    case DType::Q5_0: return run32(BlockQ5_0{}, BlockQ8_0{});
    case DType::IQ4_NL: return run32(BlockIQ4_NL{}, BlockQ8_0{});
    case DType::Q4_1: return run32(BlockQ4_1{}, BlockQ8_1{});
    case DType::Q5_1: return run32(BlockQ5_1{}, BlockQ8_1{});
    case DType::Q2_K: return runk(BlockQ2_K{});
    case DType::Q3_K: return runk(BlockQ3_K{});
    case DType::Q4_K: return runk(BlockQ4_K{});
    case DType::Q5_K: return runk(BlockQ5_K{});
    case DType::Q6_K: return runk(BlockQ6_K{});
    case DType::IQ4_XS: return runk(BlockIQ4_XS{});
    default: return false;
  }
}

}  // namespace
}  // namespace qkv

// SDOT kernels of quant_dot_rows (kernels/quant/vec_dot_arm_dotprod.h). On
// aarch64 this file builds with -march=armv8.2-a+dotprod (kernels/CMakeLists.txt;
// gcc's arm_neon.h declares vdotq_s32 for armv8.2-a+dotprod and inlines it in
// no narrower target) and -ffp-contract=off, as the scalar kernels it matches.
// armv8.2-a also allows LSE atomics and other Armv8.1/8.2 instructions in what
// the compiler emits here, and a copy of an inline function emitted by this
// file may be the one the linker keeps for the whole program, which must still
// run on an Armv8.0 core: so the file uses no atomics, no standard-library
// templates and no inline function of another header but k4_scale_min (no
// loop, inlined); `nm -C` of its object lists only this file's functions.
#include "kernels/quant/vec_dot_arm_dotprod.h"

#if defined(__aarch64__)

#if !defined(__ARM_FEATURE_DOTPROD)
#error "vec_dot_arm_dotprod.cc needs -march=armv8.2-a+dotprod (kernels/CMakeLists.txt sets it on aarch64)"
#endif

#include <arm_neon.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/quant/blocks.h"

namespace qkv {
namespace {

// An IEEE half to float: exact, as f16_to_f32 (ACLE's __fp16: one scalar
// load and fcvt).
float Half(const uint8_t* p) {
  __fp16 h;
  std::memcpy(&h, p, 2);
  return h;
}

// The scalar kernels' 8 f32 lanes (Acc8 in vec_dot.cc) as two vectors: lo
// holds lanes 0-3, hi lanes 4-7.
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

// SDOT lane i = sum of w[4i..4i+3] * a[4i..4i+3]: the scalar kernels' lane i
// of a 16-value half.
int32x4_t Dot16(int8x16_t w, const int8_t* a) { return vdotq_s32(vdupq_n_s32(0), w, vld1q_s8(a)); }

int8x16_t Low(uint8x16_t q) { return vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(15))); }
int8x16_t High(uint8x16_t q) { return vreinterpretq_s8_u8(vshrq_n_u8(q, 4)); }

// A 32-value block's weights as int8, values 0-15 in *w0 and 16-31 in *w1,
// with the offsets the scalar Values() applies (Q4_0 -8, IQ4_NL's table).
template <class B>
void Decode(const uint8_t* b, int8x16_t* w0, int8x16_t* w1);
template <>
void Decode<BlockQ8_0>(const uint8_t* b, int8x16_t* w0, int8x16_t* w1) {
  const auto* qs = reinterpret_cast<const int8_t*>(b + offsetof(BlockQ8_0, qs));
  *w0 = vld1q_s8(qs);
  *w1 = vld1q_s8(qs + 16);
}
template <>
void Decode<BlockQ4_0>(const uint8_t* b, int8x16_t* w0, int8x16_t* w1) {
  const uint8x16_t q = vld1q_u8(b + offsetof(BlockQ4_0, qs));
  *w0 = vsubq_s8(Low(q), vdupq_n_s8(8));
  *w1 = vsubq_s8(High(q), vdupq_n_s8(8));
}
template <>
void Decode<BlockQ4_1>(const uint8_t* b, int8x16_t* w0, int8x16_t* w1) {
  const uint8x16_t q = vld1q_u8(b + offsetof(BlockQ4_1, qs));
  *w0 = Low(q);
  *w1 = High(q);
}
template <>
void Decode<BlockIQ4_NL>(const uint8_t* b, int8x16_t* w0, int8x16_t* w1) {
  const int8x16_t table = vld1q_s8(kIQ4NLValues);
  const uint8x16_t q = vld1q_u8(b + offsetof(BlockIQ4_NL, qs));
  *w0 = vqtbl1q_s8(table, vandq_u8(q, vdupq_n_u8(15)));
  *w1 = vqtbl1q_s8(table, vshrq_n_u8(q, 4));
}

// Blocks of 32 against Q8_0 (A = BlockQ8_0), or Q4_1 against Q8_1 with the
// min term m * s summed in one scalar (kMin), as Dot32 / Dot32Min.
template <class B, class A, bool kMin>
float Dot32(const uint8_t* row, const A* a, size_t nb) {
  Acc acc;
  float summs = 0.0f;
  for (size_t i = 0; i < nb; ++i) {
    const uint8_t* b = row + i * sizeof(B);
    if constexpr (kMin) summs = std::fma(Half(b + offsetof(B, m)), Half(reinterpret_cast<const uint8_t*>(&a[i].s)), summs);
    int8x16_t w0, w1;
    Decode<B>(b, &w0, &w1);
    const float d = Half(b + offsetof(B, d)) * Half(reinterpret_cast<const uint8_t*>(&a[i].d));
    acc.fma(d, Dot16(w0, a[i].qs), Dot16(w1, a[i].qs + 16));
  }
  return kMin ? acc.sum() + summs : acc.sum();
}

// Q4_K: 8 sub-blocks of 32 with 6-bit scales and mins; the mins in 4 f32
// lanes, as DotK4<BlockQ4_K, false>.
float DotQ4K(const uint8_t* row, const BlockQ8_K* a, size_t nb) {
  Acc acc;
  float accm[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < nb; ++i) {
    const uint8_t* b = row + i * sizeof(BlockQ4_K);
    const uint8_t* scales = b + offsetof(BlockQ4_K, scales);
    const uint8_t* qs = b + offsetof(BlockQ4_K, qs);
    const float d = a[i].d * Half(b + offsetof(BlockQ4_K, d));
    const float dmin = -a[i].d * Half(b + offsetof(BlockQ4_K, dmin));
    int32_t sc[8], msum[8];
    for (int j = 0; j < 8; ++j) {
      uint8_t s, m;
      k4_scale_min(scales, j, &s, &m);
      sc[j] = s;
      msum[j] = m * (a[i].bsums[2 * j] + a[i].bsums[2 * j + 1]);
    }
    for (int p = 0; p < 4; ++p) accm[p] = std::fma(dmin, static_cast<float>(msum[2 * p] + msum[2 * p + 1]), accm[p]);
    // Sub-block 2c: the low nibbles of bytes 32c..32c+31; 2c + 1: their high nibbles.
    int32x4_t l0 = vdupq_n_s32(0), l1 = vdupq_n_s32(0);
    for (int c = 0; c < 4; ++c) {
      const uint8x16_t q0 = vld1q_u8(qs + 32 * c), q1 = vld1q_u8(qs + 32 * c + 16);
      const int8_t* x = a[i].qs + 64 * c;
      l0 = vmlaq_n_s32(l0, Dot16(Low(q0), x), sc[2 * c]);
      l1 = vmlaq_n_s32(l1, Dot16(Low(q1), x + 16), sc[2 * c]);
      l0 = vmlaq_n_s32(l0, Dot16(High(q0), x + 32), sc[2 * c + 1]);
      l1 = vmlaq_n_s32(l1, Dot16(High(q1), x + 48), sc[2 * c + 1]);
    }
    acc.fma(d, l0, l1);
  }
  return acc.sum() + ((accm[0] + accm[2]) + (accm[1] + accm[3]));
}

// Q6_K: 16 sub-blocks of 16 with signed 8-bit scales, values minus 32, as
// DotQ6K. In half h, value l of the four 32-value chunks k takes bits of
// ql[64h + l] (k 0, 2), ql[64h + 32 + l] (k 1, 3) and qh[32h + l].
float DotQ6K(const uint8_t* row, const BlockQ8_K* a, size_t nb) {
  Acc acc;
  const uint8x16_t m4 = vdupq_n_u8(15), m2 = vdupq_n_u8(3 << 4);
  const int8x16_t off = vdupq_n_s8(32);
  for (size_t i = 0; i < nb; ++i) {
    const uint8_t* b = row + i * sizeof(BlockQ6_K);
    const uint8_t* ql = b + offsetof(BlockQ6_K, ql);
    const uint8_t* qh = b + offsetof(BlockQ6_K, qh);
    const auto* sc = reinterpret_cast<const int8_t*>(b + offsetof(BlockQ6_K, scales));
    const float d = a[i].d * Half(b + offsetof(BlockQ6_K, d));
    int32x4_t lanes[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};
    for (int h = 0; h < 2; ++h) {
      for (int half = 0; half < 2; ++half) {
        const int o = 16 * half;
        const uint8x16_t q0 = vld1q_u8(ql + 64 * h + o), q1 = vld1q_u8(ql + 64 * h + 32 + o);
        const uint8x16_t hb = vld1q_u8(qh + 32 * h + o);
        const uint8x16_t v[4] = {
            vorrq_u8(vandq_u8(q0, m4), vandq_u8(vshlq_n_u8(hb, 4), m2)),
            vorrq_u8(vandq_u8(q1, m4), vandq_u8(vshlq_n_u8(hb, 2), m2)),
            vorrq_u8(vshrq_n_u8(q0, 4), vandq_u8(hb, m2)),
            vorrq_u8(vshrq_n_u8(q1, 4), vandq_u8(vshrq_n_u8(hb, 2), m2)),
        };
        for (int k = 0; k < 4; ++k) {
          const int8x16_t w = vsubq_s8(vreinterpretq_s8_u8(v[k]), off);
          lanes[half] = vmlaq_n_s32(lanes[half], Dot16(w, a[i].qs + 128 * h + 32 * k + o), sc[8 * h + 2 * k + half]);
        }
      }
    }
    acc.fma(d, lanes[0], lanes[1]);
  }
  return acc.sum();
}

template <class Dot>
void Rows(const void* rows, size_t row_bytes, size_t n_rows, float* y, Dot&& dot) {
  const auto* base = static_cast<const uint8_t*>(rows);
  for (size_t r = 0; r < n_rows; ++r) y[r] = dot(base + r * row_bytes);
}

}  // namespace

bool arm_dotprod_kernel(DType t) {
  switch (t) {
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::IQ4_NL:
    case DType::Q4_K:
    case DType::Q6_K: return true;
    default: return false;
  }
}

bool arm_dotprod_dot_rows(DType t, const void* rows, size_t cols, const void* xa, float* y, size_t n_rows) {
  const auto* a0 = static_cast<const BlockQ8_0*>(xa);
  const auto* a1 = static_cast<const BlockQ8_1*>(xa);
  const auto* ak = static_cast<const BlockQ8_K*>(xa);
  const size_t nb = cols / 32, nk = cols / kQK;
  switch (t) {
    case DType::Q8_0:
      Rows(rows, nb * sizeof(BlockQ8_0), n_rows, y, [&](const uint8_t* r) { return Dot32<BlockQ8_0, BlockQ8_0, false>(r, a0, nb); });
      return true;
    case DType::Q4_0:
      Rows(rows, nb * sizeof(BlockQ4_0), n_rows, y, [&](const uint8_t* r) { return Dot32<BlockQ4_0, BlockQ8_0, false>(r, a0, nb); });
      return true;
    case DType::Q4_1:
      Rows(rows, nb * sizeof(BlockQ4_1), n_rows, y, [&](const uint8_t* r) { return Dot32<BlockQ4_1, BlockQ8_1, true>(r, a1, nb); });
      return true;
    case DType::IQ4_NL:
      Rows(rows, nb * sizeof(BlockIQ4_NL), n_rows, y,
           [&](const uint8_t* r) { return Dot32<BlockIQ4_NL, BlockQ8_0, false>(r, a0, nb); });
      return true;
    case DType::Q4_K:
      Rows(rows, nk * sizeof(BlockQ4_K), n_rows, y, [&](const uint8_t* r) { return DotQ4K(r, ak, nk); });
      return true;
    case DType::Q6_K:
      Rows(rows, nk * sizeof(BlockQ6_K), n_rows, y, [&](const uint8_t* r) { return DotQ6K(r, ak, nk); });
      return true;
    default: return false;
  }
}

}  // namespace qkv

#else  // not aarch64: no SDOT

namespace qkv {
bool arm_dotprod_kernel(DType) { return false; }
bool arm_dotprod_dot_rows(DType, const void*, size_t, const void*, float*, size_t) { return false; }
}  // namespace qkv

#endif

// SDOT kernels of quant_dot_rows (kernels/quant/vec_dot_arm_dotprod.h). On
// aarch64 this file builds with -march=armv8.2-a+dotprod (kernels/CMakeLists.txt;
// gcc's arm_neon.h declares vdotq_s32 for armv8.2-a+dotprod and inlines it in
// no narrower target) and -ffp-contract=off, as the scalar kernels it matches.
// armv8.2-a also allows LSE atomics and other Armv8.1/8.2 instructions in what
// the compiler emits here, and a copy of an inline function emitted by this
// file may be the one the linker keeps for the whole program, which must still
// run on an Armv8.0 core: so the file uses no atomics, no standard-library
// templates and no inline function of another header but blocks.h's scale
// unpackers (no loop, inlined) and arm_neon_blocks.h's decoders (internal
// linkage); `nm -C` of its object lists only this file's functions.
#include "kernels/quant/vec_dot_arm_dotprod.h"

#if defined(__aarch64__)

#if !defined(__ARM_FEATURE_DOTPROD)
#error "vec_dot_arm_dotprod.cc needs -march=armv8.2-a+dotprod (kernels/CMakeLists.txt sets it on aarch64)"
#endif

#include <arm_neon.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/quant/arm_neon_blocks.h"
#include "kernels/quant/blocks.h"

namespace qkv {
namespace {

// Blocks of 32 against Q8_0 (A = BlockQ8_0), or Q4_1/Q5_1 against Q8_1 with
// the min term m * s summed in one scalar, as Dot32 / Dot32Min.
template <class B, class A>
float Dot32(const uint8_t* row, const A* a, size_t nb) {
  constexpr bool kMin = kHasMin<B>;
  Acc acc;
  float summs = 0.0f;
  for (size_t i = 0; i < nb; ++i) {
    const uint8_t* b = row + i * sizeof(B);
    if constexpr (kMin) summs = std::fma(Half(b + offsetof(B, m)), Half(reinterpret_cast<const uint8_t*>(&a[i].s)), summs);
    int8x16_t w0, w1;
    Decode32<B>(b, &w0, &w1);
    const float d = Half(b + offsetof(B, d)) * Half(reinterpret_cast<const uint8_t*>(&a[i].d));
    acc.fma(d, Dot16(w0, vld1q_s8(a[i].qs)), Dot16(w1, vld1q_s8(a[i].qs + 16)));
  }
  if constexpr (kMin) return acc.sum() + summs;
  return acc.sum();
}

// The K-quants and IQ4_XS: per super-block the lanes' integer sums with each
// 16 values' scale (lanes 0-3 take the first 16 values of each 32, lanes 4-7
// the second), one f32 fused multiply-add per lane with a.d * d, and the min
// terms as the reference adds them (KMins).
template <class B>
float DotK(const uint8_t* row, const BlockQ8_K* a, size_t nb) {
  constexpr KMins kMins = kKMins<B>;
  Acc acc;
  float accm[4] = {0, 0, 0, 0};
  float summs = 0.0f;
  KRow k;
  for (size_t i = 0; i < nb; ++i) {
    DecodeK<B>(row + i * sizeof(B), &k);
    const float d = a[i].d * k.d;
    if constexpr (kMins != KMins::kNone) {
      const float dmin = -a[i].d * k.dmin;
      int32_t mins[8];
      MinTerms(k, a[i].bsums, mins);
      if constexpr (kMins == KMins::kLanes) {
        acc.fma(dmin, vld1q_s32(mins), vld1q_s32(mins + 4));
      } else if constexpr (kMins == KMins::kPairs) {
        for (int p = 0; p < 4; ++p) accm[p] = std::fma(dmin, static_cast<float>(mins[2 * p] + mins[2 * p + 1]), accm[p]);
      } else {
        int32_t total = 0;
        for (int j = 0; j < 8; ++j) total += mins[j];
        summs = std::fma(dmin, static_cast<float>(total), summs);
      }
    }
    int32x4_t l0 = vdupq_n_s32(0), l1 = vdupq_n_s32(0);
    for (int c = 0; c < 8; ++c) {
      l0 = vmlaq_n_s32(l0, Dot16(vld1q_s8(k.w + 32 * c), vld1q_s8(a[i].qs + 32 * c)), k.sc[2 * c]);
      l1 = vmlaq_n_s32(l1, Dot16(vld1q_s8(k.w + 32 * c + 16), vld1q_s8(a[i].qs + 32 * c + 16)), k.sc[2 * c + 1]);
    }
    acc.fma(d, l0, l1);
  }
  if constexpr (kMins == KMins::kPairs) return acc.sum() + ((accm[0] + accm[2]) + (accm[1] + accm[3]));
  if constexpr (kMins == KMins::kTotal) return acc.sum() + summs;
  return acc.sum();
}

template <class Dot>
void Rows(const void* rows, size_t row_bytes, size_t n_rows, float* y, Dot&& dot) {
  const auto* base = static_cast<const uint8_t*>(rows);
  for (size_t r = 0; r < n_rows; ++r) y[r] = dot(base + r * row_bytes);
}

}  // namespace

bool arm_dotprod_kernel(DType t) {
  return dtype_is_quantized(t);  // every block type
}

bool arm_dotprod_dot_rows(DType t, const void* rows, size_t cols, const void* xa, float* y, size_t n_rows) {
  const auto* a0 = static_cast<const BlockQ8_0*>(xa);
  const auto* a1 = static_cast<const BlockQ8_1*>(xa);
  const auto* ak = static_cast<const BlockQ8_K*>(xa);
  const size_t nb = cols / 32, nk = cols / kQK;
  auto rows32 = [&](auto block, const auto* a) {
    using B = decltype(block);
    Rows(rows, nb * sizeof(B), n_rows, y, [&](const uint8_t* r) { return Dot32<B>(r, a, nb); });
    return true;
  };
  auto rowsk = [&](auto block) {
    using B = decltype(block);
    Rows(rows, nk * sizeof(B), n_rows, y, [&](const uint8_t* r) { return DotK<B>(r, ak, nk); });
    return true;
  };
  switch (t) {
    case DType::Q8_0: return rows32(BlockQ8_0{}, a0);
    case DType::Q4_0: return rows32(BlockQ4_0{}, a0);
    case DType::Q5_0: return rows32(BlockQ5_0{}, a0);
    case DType::IQ4_NL: return rows32(BlockIQ4_NL{}, a0);
    case DType::Q4_1: return rows32(BlockQ4_1{}, a1);
    case DType::Q5_1: return rows32(BlockQ5_1{}, a1);
    case DType::Q2_K: return rowsk(BlockQ2_K{});
    case DType::Q3_K: return rowsk(BlockQ3_K{});
    case DType::Q4_K: return rowsk(BlockQ4_K{});
    case DType::Q5_K: return rowsk(BlockQ5_K{});
    case DType::Q6_K: return rowsk(BlockQ6_K{});
    case DType::IQ4_XS: return rowsk(BlockIQ4_XS{});
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

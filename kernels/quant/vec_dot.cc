#include "kernels/quant/vec_dot.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/error.h"
#include "kernels/machine/cpu_features.h"
#include "kernels/quant/activation.h"
#include "kernels/quant/row_groups.h"
#include "kernels/quant/gemm_amx.h"
#include "kernels/quant/gemm_arm_dotprod.h"
#include "kernels/quant/gemm_arm_i8mm.h"
#include "kernels/quant/vec_dot_arm_dotprod.h"
#include "kernels/quant/gemm_avx2_lanes.h"
#include "kernels/quant/vec_dot_avxvnni.h"
#include "kernels/transpose16x16.h"
#include "hwy/aligned_allocator.h"
#include "hwy/cache_control.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/quant/vec_dot.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace qkv {
namespace HWY_NAMESPACE {

// 8 f32 lanes, as one AVX2 register of ggml's kernels.
struct Acc8 {
  float a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  HWY_INLINE void fma(float d, const int32_t* lanes) {
    for (int l = 0; l < 8; ++l) a[l] = std::fma(d, static_cast<float>(lanes[l]), a[l]);
  }
  HWY_INLINE float sum() const {
    float h[4];
    for (int i = 0; i < 4; ++i) h[i] = a[i + 4] + a[i];
    return (h[0] + h[2]) + (h[1] + h[3]);
  }
};

// lanes[l] += sum over k < n with (k % 32) / 4 == l of sc(k) * w[k] * a[k],
// sc(k) = scales[k / per] (scales == nullptr: 1).
template <size_t n, size_t per>
HWY_INLINE void Lanes(const int8_t* HWY_RESTRICT w, const int8_t* HWY_RESTRICT a, const int* scales,
                      int32_t* HWY_RESTRICT lanes) {
  static_assert(per == 16 || per == 32, "sub-blocks of 16 or 32 values");
  for (size_t base = 0; base < n; base += 32) {
    int32_t prod[32];
    for (size_t i = 0; i < 32; ++i) prod[i] = int32_t(w[base + i]) * int32_t(a[base + i]);
    for (int l = 0; l < 8; ++l) {
      const int32_t part = prod[4 * l] + prod[4 * l + 1] + prod[4 * l + 2] + prod[4 * l + 3];
      const int s = scales == nullptr ? 1 : per == 32 ? scales[base / 32] : scales[base / 16 + (l >= 4)];
      lanes[l] += s * part;
    }
  }
}

HWY_INLINE int Nibble(const uint8_t* qs, size_t k) { return k < 16 ? qs[k] & 15 : qs[k - 16] >> 4; }
HWY_INLINE float H(uint16_t h) { return f16_to_f32(h); }

// The f32 scales d (and, with kMin, Q8_1's sums s) of nb activation blocks, as
// the SIMD matvec and GEMM kernels read them (their buffers zero-padded past nb
// by the caller, for whole-vector loads).
template <bool kMin, class A>
HWY_INLINE void ActScalesF32(const A* blocks, size_t nb, float* d, float* s) {
  for (size_t i = 0; i < nb; ++i) d[i] = H(blocks[i].d);
  if constexpr (kMin) {
    for (size_t i = 0; i < nb; ++i) s[i] = H(blocks[i].s);
  }
}

template <class B>
HWY_INLINE B LoadBlock(const uint8_t* p) {
  B b;
  std::memcpy(&b, p, sizeof(B));
  return b;
}

// Weight values of one block as int8 (offsets applied where ggml applies them
// to the weights: Q4_0 -8, Q5_0 -16, Q3_K -4, Q6_K -32, IQ4 table).
// 32 values from 16 bytes of nibbles (low nibbles first), each minus `off`.
HWY_INLINE void Nibbles(const uint8_t* qs, int off, int8_t* w) {
  for (size_t l = 0; l < 16; ++l) {
    w[l] = static_cast<int8_t>((qs[l] & 15) - off);
    w[16 + l] = static_cast<int8_t>((qs[l] >> 4) - off);
  }
}
HWY_INLINE void Values(const BlockQ4_0& b, int8_t* w) { Nibbles(b.qs, 8, w); }
HWY_INLINE void Values(const BlockQ4_1& b, int8_t* w) { Nibbles(b.qs, 0, w); }
HWY_INLINE void Values(const BlockQ5_0& b, int8_t* w) {
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  for (size_t k = 0; k < 32; ++k) w[k] = static_cast<int8_t>((Nibble(b.qs, k) | int((qh >> k) & 1) << 4) - 16);
}
HWY_INLINE void Values(const BlockQ5_1& b, int8_t* w) {
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  for (size_t k = 0; k < 32; ++k) w[k] = static_cast<int8_t>(Nibble(b.qs, k) | int((qh >> k) & 1) << 4);
}
HWY_INLINE void Values(const BlockQ8_0& b, int8_t* w) { std::memcpy(w, b.qs, 32); }
HWY_INLINE void Table(const uint8_t* qs, int8_t* w) {
  for (size_t l = 0; l < 16; ++l) {
    w[l] = kIQ4NLValues[qs[l] & 15];
    w[16 + l] = kIQ4NLValues[qs[l] >> 4];
  }
}
HWY_INLINE void Values(const BlockIQ4_NL& b, int8_t* w) { Table(b.qs, w); }

// Blocks of 32 against Q8_0: acc += (d_w * d_a) * lanes.
template <class B>
HWY_INLINE float Dot32(const uint8_t* row, const BlockQ8_0* a, size_t nb) {
  Acc8 acc;
  int8_t w[32];
  for (size_t i = 0; i < nb; ++i) {
    const B b = LoadBlock<B>(row + i * sizeof(B));
    Values(b, w);
    int32_t lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    Lanes<32, 32>(w, a[i].qs, nullptr, lanes);
    acc.fma(H(b.d) * H(a[i].d), lanes);
  }
  return acc.sum();
}

// Q4_1 / Q5_1 against Q8_1: the min term m * s summed in one scalar.
template <class B>
HWY_INLINE float Dot32Min(const uint8_t* row, const BlockQ8_1* a, size_t nb) {
  Acc8 acc;
  float summs = 0.0f;
  int8_t w[32];
  for (size_t i = 0; i < nb; ++i) {
    const B b = LoadBlock<B>(row + i * sizeof(B));
    summs = std::fma(H(b.m), H(a[i].s), summs);
    Values(b, w);
    int32_t lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    Lanes<32, 32>(w, a[i].qs, nullptr, lanes);
    acc.fma(H(b.d) * H(a[i].d), lanes);
  }
  return acc.sum() + summs;
}

HWY_INLINE float DotQ2K(const uint8_t* row, const BlockQ8_K* a, size_t nb) {
  Acc8 acc;
  int8_t w[kQK];
  int sc[16];
  for (size_t i = 0; i < nb; ++i) {
    const BlockQ2_K b = LoadBlock<BlockQ2_K>(row + i * sizeof(BlockQ2_K));
    const float d = a[i].d * H(b.d), dmin = -a[i].d * H(b.dmin);
    int32_t mins[8];
    for (int l = 0; l < 8; ++l) {
      mins[l] = (b.scales[2 * l] >> 4) * a[i].bsums[2 * l] + (b.scales[2 * l + 1] >> 4) * a[i].bsums[2 * l + 1];
    }
    acc.fma(dmin, mins);
    for (int j = 0; j < 16; ++j) sc[j] = b.scales[j] & 15;
    for (size_t h = 0; h < 2; ++h) {
      for (int sh = 0; sh < 4; ++sh) {
        for (size_t l = 0; l < 32; ++l) w[128 * h + 32 * sh + l] = static_cast<int8_t>((b.qs[32 * h + l] >> (2 * sh)) & 3);
      }
    }
    int32_t lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    Lanes<kQK, 16>(w, a[i].qs, sc, lanes);
    acc.fma(d, lanes);
  }
  return acc.sum();
}

HWY_INLINE float DotQ3K(const uint8_t* row, const BlockQ8_K* a, size_t nb) {
  Acc8 acc;
  int8_t w[kQK];
  int sc[16];
  for (size_t i = 0; i < nb; ++i) {
    const BlockQ3_K b = LoadBlock<BlockQ3_K>(row + i * sizeof(BlockQ3_K));
    const float d = a[i].d * H(b.d);
    for (int j = 0; j < 16; ++j) sc[j] = q3k_scale(b.scales, j);
    for (size_t h = 0; h < 2; ++h) {
      for (int sh = 0; sh < 4; ++sh) {
        const int bit = 4 * int(h) + sh;
        for (size_t l = 0; l < 32; ++l) {
          const int low = (b.qs[32 * h + l] >> (2 * sh)) & 3;
          w[128 * h + 32 * sh + l] = static_cast<int8_t>(low - 4 + 4 * ((b.hmask[l] >> bit) & 1));
        }
      }
    }
    int32_t lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    Lanes<kQK, 16>(w, a[i].qs, sc, lanes);
    acc.fma(d, lanes);
  }
  return acc.sum();
}

// A Q4_K (kFifth == false) or Q5_K block's 256 values, 8 scales and 8 mins.
template <class B, bool kFifth>
HWY_INLINE void K4Values(const B& b, int8_t* w, int* sc, int* m) {
  for (int j = 0; j < 8; ++j) {
    uint8_t s, mm;
    k4_scale_min(b.scales, j, &s, &mm);
    sc[j] = s;
    m[j] = mm;
  }
  for (size_t c = 0; c < 4; ++c) {
    for (size_t l = 0; l < 32; ++l) {
      const int q = b.qs[32 * c + l];
      int lo = q & 15, hi = q >> 4;
      if constexpr (kFifth) {
        lo |= ((b.qh[l] >> (2 * c)) & 1) << 4;
        hi |= ((b.qh[l] >> (2 * c + 1)) & 1) << 4;
      }
      w[64 * c + l] = static_cast<int8_t>(lo);
      w[64 * c + 32 + l] = static_cast<int8_t>(hi);
    }
  }
}

// A Q6_K block's 256 values (minus 32) and 16 scales.
HWY_INLINE void Q6Values(const BlockQ6_K& b, int8_t* w, int* sc) {
  for (int j = 0; j < 16; ++j) sc[j] = b.scales[j];
  for (size_t h = 0; h < 2; ++h) {
    for (size_t l = 0; l < 32; ++l) {
      const int q0 = b.ql[64 * h + l], q1 = b.ql[64 * h + 32 + l], qh = b.qh[32 * h + l];
      w[128 * h + l] = static_cast<int8_t>(((q0 & 15) | (qh & 3) << 4) - 32);
      w[128 * h + 32 + l] = static_cast<int8_t>(((q1 & 15) | ((qh >> 2) & 3) << 4) - 32);
      w[128 * h + 64 + l] = static_cast<int8_t>(((q0 >> 4) | ((qh >> 4) & 3) << 4) - 32);
      w[128 * h + 96 + l] = static_cast<int8_t>(((q1 >> 4) | ((qh >> 6) & 3) << 4) - 32);
    }
  }
}

// Q4_K (fifth == false) and Q5_K: the min terms in 4 f32 lanes (Q4_K) or one
// f32 (Q5_K), as ggml's two kernels differ there.
template <class B, bool kFifth>
HWY_INLINE float DotK4(const uint8_t* row, const BlockQ8_K* a, size_t nb) {
  Acc8 acc;
  float accm[4] = {0, 0, 0, 0};
  float summs = 0.0f;
  int8_t w[kQK];
  int sc[8];
  for (size_t i = 0; i < nb; ++i) {
    const B b = LoadBlock<B>(row + i * sizeof(B));
    const float d = a[i].d * H(b.d), dmin = -a[i].d * H(b.dmin);
    int m[8];
    K4Values<B, kFifth>(b, w, sc, m);
    int32_t msum[8];
    for (int j = 0; j < 8; ++j) msum[j] = m[j] * (a[i].bsums[2 * j] + a[i].bsums[2 * j + 1]);
    if constexpr (kFifth) {
      int32_t total = 0;
      for (int j = 0; j < 8; ++j) total += msum[j];
      summs = std::fma(dmin, static_cast<float>(total), summs);
    } else {
      for (int p = 0; p < 4; ++p) accm[p] = std::fma(dmin, static_cast<float>(msum[2 * p] + msum[2 * p + 1]), accm[p]);
    }
    int32_t lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    Lanes<kQK, 32>(w, a[i].qs, sc, lanes);
    acc.fma(d, lanes);
  }
  if constexpr (kFifth) return acc.sum() + summs;
  return acc.sum() + ((accm[0] + accm[2]) + (accm[1] + accm[3]));
}

HWY_INLINE float DotQ6K(const uint8_t* row, const BlockQ8_K* a, size_t nb) {
  Acc8 acc;
  int8_t w[kQK];
  int sc[16];
  for (size_t i = 0; i < nb; ++i) {
    const BlockQ6_K b = LoadBlock<BlockQ6_K>(row + i * sizeof(BlockQ6_K));
    const float d = a[i].d * H(b.d);
    Q6Values(b, w, sc);
    int32_t lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    Lanes<kQK, 16>(w, a[i].qs, sc, lanes);
    acc.fma(d, lanes);
  }
  return acc.sum();
}

HWY_INLINE float DotIQ4XS(const uint8_t* row, const BlockQ8_K* a, size_t nb) {
  Acc8 acc;
  int8_t w[kQK];
  int sc[8];
  for (size_t i = 0; i < nb; ++i) {
    const BlockIQ4_XS b = LoadBlock<BlockIQ4_XS>(row + i * sizeof(BlockIQ4_XS));
    for (int j = 0; j < 8; ++j) sc[j] = iq4xs_scale(b, j);
    for (size_t j = 0; j < 8; ++j) Table(b.qs + 16 * j, w + 32 * j);
    int32_t lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    Lanes<kQK, 32>(w, a[i].qs, sc, lanes);
    acc.fma(H(b.d) * a[i].d, lanes);
  }
  return acc.sum();
}

HWY_INLINE float DotRow(DType t, const uint8_t* row, size_t cols, const void* xa) {
  const auto* a0 = static_cast<const BlockQ8_0*>(xa);
  const auto* a1 = static_cast<const BlockQ8_1*>(xa);
  const auto* ak = static_cast<const BlockQ8_K*>(xa);
  switch (t) {
    case DType::Q8_0: return Dot32<BlockQ8_0>(row, a0, cols / 32);
    case DType::Q4_0: return Dot32<BlockQ4_0>(row, a0, cols / 32);
    case DType::Q5_0: return Dot32<BlockQ5_0>(row, a0, cols / 32);
    case DType::IQ4_NL: return Dot32<BlockIQ4_NL>(row, a0, cols / 32);
    case DType::Q4_1: return Dot32Min<BlockQ4_1>(row, a1, cols / 32);
    case DType::Q5_1: return Dot32Min<BlockQ5_1>(row, a1, cols / 32);
    case DType::Q2_K: return DotQ2K(row, ak, cols / kQK);
    case DType::Q3_K: return DotQ3K(row, ak, cols / kQK);
    case DType::Q4_K: return DotK4<BlockQ4_K, false>(row, ak, cols / kQK);
    case DType::Q5_K: return DotK4<BlockQ5_K, true>(row, ak, cols / kQK);
    case DType::Q6_K: return DotQ6K(row, ak, cols / kQK);
    case DType::IQ4_XS: return DotIQ4XS(row, ak, cols / kQK);
    default: return 0.0f;  // F32/F16/BF16 never reach here (quant_dot_rows checks)
  }
}

// ---- Row groups' matvec (row_groups_vnni-inl.h, row_groups_avx2-inl.h) ----

// The activation's per-block terms, once per call: da (f32 of d), sa (Q8_1:
// f32 of s) and corr = -offset * (the block's byte sum).
struct GroupAct {
  std::vector<float> da, sa;
  std::vector<int32_t> corr;
  template <bool kMin, class A>
  void Prepare(const A* a, size_t nb, int offset) {
    da.resize(nb);
    sa.resize(nb);
    corr.resize(nb);
    for (size_t i = 0; i < nb; ++i) {
      da[i] = H(a[i].d);
      if constexpr (kMin) sa[i] = H(a[i].s);
      int32_t sum = 0;
      for (size_t k = 0; k < 32; ++k) sum += a[i].qs[k];
      corr[i] = -offset * sum;
    }
  }
};

// G groups (group g at w + g * spacing * gstride, its outputs at y + g *
// spacing * kRowGroup) against the activation a: per block
// column and group, 8 vpdpbusd of the lines against the activation's words
// (broadcast) in two chains from corr, then
//   acc = fma(float(isum), dw * da, acc)  [+ fma(mw, sa, acc)],
// row_group_dot's arithmetic (kernels/quant/row_groups.h).
// kernel(integral_constant G, w, spacing, y): the groups split into S runs of
// q = n_groups / S consecutive groups, pass k taking group k of each run
// (spacing q), then the n_groups % S left one at a time. A run is one
// address range, so each stream's prefetch runs on into its next group;
// passes over S consecutive groups left the first prefetch distance of each
// group but the first to demand misses. Zen 5 guest, passes of 2 groups,
// bench_linear '^matvec_row_groups/(q4_0|q5_0)/(5632x2048|2048x5632)/2',
// GB/s runs / consecutive: Q4_0 50-56 / 42-51, Q5_0 49-54 / 39-48 (one
// thread: 27-28 / 25-27, 28-29 / 23-25); four runs measured the same as two.
template <size_t S, class Kernel>
HWY_INLINE void GroupStreams(const uint8_t* groups, size_t gstride, size_t n_groups, float* y, const Kernel& kernel) {
  const size_t q = n_groups / S;
  for (size_t k = 0; k < q; ++k) kernel(std::integral_constant<size_t, S>(), groups + k * gstride, q, y + k * kRowGroup);
  for (size_t g = S * q; g < n_groups; ++g) {
    kernel(std::integral_constant<size_t, 1>(), groups + g * gstride, 1, y + g * kRowGroup);
  }
}

#if HWY_TARGET == HWY_AVX3_DL
#include "kernels/quant/vec_dot_vnni-inl.h"
#include "kernels/quant/row_groups_vnni-inl.h"
#include "kernels/quant/gemm_vnni-inl.h"
#include "kernels/quant/gemm_vnni_packed-inl.h"
#include "kernels/quant/gemm_vnni_lanes-inl.h"
#undef QKV_VNNI_TARGET
#undef QKV_VNNI_INLINE
#undef QKV_GROUP_TARGET
#undef QKV_GROUP_INLINE
#undef QKV_UNROLL
#elif HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
#include "kernels/quant/vec_dot_hwy-inl.h"
#include "kernels/quant/gemm_hwy-inl.h"
#include "kernels/quant/row_groups_avx2-inl.h"
#undef QKV_UNROLL
#endif

// simd == false: the scalar kernels above (the reference), on every target.
void DotRows(DType t, const void* rows, size_t cols, const void* xa, float* y, size_t n_rows, bool simd) {
#if HWY_TARGET == HWY_AVX3_DL
  if (simd && DotRowsVnni(t, rows, cols, xa, y, n_rows)) return;
#elif HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
  if (simd && DotRowsHwy(t, rows, cols, xa, y, n_rows)) return;
#else
  (void)simd;
#endif
  const size_t stride = dtype_row_bytes(t, cols);
  const auto* base = static_cast<const uint8_t*>(rows);
  for (size_t r = 0; r < n_rows; ++r) y[r] = DotRow(t, base + r * stride, cols, xa);
}

// Row groups (kernels/quant/row_groups.h), the scalar kernels: each row
// gathered out of its group (row_group_row), then row_group_dot's arithmetic.
template <class B, class A>
HWY_INLINE void GroupDotScalar(DType t, const uint8_t* groups, size_t cols, const void* xa, float* y, size_t n_groups) {
  constexpr bool kMin = std::is_same_v<B, BlockQ4_1> || std::is_same_v<B, BlockQ5_1>;
  const auto* a = static_cast<const A*>(xa);
  const size_t nb = cols / 32, rb = nb * sizeof(B);
  std::vector<uint8_t> row(rb);
  int8_t w[32];
  for (size_t g = 0; g < n_groups; ++g) {
    for (size_t r = 0; r < kRowGroup; ++r) {
      row_group_row(t, groups + g * kRowGroup * rb, cols, r, row.data());
      float acc = 0.0f;
      for (size_t i = 0; i < nb; ++i) {
        const B b = LoadBlock<B>(row.data() + i * sizeof(B));
        Values(b, w);
        int32_t isum = 0;
        for (size_t k = 0; k < 32; ++k) isum += int32_t(w[k]) * int32_t(a[i].qs[k]);
        acc = std::fma(static_cast<float>(isum), H(b.d) * H(a[i].d), acc);
        if constexpr (kMin) acc = std::fma(H(b.m), H(a[i].s), acc);
      }
      y[g * kRowGroup + r] = acc;
    }
  }
}

template <class B>
HWY_INLINE void GroupDotScalarK(DType t, const uint8_t* groups, size_t cols, const void* xa, float* y,
                                size_t n_groups) {
  constexpr bool kQ6 = std::is_same_v<B, BlockQ6_K>;
  const auto* a = static_cast<const BlockQ8_K*>(xa);
  const size_t nb = cols / kQK, rb = nb * sizeof(B);
  std::vector<uint8_t> row(rb);
  int8_t w[kQK];
  int sc[16], m[8];
  for (size_t g = 0; g < n_groups; ++g) {
    for (size_t r = 0; r < kRowGroup; ++r) {
      row_group_row(t, groups + g * kRowGroup * rb, cols, r, row.data());
      float acc = 0.0f;
      for (size_t i = 0; i < nb; ++i) {
        const B b = LoadBlock<B>(row.data() + i * sizeof(B));
        const float da = a[i].d;
        if constexpr (kQ6) {
          Q6Values(b, w, sc);
          int32_t sum = 0;
          for (size_t j = 0; j < 16; ++j) {
            int32_t isum = 0;
            for (size_t k = 16 * j; k < 16 * j + 16; ++k) isum += int32_t(w[k]) * int32_t(a[i].qs[k]);
            sum += sc[j] * isum;
          }
          acc = std::fma(static_cast<float>(sum), da * H(b.d), acc);
        } else {
          K4Values<B, std::is_same_v<B, BlockQ5_K>>(b, w, sc, m);
          float super = 0.0f;  // the super-block's sum without da, then times da
          for (size_t j = 0; j < 8; ++j) {
            int32_t isum = 0;
            for (size_t k = 32 * j; k < 32 * j + 32; ++k) isum += int32_t(w[k]) * int32_t(a[i].qs[k]);
            super = std::fma(static_cast<float>(isum), H(b.d) * static_cast<float>(sc[j]), super);
            const float asum = static_cast<float>(a[i].bsums[2 * j] + a[i].bsums[2 * j + 1]);
            super = std::fma(asum, -H(b.dmin) * static_cast<float>(m[j]), super);
          }
          acc = std::fma(super, da, acc);
        }
      }
      y[g * kRowGroup + r] = acc;
    }
  }
}

// simd == false: the scalar kernel, on every target.
void GroupDot(DType t, const void* groups, size_t cols, const void* xa, float* y, size_t n_groups, bool simd) {
#if HWY_TARGET == HWY_AVX3_DL
  if (simd && GroupDotVnni(t, groups, cols, xa, y, n_groups)) return;
#elif HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
  if (simd && GroupDotAvx2(t, groups, cols, xa, y, n_groups)) return;
#else
  (void)simd;
#endif
  const auto* w = static_cast<const uint8_t*>(groups);
  switch (t) {
    case DType::Q4_0: return GroupDotScalar<BlockQ4_0, BlockQ8_0>(t, w, cols, xa, y, n_groups);
    case DType::Q4_1: return GroupDotScalar<BlockQ4_1, BlockQ8_1>(t, w, cols, xa, y, n_groups);
    case DType::Q5_0: return GroupDotScalar<BlockQ5_0, BlockQ8_0>(t, w, cols, xa, y, n_groups);
    case DType::Q5_1: return GroupDotScalar<BlockQ5_1, BlockQ8_1>(t, w, cols, xa, y, n_groups);
    case DType::Q8_0: return GroupDotScalar<BlockQ8_0, BlockQ8_0>(t, w, cols, xa, y, n_groups);
    case DType::IQ4_NL: return GroupDotScalar<BlockIQ4_NL, BlockQ8_0>(t, w, cols, xa, y, n_groups);
    case DType::Q4_K: return GroupDotScalarK<BlockQ4_K>(t, w, cols, xa, y, n_groups);
    case DType::Q5_K: return GroupDotScalarK<BlockQ5_K>(t, w, cols, xa, y, n_groups);
    case DType::Q6_K: return GroupDotScalarK<BlockQ6_K>(t, w, cols, xa, y, n_groups);
    default: return;  // row_group_dot checks the type
  }
}

// Whether GroupDot has a SIMD kernel for t on this target.
bool HasGroupDot(DType t) {
#if HWY_TARGET == HWY_AVX3_DL
  return row_groups_layout(t);
#elif HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
  return Avx2GroupType(t);
#else
  (void)t;
  return false;
#endif
}

// The batched GEMM (kernels/quant/gemm_vnni-inl.h, or with tables
// gemm_vnni_packed-inl.h; on AVX2 and AVX3 gemm_hwy-inl.h, without tables);
// false: none on this target.
bool Gemm(DType t, const void* rows, size_t cols, const void* xa, size_t M, float* y, size_t ldy, size_t n_rows,
          const float* tables, bool lanes, bool groups) {
#if HWY_TARGET == HWY_AVX3_DL
  if (groups) return tables != nullptr && GemmPackedGroups(t, rows, cols, tables, M, y, ldy, n_rows);
  if (tables != nullptr && lanes) return GemmLanes(t, rows, cols, tables, M, y, ldy, n_rows);
  if (tables != nullptr) return GemmPacked(t, rows, cols, tables, M, y, ldy, n_rows);
  return GemmVnni(t, rows, cols, xa, M, y, ldy, n_rows);
#elif HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
  (void)lanes;
  return tables == nullptr && !groups && GemmHwy(t, rows, cols, xa, M, y, ldy, n_rows);
#else
  (void)t, (void)rows, (void)cols, (void)xa, (void)M, (void)y, (void)ldy, (void)n_rows, (void)tables, (void)lanes, (void)groups;
  return false;
#endif
}

// The packed kernel's input tables; false: none on this target.
bool GemmTables(DType t, const void* xa, size_t cols, size_t M, float* tables, bool lanes) {
#if HWY_TARGET == HWY_AVX3_DL
  if (lanes && quant_gemm_lanes(t, M)) return LanesTables(t, xa, cols, M, tables);
  return PackedTables(t, xa, cols, M, tables);
#else
  (void)t, (void)xa, (void)cols, (void)M, (void)tables, (void)lanes;
  return false;
#endif
}

size_t GemmTableFloats(DType t, size_t cols) {
#if HWY_TARGET == HWY_AVX3_DL
  return PackedTableFloats(t, cols);
#else
  (void)t, (void)cols;
  return 0;
#endif
}

bool HasGemm(DType t) {
#if HWY_TARGET == HWY_AVX3_DL
  return dtype_is_quantized(t);
#else
  (void)t;
  return false;
#endif
}

// Whether quant_gemm without tables has a kernel for t on this target.
bool HasRowsGemm(DType t) {
#if HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
  return dtype_is_quantized(t);
#else
  (void)t;
  return false;
#endif
}

const char* GemmName() {
#if HWY_TARGET == HWY_AVX3_DL
  return "AVX-512 VNNI integer block GEMM";
#elif HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
  return "AVX2 integer block GEMM";
#else
  return "none";
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace qkv
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qkv {
HWY_EXPORT(DotRows);
HWY_EXPORT(Gemm);
HWY_EXPORT(HasGemm);
HWY_EXPORT(HasRowsGemm);
HWY_EXPORT(GemmName);
HWY_EXPORT(GemmTables);
HWY_EXPORT(GemmTableFloats);
HWY_EXPORT(GroupDot);
HWY_EXPORT(HasGroupDot);

ActType act_type(DType t) {
  switch (t) {
    case DType::Q4_1:
    case DType::Q5_1: return ActType::kQ8_1;
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::IQ4_XS: return ActType::kQ8_K;
    default: return ActType::kQ8_0;
  }
}

size_t act_bytes(DType t, size_t n) {
  switch (act_type(t)) {
    case ActType::kQ8_1: return n / 32 * sizeof(BlockQ8_1);
    case ActType::kQ8_K: return n / kQK * sizeof(BlockQ8_K);
    case ActType::kQ8_0: break;
  }
  return n / 32 * sizeof(BlockQ8_0);
}

void quantize_activation(DType t, const float* x, size_t n, void* out) {
  QKV_CHECK(dtype_is_quantized(t) && dtype_row_ok(t, n), "quantize_activation: ", n, " values for ",
            dtype_name(t), " weights");
  switch (act_type(t)) {
    case ActType::kQ8_0: return quantize_row_q8_0(x, n, static_cast<BlockQ8_0*>(out));
    case ActType::kQ8_1: return quantize_row_q8_1(x, n, static_cast<BlockQ8_1*>(out));
    case ActType::kQ8_K: return quantize_row_q8_K(x, n, static_cast<BlockQ8_K*>(out));
  }
}

namespace {

// Q8_0 where the Highway kernels have no matvec for it (AVX2, AVX-512
// without VNNI: vpmaddubsw's signed operand cannot hold ggml's -128 weight
// bytes): the AVX-VNNI kernel with vpdpbusd emulated in AVX2 (exact sums,
// outputs equal to the scalar kernel's bit for bit). Zen 4 guest under
// QKV_ISA=avx2, single thread: 26 GB/s against the scalar loop's 1.1 with the
// weights in L2 (bench_avxvnni q8_0), 143M Q8_0 decode 131.5-131.8 tok/s
// against 117-123 (alternated runs, the host busy).
bool q8_0_takes_emulated_vnni(DType t) {
  const CpuFeatures& f = cpu_features();
  return t == DType::Q8_0 && f.avx2 && !f.avx512_vnni && avxvnni_kernel(t) && !avxvnni_takes(t);
}

}  // namespace

void quant_dot_rows(DType t, const void* rows, size_t cols, const void* xa, float* y, size_t n_rows) {
  QKV_CHECK(dtype_is_quantized(t) && dtype_row_ok(t, cols), "quant_dot_rows: ", cols, " columns of ",
            dtype_name(t));
  if (arm_dotprod_takes(t) && arm_dotprod_dot_rows(t, rows, cols, xa, y, n_rows)) return;
  if (avxvnni_takes(t) && avxvnni_dot_rows(t, rows, cols, xa, y, n_rows)) return;
  if (q8_0_takes_emulated_vnni(t) && avxvnni_dot_rows(t, rows, cols, xa, y, n_rows, AvxVnniOp::kEmulated)) return;
  HWY_DYNAMIC_DISPATCH(DotRows)(t, rows, cols, xa, y, n_rows, true);
}

void quant_dot_rows_scalar(DType t, const void* rows, size_t cols, const void* xa, float* y, size_t n_rows) {
  QKV_CHECK(dtype_is_quantized(t) && dtype_row_ok(t, cols), "quant_dot_rows_scalar: ", cols, " columns of ",
            dtype_name(t));
  HWY_DYNAMIC_DISPATCH(DotRows)(t, rows, cols, xa, y, n_rows, false);
}

void row_group_dot(DType t, const void* groups, size_t cols, const void* xa, float* y, size_t n_groups) {
  QKV_CHECK(row_groups_layout(t) && dtype_row_ok(t, cols), "row_group_dot: ", cols, " columns of ", dtype_name(t),
            " (row groups hold the 32-value block types, Q4_K, Q5_K and Q6_K)");
  HWY_DYNAMIC_DISPATCH(GroupDot)(t, groups, cols, xa, y, n_groups, true);
}

void row_group_dot_scalar(DType t, const void* groups, size_t cols, const void* xa, float* y, size_t n_groups) {
  QKV_CHECK(row_groups_layout(t) && dtype_row_ok(t, cols), "row_group_dot_scalar: ", cols, " columns of ",
            dtype_name(t), " (row groups hold the 32-value block types, Q4_K, Q5_K and Q6_K)");
  HWY_DYNAMIC_DISPATCH(GroupDot)(t, groups, cols, xa, y, n_groups, false);
}

bool row_group_dot_simd(DType t) { return HWY_DYNAMIC_DISPATCH(HasGroupDot)(t); }

bool row_groups_chosen(DType t) {
  return row_groups_layout(t) && dtype_block_values(t) == 32 && row_group_dot_simd(t) &&
         (quant_gemm_available(t) || avx2_lanes_takes(t, kAvx2LanesMinInputs));
}

bool quant_gemm_available(DType t) { return HWY_DYNAMIC_DISPATCH(HasGemm)(t); }

bool quant_gemm_rows_available(DType t) { return avxvnni_takes(t) || HWY_DYNAMIC_DISPATCH(HasRowsGemm)(t); }

const char* quant_gemm_name() {
  // block_gemm's batches of kQuantGemmAmxMinInputs and more, the VNNI kernels below.
  static_assert(kQuantGemmAmxMinInputs == 16, "the AMX name's figure");
  if (quant_gemm_amx_usable()) return "AMX int8 tiles from 16 inputs, AVX-512 VNNI integer block GEMM below";
  // kernels/quant/vec_dot_avxvnni.h, and from 5 inputs kernels/quant/gemm_avx2_lanes.h.
  static_assert(kAvx2LanesMinInputs == 5, "the lanes kernel's figure in the names");
  if (avxvnni_takes(DType::Q4_0)) return "AVX-VNNI integer block GEMM, inputs in lanes from 5";
  if (arm_dotprod_gemm_takes(DType::Q4_0)) return kArmDotprodGemmName;  // kernels/quant/gemm_arm_dotprod.h
  if (arm_i8mm_takes(DType::Q4_0)) return kArmI8mmGemmName;
  if (avx2_lanes_takes(DType::Q4_0, kAvx2LanesMinInputs)) return "AVX2 integer block GEMM, inputs in lanes from 5";
  return HWY_DYNAMIC_DISPATCH(GemmName)();
}

namespace {
bool g_packed_allowed = true;
bool g_lanes_allowed = true;
bool g_few_allowed = true;
}  // namespace

// The packed kernel exists where the tile kernel's VNNI family does (quant_gemm_available).
bool quant_gemm_packed(size_t M) {
  return g_packed_allowed && M >= kQuantGemmPackedMinInputs && HWY_DYNAMIC_DISPATCH(HasGemm)(DType::Q4_0);
}

void set_quant_gemm_packed(bool allowed) { g_packed_allowed = allowed; }

// The inputs-in-lanes kernel from 8 inputs of the 32-value types and 12 of
// the K-quants (it computes 16 lanes whatever the batch; below these the
// packed kernel measured faster): 16 inputs, 20-40% more GFLOP/s than the
// packed kernel on the 32-value types, 11-37% on the K-quants (bench_linear
// '^matmul(_nolanes)?/TYPE/(5632x2048|576x1536)/(8|12|16)/2', docs/design.md).
bool quant_gemm_lanes(DType t, size_t M) {
  if (!g_lanes_allowed || !quant_gemm_packed(M) || !dtype_is_quantized(t) || M > kQuantGemmLanesMaxInputs) return false;
  return M >= (dtype_block_values(t) == 32 ? kQuantGemmLanesMinInputs : kQuantGemmLanesMinInputsK);
}

void set_quant_gemm_lanes(bool allowed) { g_lanes_allowed = allowed; }

bool quant_gemm_few(DType t, size_t M) {
  return g_few_allowed && M >= 2 && M <= kQuantGemmFewMaxInputs && dtype_is_quantized(t) &&
         dtype_block_values(t) == 256 && quant_gemm_available(t);
}

void set_quant_gemm_few(bool allowed) { g_few_allowed = allowed; }

size_t quant_gemm_table_floats(DType t, size_t cols, size_t M, bool lanes) {
  // Both layouts take the same floats per input; the lanes one has 16 input lanes whatever M.
  return HWY_DYNAMIC_DISPATCH(GemmTableFloats)(t, cols) * (lanes && quant_gemm_lanes(t, M) ? kQuantGemmLanesMaxInputs : M);
}

void quant_gemm_tables(DType t, const void* xa, size_t cols, size_t M, float* tables, bool lanes) {
  QKV_CHECK(dtype_is_quantized(t) && dtype_row_ok(t, cols), "quant_gemm_tables: ", cols, " columns of ",
            dtype_name(t));
  QKV_CHECK(HWY_DYNAMIC_DISPATCH(GemmTables)(t, xa, cols, M, tables, lanes), "quant_gemm_tables: no packed kernel for ",
            dtype_name(t), " on this CPU (check quant_gemm_available)");
}

void quant_gemm(DType t, const void* rows, size_t cols, const void* xa, size_t M, float* y, size_t ldy,
                size_t n_rows, const float* tables, size_t batch, bool row_groups) {
  QKV_CHECK(dtype_is_quantized(t) && dtype_row_ok(t, cols), "quant_gemm: ", cols, " columns of ", dtype_name(t));
  QKV_CHECK(ldy >= n_rows || M <= 1, "quant_gemm: output stride ", ldy, " below the row count ", n_rows);
  // The tables' layout is that of the batch they were made for, which a
  // call of the packed kernel may take a slice of, and one of the lanes kernel not.
  if (batch == 0) batch = M;
  QKV_CHECK(M <= batch, "quant_gemm: ", M, " inputs from tables made for ", batch);
  if (row_groups) {
    QKV_CHECK(row_groups_layout(t) && tables != nullptr && n_rows % kRowGroup == 0, "quant_gemm: row groups of ",
              dtype_name(t), " (", n_rows, " rows", tables == nullptr ? ", no tables" : "",
              ") need a type with row groups, whole groups and the packed or lanes kernel's tables");
  }
  const bool lanes = !row_groups && tables != nullptr && quant_gemm_lanes(t, batch);
  QKV_CHECK(!lanes || M == batch, "quant_gemm: ", M, " of a batch of ", batch,
            " inputs in the inputs-in-lanes layout (a call takes it whole)");
  if (tables == nullptr && !row_groups && arm_i8mm_takes(t) && arm_i8mm_gemm(t, rows, cols, xa, M, y, ldy, n_rows)) return;
  if (tables == nullptr && !row_groups && arm_dotprod_gemm_takes(t) &&
      arm_dotprod_gemm(t, rows, cols, xa, M, y, ldy, n_rows)) return;
  Avx2LanesOp lanes8_op;
  if (tables != nullptr && avx2_lanes_takes(t, batch, &lanes8_op)) {
    avx2_lanes_gemm(t, rows, cols, tables, M, y, ldy, n_rows, lanes8_op, row_groups);
    return;
  }
  if (tables == nullptr && !row_groups && avxvnni_takes(t) && avxvnni_gemm(t, rows, cols, xa, M, y, ldy, n_rows)) return;
  QKV_CHECK(HWY_DYNAMIC_DISPATCH(Gemm)(t, rows, cols, xa, M, y, ldy, n_rows, tables, lanes, row_groups),
            "quant_gemm: no kernel for ", dtype_name(t), row_groups ? " row groups" : "",
            " on this CPU (check quant_gemm_available)");
}

}  // namespace qkv
#endif  // HWY_ONCE

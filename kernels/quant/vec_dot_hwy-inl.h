// 256-bit matvec of the ggml block types for x86 CPUs without AVX-512 VNNI
// (AVX2 machines such as AMD Zen 2/3; AVX-512 CPUs without VNNI): one kernel
// per block size (32-value blocks against Q8_0/Q8_1, 256-value super-blocks
// against Q8_K), each templated over a small block decoder
// (kernels/quant/vec_dot_hwy_blocks-inl.h) that unpacks 32 values per
// register as unsigned bytes u = q + kOffset (or, kSigned, as signed bytes q),
// plus the sub-block scales and the min terms.
//
// One register holds 32 consecutive values. vpmaddubsw sums the products of
// adjacent unsigned weight and signed activation bytes into 16 int16 lanes;
// vpmaddwd (ReorderWidenMulAccumulate) then sums adjacent int16 lanes, times
// the sub-block scale, into 8 int32 lanes: lane l holds values 4l .. 4l + 3,
// exactly lane l of ggml's 8-lane layout (kernels/quant/vec_dot.h). The offset
// is removed exactly by subtracting vpmaddubsw(offset, a), computed once per
// activation block for all rows of a pass; signed weights (IQ4) take
// vpmaddubsw(|q|, a with q's sign) instead. Every int16 pair sum fits: |q| and
// |a| are at most 127 and u at most 63 (tests/test_quant_matvec.cc checks
// activations all at -127). Integer block sums are exact and the
// f32 steps (one fused multiply-add per block and lane, the min terms, the
// final pairwise sum) are the scalar kernel's, in its order: the results equal
// the scalar path bit for bit.
//
// Rows go 4 per pass, in 4 long streams (each a quarter of the caller's rows),
// each prefetching kHwyPrefetchBytes ahead, as the VNNI kernels.
//
// Measured on the AVX2 target (bench_linear --benchmark_filter=quant_rows, 1
// thread, GB/s of weights per CPU second, medians of 3 on a busy 2-core EPYC),
// 256x2048 in L2 / 5632x2048 from DRAM, the scalar kernels on the same target
// in brackets: Q4_K 24 / 19 (2.0 / 1.7), Q6_K 22 / 21 (2.6 / 2.5), Q4_0
// 21 / 20 (0.6 / 0.5), Q5_K 19 / 19 (2.0 / 2.0), IQ4_XS 18 / 16 (0.8 / 0.8),
// Q5_0 15 / 17 (0.6 / 0.7), Q3_K 10 / 9 (1.1 / 1.1), Q2_K 16 / 13 (1.1 / 1.1),
// Q4_1 17 / 16 (0.7 / 0.7), Q5_1 15 / 13 (0.7 / 0.8), IQ4_NL 16 / 16
// (0.7 / 0.7).
//
// Highway 1.0.3 has no op for vpmaddubsw / vpsignb, hence the intrinsics in
// PairSums*: the file is included only for the AVX2 and AVX3 targets (both
// have them, on 256-bit vectors); the other targets keep the scalar kernels.
//
// Included by kernels/quant/vec_dot.cc inside its per-target namespace when
// HWY_TARGET is HWY_AVX2 or HWY_AVX3.

namespace hn = hwy::HWY_NAMESPACE;

constexpr size_t kHwyPrefetchBytes = 1024;

#define QKV_UNROLL _Pragma("GCC unroll 4")

using DU8 = hn::Full256<uint8_t>;
using DI8 = hn::Full256<int8_t>;
using DU16 = hn::Full256<uint16_t>;
using DI16 = hn::Full256<int16_t>;
using DU32 = hn::Full256<uint32_t>;
using DI32 = hn::Full256<int32_t>;
using DF = hn::Full256<float>;
using VU8 = hn::Vec256<uint8_t>;
using VI8 = hn::Vec256<int8_t>;
using VI16 = hn::Vec256<int16_t>;
using VI32 = hn::Vec256<int32_t>;
using VF = hn::Vec256<float>;

// Sums of adjacent products u[2j] a[2j] + u[2j + 1] a[2j + 1] (vpmaddubsw).
HWY_INLINE VI16 PairSums(VU8 u, VI8 a) { return VI16{_mm256_maddubs_epi16(u.raw, a.raw)}; }
// The same for signed weights q: |q| times a with q's sign (exact for |q|, |a| <= 127).
HWY_INLINE VI16 PairSumsSigned(VI8 q, VI8 a) {
  return VI16{_mm256_maddubs_epi16(_mm256_abs_epi8(q.raw), _mm256_sign_epi8(a.raw, q.raw))};
}

HWY_INLINE float HalfAt(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// Per-row accumulators: 8 f32 lanes as ggml's AVX2 kernels, plus the min
// terms of Q4_K (4 lanes) and Q4_1/Q5_1/Q5_K (one f32).
struct HwyRow {
  VF acc;
  hn::Vec128<float> accm;
  float summs;
};

HWY_INLINE HwyRow ZeroRow() { return HwyRow{hn::Zero(DF()), hn::Zero(hn::Full128<float>()), 0.0f}; }

HWY_INLINE float Sum8(VF v) {
  HWY_ALIGN float a[8];
  hn::Store(v, DF(), a);
  float h[4];
  for (int i = 0; i < 4; ++i) h[i] = a[i + 4] + a[i];
  return (h[0] + h[2]) + (h[1] + h[3]);
}

HWY_INLINE float Sum4(hn::Vec128<float> v) {
  HWY_ALIGN float a[4];
  hn::Store(v, hn::Full128<float>(), a);
  return (a[0] + a[2]) + (a[1] + a[3]);
}

// Prefetches every cache line of [p, p + n) (n a constant: no loop remains).
template <size_t n>
HWY_INLINE void PrefetchSpan(const uint8_t* p) {
  for (size_t o = 0; o < n; o += 64) hwy::Prefetch(p + o);
  if (n % 64 != 1) hwy::Prefetch(p + n - 1);
}

// Int8 products of one register of weights with one of activations as int16
// pair sums (offset removed with the activation's precomputed correction).
template <class Dec>
HWY_INLINE VI16 Products(VU8 u, VI8 a, VI16 corr) {
  if constexpr (Dec::kSigned) return PairSumsSigned(hn::BitCast(DI8(), u), a);
  const VI16 p = PairSums(u, a);
  return Dec::kOffset != 0 ? hn::Sub(p, corr) : p;
}

template <int kOffset>
HWY_INLINE VI16 Correction(VI8 a) {
  return kOffset != 0 ? PairSums(hn::Set(DU8(), uint8_t{kOffset}), a) : hn::Zero(DI16());
}

// 16 bytes at p as 32 values: low nibbles (values 0-15), then high nibbles
// (16-31), ggml's order for 32-value blocks and IQ4_XS sub-blocks.
HWY_INLINE VU8 NibbleHalves(const uint8_t* p) {
  const DU32 du32;
  const auto v = hn::BitCast(du32, hn::LoadDup128(DU8(), p));
  const auto shift = hn::Combine(du32, hn::Set(hn::Full128<uint32_t>(), 4u), hn::Zero(hn::Full128<uint32_t>()));
  return hn::And(hn::BitCast(DU8(), hn::operator>>(v, shift)), hn::Set(DU8(), uint8_t{0x0F}));
}

// The IQ4_NL levels in both 128-bit halves (TableLookupBytes is per half).
HWY_INLINE VI8 IQ4Table() { return hn::LoadDup128(DI8(), kIQ4NLValues); }

// ---- 256-value super-blocks ----

// One Q8_K block as every row of a pass uses it.
struct HwyActK {
  VI8 q[8];
  VI16 corr[8];
  VI16 bsums;                // 16 sums of 16 values
  hn::Vec128<int16_t> pairs; // 8: bsums[2j] + bsums[2j + 1]
  float d;
};

template <int kOffset>
HWY_INLINE void LoadActK(const BlockQ8_K& a, HwyActK* out) {
  for (int c = 0; c < 8; ++c) {
    out->q[c] = hn::LoadU(DI8(), a.qs + 32 * c);
    out->corr[c] = Correction<kOffset>(out->q[c]);
  }
  out->bsums = hn::LoadU(DI16(), a.bsums);
  VI32 unused;
  const VI32 p = hn::ReorderWidenMulAccumulate(DI32(), out->bsums, hn::Set(DI16(), int16_t{1}), hn::Zero(DI32()), unused);
  out->pairs = hn::DemoteTo(hn::Full128<int16_t>(), p);  // |pair| <= 2 * 16 * 127: exact
  out->d = a.d;
}

// Selects sub-block scales for register c (values 32c .. 32c + 31) from 16
// scale bytes in both halves: int16 lane j takes scale (32c + 2j) / kSub,
// sign-extended when kSignedScales.
template <size_t kSub, bool kSignedScales>
HWY_INLINE void ScaleSelectors(VI8 idx[8]) {
  for (int c = 0; c < 8; ++c) {
    HWY_ALIGN int8_t b[32];
    for (int j = 0; j < 16; ++j) {
      const auto sub = static_cast<int8_t>((32 * c + 2 * j) / int(kSub));
      b[2 * j] = kSignedScales ? int8_t(-128) : sub;  // -128: a zero byte
      b[2 * j + 1] = kSignedScales ? sub : int8_t(-128);
    }
    idx[c] = hn::Load(DI8(), b);
  }
}

// Rows of 256-value super-blocks. Dec::Decode(block, act, row, u) writes the
// 256 values into u[0..7], adds the block's min term to row, and returns the
// sub-block scales as bytes (byte j = sub-block j of Dec::kSub values);
// Dec::D(block) is the block's f32 scale d.
template <class Dec, size_t R>
HWY_NOINLINE void KRowsHwy(const uint8_t* HWY_RESTRICT w, size_t stride, size_t nb,
                           const BlockQ8_K* HWY_RESTRICT a, float* HWY_RESTRICT y, size_t ys) {
  using B = typename Dec::Block;
  static_assert(Dec::kSub == 16 || Dec::kSub == 32, "sub-blocks of 16 or 32 values");
  VI8 idx[8];
  ScaleSelectors<Dec::kSub, Dec::kSignedScales>(idx);
  HwyRow row[R];
  for (size_t r = 0; r < R; ++r) row[r] = ZeroRow();
  for (size_t i = 0; i < nb; ++i) {
    HwyActK act;
    LoadActK<Dec::kOffset>(a[i], &act);
    QKV_UNROLL for (size_t r = 0; r < R; ++r) {
      const uint8_t* b = w + r * stride + i * sizeof(B);
      PrefetchSpan<sizeof(B)>(b + kHwyPrefetchBytes);
      VU8 u[8];
      const hn::Vec128<int8_t> sc = Dec::Decode(b, act, &row[r], u);
      const VI8 sc2 = hn::Combine(DI8(), sc, sc);
      VI32 s = hn::Zero(DI32()), unused;
      for (int c = 0; c < 8; ++c) {
        const VI16 p = Products<Dec>(u[c], act.q[c], act.corr[c]);
        VI16 scale = hn::BitCast(DI16(), hn::TableLookupBytes(sc2, idx[c]));
        if (Dec::kSignedScales) scale = hn::ShiftRight<8>(scale);
        s = hn::ReorderWidenMulAccumulate(DI32(), p, scale, s, unused);
      }
      row[r].acc = hn::MulAdd(hn::Set(DF(), act.d * Dec::D(b)), hn::ConvertTo(DF(), s), row[r].acc);
    }
  }
  for (size_t r = 0; r < R; ++r) y[r * ys] = Dec::Finish(row[r]);
}

// One activation row of 32-value blocks: the blocks, their scales d and (Q8_1)
// sums s as f32, each padded to a multiple of 8 blocks.
template <class A>
struct HwyAct32 {
  const A* blocks;
  const float* d;
  const float* s;
};

// The f16 field at byte `at` of 8 consecutive blocks of S bytes from p, as
// 8 f32 (one conversion; a scalar one per block and row cost 3 of the ~17
// instructions of a block's dot product).
template <size_t S>
HWY_INLINE hn::Vec256<float> Halves8(const uint8_t* p) {
  uint16_t h[8];
  for (size_t k = 0; k < 8; ++k) std::memcpy(&h[k], p + k * S, 2);
  const __m128i v = _mm_set_epi16(static_cast<short>(h[7]), static_cast<short>(h[6]), static_cast<short>(h[5]),
                                  static_cast<short>(h[4]), static_cast<short>(h[3]), static_cast<short>(h[2]),
                                  static_cast<short>(h[1]), static_cast<short>(h[0]));
  return hn::Vec256<float>{_mm256_cvtph_ps(v)};
}

// Rows of 32-value blocks against Q8_0 or Q8_1 (Dec::Act), one block per
// register, the block scales converted 8 at a time. Dec::Unpack(b) gives the
// block's 32 values; Dec::kMin: the block's f16 min m (at byte 2) times the
// activation's s is summed, one scalar fused multiply-add per block as the
// scalar kernel does. a.d and a.s are padded to a multiple of 8 blocks.
template <class Dec, size_t R>
HWY_NOINLINE void Rows32Hwy(const uint8_t* HWY_RESTRICT w, size_t stride, size_t nb,
                            const HwyAct32<typename Dec::Act>& a, float* HWY_RESTRICT y, size_t ys) {
  using B = typename Dec::Block;
  HwyRow row[R];
  for (size_t r = 0; r < R; ++r) row[r] = ZeroRow();
  const VI16 ones = hn::Set(DI16(), int16_t{1});
  HWY_ALIGN float dsc[R][8], msc[R][8];
  for (size_t g = 0; g < nb; g += 8) {
    const size_t n = std::min<size_t>(8, nb - g);
    QKV_UNROLL for (size_t r = 0; r < R; ++r) {
      const uint8_t* group = w + r * stride + g * sizeof(B);
      if (n == 8) {
        hn::Store(hn::Mul(Halves8<sizeof(B)>(group), hn::LoadU(DF(), a.d + g)), DF(), dsc[r]);
        if (Dec::kMin) hn::Store(Halves8<sizeof(B)>(group + 2), DF(), msc[r]);
      } else {
        for (size_t k = 0; k < n; ++k) {
          dsc[r][k] = HalfAt(group + k * sizeof(B)) * a.d[g + k];
          if (Dec::kMin) msc[r][k] = HalfAt(group + k * sizeof(B) + 2);
        }
      }
    }
    for (size_t k = 0; k < n; ++k) {
      const size_t i = g + k;
      const VI8 aq = hn::LoadU(DI8(), a.blocks[i].qs);
      const VI16 corr = Correction<Dec::kOffset>(aq);
      QKV_UNROLL for (size_t r = 0; r < R; ++r) {
        const uint8_t* b = w + r * stride + i * sizeof(B);
        hwy::Prefetch(b + kHwyPrefetchBytes);  // blocks < 64 bytes: every line
        VI32 unused;
        const VI32 s = hn::ReorderWidenMulAccumulate(DI32(), Products<Dec>(Dec::Unpack(b), aq, corr), ones,
                                                     hn::Zero(DI32()), unused);
        if (Dec::kMin) row[r].summs = std::fma(msc[r][k], a.s[i], row[r].summs);
        row[r].acc = hn::MulAdd(hn::Set(DF(), dsc[r][k]), hn::ConvertTo(DF(), s), row[r].acc);
      }
    }
  }
  for (size_t r = 0; r < R; ++r) y[r * ys] = Sum8(row[r].acc) + row[r].summs;
}

#include "kernels/quant/vec_dot_hwy_blocks-inl.h"

// n_rows rows in 4 streams of L = n_rows / 4 rows (pass k: rows k, k + L,
// k + 2L, k + 3L), the rest one at a time; the same arithmetic for every row.
template <class Dec>
HWY_INLINE void KHwy(const uint8_t* base, size_t cols, const void* xa, float* y, size_t n_rows) {
  const size_t nb = cols / kQK;
  const size_t rb = nb * sizeof(typename Dec::Block);
  const auto* a = static_cast<const BlockQ8_K*>(xa);
  const size_t L = n_rows / 4;
  for (size_t k = 0; k < L; ++k) KRowsHwy<Dec, 4>(base + k * rb, L * rb, nb, a, y + k, L);
  for (size_t r = 4 * L; r < n_rows; ++r) KRowsHwy<Dec, 1>(base + r * rb, rb, nb, a, y + r, 1);
}

template <class Dec>
HWY_INLINE void Hwy32(const uint8_t* base, size_t cols, const void* xa, float* y, size_t n_rows) {
  using A = typename Dec::Act;
  const size_t nb = cols / 32;
  HwyAct32<A> act{static_cast<const A*>(xa), nullptr, nullptr};
  static thread_local std::vector<float> scales;
  scales.assign(2 * (nb + 8), 0.0f);
  act.d = scales.data();
  act.s = scales.data() + nb + 8;
  ActScalesF32<Dec::kMin>(act.blocks, nb, scales.data(), scales.data() + nb + 8);
  const size_t rb = nb * sizeof(typename Dec::Block);
  const size_t L = n_rows / 4;
  for (size_t k = 0; k < L; ++k) Rows32Hwy<Dec, 4>(base + k * rb, L * rb, nb, act, y + k, L);
  for (size_t r = 4 * L; r < n_rows; ++r) Rows32Hwy<Dec, 1>(base + r * rb, rb, nb, act, y + r, 1);
}

// Returns false for the types without a kernel here.
HWY_INLINE bool DotRowsHwy(DType t, const void* rows, size_t cols, const void* xa, float* y, size_t n_rows) {
  const auto* base = static_cast<const uint8_t*>(rows);
  switch (t) {
    case DType::Q4_0: Hwy32<HwyQ4_0>(base, cols, xa, y, n_rows); return true;
    case DType::Q4_1: Hwy32<HwyQ4_1>(base, cols, xa, y, n_rows); return true;
    case DType::Q5_0: Hwy32<HwyQ5_0>(base, cols, xa, y, n_rows); return true;
    case DType::Q5_1: Hwy32<HwyQ5_1>(base, cols, xa, y, n_rows); return true;
    case DType::IQ4_NL: Hwy32<HwyIQ4_NL>(base, cols, xa, y, n_rows); return true;
    case DType::Q2_K: KHwy<HwyQ2_K>(base, cols, xa, y, n_rows); return true;
    case DType::Q3_K: KHwy<HwyQ3_K>(base, cols, xa, y, n_rows); return true;
    case DType::Q4_K: KHwy<HwyQ4_K>(base, cols, xa, y, n_rows); return true;
    case DType::Q5_K: KHwy<HwyQ5_K>(base, cols, xa, y, n_rows); return true;
    case DType::Q6_K: KHwy<HwyQ6_K>(base, cols, xa, y, n_rows); return true;
    case DType::IQ4_XS: KHwy<HwyIQ4_XS>(base, cols, xa, y, n_rows); return true;
    default: return false;
  }
}

// The row kernel (decode: a handful of rows, d a multiple of the vector
// length): d along the lanes, K/V converted in registers from the cache, the
// dot products of several keys reduced together by a transpose-add tree, and
// a 64-key block's Q·K followed by its P·V in column passes.
//
// A Highway "-inl" header of the attention kernel: kernels/attention/attention.cc
// includes it once per SIMD target (foreach_target), after hwy/highway.h.
#if defined(QKV_KERNELS_ATTENTION_ROW_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef QKV_KERNELS_ATTENTION_ROW_INL_H_
#undef QKV_KERNELS_ATTENTION_ROW_INL_H_
#else
#define QKV_KERNELS_ATTENTION_ROW_INL_H_
#endif

#include "hwy/highway.h"
#include "kernels/attention/prefetch-inl.h"
#include "kernels/attention/q8_vnni-inl.h"

HWY_BEFORE_NAMESPACE();
namespace qkv {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR
template <int RB>
constexpr int RowKB() {
  return std::min(kVecRegs / 4, (kVecRegs / 2) / RB);
}

// One level of the transpose-add tree that reduces N vectors to one whose lane k
// is the sum of vector k's lanes: each level adds pairs of adjacent vectors'
// lanes, halving the vectors, with lane order kept such that after log2(N)
// levels it is natural. Generic form: lanes [0, N/2) hold the adjacent-pair sums
// of a, lanes [N/2, N) those of b (two cross-lane permutes). With AVX-512 the
// first two levels pair lanes within 128-bit blocks (vshufps) and the last two
// pair whole blocks (vshuff32x4): cheaper shuffles than vpermt2ps, the same
// final order (level 0: [a0+a1, a2+a3, b0+b1, b2+b3] per block; level 1 turns
// four vectors into per-block sums [v0 v1 v2 v3]; levels 2-3 add the blocks).
HWY_INLINE VF PairSums(DF df, VF a, VF b) {
  return hn::Add(hn::ConcatEven(df, b, a), hn::ConcatOdd(df, b, a));
}

HWY_INLINE VF TreeLevel(DF df, VF a, VF b, size_t level) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  (void)df;
  if (level < 2) return VF{_mm512_add_ps(_mm512_shuffle_ps(a.raw, b.raw, 0x88), _mm512_shuffle_ps(a.raw, b.raw, 0xDD))};
  return VF{_mm512_add_ps(_mm512_shuffle_f32x4(a.raw, b.raw, 0x88), _mm512_shuffle_f32x4(a.raw, b.raw, 0xDD))};
#else
  (void)level;
  return PairSums(df, a, b);
#endif
}

// The rest of the tree: v[0..n) -> one vector (v is clobbered). From the N/2
// pair vectors of RowDots, lane k of the result is the dot product of key k.
// Counts and levels are compile-time constants, so the tree unrolls into
// registers (a loop over a run-time count kept the vectors in memory).
template <size_t kN, size_t kLevel = 1>  // level 0 is done by RowDots
HWY_INLINE VF TransposeSum(DF df, VF* v) {
  if constexpr (kN == 1) {
    return v[0];
  } else {
    for (size_t i = 0; i < kN / 2; ++i) v[i] = TreeLevel(df, v[2 * i], v[2 * i + 1], kLevel);
    return TransposeSum<kN / 2, kLevel + 1>(df, v);
  }
}

// Dot products of KB consecutive keys against RB rows, with the first level of
// the transpose tree done in registers: part[(r*N/2 + (slot + k)/2)*N ..] holds
// TreeLevel 0 of (dot vector of key slot+k, of key slot+k+1) for even k (slot even). A
// single key (KB == 1) is paired with zeros. Halves the stores and reloads
// through `part` against storing every key's vector.
template <DType T, int RB, int KB, size_t kD = 0>
HWY_INLINE void RowDots(DF df, const float* HWY_RESTRICT qs, size_t d_runtime, const uint8_t* krow, int64_t rs,
                        float* HWY_RESTRICT part, size_t slot) {
  const size_t d = kD != 0 ? kD : d_runtime;
  static_assert(KB == 1 || KB % 2 == 0, "keys are paired");
  const size_t N = hn::Lanes(df);
  VF acc[KB][RB];
  for (int k = 0; k < KB; ++k)
    for (int r = 0; r < RB; ++r) acc[k][r] = hn::Zero(df);
  for (size_t x = 0; x < d; x += N) {
    VF kv[KB];
    for (int k = 0; k < KB; ++k) kv[k] = Elem<T>::Load(df, krow + k * rs, x);
    for (int r = 0; r < RB; ++r) {
      VF qv = hn::Load(df, qs + r * d + x);
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
      // Keep q in a register for its KB uses: GCC otherwise folds the load into
      // every FMA, and KB loads per FMA pair saturate the two 512-bit load ports.
      if (KB > 1) asm("" : "+v"(qv.raw));
#endif
      for (int k = 0; k < KB; ++k) acc[k][r] = hn::MulAdd(qv, kv[k], acc[k][r]);
    }
  }
  for (int r = 0; r < RB; ++r) {
    float* dst = part + (r * N / 2 + slot / 2) * N;
    if (KB == 1) {
      hn::Store(TreeLevel(df, acc[0][r], hn::Zero(df), 0), df, dst);
    } else {
      for (int k = 0; k + 1 < KB; k += 2) hn::Store(TreeLevel(df, acc[k][r], acc[k + 1][r], 0), df, dst + (k / 2) * N);
    }
  }
}

// acc rows [RB][d] += Σ_j p[r][j] * v_j for XB column vectors at a time, so the
// accumulators stay in registers across the block and each p[r][j] broadcast
// feeds XB FMAs.
template <DType T, int RB, int XB, size_t kD = 0>
HWY_INLINE void RowAccumulateCols(DF df, const float* HWY_RESTRICT pr, size_t bk, size_t nk, const uint8_t* vrow0,
                                  int64_t rs, size_t d_runtime, size_t x, float* HWY_RESTRICT acc) {
  const size_t d = kD != 0 ? kD : d_runtime;
  const size_t N = hn::Lanes(df);
  VF a[XB][RB];
  for (int xb = 0; xb < XB; ++xb)
    for (int r = 0; r < RB; ++r) a[xb][r] = hn::Load(df, acc + r * d + x + xb * N);
  const uint8_t* vrow = vrow0;
  for (size_t j = 0; j < nk; ++j, vrow += rs) {
    VF vv[XB];
    LoadCols<T, XB>(df, vrow, x, vv);
    for (int r = 0; r < RB; ++r) {
      const VF pj = hn::Set(df, pr[r * bk + j]);
      for (int xb = 0; xb < XB; ++xb) a[xb][r] = hn::MulAdd(pj, vv[xb], a[xb][r]);
    }
  }
  for (int xb = 0; xb < XB; ++xb)
    for (int r = 0; r < RB; ++r) hn::Store(a[xb][r], df, acc + r * d + x + xb * N);
}

template <DType T, int RB, size_t kD = 0>
HWY_INLINE void RowAccumulate(DF df, const float* HWY_RESTRICT pr, size_t bk, size_t nk, const uint8_t* vrow0,
                              int64_t rs, size_t d_runtime, float* HWY_RESTRICT acc) {
  const size_t d = kD != 0 ? kD : d_runtime;
  const size_t N = hn::Lanes(df);
  constexpr int XB = RowKB<RB>();
  size_t x = 0;
  for (; x + XB * N <= d; x += XB * N) RowAccumulateCols<T, RB, XB, kD>(df, pr, bk, nk, vrow0, rs, d, x, acc);
  // Rows narrower than XB vectors (d = 64 is 4 with AVX-512) still go several
  // vectors at a time: one vector per pass leaves each row a single chain of
  // dependent FMAs, latency-bound (measured 1.3x slower for d = 64, 3 rows).
  if constexpr (XB > 4) {
    for (; x + 4 * N <= d; x += 4 * N) RowAccumulateCols<T, RB, 4, kD>(df, pr, bk, nk, vrow0, rs, d, x, acc);
  }
  if constexpr (XB > 2) {
    for (; x + 2 * N <= d; x += 2 * N) RowAccumulateCols<T, RB, 2, kD>(df, pr, bk, nk, vrow0, rs, d, x, acc);
  }
  for (; x < d; x += N) RowAccumulateCols<T, RB, 1, kD>(df, pr, bk, nk, vrow0, rs, d, x, acc);
}


template <DType T, int RB, size_t kD = 0>
HWY_INLINE void RowBlockRows(DF df, const float* qs, size_t d, const uint8_t* kblk, int64_t rs, size_t nk,
                             float* part, float* st, size_t bk, const RowPrefetch* pf) {
  const size_t N = hn::Lanes(df);
  // Keys go in even counts (the first tree level pairs them); one odd key last.
  constexpr int KB = std::max(2, RowKB<RB>() / 2 * 2);
  // Rows of f32, bf16 or f16 that fill whole lines (kD known): the steady
  // state's prefetches unroll per row (RowPrefetch::Keys).
  constexpr int64_t kElem = T == DType::F32 ? 4 : 2;
  constexpr int64_t kRowBytes =
      kD != 0 && (T == DType::F32 || T == DType::F16 || T == DType::BF16) && kD * kElem % 64 == 0
          ? static_cast<int64_t>(kD) * kElem
          : 0;
  for (size_t jg = 0; jg < nk; jg += N) {
    const size_t ng = std::min(N, nk - jg);
    // Prefetches go out KB keys at a time, between the dot products (RowPrefetch).
    size_t jj = 0;
    for (; jj + KB <= ng; jj += KB) {
      if (pf) pf->template Keys<kRowBytes>(pf->from + static_cast<int64_t>(jg + jj), KB);
      RowDots<T, RB, KB, kD>(df, qs, d, kblk + static_cast<int64_t>(jg + jj) * rs, rs, part, jj);
    }
    if (pf && jj < ng) pf->Keys(pf->from + static_cast<int64_t>(jg + jj), static_cast<int64_t>(ng - jj));
    if (KB > 2)
      for (; jj + 2 <= ng; jj += 2) RowDots<T, RB, 2, kD>(df, qs, d, kblk + static_cast<int64_t>(jg + jj) * rs, rs, part, jj);
    if (jj < ng) RowDots<T, RB, 1, kD>(df, qs, d, kblk + static_cast<int64_t>(jg + jj) * rs, rs, part, jj);
    // The remaining levels of the tree over the N/2 pair vectors of each row.
    constexpr size_t kPairs = hn::MaxLanes(DF()) / 2;  // N / 2 (fixed-width targets)
    const size_t npairs = (ng + 1) / 2;
    for (int r = 0; r < RB; ++r) {
      VF v[kPairs];
      const float* pr = part + r * kPairs * N;
      for (size_t k = 0; k < kPairs; ++k) v[k] = k < npairs ? hn::Load(df, pr + k * N) : hn::Zero(df);
      hn::Store(TransposeSum<kPairs>(df, v), df, st + r * bk + jg);
    }
  }
}


// Calls f with std::integral_constant<size_t, kD>: kD = d for the head dims
// with fast paths (64 and 128: the loops over d unroll completely and their
// counters and bounds disappear), 0 (read d at run time) for the others.
template <class F>
HWY_INLINE void WithHeadDim(size_t d, const F& f) {
  if (d == 64) return f(std::integral_constant<size_t, 64>());
  if (d == 128) return f(std::integral_constant<size_t, 128>());
  return f(std::integral_constant<size_t, 0>());
}

template <DType T>
void RowItem(const Call& c, const Plan& p, const Item& it, float* scratch, float* partials, int64_t idx) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const size_t d = static_cast<size_t>(c.s.d), bk = static_cast<size_t>(p.bk);
  const int64_t rows = it.gh * it.qr;
  const size_t R = static_cast<size_t>(p.rows);
  float* qs = scratch;
  float* acc = qs + RoundUp(R * d, 16);
  float* part = acc + RoundUp(R * d, 16);
  float* st = part + RoundUp(R * N * N, 16);
  float* m = st + RoundUp(R * bk, 16);
  float* l = m + R;
  const float ninf = -std::numeric_limits<float>::infinity();

  ScaledQueries(c, it, rows, d, qs);
  std::fill(m, m + rows, ninf);
  std::fill(l, l + rows, 0.0f);
  std::fill(acc, acc + rows * d, 0.0f);

  // Q8_0 K on AVX3_DL: integer Q·K (ScoresQ8Vnni) when the gather offsets of 16
  // rows fit in 32 bits and q is finite.
#if HWY_TARGET == HWY_AVX3_DL
  bool q8_vnni = false;
  QueryQ8 qq;
  if (T == DType::Q8_0 && N == 16 && c.k.row_stride >= 0 && c.k.row_stride < (int64_t(1) << 26)) {
    const size_t nb = d / kQ8BlockSize;
    qq.d = d;
    qq.nb = nb;
    float* q8_region = m + RoundUp(3 * R, 16);
    qq.q8 = reinterpret_cast<int8_t*>(q8_region);
    qq.dq = q8_region + RoundUp((R * d + 3) / 4, 16);
    qq.corr = reinterpret_cast<int32_t*>(qq.dq + R * (nb + 1));
    q8_vnni = qq.Quantize(qs, rows);
  }
#endif

  const uint8_t* kbase = ItemRows(c.k, it);
  const uint8_t* vbase = ItemRows(c.v, it);
  const int64_t krs = c.k.row_stride, vrs = c.v.row_stride;

  const int64_t row_bytes = static_cast<int64_t>(dtype_row_bytes(T, d));
  const int64_t pf_dist = RowPrefetch::Distance(row_bytes);
  for (int64_t j0 = it.lo; j0 < it.hi; j0 += p.bk) {
    const size_t nk = static_cast<size_t>(std::min<int64_t>(p.bk, it.hi - j0));
    const uint8_t* kblk = kbase + j0 * krs;
    const uint8_t* vblk = vbase + j0 * vrs;
    // Software prefetch of the K and V rows `dist` keys ahead, spread over the
    // block's key groups (RowBlockRows) rather than issued in one burst.
    const RowPrefetch pf{kbase, vbase, krs, vrs, row_bytes, j0 + pf_dist, it.hi};
    int64_t r = 0;
#if HWY_TARGET == HWY_AVX3_DL
    if (q8_vnni) {
      for (; r + 8 <= rows; r += 8) ScoresQ8Vnni<8>(qq, r, kblk, krs, nk, st, bk, r == 0 ? &pf : nullptr);
      for (; r + 4 <= rows; r += 4) ScoresQ8Vnni<4>(qq, r, kblk, krs, nk, st, bk, r == 0 ? &pf : nullptr);
      for (; r + 2 <= rows; r += 2) ScoresQ8Vnni<2>(qq, r, kblk, krs, nk, st, bk, r == 0 ? &pf : nullptr);
      for (; r < rows; ++r) ScoresQ8Vnni<1>(qq, r, kblk, krs, nk, st, bk, r == 0 ? &pf : nullptr);
    }
#endif
    WithHeadDim(d, [&](auto head_dim) HWY_ATTR {
      constexpr size_t kD = decltype(head_dim)::value;
      for (; r + 8 <= rows; r += 8) RowBlockRows<T, 8, kD>(df, qs + r * d, d, kblk, krs, nk, part, st + r * bk, bk, r == 0 ? &pf : nullptr);
      for (; r + 4 <= rows; r += 4) RowBlockRows<T, 4, kD>(df, qs + r * d, d, kblk, krs, nk, part, st + r * bk, bk, r == 0 ? &pf : nullptr);
      for (; r + 3 <= rows; r += 3) RowBlockRows<T, 3, kD>(df, qs + r * d, d, kblk, krs, nk, part, st + r * bk, bk, r == 0 ? &pf : nullptr);
      for (; r + 2 <= rows; r += 2) RowBlockRows<T, 2, kD>(df, qs + r * d, d, kblk, krs, nk, part, st + r * bk, bk, r == 0 ? &pf : nullptr);
      for (; r < rows; ++r) RowBlockRows<T, 1, kD>(df, qs + r * d, d, kblk, krs, nk, part, st + r * bk, bk, r == 0 ? &pf : nullptr);
    });
    // Both score paths (f32 and the Q8_0 integer one) filled RoundUp(nk, N) lanes per row.
    if (c.softcap > 0.0f) {
      for (r = 0; r < rows; ++r) SoftCapScores(df, c.softcap, st + r * bk, RoundUp(nk, N));
    }

    const bool full = j0 >= it.flo && j0 + static_cast<int64_t>(nk) <= it.fhi && !c.mi.per_key_parts();
    if (!full) ApplyMask(c, it, rows, j0, static_cast<int64_t>(nk), st, 1, static_cast<int64_t>(bk));
    const size_t nkr = RoundUp(nk, N);
    for (r = 0; r < rows; ++r) {
      float* sr = st + r * bk;
      for (size_t jj = nk; jj < nkr; ++jj) sr[jj] = ninf;
      VF mxv = hn::Set(df, ninf);
      for (size_t jj = 0; jj < nkr; jj += N) mxv = hn::Max(mxv, hn::Load(df, sr + jj));
      const float mx = hn::GetLane(hn::MaxOfLanes(df, mxv));
      const float m_new = std::max(m[r], mx);
      const float safe = m_new == ninf ? 0.0f : m_new;
      const float corr = std::exp(m[r] - safe);
      const VF sv = hn::Set(df, safe);
      VF sum = hn::Zero(df);
      for (size_t jj = 0; jj < nkr; jj += N) {
        const VF pj = hn::Exp(df, hn::Sub(hn::Load(df, sr + jj), sv));
        hn::Store(pj, df, sr + jj);
        sum = hn::Add(sum, pj);
      }
      l[r] = l[r] * corr + hn::GetLane(hn::SumOfLanes(df, sum));
      m[r] = m_new;
      if (corr != 1.0f) {
        const VF cv = hn::Set(df, corr);
        float* a = acc + r * d;
        for (size_t x = 0; x < d; x += N) hn::Store(hn::Mul(hn::Load(df, a + x), cv), df, a + x);
      }
    }
    r = 0;
    WithHeadDim(d, [&](auto head_dim) HWY_ATTR {
      constexpr size_t kD = decltype(head_dim)::value;
      for (; r + 8 <= rows; r += 8) RowAccumulate<T, 8, kD>(df, st + r * bk, bk, nk, vblk, vrs, d, acc + r * d);
      for (; r + 4 <= rows; r += 4) RowAccumulate<T, 4, kD>(df, st + r * bk, bk, nk, vblk, vrs, d, acc + r * d);
      for (; r + 3 <= rows; r += 3) RowAccumulate<T, 3, kD>(df, st + r * bk, bk, nk, vblk, vrs, d, acc + r * d);
      for (; r + 2 <= rows; r += 2) RowAccumulate<T, 2, kD>(df, st + r * bk, bk, nk, vblk, vrs, d, acc + r * d);
      for (; r < rows; ++r) RowAccumulate<T, 1, kD>(df, st + r * bk, bk, nk, vblk, vrs, d, acc + r * d);
    });
  }

  FinishRows(c, p, it, idx, rows, m, l, acc, partials);
}

#endif  // HWY_TARGET != HWY_SCALAR

}  // namespace HWY_NAMESPACE
}  // namespace qkv
HWY_AFTER_NAMESPACE();

#endif  // QKV_KERNELS_ATTENTION_ROW_INL_H_

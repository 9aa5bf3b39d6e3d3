// The tile kernel (prefill, and any item with enough rows to fill a vector):
// rows along the SIMD lanes, Qᵀ packed once per item, each key block decoded to
// f32 in L1, and register-blocked outer products for Sᵀ = K·Qᵀ and Oᵀ += Vᵀ·P.
//
// A Highway "-inl" header of the attention kernel: kernels/attention/attention.cc
// includes it once per SIMD target (foreach_target), after hwy/highway.h.
#if defined(QKV_KERNELS_ATTENTION_TILE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef QKV_KERNELS_ATTENTION_TILE_INL_H_
#undef QKV_KERNELS_ATTENTION_TILE_INL_H_
#else
#define QKV_KERNELS_ATTENTION_TILE_INL_H_
#endif

#include "hwy/highway.h"
#include "kernels/attention/plan-inl.h"

HWY_BEFORE_NAMESPACE();
namespace qkv {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Tile kernel.

// Keys (score tile) or value columns (accumulate tile) per register block: as
// many accumulators as the register file holds beside the row vectors and a
// broadcast, rounded to a power of two so it divides the usual block sizes and
// head dims (a remainder falls back to 4, then 1: narrow blocks are latency-bound).
template <int NRV>
constexpr int TileMJ() {
  return (kVecRegs - NRV - 2) / NRV >= 8 ? 8 : (kVecRegs - NRV - 2) / NRV >= 6 ? 6 : (kVecRegs - NRV - 2) / NRV >= 4 ? 4 : 2;
}

// st[jj*R + lanes] = Σ_c kb[jj*ldk + c] * qt[c*R + lanes] for MJ keys.
template <int NRV, int MJ>
HWY_INLINE void ScoreTile(DF df, const float* HWY_RESTRICT qt, size_t R, const float* HWY_RESTRICT kb,
                          size_t ldk, size_t d, float* HWY_RESTRICT st) {
  const size_t N = hn::Lanes(df);
  VF acc[MJ][NRV];
  for (int jj = 0; jj < MJ; ++jj)
    for (int v = 0; v < NRV; ++v) acc[jj][v] = hn::Zero(df);
  for (size_t c = 0; c < d; ++c) {
    VF qv[NRV];
    for (int v = 0; v < NRV; ++v) qv[v] = hn::Load(df, qt + c * R + v * N);
    for (int jj = 0; jj < MJ; ++jj) {
      const VF kk = hn::Set(df, kb[jj * ldk + c]);
      for (int v = 0; v < NRV; ++v) acc[jj][v] = hn::MulAdd(kk, qv[v], acc[jj][v]);
    }
  }
  for (int jj = 0; jj < MJ; ++jj)
    for (int v = 0; v < NRV; ++v) hn::Store(acc[jj][v], df, st + jj * R + v * N);
}

// ot[(c0+cc)*R + lanes] = ot * corr + Σ_j vb[j*ldv + c0 + cc] * p[j*R + lanes] for MC columns.
template <int NRV, int MC>
HWY_INLINE void AccumulateTile(DF df, const float* HWY_RESTRICT p, size_t R, size_t nk,
                               const float* HWY_RESTRICT vb, size_t ldv, size_t c0, const VF* corr,
                               float* HWY_RESTRICT ot) {
  const size_t N = hn::Lanes(df);
  VF acc[MC][NRV];
  for (int cc = 0; cc < MC; ++cc)
    for (int v = 0; v < NRV; ++v) acc[cc][v] = hn::Mul(hn::Load(df, ot + (c0 + cc) * R + v * N), corr[v]);
  for (size_t j = 0; j < nk; ++j) {
    VF pv[NRV];
    for (int v = 0; v < NRV; ++v) pv[v] = hn::Load(df, p + j * R + v * N);
    for (int cc = 0; cc < MC; ++cc) {
      const VF vv = hn::Set(df, vb[j * ldv + c0 + cc]);
      for (int v = 0; v < NRV; ++v) acc[cc][v] = hn::MulAdd(vv, pv[v], acc[cc][v]);
    }
  }
  for (int cc = 0; cc < MC; ++cc)
    for (int v = 0; v < NRV; ++v) hn::Store(acc[cc][v], df, ot + (c0 + cc) * R + v * N);
}

template <DType T, int NRV>
void TileItem(const Call& c, const Plan& p, const Item& it, float* scratch, float* partials, int64_t idx) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const size_t d = static_cast<size_t>(c.s.d), R = static_cast<size_t>(p.rpad);
  const size_t bk = static_cast<size_t>(p.bk), ld = static_cast<size_t>(p.ld);
  const int64_t rows = it.gh * it.qr;
  constexpr int MJ = TileMJ<NRV>();

  float* qt = scratch;
  float* ot = qt + RoundUp(d * R, 16);
  float* st = ot + RoundUp(d * R, 16);
  float* kvb = st + RoundUp(bk * R, 16);
  float* m = kvb + RoundUp(bk * ld, 16);
  float* l = m + R;

  // Qᵀ with the scale folded in; padding lanes are zero (their scores are 0, harmless).
  for (size_t r = 0; r < R; ++r) {
    if (static_cast<int64_t>(r) < rows) {
      const float* qrow = ItemQuery(c, it, static_cast<int64_t>(r));
      for (size_t x = 0; x < d; ++x) qt[x * R + r] = qrow[x] * c.scale;
    } else {
      for (size_t x = 0; x < d; ++x) qt[x * R + r] = 0.0f;
    }
    m[r] = -std::numeric_limits<float>::infinity();
    l[r] = 0.0f;
  }
  std::fill(ot, ot + d * R, 0.0f);

  const uint8_t* kbase = ItemRows(c.k, it);
  const uint8_t* vbase = ItemRows(c.v, it);
  // f32 rows whose stride is whole floats are used in place, not copied.
  const bool direct_k = T == DType::F32 && c.k.row_stride % 4 == 0;
  const bool direct_v = T == DType::F32 && c.v.row_stride % 4 == 0;

  for (int64_t j0 = it.lo; j0 < it.hi; j0 += p.bk) {
    const size_t nk = static_cast<size_t>(std::min<int64_t>(p.bk, it.hi - j0));
    const float* kb;
    size_t ldk;
    if (direct_k) {
      kb = reinterpret_cast<const float*>(kbase + j0 * c.k.row_stride);
      ldk = static_cast<size_t>(c.k.row_stride / 4);
    } else {
      DecodeRows<T>(kbase + j0 * c.k.row_stride, c.k.row_stride, nk, d, kvb, ld);
      kb = kvb;
      ldk = ld;
    }
    size_t j = 0;
    for (; j + MJ <= nk; j += MJ) ScoreTile<NRV, MJ>(df, qt, R, kb + j * ldk, ldk, d, st + j * R);
    if (MJ > 2)
      for (; j + 2 <= nk; j += 2) ScoreTile<NRV, 2>(df, qt, R, kb + j * ldk, ldk, d, st + j * R);
    for (; j < nk; ++j) ScoreTile<NRV, 1>(df, qt, R, kb + j * ldk, ldk, d, st + j * R);
    if (c.softcap > 0.0f) SoftCapScores(df, c.softcap, st, nk * R);

    const bool full = j0 >= it.flo && j0 + static_cast<int64_t>(nk) <= it.fhi && !c.mi.per_key_parts();
    if (!full) ApplyMask(c, it, rows, j0, static_cast<int64_t>(nk), st, static_cast<int64_t>(R), 1);

    VF corr[NRV];
    for (int v = 0; v < NRV; ++v) {
      VF mx = hn::Set(df, -std::numeric_limits<float>::infinity());
      for (size_t jj = 0; jj < nk; ++jj) mx = hn::Max(mx, hn::Load(df, st + jj * R + v * N));
      corr[v] = SoftmaxStep(df, mx, m + v * N, l + v * N, st + v * N, static_cast<int64_t>(nk),
                            static_cast<int64_t>(R));
    }

    const float* vb;
    size_t ldv;
    if (direct_v) {
      vb = reinterpret_cast<const float*>(vbase + j0 * c.v.row_stride);
      ldv = static_cast<size_t>(c.v.row_stride / 4);
    } else {
      DecodeRows<T>(vbase + j0 * c.v.row_stride, c.v.row_stride, nk, d, kvb, ld);
      vb = kvb;
      ldv = ld;
    }
    size_t x = 0;
    for (; x + MJ <= d; x += MJ) AccumulateTile<NRV, MJ>(df, st, R, nk, vb, ldv, x, corr, ot);
    if (MJ > 2)
      for (; x + 2 <= d; x += 2) AccumulateTile<NRV, 2>(df, st, R, nk, vb, ldv, x, corr, ot);
    for (; x < d; ++x) AccumulateTile<NRV, 1>(df, st, R, nk, vb, ldv, x, corr, ot);
  }

  if (p.nsplit == 1) {
    for (int64_t r = 0; r < rows; ++r) FinishRow(c, it, r, m[r], l[r], [&](int64_t x) { return ot[x * R + r]; });
  } else {
    float* slot = PartialSlot(partials, p, c.s, idx);
    for (int64_t r = 0; r < rows; ++r) {
      slot[r] = m[r];
      slot[p.rows + r] = l[r];
      float* a = slot + 2 * p.rows + r * c.s.d;
      for (size_t x = 0; x < d; ++x) a[x] = ot[x * R + r];
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace qkv
HWY_AFTER_NAMESPACE();

#endif  // QKV_KERNELS_ATTENTION_TILE_INL_H_

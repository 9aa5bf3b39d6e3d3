// The streaming (online-softmax) SDPA kernel. See attention.h for the contract
// and notes.md for the online-softmax and split-merge formulas.
//
// Work is cut into items: (batch b, KV head, a group of query heads sharing that
// KV head, a block of query rows, a chunk of keys). The rows of an item (every
// query head of the group times every query row of the block) are processed
// together against each block of keys while it is hot, so K/V are streamed once
// per GQA group. Two loop bodies, both templated over the K/V element type:
//
//  * Tile kernel (prefill, and any shape with enough rows to fill a vector):
//    rows sit along the SIMD lanes. Q is packed once per item as Qᵀ [d][rows]
//    (scale folded in); each key block is decoded to f32 in an L1-sized scratch
//    (it is reused by every row), then Sᵀ = K·Qᵀ, P = exp(Sᵀ - m) and
//    Oᵀ += Vᵀ·P are register-blocked outer products: a broadcast key/value element
//    times a vector of rows. Row-wise max and sum are then lane-wise, no
//    horizontal reductions, and the accumulator Oᵀ [d][rows] stays in L1.
//  * Row kernel (decode: a handful of rows, d a multiple of the vector length):
//    d sits along the lanes and K/V elements are converted in registers straight
//    from the (cache) memory; the dot products of N keys are reduced together by
//    a transpose-add tree, so a key costs a few shuffles instead of a full
//    horizontal sum.
//
// When there are few items for the threads (decode with few KV heads), the key
// range is split into chunks and the partial (m, l, acc) states are merged
// exactly afterwards (flash-decoding). The split depends on the thread count,
// so results differ across thread counts only by rounding.

#ifndef QKV_ATTENTION_CC_SHARED
#define QKV_ATTENTION_CC_SHARED

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "hwy/aligned_allocator.h"
#include "kernels/attention.h"
#include "kernels/attention_common.h"

namespace qkv {
namespace attn {

// One validated call.
struct Call {
  AttentionShape s;
  QueryView q;
  KVView k, v;
  MaskInfo mi;
  OutputView out;
  float scale = 1.0f;
  float* lse = nullptr;
  int threads = 1;
};

}  // namespace attn
}  // namespace qkv

#endif  // QKV_ATTENTION_CC_SHARED

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/cache_control.h"
#include "hwy/contrib/math/math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace qkv {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
using attn::Call;

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
constexpr int kVecRegs = 32;
#else
constexpr int kVecRegs = 16;
#endif

// ---------------------------------------------------------------------------
// K/V element access: N values starting at element c of a row, as f32 lanes.

template <DType T>
struct Elem;

template <>
struct Elem<DType::F32> {
  static HWY_INLINE VF Load(DF df, const uint8_t* row, size_t c) {
    return hn::LoadU(df, reinterpret_cast<const float*>(row) + c);
  }
  static float Scalar(const uint8_t* row, size_t c) {
    float f;
    std::memcpy(&f, row + 4 * c, 4);
    return f;
  }
};

template <>
struct Elem<DType::F16> {
  static HWY_INLINE VF Load(DF df, const uint8_t* row, size_t c) {
    const hn::Rebind<hwy::float16_t, DF> dh;
    return hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(row) + c));
  }
  static float Scalar(const uint8_t* row, size_t c) {
    uint16_t h;
    std::memcpy(&h, row + 2 * c, 2);
    return f16_to_f32(h);
  }
};

template <>
struct Elem<DType::BF16> {
  static HWY_INLINE VF Load(DF df, const uint8_t* row, size_t c) {
    const hn::Rebind<uint16_t, DF> du16;
    const hn::RebindToUnsigned<DF> du32;
    const auto wide = hn::PromoteTo(du32, hn::LoadU(du16, reinterpret_cast<const uint16_t*>(row) + c));
    return hn::BitCast(df, hn::ShiftLeft<16>(wide));
  }
  static float Scalar(const uint8_t* row, size_t c) {
    uint16_t h;
    std::memcpy(&h, row + 2 * c, 2);
    return bf16_to_f32(h);
  }
};

template <>
struct Elem<DType::Q8_0> {
  // c is a multiple of N and N divides 32, so the N values lie in one block.
  static HWY_INLINE VF Load(DF df, const uint8_t* row, size_t c) {
    const uint8_t* blk = row + (c / kQ8BlockSize) * sizeof(BlockQ8_0);
    uint16_t dh;
    std::memcpy(&dh, blk, 2);
    const hn::Rebind<int8_t, DF> di8;
    const hn::RebindToSigned<DF> di32;
    const auto q = hn::PromoteTo(di32, hn::LoadU(di8, reinterpret_cast<const int8_t*>(blk + 2) + c % kQ8BlockSize));
    return hn::Mul(hn::ConvertTo(df, q), hn::Set(df, f16_to_f32(dh)));
  }
  static float Scalar(const uint8_t* row, size_t c) {
    const uint8_t* blk = row + (c / kQ8BlockSize) * sizeof(BlockQ8_0);
    uint16_t dh;
    std::memcpy(&dh, blk, 2);
    return f16_to_f32(dh) * static_cast<float>(static_cast<int8_t>(blk[2 + c % kQ8BlockSize]));
  }
};

// Decodes n rows of d values (row stride rs bytes) into dst (row stride ld floats).
template <DType T>
HWY_INLINE void DecodeRows(const uint8_t* src, int64_t rs, size_t n, size_t d, float* dst, size_t ld) {
  const DF df;
  const size_t N = hn::Lanes(df);
  for (size_t j = 0; j < n; ++j) {
    const uint8_t* row = src + static_cast<int64_t>(j) * rs;
    float* o = dst + j * ld;
    size_t c = 0;
    for (; c + N <= d; c += N) hn::StoreU(Elem<T>::Load(df, row, c), df, o + c);
    for (; c < d; ++c) o[c] = Elem<T>::Scalar(row, c);
  }
}

// ---------------------------------------------------------------------------
// Planning.

struct Plan {
  bool row_kernel = false;
  int64_t g = 1;       // query heads per KV head
  int64_t gh = 1;      // query heads per item
  int64_t nhsub = 1;   // head subgroups per KV head
  int64_t qr = 1;      // query rows per item
  int64_t nqt = 1;     // query blocks
  int64_t rows = 1;    // max rows per item (gh * qr)
  int64_t rpad = 1;    // rows rounded up to whole vectors (tile kernel)
  int nrv = 1;         // vectors of rows (tile kernel)
  int64_t bk = 32;     // keys per block
  int64_t ld = 1;      // decoded K/V scratch row stride, floats
  int64_t nsplit = 1;  // key chunks per item
  int64_t items_base = 0;
};

constexpr int kMaxNRV = 4;

HWY_INLINE size_t RoundUp(size_t x, size_t m) { return (x + m - 1) / m * m; }

Plan MakePlan(const AttentionShape& s, int threads) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  Plan p;
  p.g = s.Hq / s.Hkv;
  const int64_t lq = std::max<int64_t>(s.Lq, 1);
#if HWY_TARGET != HWY_SCALAR
  // Few rows (decode): lanes along d, so no lane sits idle.
  if (2 * p.g * lq <= N && s.d % N == 0) {
    p.row_kernel = true;
    p.gh = p.g;
    p.qr = lq;
    p.rows = p.gh * p.qr;
    p.bk = 4 * N;
  }
#endif
  if (!p.row_kernel) {
    // Rows per item: 4 vectors of rows with 32 registers (24 accumulators), 2 with 16.
    const int64_t target = (kVecRegs >= 32 ? 4 : 2) * N;
    p.gh = std::min(p.g, target);
    p.qr = std::max<int64_t>(1, std::min(lq, target / p.gh));
    p.rows = p.gh * p.qr;
    p.nrv = static_cast<int>((p.rows + N - 1) / N);
    p.rpad = p.nrv * N;
    // Key block: the decoded f32 block stays around 16 KiB (L1 holds it plus Qᵀ/Oᵀ).
    p.bk = std::clamp<int64_t>(4096 / std::max<int64_t>(s.d, 1), 8, 64);
    p.ld = static_cast<int64_t>(RoundUp(static_cast<size_t>(s.d), static_cast<size_t>(N)));
  }
  p.nhsub = (p.g + p.gh - 1) / p.gh;
  p.nqt = (lq + p.qr - 1) / p.qr;
  p.items_base = s.B * s.Hkv * p.nhsub * p.nqt;
  // Flash-decoding: too few items to feed the threads evenly and long enough key
  // ranges: split keys so there are >= 4 items per thread, chunks >= 512 keys.
  const int64_t want = 4 * static_cast<int64_t>(threads);
  if (p.items_base > 0 && p.items_base < want && threads > 1) {
    const int64_t by_items = (want + p.items_base - 1) / p.items_base;
    const int64_t by_len = std::max<int64_t>(1, s.Lk / 512);
    p.nsplit = std::max<int64_t>(1, std::min(by_items, by_len));
  }
  return p;
}

size_t ScratchFloats(const Plan& p, const AttentionShape& s) {
  const DF df;
  const size_t N = hn::Lanes(df), d = static_cast<size_t>(s.d);
  const size_t pad = 16;  // keeps each region 64-byte aligned
  if (p.row_kernel) {
    const size_t R = static_cast<size_t>(p.rows), bk = static_cast<size_t>(p.bk);
    return RoundUp(R * d, pad) * 2 + RoundUp(R * N * N, pad) + RoundUp(R * bk, pad) + RoundUp(3 * R, pad);
  }
  const size_t R = static_cast<size_t>(p.rpad), bk = static_cast<size_t>(p.bk);
  return RoundUp(d * R, pad) * 2 + RoundUp(bk * R, pad) + RoundUp(bk * static_cast<size_t>(p.ld), pad) +
         RoundUp(3 * R, pad);
}

// Per-thread working set, plus each thread's share of the split-merge partials
// (at most ~8 items per thread of rows x (d + 2) floats when keys are split).
size_t ScratchBytes(const AttentionShape& s, int /*type*/, int threads) {
  const Plan p = MakePlan(s, threads);
  size_t floats = ScratchFloats(p, s);
  if (p.nsplit > 1) {
    const size_t partials = static_cast<size_t>(p.items_base * p.nsplit * p.rows * (s.d + 2));
    floats += (partials + static_cast<size_t>(threads) - 1) / static_cast<size_t>(threads);
  }
  return floats * sizeof(float);
}

// One work item, resolved.
struct Item {
  int64_t b, hkv, h0, gh, i0, qr;
  int64_t lo, hi;    // keys this item (chunk) processes
  int64_t flo, fhi;  // keys every row of the item sees, before per-key parts
  int64_t base;      // index without the split
  int64_t split;
};

Item MakeItem(const Call& c, const Plan& p, int64_t idx) {
  Item it;
  it.split = idx % p.nsplit;
  int64_t t = idx / p.nsplit;
  it.base = t;
  // Query blocks in reverse order: under a causal mask the last blocks are the
  // heaviest, and dynamic scheduling balances best when they start first.
  const int64_t qt = p.nqt - 1 - t % p.nqt;
  t /= p.nqt;
  const int64_t hs = t % p.nhsub;
  t /= p.nhsub;
  it.hkv = t % c.s.Hkv;
  it.b = t / c.s.Hkv;
  it.h0 = it.hkv * p.g + hs * p.gh;
  it.gh = std::min(p.gh, p.g - hs * p.gh);
  it.i0 = qt * p.qr;
  it.qr = std::min(p.qr, c.s.Lq - it.i0);
  const int64_t pos_first = c.mi.pos0(it.b) + it.i0, pos_last = pos_first + it.qr - 1;
  int64_t lo1, hi1, lo2, hi2;
  c.mi.key_range(it.b, pos_first, &lo1, &hi1);
  c.mi.key_range(it.b, pos_last, &lo2, &hi2);
  const int64_t lo = lo1, hi = std::max(hi1, hi2);
  it.flo = lo2;
  it.fhi = hi1;
  const int64_t span = std::max<int64_t>(hi - lo, 0);
  const int64_t chunk = (span + p.nsplit - 1) / p.nsplit;
  it.lo = std::min(hi, lo + it.split * chunk);
  it.hi = std::min(hi, it.lo + chunk);
  if (p.nsplit == 1) {
    it.lo = lo;
    it.hi = hi;
  }
  return it;
}

// Scores for keys [j0, j0+nk) of rows r < nrows: masked entries become -inf and
// the per-key terms are added. Element (j, r) lives at s[j*sj + r*sr].
void ApplyMask(const Call& c, const Item& it, int64_t nrows, int64_t j0, int64_t nk, float* s,
               int64_t sj, int64_t sr) {
  const float ninf = -std::numeric_limits<float>::infinity();
  for (int64_t r = 0; r < nrows; ++r) {
    const int64_t i = it.i0 + r % it.qr;
    int64_t lo, hi;
    c.mi.key_range(it.b, c.mi.pos0(it.b) + i, &lo, &hi);
    for (int64_t jj = 0; jj < nk; ++jj) {
      const int64_t j = j0 + jj;
      float& e = s[jj * sj + r * sr];
      if (j < lo || j >= hi) {
        e = ninf;
      } else if (c.mi.per_key_parts()) {
        e += c.mi.per_key_term(it.b, i, j);
      }
    }
  }
}

// Writes a finished row: out = acc / l, lse = m + ln l (zeros / -inf if l == 0).
// acc(c) gives the accumulator value of column c.
template <class AccFn>
HWY_INLINE void FinishRow(const Call& c, const Item& it, int64_t r, float m, float l, AccFn acc) {
  const int64_t h = it.h0 + r / it.qr, i = it.i0 + r % it.qr;
  float* o = c.out.data + it.b * c.out.batch_stride + h * c.out.head_stride + i * c.out.row_stride;
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  for (int64_t x = 0; x < c.s.d; ++x) o[x] = acc(x) * inv;
  if (c.lse) {
    c.lse[(it.b * c.s.Hq + h) * c.s.Lq + i] = l > 0.0f ? m + std::log(l) : -std::numeric_limits<float>::infinity();
  }
}

// Partial state of one item chunk for the split merge: [m rows][l rows][acc rows x d].
HWY_INLINE float* PartialSlot(float* partials, const Plan& p, const AttentionShape& s, int64_t idx) {
  return partials + idx * p.rows * (s.d + 2);
}

// Online-softmax update of one block for a vector of rows: m/l updated in place,
// scores replaced by p = exp(s - m_new); returns the rescale factor of the
// accumulator. A row with m_new = -inf (all masked so far) gets p = 0, factor 0.
HWY_INLINE VF SoftmaxStep(DF df, VF mx_block, float* m, float* l, float* s, int64_t n_scores, int64_t step) {
  const VF ninf = hn::Set(df, -std::numeric_limits<float>::infinity());
  const VF m_old = hn::Load(df, m);
  const VF m_new = hn::Max(m_old, mx_block);
  const VF safe = hn::IfThenZeroElse(hn::Eq(m_new, ninf), m_new);
  const VF corr = hn::Exp(df, hn::Sub(m_old, safe));
  VF sum = hn::Zero(df);
  for (int64_t j = 0; j < n_scores; ++j) {
    float* e = s + j * step;
    const VF pj = hn::Exp(df, hn::Sub(hn::Load(df, e), safe));
    hn::Store(pj, df, e);
    sum = hn::Add(sum, pj);
  }
  hn::Store(hn::MulAdd(hn::Load(df, l), corr, sum), df, l);
  hn::Store(m_new, df, m);
  return corr;
}

// ---------------------------------------------------------------------------
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
      const int64_t h = it.h0 + static_cast<int64_t>(r) / it.qr, i = it.i0 + static_cast<int64_t>(r) % it.qr;
      const float* qrow = c.q.data + it.b * c.q.batch_stride + h * c.q.head_stride + i * c.q.row_stride;
      for (size_t x = 0; x < d; ++x) qt[x * R + r] = qrow[x] * c.scale;
    } else {
      for (size_t x = 0; x < d; ++x) qt[x * R + r] = 0.0f;
    }
    m[r] = -std::numeric_limits<float>::infinity();
    l[r] = 0.0f;
  }
  std::fill(ot, ot + d * R, 0.0f);

  const uint8_t* kbase = static_cast<const uint8_t*>(c.k.data) + it.b * c.k.batch_stride + it.hkv * c.k.head_stride;
  const uint8_t* vbase = static_cast<const uint8_t*>(c.v.data) + it.b * c.v.batch_stride + it.hkv * c.v.head_stride;
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

// ---------------------------------------------------------------------------
// Row kernel (decode).

#if HWY_TARGET != HWY_SCALAR
// v[0..N) -> one vector whose lane k is the sum of v[k]'s lanes. v is clobbered.
HWY_INLINE VF TransposeSum(DF df, VF* v, size_t n) {
  for (size_t cnt = n; cnt > 1; cnt /= 2) {
    for (size_t i = 0; i < cnt / 2; ++i) {
      v[i] = hn::Add(hn::ConcatEven(df, v[2 * i + 1], v[2 * i]), hn::ConcatOdd(df, v[2 * i + 1], v[2 * i]));
    }
  }
  return v[0];
}

// Register blocking of the row kernel: RB rows times KB keys (dots) or XB
// column vectors (accumulate) of accumulators, plus the KB/XB converted K/V vectors.
template <int RB>
constexpr int RowKB() {
  return std::min(kVecRegs / 4, (kVecRegs / 2) / RB);
}

// Partial dot vectors of KB consecutive keys against RB rows:
// part[(r*N + slot + k)*N ..] = Σ_x q_r[x..] ⊙ k_k[x..] (lanes summed later).
template <DType T, int RB, int KB>
HWY_INLINE void RowDots(DF df, const float* HWY_RESTRICT qs, size_t d, const uint8_t* krow, int64_t rs,
                        float* HWY_RESTRICT part, size_t slot) {
  const size_t N = hn::Lanes(df);
  VF acc[KB][RB];
  for (int k = 0; k < KB; ++k)
    for (int r = 0; r < RB; ++r) acc[k][r] = hn::Zero(df);
  for (size_t x = 0; x < d; x += N) {
    VF kv[KB];
    for (int k = 0; k < KB; ++k) kv[k] = Elem<T>::Load(df, krow + k * rs, x);
    for (int r = 0; r < RB; ++r) {
      const VF qv = hn::Load(df, qs + r * d + x);
      for (int k = 0; k < KB; ++k) acc[k][r] = hn::MulAdd(qv, kv[k], acc[k][r]);
    }
  }
  for (int k = 0; k < KB; ++k)
    for (int r = 0; r < RB; ++r) hn::Store(acc[k][r], df, part + (r * N + slot + k) * N);
}

// acc rows [RB][d] += Σ_j p[r][j] * v_j for XB column vectors at a time, so the
// accumulators stay in registers across the block and each p[r][j] broadcast
// feeds XB FMAs.
template <DType T, int RB, int XB>
HWY_INLINE void RowAccumulateCols(DF df, const float* HWY_RESTRICT pr, size_t bk, size_t nk, const uint8_t* vrow0,
                                  int64_t rs, size_t d, size_t x, float* HWY_RESTRICT acc) {
  const size_t N = hn::Lanes(df);
  VF a[XB][RB];
  for (int xb = 0; xb < XB; ++xb)
    for (int r = 0; r < RB; ++r) a[xb][r] = hn::Load(df, acc + r * d + x + xb * N);
  const uint8_t* vrow = vrow0;
  for (size_t j = 0; j < nk; ++j, vrow += rs) {
    VF vv[XB];
    for (int xb = 0; xb < XB; ++xb) vv[xb] = Elem<T>::Load(df, vrow, x + xb * N);
    for (int r = 0; r < RB; ++r) {
      const VF pj = hn::Set(df, pr[r * bk + j]);
      for (int xb = 0; xb < XB; ++xb) a[xb][r] = hn::MulAdd(pj, vv[xb], a[xb][r]);
    }
  }
  for (int xb = 0; xb < XB; ++xb)
    for (int r = 0; r < RB; ++r) hn::Store(a[xb][r], df, acc + r * d + x + xb * N);
}

template <DType T, int RB>
HWY_INLINE void RowAccumulate(DF df, const float* HWY_RESTRICT pr, size_t bk, size_t nk, const uint8_t* vrow0,
                              int64_t rs, size_t d, float* HWY_RESTRICT acc) {
  const size_t N = hn::Lanes(df);
  constexpr int XB = RowKB<RB>();
  size_t x = 0;
  for (; x + XB * N <= d; x += XB * N) RowAccumulateCols<T, RB, XB>(df, pr, bk, nk, vrow0, rs, d, x, acc);
  for (; x < d; x += N) RowAccumulateCols<T, RB, 1>(df, pr, bk, nk, vrow0, rs, d, x, acc);
}

template <DType T, int RB>
HWY_INLINE void RowBlockRows(DF df, const float* qs, size_t d, const uint8_t* kblk, int64_t rs, size_t nk,
                             float* part, float* st, size_t bk) {
  const size_t N = hn::Lanes(df);
  constexpr int KB = RowKB<RB>();
  for (size_t jg = 0; jg < nk; jg += N) {
    const size_t ng = std::min(N, nk - jg);
    size_t jj = 0;
    for (; jj + KB <= ng; jj += KB)
      RowDots<T, RB, KB>(df, qs, d, kblk + static_cast<int64_t>(jg + jj) * rs, rs, part, jj);
    for (; jj < ng; ++jj) RowDots<T, RB, 1>(df, qs, d, kblk + static_cast<int64_t>(jg + jj) * rs, rs, part, jj);
    for (int r = 0; r < RB; ++r) {
      VF v[hn::MaxLanes(DF())];
      for (size_t k = 0; k < N; ++k) v[k] = k < ng ? hn::Load(df, part + (r * N + k) * N) : hn::Zero(df);
      hn::Store(TransposeSum(df, v, N), df, st + r * bk + jg);
    }
  }
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

  for (int64_t r = 0; r < rows; ++r) {
    const int64_t h = it.h0 + r / it.qr, i = it.i0 + r % it.qr;
    const float* qrow = c.q.data + it.b * c.q.batch_stride + h * c.q.head_stride + i * c.q.row_stride;
    for (size_t x = 0; x < d; ++x) qs[r * d + x] = qrow[x] * c.scale;
    m[r] = ninf;
    l[r] = 0.0f;
  }
  std::fill(acc, acc + rows * d, 0.0f);

  const uint8_t* kbase = static_cast<const uint8_t*>(c.k.data) + it.b * c.k.batch_stride + it.hkv * c.k.head_stride;
  const uint8_t* vbase = static_cast<const uint8_t*>(c.v.data) + it.b * c.v.batch_stride + it.hkv * c.v.head_stride;
  const int64_t krs = c.k.row_stride, vrs = c.v.row_stride;

  for (int64_t j0 = it.lo; j0 < it.hi; j0 += p.bk) {
    const size_t nk = static_cast<size_t>(std::min<int64_t>(p.bk, it.hi - j0));
    const uint8_t* kblk = kbase + j0 * krs;
    const uint8_t* vblk = vbase + j0 * vrs;
    // Fetch the next block's keys while this one computes.
    if (j0 + p.bk < it.hi) {
      const uint8_t* nk_ = kblk + p.bk * krs;
      const uint8_t* nv_ = vblk + p.bk * vrs;
      const int64_t row_bytes = static_cast<int64_t>(dtype_row_bytes(T, d));
      const int64_t n_next = std::min<int64_t>(p.bk, it.hi - j0 - p.bk);
      for (int64_t jj = 0; jj < n_next; ++jj) {
        for (int64_t off = 0; off < row_bytes; off += 64) {
          hwy::Prefetch(nk_ + jj * krs + off);
          hwy::Prefetch(nv_ + jj * vrs + off);
        }
      }
    }
    int64_t r = 0;
    for (; r + 8 <= rows; r += 8) RowBlockRows<T, 8>(df, qs + r * d, d, kblk, krs, nk, part, st + r * bk, bk);
    for (; r + 4 <= rows; r += 4) RowBlockRows<T, 4>(df, qs + r * d, d, kblk, krs, nk, part, st + r * bk, bk);
    for (; r + 2 <= rows; r += 2) RowBlockRows<T, 2>(df, qs + r * d, d, kblk, krs, nk, part, st + r * bk, bk);
    for (; r < rows; ++r) RowBlockRows<T, 1>(df, qs + r * d, d, kblk, krs, nk, part, st + r * bk, bk);

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
    for (; r + 8 <= rows; r += 8) RowAccumulate<T, 8>(df, st + r * bk, bk, nk, vblk, vrs, d, acc + r * d);
    for (; r + 4 <= rows; r += 4) RowAccumulate<T, 4>(df, st + r * bk, bk, nk, vblk, vrs, d, acc + r * d);
    for (; r + 2 <= rows; r += 2) RowAccumulate<T, 2>(df, st + r * bk, bk, nk, vblk, vrs, d, acc + r * d);
    for (; r < rows; ++r) RowAccumulate<T, 1>(df, st + r * bk, bk, nk, vblk, vrs, d, acc + r * d);
  }

  if (p.nsplit == 1) {
    for (int64_t r = 0; r < rows; ++r) FinishRow(c, it, r, m[r], l[r], [&](int64_t x) { return acc[r * d + x]; });
  } else {
    float* slot = PartialSlot(partials, p, c.s, idx);
    for (int64_t r = 0; r < rows; ++r) {
      slot[r] = m[r];
      slot[p.rows + r] = l[r];
      std::copy(acc + r * d, acc + (r + 1) * d, slot + 2 * p.rows + r * c.s.d);
    }
  }
}
#endif  // HWY_TARGET != HWY_SCALAR

// ---------------------------------------------------------------------------
// Driver.

template <DType T>
void RunItem(const Call& c, const Plan& p, const Item& it, float* scratch, float* partials, int64_t idx) {
#if HWY_TARGET != HWY_SCALAR
  if (p.row_kernel) return RowItem<T>(c, p, it, scratch, partials, idx);
#endif
  switch (p.nrv) {
    case 1: return TileItem<T, 1>(c, p, it, scratch, partials, idx);
    case 2: return TileItem<T, 2>(c, p, it, scratch, partials, idx);
    case 3: return TileItem<T, 3>(c, p, it, scratch, partials, idx);
    default: return TileItem<T, kMaxNRV>(c, p, it, scratch, partials, idx);
  }
}

// Exact merge of the chunk partials of one base item (notes.md, split-KV decode).
void MergeItem(const Call& c, const Plan& p, int64_t base, float* partials) {
  const Item it = MakeItem(c, p, base * p.nsplit);
  const int64_t rows = it.gh * it.qr, d = c.s.d;
  const float ninf = -std::numeric_limits<float>::infinity();
  std::vector<float> sum(static_cast<size_t>(d));
  for (int64_t r = 0; r < rows; ++r) {
    float M = ninf;
    for (int64_t s = 0; s < p.nsplit; ++s) M = std::max(M, PartialSlot(partials, p, c.s, base * p.nsplit + s)[r]);
    float L = 0.0f;
    std::fill(sum.begin(), sum.end(), 0.0f);
    if (M != ninf) {
      for (int64_t s = 0; s < p.nsplit; ++s) {
        const float* slot = PartialSlot(partials, p, c.s, base * p.nsplit + s);
        if (slot[r] == ninf) continue;  // an empty or fully masked chunk contributes nothing
        const float w = std::exp(slot[r] - M);
        L += slot[p.rows + r] * w;
        const float* a = slot + 2 * p.rows + r * d;
        for (int64_t x = 0; x < d; ++x) sum[x] += a[x] * w;
      }
    }
    FinishRow(c, it, r, M, L, [&](int64_t x) { return sum[x]; });
  }
}

template <DType T>
void RunTyped(const Call& c) {
  const Plan p = MakePlan(c.s, c.threads);
  const int64_t n_items = p.items_base * p.nsplit;
  if (n_items == 0) return;
  const size_t per_thread = ScratchFloats(p, c.s);
  const int threads = static_cast<int>(std::min<int64_t>(c.threads, n_items));
  auto scratch = hwy::AllocateAligned<float>(per_thread * threads);
  hwy::AlignedFreeUniquePtr<float[]> partials;
  if (p.nsplit > 1) partials = hwy::AllocateAligned<float>(static_cast<size_t>(n_items * p.rows * (c.s.d + 2)));
#pragma omp parallel num_threads(threads)
  {
    float* mine = scratch.get() + per_thread * omp_get_thread_num();
#pragma omp for schedule(dynamic, 1)
    for (int64_t idx = 0; idx < n_items; ++idx) {
      RunItem<T>(c, p, MakeItem(c, p, idx), mine, partials.get(), idx);
    }
    if (p.nsplit > 1) {
#pragma omp for schedule(static)
      for (int64_t base = 0; base < p.items_base; ++base) MergeItem(c, p, base, partials.get());
    }
  }
}

void Run(const Call& c) {
  switch (c.k.type) {
    case DType::F32: return RunTyped<DType::F32>(c);
    case DType::F16: return RunTyped<DType::F16>(c);
    case DType::BF16: return RunTyped<DType::BF16>(c);
    case DType::Q8_0: return RunTyped<DType::Q8_0>(c);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace qkv
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qkv {
HWY_EXPORT(Run);
HWY_EXPORT(ScratchBytes);

namespace {

int resolve_threads(int requested) { return requested > 0 ? requested : std::max(1, omp_get_max_threads()); }

// The documented materialized path for the optional weights: scores recomputed
// per row in fp64 from the decoded K rows and normalized with the streaming
// kernel's log-sum-exp, so the weights are consistent with the output.
void materialize_weights(const attn::Call& c, float* weights) {
  const AttentionShape& s = c.s;
  const int64_t g = s.Hq / s.Hkv;
#pragma omp parallel for num_threads(c.threads) schedule(dynamic, 1)
  for (int64_t bh = 0; bh < s.B * s.Hq; ++bh) {
    const int64_t b = bh / s.Hq, h = bh % s.Hq, hk = h / g;
    std::vector<float> krow(static_cast<size_t>(s.d));
    const auto* kbase = static_cast<const uint8_t*>(c.k.data) + b * c.k.batch_stride + hk * c.k.head_stride;
    for (int64_t i = 0; i < s.Lq; ++i) {
      const float* qr = c.q.data + b * c.q.batch_stride + h * c.q.head_stride + i * c.q.row_stride;
      float* w = weights + (bh * s.Lq + i) * s.Lk;
      const float lse = c.lse[bh * s.Lq + i];
      int64_t lo, hi;
      c.mi.key_range(b, c.mi.pos0(b) + i, &lo, &hi);
      for (int64_t j = 0; j < s.Lk; ++j) {
        w[j] = 0.0f;
        if (j < lo || j >= hi || std::isinf(lse)) continue;
        const float term = c.mi.per_key_term(b, i, j);
        if (std::isinf(term) && term < 0) continue;
        decode_row(c.k.type, kbase + j * c.k.row_stride, static_cast<size_t>(s.d), krow.data());
        double dot = 0.0;
        for (int64_t x = 0; x < s.d; ++x) dot += double(qr[x]) * double(krow[x]);
        w[j] = static_cast<float>(std::exp(dot * double(c.scale) + double(term) - double(lse)));
      }
    }
  }
}

}  // namespace

void attention(const AttentionShape& shape, const QueryView& q, const KVView& k, const KVView& v,
               const AttentionMask& mask, const OutputView& out, const AttentionOptions& opts) {
  attn::Call c;
  c.mi = attn::validate("attention", shape, q, k, v, mask, out, opts);
  c.s = shape;
  c.q = q;
  c.k = k;
  c.v = v;
  c.out = out;
  c.scale = opts.scale != 0.0f ? opts.scale : 1.0f / std::sqrt(static_cast<float>(shape.d));
  c.threads = resolve_threads(opts.threads);
  std::vector<float> lse_tmp;
  c.lse = opts.lse;
  if (opts.weights && !c.lse) {
    lse_tmp.resize(static_cast<size_t>(shape.B * shape.Hq * shape.Lq));
    c.lse = lse_tmp.data();
  }
  HWY_DYNAMIC_DISPATCH(Run)(c);
  if (opts.weights) materialize_weights(c, opts.weights);
}

size_t attention_scratch_bytes_per_thread(const AttentionShape& shape, DType kv_type) {
  QKV_CHECK(shape.Hq >= 1 && shape.Hkv >= 1 && shape.Hq % shape.Hkv == 0 && shape.d >= 1 && shape.Lq >= 0 &&
                shape.Lk >= 0 && shape.B >= 0,
            "attention_scratch_bytes_per_thread: invalid shape");
  return HWY_DYNAMIC_DISPATCH(ScratchBytes)(shape, static_cast<int>(kv_type), resolve_threads(0));
}

}  // namespace qkv
#endif  // HWY_ONCE

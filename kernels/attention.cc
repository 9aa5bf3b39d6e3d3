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
//    horizontal sum. For a Q8_0 cache on AVX3_DL the scores are integer dot
//    products instead (ScoresQ8Vnni: q quantized per 32-block, keys along the
//    lanes, VNNI), which is why q8_0 decode outruns f16 there. When the rows
//    divide the vector (GQA groups of 4 or 8 on AVX-512) and the cache is
//    not Q8_0, the key-group form of it runs instead (GroupItem): Q·K, softmax
//    and P·V every few keys rather than per 64-key block, so a key's K and V
//    rows are consumed together while the next keys' lines are on their way.
//
// When there are few items for the threads (decode with few KV heads), the key
// range is split into chunks and the partial (m, l, acc) states are merged
// exactly afterwards (flash-decoding). The split depends on the thread count,
// so results differ across thread counts only by rounding.

#ifndef QKV_ATTENTION_CC_SHARED
#define QKV_ATTENTION_CC_SHARED

#include <omp.h>

#include <atomic>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "hwy/aligned_allocator.h"
#include "kernels/attention.h"
#include "kernels/block_queue.h"
#include "kernels/team.h"
#include "kernels/attention_common.h"
#include "kernels/error.h"

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

// The calling thread's reusable buffer of at least n floats, 64-byte aligned. A
// decoder calls attention once per layer and token; allocating the scratch and
// the split-merge partials anew each time costs page faults and first-touch
// misses on every call. Each caller thread owns one buffer (concurrent calls
// from different threads never share it); `which` picks one of two buffers.
inline float* ThreadBuffer(int which, size_t n) {
  static thread_local hwy::AlignedFreeUniquePtr<float[]> buf[2];
  static thread_local size_t cap[2] = {0, 0};
  if (cap[which] < n) {
    buf[which] = hwy::AllocateAligned<float>(n);
    QKV_CHECK(buf[which] != nullptr, "attention: cannot allocate ", n * sizeof(float), " bytes of scratch");
    cap[which] = n;
  }
  return buf[which].get();
}

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
  static HWY_INLINE const uint8_t* Block(const uint8_t* row, size_t c) {
    return row + (c / kQ8BlockSize) * sizeof(BlockQ8_0);
  }
  // A block's scale in every lane, converted by the vector unit (broadcast,
  // then f16 -> f32): the scalar f16_to_f32 costs branches on every vector of
  // every key.
  static HWY_INLINE VF Scale(DF df, const uint8_t* blk) {
    uint16_t dh;
    std::memcpy(&dh, blk, 2);
    const hn::Rebind<uint16_t, DF> du16;
    const hn::Rebind<hwy::float16_t, DF> dh16;
    return hn::PromoteTo(df, hn::BitCast(dh16, hn::Set(du16, dh)));
  }
  // N values of a block from its value i, times its scale.
  static HWY_INLINE VF Values(DF df, const uint8_t* blk, size_t i, VF scale) {
    const hn::Rebind<int8_t, DF> di8;
    const hn::RebindToSigned<DF> di32;
    const auto q = hn::PromoteTo(di32, hn::LoadU(di8, reinterpret_cast<const int8_t*>(blk + 2) + i));
    return hn::Mul(hn::ConvertTo(df, q), scale);
  }
  // c is a multiple of N and N divides 32, so the N values lie in one block.
  static HWY_INLINE VF Load(DF df, const uint8_t* row, size_t c) {
    const uint8_t* blk = Block(row, c);
    return Values(df, blk, c % kQ8BlockSize, Scale(df, blk));
  }
  static float Scalar(const uint8_t* row, size_t c) {
    const uint8_t* blk = Block(row, c);
    uint16_t dh;
    std::memcpy(&dh, blk, 2);
    return f16_to_f32(dh) * static_cast<float>(static_cast<int8_t>(blk[2 + c % kQ8BlockSize]));
  }
};

// XB vectors of a row from column x (v[i] = Elem<T>::Load at x + i*N). A Q8_0
// run inside one 32-value block converts the block's scale once, not per vector.
template <DType T, int XB>
HWY_INLINE void LoadCols(DF df, const uint8_t* row, size_t x, VF* v) {
  const size_t N = hn::Lanes(df);
  if constexpr (T == DType::Q8_0 && XB > 1) {
    if (x % kQ8BlockSize + XB * N <= kQ8BlockSize) {
      const uint8_t* blk = Elem<T>::Block(row, x);
      const VF scale = Elem<T>::Scale(df, blk);
      for (int i = 0; i < XB; ++i) v[i] = Elem<T>::Values(df, blk, x % kQ8BlockSize + i * N, scale);
      return;
    }
  }
  for (int i = 0; i < XB; ++i) v[i] = Elem<T>::Load(df, row, x + i * N);
}

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
    // q rows, accumulators, tree pairs, scores, m/l, and the quantized q rows
    // (int8, plus a scale and a correction per 32-block) of the Q8_0 path.
    const size_t nb = d / kQ8BlockSize + 1;
    return RoundUp(R * d, pad) * 2 + RoundUp(R * N * N, pad) + RoundUp(R * bk, pad) + RoundUp(3 * R, pad) +
           RoundUp((R * d + 3) / 4, pad) + RoundUp(2 * R * nb, pad);
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

// The first row of an item's KV head in a K or V view.
HWY_INLINE const uint8_t* ItemRows(const KVView& kv, const Item& it) {
  return static_cast<const uint8_t*>(kv.data) + it.b * kv.batch_stride + it.hkv * kv.head_stride;
}

// Row r of an item (query head h0 + r / qr, query row i0 + r % qr) of Q.
HWY_INLINE const float* ItemQuery(const Call& c, const Item& it, int64_t r) {
  const int64_t h = it.h0 + r / it.qr, i = it.i0 + r % it.qr;
  return c.q.data + it.b * c.q.batch_stride + h * c.q.head_stride + i * c.q.row_stride;
}

// The row kernels' q rows [rows][d], the scale folded in.
HWY_INLINE void ScaledQueries(const Call& c, const Item& it, int64_t rows, size_t d, float* qs) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* qrow = ItemQuery(c, it, r);
    for (size_t x = 0; x < d; ++x) qs[r * d + x] = qrow[x] * c.scale;
  }
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

// The end of a row-major item (acc [rows][d]): the output rows, or with split
// keys the item's partial state for the merge.
inline void FinishRows(const Call& c, const Plan& p, const Item& it, int64_t idx, int64_t rows, const float* m,
                       const float* l, const float* acc, float* partials) {
  const int64_t d = c.s.d;
  if (p.nsplit == 1) {
    for (int64_t r = 0; r < rows; ++r) FinishRow(c, it, r, m[r], l[r], [&](int64_t x) { return acc[r * d + x]; });
    return;
  }
  float* slot = PartialSlot(partials, p, c.s, idx);
  for (int64_t r = 0; r < rows; ++r) {
    slot[r] = m[r];
    slot[p.rows + r] = l[r];
    std::copy(acc + r * d, acc + (r + 1) * d, slot + 2 * p.rows + r * d);
  }
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
// Register blocking of the row kernel: RB rows times KB keys (dots) or XB
// column vectors (accumulate) of accumulators, plus the KB/XB converted K/V vectors.
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

// Software prefetch for the row kernel: K and V rows a fixed distance ahead of
// the keys being scored, issued with the dot products of a few keys at a time
// (RowBlockRows: KB keys' rows before each RowDots call) so the requests are
// spread over the computation. Bursts stall: a whole block's lines at once
// fills the miss buffers, and even a 16-key group's lines at once (128
// prefetches for f16, d = 128) measured 1.2-1.4x slower at Lk = 32768 than
// KB keys' worth at a time. The hardware prefetcher alone falls behind on
// these two interleaved streams.
struct RowPrefetch {
  const uint8_t* kbase;
  const uint8_t* vbase;
  int64_t krs, vrs, row_bytes;
  int64_t from, hi;  // keys [from + j, ...) are prefetched while key j is scored

  // About 2 KiB (and at least 8 rows) ahead per stream: measured fastest of 2,
  // 4 and 8 KiB at Lk = 32768 for GQA 8 and MHA alike (the hardware prefetcher
  // covers most of the DRAM latency; these requests land the lines in L1 in time).
  static int64_t Distance(int64_t row_bytes) { return std::max<int64_t>(8, 2048 / std::max<int64_t>(row_bytes, 1)); }

  HWY_INLINE void Keys(int64_t j, int64_t n) const {
    const int64_t end = std::min(j + n, hi);
    const uint8_t* kp = kbase + j * krs;
    const uint8_t* vp = vbase + j * vrs;
    for (int64_t jj = j; jj < end; ++jj, kp += krs, vp += vrs) {
      for (int64_t off = 0; off < row_bytes; off += 64) {
        hwy::Prefetch(kp + off);
        hwy::Prefetch(vp + off);
      }
    }
  }
};

template <DType T, int RB, size_t kD = 0>
HWY_INLINE void RowBlockRows(DF df, const float* qs, size_t d, const uint8_t* kblk, int64_t rs, size_t nk,
                             float* part, float* st, size_t bk, const RowPrefetch* pf) {
  const size_t N = hn::Lanes(df);
  // Keys go in even counts (the first tree level pairs them); one odd key last.
  constexpr int KB = std::max(2, RowKB<RB>() / 2 * 2);
  for (size_t jg = 0; jg < nk; jg += N) {
    const size_t ng = std::min(N, nk - jg);
    // Prefetches go out KB keys at a time, between the dot products (RowPrefetch).
    size_t jj = 0;
    for (; jj + KB <= ng; jj += KB) {
      if (pf) pf->Keys(pf->from + static_cast<int64_t>(jg + jj), KB);
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

#if HWY_TARGET == HWY_AVX3_DL
// Query rows of one item quantized for an integer Q·K against a Q8_0 cache: per
// 32-value block b of row r, q ≈ dq[r][b] * q8[r][b*32 ..] with q8 in
// [-127, 127] (|error| <= dq/2 = max|q_block| / 254 per element), and
// corr[r][b] = -128 * Σ q8 over the block (see ScoresQ8Vnni). The scale of the
// scores is folded into q before quantizing.
struct QueryQ8 {
  int8_t* q8 = nullptr;     // [rows][d]
  float* dq = nullptr;      // [rows][nb]
  int32_t* corr = nullptr;  // [rows][nb]
  size_t d = 0, nb = 0;

  // false if a value is not finite (the f32 path then keeps NaN/inf semantics).
  bool Quantize(const float* qs, int64_t rows) {
    for (int64_t r = 0; r < rows; ++r) {
      for (size_t b = 0; b < nb; ++b) {
        const float* x = qs + r * d + b * kQ8BlockSize;
        float amax = 0.0f;
        for (size_t i = 0; i < kQ8BlockSize; ++i) amax = std::max(amax, std::fabs(x[i]));
        if (!std::isfinite(amax)) return false;
        const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        int8_t* q = q8 + r * d + b * kQ8BlockSize;
        int32_t sum = 0;
        for (size_t i = 0; i < kQ8BlockSize; ++i) {
          // |x * inv| <= 127 up to rounding, so the clamp only guards that rounding.
          const float v = std::min(127.0f, std::max(-127.0f, std::nearbyint(x[i] * inv)));
          q[i] = static_cast<int8_t>(v);
          sum += q[i];
        }
        dq[r * nb + b] = amax / 127.0f;
        corr[r * nb + b] = -128 * sum;
      }
    }
    return true;
  }
};

// Scores of nk keys (a block) against RB quantized query rows with AVX-512 VNNI:
// st[r*bk + j] = Σ_b dq[r][b] * dk[j][b] * Σ_{x in block b} q8[r][x] * k8[j][x].
// Keys sit along the lanes, 16 at a time: each 32-byte block of 16 key rows is
// transposed in registers into 8 vectors of 4-byte groups (lane j = bytes 4c..4c+3
// of key j), so one vpdpbusd with a broadcast 4-byte group of the query adds 4
// products to each of 16 keys' sums, and a block needs 8 of them per row; the
// integer block sums are exact. No horizontal reduction is left, and the
// transpose is paid once per key for all RB rows (the GQA group). vpdpbusd takes
// unsigned x signed bytes: K's sign bit is flipped (k + 128) and corr removes
// the 128 * Σq that adds. Against the f32 path this cuts the Q·K work ~3x for a
// GQA group of 8. Highway 1.0.3 has no such op (and its AVX3_DL target does not
// enable avx512vnni, which every AVX3_DL CPU has), hence the intrinsics.
template <int RB>
__attribute__((target("avx512vnni"))) void ScoresQ8Vnni(const QueryQ8& qq, int64_t r0, const uint8_t* kblk,
                                                         int64_t rs, size_t nk, float* st, size_t bk,
                                                         const RowPrefetch* pf) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i take_lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
  const __m512i take_hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
  const size_t d = qq.d, nb = qq.nb;
  for (size_t jg = 0; jg < nk; jg += 16) {
    const size_t ng = std::min<size_t>(16, nk - jg);
    // Lanes past the block's end repeat its last key; the caller sets their
    // scores to -inf.
    const uint8_t* row[16];
    int32_t off[16];
    for (size_t j = 0; j < 16; ++j) {
      const size_t jj = std::min(j, ng - 1);
      row[j] = kblk + static_cast<int64_t>(jg + jj) * rs;
      off[j] = static_cast<int32_t>(static_cast<int64_t>(jj) * rs);
    }
    const __m512i offsets = _mm512_loadu_si512(off);
    const uint8_t* first = kblk + static_cast<int64_t>(jg) * rs;
    __m512 score[RB];
    for (int r = 0; r < RB; ++r) score[r] = _mm512_setzero_ps();
    for (size_t b = 0; b < nb; ++b) {
      // The group's prefetches spread over its 32-value blocks, a few keys'
      // rows each: all 16 keys' at once measured ~10% slower, warm and cold.
      if (pf) {
        const size_t per = (ng + nb - 1) / nb, k0 = b * per;
        if (k0 < ng) pf->Keys(pf->from + static_cast<int64_t>(jg + k0), static_cast<int64_t>(std::min(per, ng - k0)));
      }
      const size_t bo = b * sizeof(BlockQ8_0);
      // The 16 keys' f16 block scales: 4 bytes gathered at each block start
      // (scale + 2 quant bytes, dropped by the narrowing).
      const __m512i raw = _mm512_i32gather_epi32(offsets, first + bo, 1);
      const __m512 dk = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(raw));
      __m512i z[8], t[8], u[8], kt[8];
      for (int i = 0; i < 8; ++i) {
        const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row[i] + bo + 2));
        const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row[i + 8] + bo + 2));
        z[i] = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), flip);
      }
      // 8x8 transpose of 4-byte groups within each 256-bit half (keys 0-7 and 8-15),
      // then the halves' 128-bit pieces are regrouped so lane j is key j.
      for (int i = 0; i < 8; i += 2) {
        t[i] = _mm512_unpacklo_epi32(z[i], z[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(z[i], z[i + 1]);
      }
      for (int h = 0; h < 8; h += 4) {
        u[h + 0] = _mm512_unpacklo_epi64(t[h + 0], t[h + 2]);
        u[h + 1] = _mm512_unpackhi_epi64(t[h + 0], t[h + 2]);
        u[h + 2] = _mm512_unpacklo_epi64(t[h + 1], t[h + 3]);
        u[h + 3] = _mm512_unpackhi_epi64(t[h + 1], t[h + 3]);
      }
      for (int c = 0; c < 4; ++c) {
        kt[c] = _mm512_permutex2var_epi64(u[c], take_lo, u[c + 4]);
        kt[c + 4] = _mm512_permutex2var_epi64(u[c], take_hi, u[c + 4]);
      }
      for (int r = 0; r < RB; ++r) {
        const int64_t rr = r0 + r;
        const int8_t* q = qq.q8 + rr * static_cast<int64_t>(d) + b * kQ8BlockSize;
        __m512i acc = _mm512_set1_epi32(qq.corr[rr * static_cast<int64_t>(nb) + b]);
        for (int c = 0; c < 8; ++c) {
          int32_t group;
          std::memcpy(&group, q + 4 * c, 4);
          acc = _mm512_dpbusd_epi32(acc, kt[c], _mm512_set1_epi32(group));
        }
        const __m512 w = _mm512_mul_ps(dk, _mm512_set1_ps(qq.dq[rr * static_cast<int64_t>(nb) + b]));
        score[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), w, score[r]);
      }
    }
    for (int r = 0; r < RB; ++r) _mm512_storeu_ps(st + (r0 + r) * static_cast<int64_t>(bk) + jg, score[r]);
  }
}
#endif  // HWY_TARGET == HWY_AVX3_DL

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

// Key-group kernel (decode): the Q·K, softmax and P·V of every few keys run
// before the next keys are read, so each key's K and V rows are consumed
// together, a few keys after their prefetch. RowItem instead runs a 64-key
// block's Q·K, then its P·V in column passes: in the P·V phase no new lines are
// requested, so from DRAM the stream idles for part of every block. This order
// measured 1.2-1.3x faster cold at 32768 keys (f16, GQA 8, 2 threads) and
// 1.03-1.1x warm (docs/benchmarks.md, twelfth session).
//
// A step is GS score vectors of KG = N / rows keys each. Lane i of a score
// vector is (key i / rows, row i % rows): the transpose-add tree over the
// KG x rows dot-product vectors yields that order directly, so the softmax
// (running max, exp, sum) is lane-wise, each row's max spread over its key
// lanes by rotations. The accumulators [rows][d] stay in L1 and are loaded
// and stored once per step.
constexpr int kGroupSteps = 2;  // score vectors per step: 2 measured faster than 1 (warm) and 4 (cold)

// Whether the key-group kernel takes `rows` query rows on this target: rows
// divides the vector, and a group's dot products (N vectors), its keys' K, q
// and the step's first scores fit the registers, as do a step's V vectors,
// weights and one accumulator in the P·V pass.
constexpr bool GroupRowsOk(int64_t rows) {
  constexpr int64_t kN = static_cast<int64_t>(hn::MaxLanes(DF()));
  if (rows < 1 || kN % rows != 0) return false;
  const int64_t kg = kN / rows, ks = kGroupSteps * kg;
  return kg >= 2 && kN + kg + 2 <= kVecRegs && 2 * ks + 1 <= kVecRegs;
}

// Value vectors per P·V pass for KS keys: a power of two, KS x XC vectors plus
// the KS weights and an accumulator in registers.
constexpr int GroupPassVectors(int ks) {
  int xc = 1;
  while (xc < 8 && ks * 2 * xc + ks + 1 <= kVecRegs) xc *= 2;
  return xc;
}

// acc[r][x .. x + XC*N) += Σ_k p[k][r] * V[k][x ..] over the KS keys of a step;
// p[k][r] is pbuf[k * R + r] (the score vectors' lane order).
template <DType T, int R, int KS, int XC, size_t kD>
HWY_INLINE void GroupAccumulate(DF df, const float* HWY_RESTRICT pbuf, const uint8_t* const* vrow, size_t d_runtime,
                                size_t x, float* HWY_RESTRICT acc) {
  const size_t d = kD != 0 ? kD : d_runtime;
  const size_t N = hn::Lanes(df);
  VF vv[KS][XC];
  for (int k = 0; k < KS; ++k)
    for (int xc = 0; xc < XC; ++xc) vv[k][xc] = Elem<T>::Load(df, vrow[k], x + xc * N);
  for (int r = 0; r < R; ++r) {
    VF pb[KS];
    for (int k = 0; k < KS; ++k) pb[k] = hn::Set(df, pbuf[k * R + r]);
    for (int xc = 0; xc < XC; ++xc) {
      float* a = acc + r * d + x + xc * N;
      VF av = hn::Load(df, a);
      for (int k = 0; k < KS; ++k) av = hn::MulAdd(pb[k], vv[k][xc], av);
      hn::Store(av, df, a);
    }
  }
}

template <DType T, int R, size_t kD>
void GroupItem(const Call& c, const Plan& p, const Item& it, float* scratch, float* partials, int64_t idx) {
  const DF df;
  constexpr int kN = static_cast<int>(hn::MaxLanes(DF()));
  constexpr int KG = kN / R;                // keys per score vector
  constexpr int GS = kGroupSteps;
  constexpr int KS = KG * GS;                  // keys per step: one softmax update, one P·V
  constexpr int XC = GroupPassVectors(KS);     // value vectors per P·V pass
  const size_t N = hn::Lanes(df);
  const size_t d = kD != 0 ? kD : static_cast<size_t>(c.s.d);
  const size_t Rp = static_cast<size_t>(p.rows);
  float* qs = scratch;
  float* acc = qs + RoundUp(Rp * d, 16);
  float* buf = acc + RoundUp(Rp * d, 16);  // (GS + 1) x N floats: a step's p, then m / corr
  const float ninf = -std::numeric_limits<float>::infinity();

  ScaledQueries(c, it, R, d, qs);
  std::fill(acc, acc + R * d, 0.0f);

  // Rotations by R, 2R, ... lanes: after them every key lane of a row holds the row's max.
  constexpr int kRot = KG >= 8 ? 3 : KG >= 4 ? 2 : 1;
  alignas(64) int32_t rot_lanes[kN];
  decltype(hn::SetTableIndices(df, rot_lanes)) rot[kRot];
  for (int t = 0; t < kRot; ++t) {
    for (int i = 0; i < kN; ++i) rot_lanes[i] = (i + (R << t)) % kN;
    rot[t] = hn::SetTableIndices(df, rot_lanes);
  }

  const uint8_t* kbase = ItemRows(c.k, it);
  const uint8_t* vbase = ItemRows(c.v, it);
  const int64_t krs = c.k.row_stride, vrs = c.v.row_stride;
  const int64_t row_bytes = static_cast<int64_t>(dtype_row_bytes(T, d));
  const int64_t pf_dist = RowPrefetch::Distance(row_bytes);
  const RowPrefetch pf{kbase, vbase, krs, vrs, row_bytes, pf_dist, it.hi};
  const VF vninf = hn::Set(df, ninf);

  VF m = vninf, l = hn::Zero(df);
  for (int64_t j = it.lo; j < it.hi; j += KS) {
    const int64_t nvalid = std::min<int64_t>(KS, it.hi - j);
    // A partial last step repeats its last key (masked below), so no row past
    // the item is read.
    const uint8_t* krow[KS];
    const uint8_t* vrow[KS];
    for (int k = 0; k < KS; ++k) {
      const int64_t jj = j + std::min<int64_t>(k, nvalid - 1);
      krow[k] = kbase + jj * krs;
      vrow[k] = vbase + jj * vrs;
    }

    // Q·K of each group of KG keys: KG x R dot-product vectors, then the tree in registers.
    VF s[GS];
    for (int g = 0; g < GS; ++g) {
      pf.Keys(j + g * KG + pf_dist, KG);  // KG keys' lines at a time: bursts stall (RowPrefetch)
      VF dot[KG][R];
      for (int k = 0; k < KG; ++k)
        for (int r = 0; r < R; ++r) dot[k][r] = hn::Zero(df);
      for (size_t x = 0; x < d; x += N) {
        VF kv[KG];
        for (int k = 0; k < KG; ++k) kv[k] = Elem<T>::Load(df, krow[g * KG + k], x);
        for (int r = 0; r < R; ++r) {
          VF qv = hn::Load(df, qs + r * d + x);
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
          asm("" : "+v"(qv.raw));  // q in a register for its KG uses (see RowDots)
#endif
          for (int k = 0; k < KG; ++k) dot[k][r] = hn::MulAdd(qv, kv[k], dot[k][r]);
        }
      }
      VF pairs[kN / 2];
      for (int i = 0; i < kN / 2; ++i) {
        const int a = 2 * i, b = 2 * i + 1;
        pairs[i] = TreeLevel(df, dot[a / R][a % R], dot[b / R][b % R], 0);
      }
      s[g] = TransposeSum<static_cast<size_t>(kN / 2)>(df, pairs);
    }

    const bool full = nvalid == KS && j >= it.flo && j + KS <= it.fhi && !c.mi.per_key_parts();
    if (!full) {
      for (int g = 0; g < GS; ++g) {
        const int64_t ng = std::clamp<int64_t>(nvalid - g * KG, 0, KG);
        hn::Store(s[g], df, buf);
        ApplyMask(c, it, R, j + g * KG, ng, buf, R, 1);
        for (int i = static_cast<int>(ng) * R; i < kN; ++i) buf[i] = ninf;
        s[g] = hn::Load(df, buf);
      }
    }

    // Online softmax, lane-wise; the accumulators are rescaled only when a
    // row's max grows.
    VF mx = s[0];
    for (int g = 1; g < GS; ++g) mx = hn::Max(mx, s[g]);
    for (int t = 0; t < kRot; ++t) mx = hn::Max(mx, hn::TableLookupLanes(mx, rot[t]));
    const VF m_new = hn::Max(m, mx);
    if (!hn::AllFalse(df, hn::Gt(m_new, m))) {
      const VF safe = hn::IfThenZeroElse(hn::Eq(m_new, vninf), m_new);
      const VF corr = hn::Exp(df, hn::Sub(m, safe));
      l = hn::Mul(l, corr);
      hn::Store(corr, df, buf + GS * N);
      for (int r = 0; r < R; ++r) {
        const float f = buf[GS * N + static_cast<size_t>(r)];
        if (f == 1.0f) continue;
        const VF fv = hn::Set(df, f);
        float* a = acc + r * d;
        for (size_t x = 0; x < d; x += N) hn::Store(hn::Mul(hn::Load(df, a + x), fv), df, a + x);
      }
      m = m_new;
    }
    const VF safe = hn::IfThenZeroElse(hn::Eq(m, vninf), m);
    for (int g = 0; g < GS; ++g) {
      const VF pg = hn::Exp(df, hn::Sub(s[g], safe));
      l = hn::Add(l, pg);
      hn::Store(pg, df, buf + g * N);  // key k of the step, row r: buf[k * R + r]
    }

    // P·V of the step.
    size_t x = 0;
    for (; x + XC * N <= d; x += XC * N) GroupAccumulate<T, R, KS, XC, kD>(df, buf, vrow, d, x, acc);
    for (; x < d; x += N) GroupAccumulate<T, R, KS, 1, kD>(df, buf, vrow, d, x, acc);
  }

  // Each row's sum over its key lanes; m is the same in all of them.
  hn::Store(l, df, buf);
  hn::Store(m, df, buf + N);  // (GS + 1) x N floats fit in the tree-pairs region
  float lr[R], mr[R];
  for (int r = 0; r < R; ++r) {
    lr[r] = 0.0f;
    for (int k = 0; k < KG; ++k) lr[r] += buf[k * R + r];
    mr[r] = buf[N + static_cast<size_t>(r)];
  }
  FinishRows(c, p, it, idx, R, mr, lr, acc, partials);
}

// GroupItem for the item's row count (GroupRowsOk must hold).
template <DType T>
void GroupItemRows(const Call& c, const Plan& p, const Item& it, float* scratch, float* partials, int64_t idx) {
  const int64_t rows = it.gh * it.qr;
  WithHeadDim(static_cast<size_t>(c.s.d), [&](auto head_dim) HWY_ATTR {
    constexpr size_t kD = decltype(head_dim)::value;
    if constexpr (GroupRowsOk(8)) {
      if (rows == 8) return GroupItem<T, 8, kD>(c, p, it, scratch, partials, idx);
    }
    if constexpr (GroupRowsOk(4)) {
      if (rows == 4) return GroupItem<T, 4, kD>(c, p, it, scratch, partials, idx);
    }
    if constexpr (GroupRowsOk(2)) {
      if (rows == 2) return GroupItem<T, 2, kD>(c, p, it, scratch, partials, idx);
    }
    QKV_CHECK(false, "attention: no key-group kernel for ", rows, " rows");
  });
}

// Q8_0 keeps RowItem: on AVX3_DL its integer Q·K scores 16 keys at once.
template <DType T>
HWY_INLINE bool UseGroupKernel(int64_t rows) {
  return T != DType::Q8_0 && (rows == 8 || rows == 4 || rows == 2) && GroupRowsOk(rows);
}

#endif  // HWY_TARGET != HWY_SCALAR

// ---------------------------------------------------------------------------
// Driver.

template <DType T>
void RunItem(const Call& c, const Plan& p, const Item& it, float* scratch, float* partials, int64_t idx) {
#if HWY_TARGET != HWY_SCALAR
  if (p.row_kernel) {
    if (UseGroupKernel<T>(it.gh * it.qr)) return GroupItemRows<T>(c, p, it, scratch, partials, idx);
    return RowItem<T>(c, p, it, scratch, partials, idx);
  }
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

// The first keys of an item's K and V rows (the row kernel's prefetch
// distance), requested ahead of the item.
template <DType T>
void PrefetchItemHead(const Call& c, const Plan& p, const Item& it) {
#if HWY_TARGET != HWY_SCALAR
  if (!p.row_kernel || it.hi <= it.lo) return;
  const int64_t row_bytes = static_cast<int64_t>(dtype_row_bytes(T, static_cast<size_t>(c.s.d)));
  const int64_t n = std::min(RowPrefetch::Distance(row_bytes), it.hi - it.lo);
  const uint8_t* kbase = ItemRows(c.k, it);
  const uint8_t* vbase = ItemRows(c.v, it);
  const RowPrefetch pf{kbase, vbase, c.k.row_stride, c.v.row_stride, row_bytes, it.lo, it.hi};
  pf.Keys(it.lo, n);
#else
  (void)c, (void)p, (void)it;
#endif
}

// One thread's part of a call: it runs the item ranges that take(&i0, &i1)
// hands it, then, with split keys, merges its share of the items once every
// thread's partials are written (after sync). scratch: this thread's working set.
template <DType T, class Take, class Sync, class MergeShare>
void RunThread(const Call& c, const Plan& p, float* scratch, float* partials, Take&& take, Sync&& sync,
               MergeShare&& merge_share) {
  int64_t i0, i1;
  while (take(&i0, &i1)) {
    for (int64_t idx = i0; idx < i1; ++idx) {
      if (idx + 1 < i1) PrefetchItemHead<T>(c, p, MakeItem(c, p, idx + 1));
      RunItem<T>(c, p, MakeItem(c, p, idx), scratch, partials, idx);
    }
  }
  if (p.nsplit > 1) {
    sync();
    int64_t lo, hi;
    merge_share(p.items_base, &lo, &hi);
    for (int64_t base = lo; base < hi; ++base) MergeItem(c, p, base, partials);
  }
}

template <DType T>
void RunTyped(const Call& c) {
  const Plan p = MakePlan(c.s, c.threads);
  const int64_t n_items = p.items_base * p.nsplit;
  const size_t per_thread = ScratchFloats(p, c.s);
  // Decode (row kernel): items go out in ranges (large first, then single
  // items), so a thread knows its next item and starts that item's K/V
  // streams while it works: decode items are often short (a batch of
  // sequences at small depth), and each would otherwise begin with a DRAM
  // miss on both streams. Other items one at a time, heaviest first (MakeItem).
  if (Team* team = current_team()) {
    // Every team thread runs this call: scratch is each thread's own, the
    // partials are shared (shared_floats publishes thread 0's buffer with a sync).
    team->begin_call();
    float* partials = p.nsplit > 1 ? team->shared_floats(static_cast<size_t>(n_items * p.rows * (c.s.d + 2)))
                                   : nullptr;
    detail::BlockQueue queue(team, n_items, 1);
    auto take = [&](int64_t* i0, int64_t* i1) { return queue.take(i0, i1); };
    float* mine = attn::ThreadBuffer(0, per_thread);
    auto sync = [&] { team->sync(); };
    auto share = [&](int64_t n, int64_t* lo, int64_t* hi) { team->share(n, lo, hi); };
    // (The tile kernel's items, too, go out as the queue's ranges here, not
    // one at a time: a team runs decode steps, where items are row-kernel ones.)
    RunThread<T>(c, p, mine, partials, take, sync, share);
    team->sync();
    return;
  }
  if (n_items == 0) return;
  const int threads = static_cast<int>(std::min<int64_t>(c.threads, n_items));
  float* scratch = attn::ThreadBuffer(0, per_thread * static_cast<size_t>(threads));
  float* partials = p.nsplit > 1 ? attn::ThreadBuffer(1, static_cast<size_t>(n_items * p.rows * (c.s.d + 2))) : nullptr;
  detail::BlockQueue queue(n_items, threads, 1);
  std::atomic<int64_t> next_single{0};
  auto take_single = [&](int64_t* i0, int64_t* i1) {
    *i0 = next_single.fetch_add(1, std::memory_order_relaxed);
    *i1 = *i0 + 1;
    return *i0 < n_items;
  };
#pragma omp parallel num_threads(threads)
  {
    float* mine = scratch + per_thread * static_cast<size_t>(omp_get_thread_num());
    auto take_range = [&](int64_t* i0, int64_t* i1) { return queue.take(i0, i1); };
    auto sync = [] {
#pragma omp barrier
    };
    auto share = [](int64_t n, int64_t* lo, int64_t* hi) {
      const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
      *lo = n * t / nt;
      *hi = n * (t + 1) / nt;
    };
    if (p.row_kernel) {
      RunThread<T>(c, p, mine, partials, take_range, sync, share);
    } else {
      RunThread<T>(c, p, mine, partials, take_single, sync, share);
    }
  }
}

void Run(const Call& c) {
  switch (c.k.type) {
    case DType::F32: return RunTyped<DType::F32>(c);
    case DType::F16: return RunTyped<DType::F16>(c);
    case DType::BF16: return RunTyped<DType::BF16>(c);
    case DType::Q8_0: return RunTyped<DType::Q8_0>(c);
    default: break;  // KV caches hold only the four types above (kv_cache.cc checks)
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
  Team* const team = current_team();
  if (team != nullptr && opts.weights != nullptr) {
    // The materialized weights need every row's log-sum-exp on one thread:
    // thread 0 does the whole call on its own.
    if (team->thread() == 0) run_outside_team([&] { attention(shape, q, k, v, mask, out, opts); });
    team->sync();
    return;
  }
  // In a team, the team's threads do the call (the split of keys depends on
  // their number, so the result is the same as from a region of that size).
  c.threads = team != nullptr ? team->size() : resolve_threads(opts.threads);
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

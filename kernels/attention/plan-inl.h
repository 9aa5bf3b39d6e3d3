// How a call is cut into work items (the plan), the per-thread scratch, an
// item's rows, and the steps every attention kernel shares: masking a block of
// scores, the online-softmax update, and writing a finished row or an item's
// partial state for the split-KV merge.
//
// A Highway "-inl" header of the attention kernel: kernels/attention/attention.cc
// includes it once per SIMD target (foreach_target), after hwy/highway.h.
#if defined(QKV_KERNELS_ATTENTION_PLAN_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef QKV_KERNELS_ATTENTION_PLAN_INL_H_
#undef QKV_KERNELS_ATTENTION_PLAN_INL_H_
#else
#define QKV_KERNELS_ATTENTION_PLAN_INL_H_
#endif

#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
#include "kernels/attention/loaders-inl.h"

HWY_BEFORE_NAMESPACE();
namespace qkv {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

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

// Score soft-capping (Call::softcap > 0): s -> cap * tanh(s / cap), on the
// scaled scores before the mask, as llama.cpp does for gemma2. The kernels
// test the cap once per block (or instantiate the key-group kernel with and
// without it), so without a cap no score pass changes.
struct SoftCap {
  VF inv, cap;
  explicit SoftCap(DF df, float c) : inv(hn::Set(df, 1.0f / c)), cap(hn::Set(df, c)) {}
  HWY_INLINE VF operator()(DF df, VF s) const { return hn::Mul(cap, hn::Tanh(df, hn::Mul(s, inv))); }
};

// n scores at s (n a multiple of the vector length, s vector-aligned) soft-capped in place.
HWY_INLINE void SoftCapScores(DF df, float cap, float* HWY_RESTRICT s, size_t n) {
  const SoftCap sc(df, cap);
  const size_t N = hn::Lanes(df);
  for (size_t j = 0; j < n; j += N) hn::Store(sc(df, hn::Load(df, s + j)), df, s + j);
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

}  // namespace HWY_NAMESPACE
}  // namespace qkv
HWY_AFTER_NAMESPACE();

#endif  // QKV_KERNELS_ATTENTION_PLAN_INL_H_

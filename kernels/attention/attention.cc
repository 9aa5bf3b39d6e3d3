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

//
// Files (kernels/attention/): loaders-inl.h (K/V element types), plan-inl.h
// (items, scratch, masking, the softmax step), tile-inl.h, row-inl.h and
// q8_vnni-inl.h, group-inl.h (the key-group kernel), prefetch-inl.h,
// merge-inl.h (split-KV), this file (the driver and the entry points) and
// reference.cc (the fp64 reference). The -inl headers are compiled once per
// SIMD target as part of this translation unit.

#include "kernels/sve_excluded.h"  // first: it decides Highway's targets here
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/attention.h"
#include "kernels/attention/call.h"
#include "kernels/attention/validate.h"
#include "kernels/error.h"
#include "kernels/threads/block_queue.h"
#include "kernels/threads/team.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attention/attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/attention/group-inl.h"
#include "kernels/attention/loaders-inl.h"
#include "kernels/attention/merge-inl.h"
#include "kernels/attention/plan-inl.h"
#include "kernels/attention/prefetch-inl.h"
#include "kernels/attention/row-inl.h"
#include "kernels/attention/tile-inl.h"

HWY_BEFORE_NAMESPACE();
namespace qkv {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

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
        const double score = attn::soft_capped(dot * double(c.scale), double(c.softcap)) + double(term);
        w[j] = static_cast<float>(std::exp(score - double(lse)));
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
  c.softcap = opts.softcap;
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

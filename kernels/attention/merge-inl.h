// The split-KV (flash-decoding) merge: the partial (m, l, acc) states of an
// item's key chunks combined exactly into its output rows.
//
// A Highway "-inl" header of the attention kernel: kernels/attention/attention.cc
// includes it once per SIMD target (foreach_target), after hwy/highway.h.
#if defined(QKV_KERNELS_ATTENTION_MERGE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef QKV_KERNELS_ATTENTION_MERGE_INL_H_
#undef QKV_KERNELS_ATTENTION_MERGE_INL_H_
#else
#define QKV_KERNELS_ATTENTION_MERGE_INL_H_
#endif

#include "hwy/highway.h"
#include "kernels/attention/plan-inl.h"

HWY_BEFORE_NAMESPACE();
namespace qkv {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

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

}  // namespace HWY_NAMESPACE
}  // namespace qkv
HWY_AFTER_NAMESPACE();

#endif  // QKV_KERNELS_ATTENTION_MERGE_INL_H_

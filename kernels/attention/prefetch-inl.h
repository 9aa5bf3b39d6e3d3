// Software prefetch of the K and V rows a fixed distance ahead of the keys the
// decode kernels are scoring.
//
// A Highway "-inl" header of the attention kernel: kernels/attention/attention.cc
// includes it once per SIMD target (foreach_target), after hwy/highway.h.
#if defined(QKV_KERNELS_ATTENTION_PREFETCH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef QKV_KERNELS_ATTENTION_PREFETCH_INL_H_
#undef QKV_KERNELS_ATTENTION_PREFETCH_INL_H_
#else
#define QKV_KERNELS_ATTENTION_PREFETCH_INL_H_
#endif

#include "hwy/highway.h"
#include "hwy/cache_control.h"
#include "kernels/attention/plan-inl.h"

HWY_BEFORE_NAMESPACE();
namespace qkv {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR
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

  // Keys [j, j + n) below hi. kBytes: the row size when the caller knows it
  // at compile time (a multiple of 64), so that each row's prefetches unroll;
  // 0: row_bytes.
  template <int64_t kBytes = 0>
  HWY_INLINE void Keys(int64_t j, int64_t n) const {
    const int64_t end = std::min(j + n, hi), bytes = kBytes != 0 ? kBytes : row_bytes;
    const uint8_t* kp = kbase + j * krs;
    const uint8_t* vp = vbase + j * vrs;
    for (int64_t jj = j; jj < end; ++jj, kp += krs, vp += vrs) {
      for (int64_t off = 0; off < bytes; off += 64) {
        hwy::Prefetch(kp + off);
        hwy::Prefetch(vp + off);
      }
    }
  }
};

#endif  // HWY_TARGET != HWY_SCALAR

}  // namespace HWY_NAMESPACE
}  // namespace qkv
HWY_AFTER_NAMESPACE();

#endif  // QKV_KERNELS_ATTENTION_PREFETCH_INL_H_

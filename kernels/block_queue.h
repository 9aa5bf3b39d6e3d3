// A lock-free queue of ranges of work items for OpenMP teams, shared by the
// kernels that hand out rows or items dynamically.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace qkv {
namespace detail {

// Hands out ranges of n blocks to threads: large ranges first (half of what is
// left, split between the threads), then smaller ones down to min_blocks, so a
// thread slowed by a noisy neighbour or a late start just takes fewer instead of
// holding up the others at the join. (A static split left the first thread
// waiting ~15% of a decode step, measured with perf.) Which thread computes a
// row does not change its result. Used by matvec, the batched-decode GEMM and
// decode attention.
class BlockQueue {
 public:
  BlockQueue(int64_t n, int threads, int64_t min_blocks)
      : n_(n), threads_(std::max(1, threads)), min_(std::max<int64_t>(1, min_blocks)) {}

  bool take(int64_t* b0, int64_t* b1) {
    int64_t cur = next_.load(std::memory_order_relaxed);
    for (;;) {
      if (cur >= n_) return false;
      const int64_t left = n_ - cur;
      const int64_t chunk = threads_ == 1 ? left : std::min(left, std::max(min_, left / (2 * threads_)));
      if (next_.compare_exchange_weak(cur, cur + chunk, std::memory_order_relaxed)) {
        *b0 = cur;
        *b1 = cur + chunk;
        return true;
      }
    }
  }

 private:
  const int64_t n_;
  const int threads_;
  const int64_t min_;
  std::atomic<int64_t> next_{0};
};

}  // namespace detail
}  // namespace qkv

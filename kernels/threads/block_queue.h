// A lock-free queue of ranges of work items for OpenMP teams, shared by the
// kernels that hand out rows or items dynamically.
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "kernels/threads/team.h"

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
  // The running team's queue for its current call (see Team::take).
  BlockQueue(Team* team, int64_t n, int64_t min_blocks)
      : n_(n), threads_(team->size()), min_(std::max<int64_t>(1, min_blocks)), team_(team) {}

  // The next range's length when `left` blocks remain.
  static int64_t chunk_size(int64_t left, int threads, int64_t min_blocks) {
    return threads == 1 ? left : std::min(left, std::max(min_blocks, left / (2 * threads)));
  }

  bool take(int64_t* b0, int64_t* b1) {
    if (team_ != nullptr) return team_->take(n_, min_, b0, b1);
    int64_t cur = next_.load(std::memory_order_relaxed);
    for (;;) {
      if (cur >= n_) return false;
      const int64_t chunk = chunk_size(n_ - cur, threads_, min_);
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
  Team* const team_ = nullptr;
};

// Runs body(queue) on every thread that shares n blocks of work, each thread
// taking ranges from `queue` until it is empty. Inside a running Team (every
// team thread makes this call) that is the team, with a sync before
// returning; otherwise a new OpenMP region of omp_get_max_threads(), or the
// calling thread alone unless `parallel`, which says whether the work is
// worth more than one thread.
template <class Body>
void share_blocks(int64_t n, int64_t min_blocks, bool parallel, Body&& body) {
  if (Team* team = current_team()) {
    team->begin_call();
    BlockQueue queue(team, n, parallel ? min_blocks : n);
    body(queue);
    team->sync();
    return;
  }
  const int threads = omp_get_max_threads();
  parallel = parallel && threads > 1 && !omp_in_parallel();
  BlockQueue queue(n, parallel ? threads : 1, min_blocks);
#pragma omp parallel num_threads(threads) if (parallel)
  body(queue);
}

}  // namespace detail
}  // namespace qkv

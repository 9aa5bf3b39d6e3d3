// One OpenMP team kept for a whole sequence of kernel calls (a decode step),
// synchronised by a spinning barrier instead of a parallel region per call.
//
// Why: libgomp ends every parallel region and every barrier with a futex-wake
// system call, whether or not a thread sleeps, and a system call costs about
// 0.9 us on this machine's virtualised CPUs: an empty 2-thread region costs
// ~3 us and a barrier ~1.4 us (bench_ops --benchmark_filter=omp), while a
// spinning barrier over two atomics costs 0.26-0.44 us (BM_team_sync). A decode
// token runs ~150 kernel calls, each once a region of its own.
//
// Use: run_team(threads, fn) runs fn on every thread of one OpenMP region, each
// with the same arguments (SPMD). Inside, kernels that support a team (matvec,
// matmul, attention: see their headers) notice current_team(), share their
// work with the other threads through the team's block queue, and sync before
// they return, so every thread must make the same sequence of such calls.
// Serial work goes through rows() / span() shares followed by sync().
//
// Errors: an exception on one thread marks the team failed; the others leave
// their next sync() (or a kernel's) with TeamAborted, and run_team rethrows
// the first exception after the region. No thread is left spinning.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace qkv {

class Team {
 public:
  int size() const { return size_; }
  // The calling thread's index in [0, size()).
  int thread() const;

  // Waits until every thread of the team has reached the same sync: spins up
  // to wait_poll() microseconds, then blocks (kernels/threads/wait.h), so a
  // team on more threads than free cores lets the thread it waits for run. A
  // team of more threads than the CPUs it may use (usable_cpus()) blocks at
  // once: a spinning thread there holds a CPU an unfinished member needs.
  void sync();

  // This thread's share [*lo, *hi) of n items split into size() contiguous
  // near-equal parts (a static split: for cheap element-wise passes).
  void share(int64_t n, int64_t* lo, int64_t* hi) const;

  // Dynamic split of n blocks for the calling thread's current work-sharing
  // call (BlockQueue's policy: large ranges first, then down to min_blocks).
  // The last thread takes its ranges from the back, the others from the
  // front (up to 2^20 - 1 blocks), so that with two threads each starts on the
  // blocks of its own share(): a decode step's attention items are per row,
  // and that thread's row pass wrote their queries and new keys and values
  // (16 sequences of 143M Q4_K_M 5-8% faster, docs/design.md).
  // Every thread calls begin_call() once at the start of such a call, then
  // take() until it returns false, and the call ends with sync().
  void begin_call();
  bool take(int64_t n, int64_t min_blocks, int64_t* b0, int64_t* b1);

  // A buffer of at least n floats (64-byte aligned) that every thread of the
  // team gets the same pointer to: thread 0 (re)allocates it, then a sync.
  // Valid until the next shared_floats() call; every thread must make it.
  float* shared_floats(size_t n);

  // Thrown from sync() on the threads that did not fail.
  struct Aborted {};

 private:
  friend void run_team(int threads, const std::function<void()>& fn);
  explicit Team(int size) : size_(size), calls_(static_cast<size_t>(size)) {}
  void fail(std::exception_ptr e);

  int size_;
  int poll_us_ = -1;  // a sync's spin: -1 wait_poll(), 0 when oversubscribed
  alignas(64) std::atomic<int> arrived_{0};
  alignas(64) std::atomic<uint32_t> generation_{0};  // also the word blocked threads wait on
  std::atomic<int> sleepers_{0};                       // threads blocked in sync()
  alignas(64) std::atomic<bool> failed_{false};
  // Two queue slots, used by alternate calls: call k reuses slot k % 2 only
  // after the sync ending call k - 1, when no thread still takes from call
  // k - 2. A slot packs (call id << 40 | next block); the first thread to see
  // an old id restarts it at 0.
  alignas(64) std::atomic<uint64_t> slot_[2] = {};
  struct alignas(64) CallId {  // a line per thread: written once per call
    uint32_t id = 0;
  };
  std::vector<CallId> calls_;  // per thread: the id of its current call
  struct FreeFloats {
    void operator()(float* p) const;
  };
  std::unique_ptr<float[], FreeFloats> shared_;
  size_t shared_size_ = 0;
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

// Runs fn on `threads` threads (OpenMP) as one Team; returns when all have
// finished. With threads == 1, or when already inside a parallel region or a
// team, fn runs on the calling thread alone as a team of one.
void run_team(int threads, const std::function<void()>& fn);

// The team the calling thread is running in, or null.
Team* current_team();

// Team::sync() calls the calling thread has made, in every team (a decode
// step's count: the difference across it on the thread that runs it, member
// 0; benchmarks multiply it by a sync's cost).
uint64_t syncs_by_this_thread();

// Runs fn on the calling thread as if it were in no team (kernels it calls do
// their own threading), then restores the thread's team.
void run_outside_team(const std::function<void()>& fn);

}  // namespace qkv

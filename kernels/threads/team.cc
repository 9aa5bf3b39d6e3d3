#include "kernels/threads/team.h"

#include <omp.h>

#include <algorithm>
#include <new>

#include "kernels/error.h"
#include "kernels/threads/block_queue.h"
#include "kernels/threads/placement.h"
#include "kernels/threads/wait.h"

namespace qkv {

namespace {
thread_local Team* t_team = nullptr;
thread_local int t_thread = 0;
thread_local uint64_t t_syncs = 0;

constexpr int kIdShift = 40;
constexpr uint64_t kNextMask = (uint64_t{1} << kIdShift) - 1;
// Calls of up to kEndMask blocks split the slot's low bits into the blocks
// taken from the front and from the back.
constexpr int kEndBits = kIdShift / 2;
constexpr uint64_t kEndMask = (uint64_t{1} << kEndBits) - 1;

// Makes the calling thread a member of `team` (null: of none) as `thread`
// until the scope ends, however it ends, then restores what was there.
class MemberScope {
 public:
  MemberScope(Team* team, int thread) : saved_team_(t_team), saved_thread_(t_thread) {
    t_team = team;
    t_thread = thread;
  }
  ~MemberScope() {
    t_team = saved_team_;
    t_thread = saved_thread_;
  }
  MemberScope(const MemberScope&) = delete;
  MemberScope& operator=(const MemberScope&) = delete;

 private:
  Team* const saved_team_;
  const int saved_thread_;
};

}  // namespace

int Team::thread() const { return t_thread; }

Team* current_team() { return t_team; }

uint64_t syncs_by_this_thread() { return t_syncs; }

void Team::sync() {
  ++t_syncs;
  if (size_ == 1) return;
  // The generation is read before arriving: the last thread to arrive bumps
  // it, which releases everyone who saw the old value.
  const uint32_t gen = generation_.load(std::memory_order_acquire);
  if (arrived_.fetch_add(1, std::memory_order_acq_rel) == size_ - 1) {
    arrived_.store(0, std::memory_order_relaxed);
    generation_.store(gen + 1, std::memory_order_seq_cst);
    // No system call unless a thread is blocked (one costs ~1 us here).
    if (sleepers_.load(std::memory_order_seq_cst) > 0) wake_all(generation_);
    return;
  }
  // A wait here is usually the other threads finishing their share, a few
  // microseconds: it spins that long, then blocks.
  spin_then_block(
      generation_, sleepers_, [&] { return generation_.load(std::memory_order_acquire) != gen; },
      [&] { return failed_.load(std::memory_order_relaxed); }, poll_us_);
  if (failed_.load(std::memory_order_acquire)) throw Aborted{};
}

void Team::share(int64_t n, int64_t* lo, int64_t* hi) const {
  const int t = thread();
  *lo = n * t / size_;
  *hi = n * (t + 1) / size_;
}

void Team::begin_call() { ++calls_[static_cast<size_t>(thread())].id; }

bool Team::take(int64_t n, int64_t min_blocks, int64_t* b0, int64_t* b1) {
  QKV_CHECK(n >= 0 && static_cast<uint64_t>(n) <= kNextMask, "Team::take: ", n, " blocks is out of range");
  const uint64_t id = calls_[static_cast<size_t>(thread())].id & ((uint64_t{1} << (64 - kIdShift)) - 1);
  std::atomic<uint64_t>& slot = slot_[id % 2];
  // Up to kEndMask blocks the slot counts blocks taken from both ends: the
  // last thread takes from the back, the others from the front.
  const bool two_ends = static_cast<uint64_t>(n) <= kEndMask;
  const bool back = two_ends && size_ > 1 && thread() == size_ - 1;
  uint64_t cur = slot.load(std::memory_order_relaxed);
  for (;;) {
    if ((cur >> kIdShift) != id) {  // the slot still holds call id - 2: restart it for this call
      const uint64_t fresh = id << kIdShift;
      if (slot.compare_exchange_weak(cur, fresh, std::memory_order_relaxed)) cur = fresh;
      continue;
    }
    const int64_t front = static_cast<int64_t>(cur & (two_ends ? kEndMask : kNextMask));
    const int64_t from_back = two_ends ? static_cast<int64_t>((cur >> kEndBits) & kEndMask) : 0;
    const int64_t left = n - front - from_back;
    if (left <= 0) return false;
    const int64_t chunk = detail::BlockQueue::chunk_size(left, size_, min_blocks);
    const uint64_t taken = back ? cur + (static_cast<uint64_t>(chunk) << kEndBits) : cur + static_cast<uint64_t>(chunk);
    if (slot.compare_exchange_weak(cur, taken, std::memory_order_relaxed)) {
      *b0 = back ? n - from_back - chunk : front;
      *b1 = *b0 + chunk;
      return true;
    }
  }
}

void Team::FreeFloats::operator()(float* p) const { ::operator delete[](p, std::align_val_t(64)); }

float* Team::shared_floats(size_t n) {
  if (thread() == 0 && shared_size_ < n) {
    shared_.reset(static_cast<float*>(::operator new[](n * sizeof(float), std::align_val_t(64))));
    shared_size_ = n;
  }
  sync();
  return shared_.get();
}

void run_outside_team(const std::function<void()>& fn) {
  const MemberScope outside(nullptr, 0);
  fn();
}

void Team::fail(std::exception_ptr e) {
  {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (!error_) error_ = e;
  }
  failed_.store(true, std::memory_order_seq_cst);
  // Wakes the threads blocked in sync() (their word changes, so none misses it).
  generation_.fetch_add(1, std::memory_order_seq_cst);
  wake_all(generation_);
}

void run_team(int threads, const std::function<void()>& fn) {
  if (t_team != nullptr) return fn();  // already in a team: a nested call joins nothing new
  if (threads <= 1 || omp_in_parallel()) {
    Team solo(1);
    const MemberScope member(&solo, 0);
    pin_team_member(0, 1);
    fn();
    return;
  }
  Team team(threads);
#pragma omp parallel num_threads(threads)
  {
    // The runtime may give fewer threads than asked: the team is what it got.
#pragma omp single
    {
      team.size_ = omp_get_num_threads();
      if (team.size_ > usable_cpus()) team.poll_us_ = 0;
    }
    const MemberScope member(&team, omp_get_thread_num());
    try {
      pin_team_member(omp_get_thread_num(), team.size_);  // --cpu-mask, --numa (kernels/threads/placement.h)
      fn();
    } catch (const Team::Aborted&) {
      // another thread failed first; its exception is the one reported
    } catch (...) {
      team.fail(std::current_exception());
    }
  }
  if (team.error_) std::rethrow_exception(team.error_);
}

}  // namespace qkv

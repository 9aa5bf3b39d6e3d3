// ctest-labels: asan kernels
// How a team's threads wait (kernels/threads/wait.h): a thread with nothing to
// do blocks after its spin instead of burning its core, a blocked thread is
// woken by the sync that releases it and by another thread's failure, and a
// team on more threads than cores, beside a competitor pinned to a core,
// finishes with every sync and every block of work still exact.
#include <doctest/doctest.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "kernels/error.h"
#include "kernels/threads/cores.h"
#include "kernels/threads/placement.h"
#include "kernels/threads/team.h"
#include "kernels/threads/wait.h"

using namespace qkv;

namespace {

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Sets the wait's spin for a scope and restores the default after.
struct PollScope {
  explicit PollScope(int level) { set_wait_poll(level); }
  ~PollScope() { set_wait_poll(kDefaultPoll); }
};

// A thread that spins on one core until destroyed: someone else's work.
class Competitor {
 public:
  explicit Competitor(int cpu) {
    thread_ = std::thread([this, cpu] {
#if defined(__linux__)
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpu, &set);
      pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
#endif
      volatile uint64_t x = 0;
      while (!stop_.load(std::memory_order_relaxed)) x = x + 1;
    });
  }
  ~Competitor() {
    stop_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace

TEST_CASE("wait: a thread waiting a second at a sync blocks instead of spinning") {
  for (int level : {kDefaultPoll, 0, 100}) {
    CAPTURE(level);
    const PollScope poll(level);
    std::atomic<double> waiter_cpu{-1.0};
    std::atomic<int> size{0};
    run_team(2, [&] {
      Team* team = current_team();
      size = team->size();
      if (team->thread() == 0) {
        std::this_thread::sleep_for(std::chrono::seconds(1));
        team->sync();
      } else {
        const double t0 = thread_cpu_seconds();
        team->sync();
        waiter_cpu = thread_cpu_seconds() - t0;
      }
    });
    if (size.load() < 2) {
      MESSAGE("skipped: OpenMP gave a team of one thread");
      continue;
    }
    // A wait that never blocks would cost about the whole second here.
    CHECK(waiter_cpu.load() >= 0.0);
    CHECK(waiter_cpu.load() < 0.1);
  }
}

TEST_CASE("wait: a blocked thread wakes for its sync, round after round") {
  const PollScope poll(0);  // block at once: every wait goes through the futex
  std::vector<int> slot(2, -1);
  std::atomic<int> wrong{0};
  run_team(2, [&] {
    Team* team = current_team();
    const int t = team->thread();
    for (int round = 0; round < 3000; ++round) {
      slot[t] = round;
      team->sync();
      for (int u = 0; u < team->size(); ++u) wrong += slot[u] != round;
      team->sync();
    }
  });
  CHECK(wrong.load() == 0);
}

TEST_CASE("wait: a failure wakes the threads blocked at a sync") {
  const PollScope poll(0);
  std::atomic<int> after{0};
  bool threw = false;
  try {
    run_team(3, [&] {
      Team* team = current_team();
      if (team->thread() == 0) {
        // The others are blocked by now (no spin), waiting for this thread.
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        fail("thread 0 fails on purpose");
      }
      team->sync();
      ++after;
    });
  } catch (const Error& e) {
    threw = std::string(e.what()).find("fails on purpose") != std::string::npos;
  }
  CHECK(threw);
  CHECK(after.load() == 0);
}

TEST_CASE("wait: spin_then_block returns once the word changes and the waker wakes") {
  for (int level : {0, kDefaultPoll}) {
    CAPTURE(level);
    const PollScope poll(level);
    std::atomic<uint32_t> word{7};
    std::atomic<int> sleepers{0};
    std::atomic<bool> done{false};
    std::thread waiter([&] {
      spin_then_block(
          word, sleepers, [&] { return word.load() != 7; }, [] { return false; });
      done = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CHECK_FALSE(done.load());
    word.store(8, std::memory_order_seq_cst);
    if (sleepers.load(std::memory_order_seq_cst) > 0) wake_all(word);
    waiter.join();
    CHECK(done.load());
    CHECK(sleepers.load() == 0);
  }
}

TEST_CASE("team: more threads than cores, beside a pinned competitor, finishes exact") {
  const int threads = 2 * physical_cores() + 1;
  const Competitor competitor(0);
  for (int level : {kDefaultPoll, 0}) {
    CAPTURE(level);
    const PollScope poll(level);
    constexpr int64_t kBlocks = 997;
    std::vector<std::atomic<int>> taken(kBlocks);
    std::vector<int> slot(static_cast<size_t>(threads), -1);
    std::atomic<int> wrong{0}, size{0};
    constexpr int kRounds = 300;
    run_team(threads, [&] {
      Team* team = current_team();
      size = team->size();
      const int t = team->thread();
      for (int round = 0; round < kRounds; ++round) {
        slot[static_cast<size_t>(t)] = round;
        team->begin_call();
        int64_t b0, b1;
        while (team->take(kBlocks, 3, &b0, &b1)) {
          for (int64_t b = b0; b < b1; ++b) taken[static_cast<size_t>(b)].fetch_add(1, std::memory_order_relaxed);
        }
        team->sync();
        for (int u = 0; u < team->size(); ++u) wrong += slot[static_cast<size_t>(u)] != round;
        team->sync();
      }
    });
    CHECK(size.load() >= 1);
    CHECK(wrong.load() == 0);
    int off = 0;
    for (const auto& n : taken) off += n.load() != kRounds;
    CHECK(off == 0);
  }
}

TEST_CASE("threads: the default is one per physical core, within the CPUs this process may use") {
  const int cores = physical_cores();
  CHECK(cores >= 1);
  CHECK(cores <= omp_get_num_procs());
  CHECK(threads_or_default(0) == cores);
  CHECK(threads_or_default(1) == 1);
  // A count beyond the usable CPUs runs on as many as there are.
  CHECK(threads_or_default(usable_cpus()) == usable_cpus());
  CHECK(threads_or_default(usable_cpus() + 3) == usable_cpus());
}

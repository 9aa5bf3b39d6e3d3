// How qkv's threads wait for each other: spin for a bounded time, then block.
//
// Why: on a machine whose cores are busy with other work, a thread that spins
// (or yields, which the kernel's fair scheduler answers by running the other
// process for its whole slice) burns the share of the core the thread it waits
// for needs, and a barrier then costs a scheduler slice instead of
// microseconds: with a competitor on each core of a 2-core guest, 143M F16's
// 16 sequences ran at 103 tok/s on 2 threads against 224 on 1 while the team
// yielded, and at 361 on 2 with these waits. A thread that blocks keeps its
// share, and the scheduler runs it as soon as it is woken. On an idle machine
// most waits end within the spin, so blocking costs nothing there.
//
// The spin time is one setting for the process: llama.cpp's --poll level 0..100
// (0: block at once), in microseconds.
#pragma once

#include <atomic>
#include <cstdint>

namespace qkv {

// The default --poll level: the time a wait spins, in microseconds.
constexpr int kDefaultPoll = 50;

// Sets how long waits spin before they block (0..100 microseconds; clamped).
void set_wait_poll(int level);
int wait_poll();

// Blocks while *word == expected; may return spuriously (callers re-check).
void block_while_equal(std::atomic<uint32_t>& word, uint32_t expected);
// Wakes every thread blocked on word.
void wake_all(std::atomic<uint32_t>& word);

// Waits until done() is true: spins up to poll_us microseconds (-1:
// wait_poll()), then blocks on `word` (which whoever makes done() true
// changes, then calls wake_all when *sleepers is non-zero). abort() is checked
// too: when true the wait ends.
template <class Done, class Abort>
void spin_then_block(std::atomic<uint32_t>& word, std::atomic<int>& sleepers, Done&& done, Abort&& abort,
                     int poll_us = -1);

namespace detail {
void spin_pause();
int64_t now_ns();
}  // namespace detail

template <class Done, class Abort>
void spin_then_block(std::atomic<uint32_t>& word, std::atomic<int>& sleepers, Done&& done, Abort&& abort,
                     int poll_us) {
  if (done() || abort()) return;
  const int64_t budget = int64_t{1000} * (poll_us < 0 ? wait_poll() : poll_us);
  if (budget > 0) {
    const int64_t start = detail::now_ns();
    for (int spins = 1;; ++spins) {
      detail::spin_pause();
      if (done() || abort()) return;
      // The clock costs ~20 ns: read it every 32 pauses.
      if (spins % 32 == 0 && detail::now_ns() - start >= budget) break;
    }
  }
  // Counted as a sleeper before the last look at the word: the waker changes
  // the word, then reads the count (both sequentially consistent), so either it
  // sees this sleeper and wakes it, or this thread sees the changed word.
  sleepers.fetch_add(1, std::memory_order_seq_cst);
  for (;;) {
    const uint32_t seen = word.load(std::memory_order_seq_cst);
    if (done() || abort()) break;
    block_while_equal(word, seen);
  }
  sleepers.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace qkv

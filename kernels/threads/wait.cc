#include "kernels/threads/wait.h"

#include <algorithm>
#include <chrono>
#include <thread>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace qkv {

namespace {
std::atomic<int> g_poll{kDefaultPoll};
}  // namespace

void set_wait_poll(int level) { g_poll.store(std::clamp(level, 0, 100), std::memory_order_relaxed); }

int wait_poll() { return g_poll.load(std::memory_order_relaxed); }

namespace detail {

void spin_pause() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace detail

#if defined(__linux__)
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "a futex word is 32 bits");

void block_while_equal(std::atomic<uint32_t>& word, uint32_t expected) {
  // EAGAIN (the word changed) and EINTR are both a return: the caller re-checks.
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

void wake_all(std::atomic<uint32_t>& word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
}
#else
// No futex: a short sleep between looks (the caller loops until done).
void block_while_equal(std::atomic<uint32_t>& word, uint32_t expected) {
  if (word.load(std::memory_order_acquire) == expected) std::this_thread::sleep_for(std::chrono::microseconds(50));
}

void wake_all(std::atomic<uint32_t>&) {}
#endif

}  // namespace qkv

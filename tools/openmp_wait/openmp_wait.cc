// libqkv_openmp_wait.so: makes OpenMP's idle threads in the qkv executable wait
// the way qkv's team does (kernels/threads/wait.h): spin for up to --poll
// microseconds, then block.
//
// Why a library of its own: libgomp reads its wait policy from the environment
// once, in its own initializer, before main runs; by default it spins 300,000
// pauses (~7 ms here) at every region's end, and on a busy machine that spin
// burns the share of a core the next region's work needs (143M F16 prefill of
// 256 tokens with a competitor on each core: 364 tokens/s, 534 with a 50 us
// spin). The loader initializes a library after every library it needs, and
// otherwise in the reverse of the program's DT_NEEDED order, so this library,
// needing nothing but libc and listed after libgomp and oneDNN (which needs
// libgomp; tools/CMakeLists.txt), sets GOMP_SPINCOUNT before libgomp reads it.
// (A .preinit_array function runs earlier still, but libc's own initializer
// then resets the environment to the one the kernel passed.) tests/cli_poll.sh
// checks the order with libgomp's OMP_DISPLAY_ENV. A user's own
// OMP_WAIT_POLICY or GOMP_SPINCOUNT is kept.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/threads/wait.h"
#include "tools/poll_level.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace {

using qkv::kDefaultPoll;

double now_us() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}

// libgomp's spin is a load and a pause a round: rounds per microsecond here
// (41 on a Zen 4 guest, where a pause takes 24 ns).
double spin_rounds_per_us() {
  constexpr int kRounds = 2000;
  volatile int sink = 0;
  const double t0 = now_us();
  for (int i = 0; i < kRounds; ++i) {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
    sink = sink + 1;
  }
  const double us = now_us() - t0;
  return us > 0 ? kRounds / us : 100.0;
}

// glibc passes an initializer the program's argc, argv and environment.
void set_openmp_spin(int argc, char** argv, char**) {
  if (getenv("OMP_WAIT_POLICY") != nullptr || getenv("GOMP_SPINCOUNT") != nullptr) return;
  int level = kDefaultPoll;
  for (int i = 2; i + 1 < argc; ++i) {  // qkv COMMAND ... --poll N ...
    if (strcmp(argv[i], "--poll") == 0) qkv::tools::parse_poll_level(argv[i + 1], &level);
  }
  char value[32];
  snprintf(value, sizeof(value), "%ld", static_cast<long>(level * spin_rounds_per_us()));
  setenv("GOMP_SPINCOUNT", value, 0);
}

__attribute__((section(".init_array"), used)) void (*const kSetOpenmpSpin)(int, char**, char**) = set_openmp_spin;

}  // namespace

// The executable refers to this symbol so that the linker keeps the library
// in its DT_NEEDED list (an --as-needed link drops an unreferenced library).
extern "C" __attribute__((visibility("default"))) int qkv_openmp_wait_linked() { return 1; }

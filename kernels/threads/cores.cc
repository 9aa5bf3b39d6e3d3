#include "kernels/threads/cores.h"

#include <omp.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <utility>

#include "kernels/threads/placement.h"

#if defined(__linux__)
#include <sched.h>
#endif

namespace qkv {

namespace {

bool read_int(const std::string& path, int* value) {
  std::ifstream in(path);
  return static_cast<bool>(in >> *value);
}

int count_physical_cores() {
#if defined(__linux__)
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0) return omp_get_num_procs();
  std::set<std::pair<int, int>> cores;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &mask)) continue;
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    int package = 0, core = 0;
    if (!read_int(dir + "physical_package_id", &package) || !read_int(dir + "core_id", &core)) {
      return CPU_COUNT(&mask);  // no topology (some containers): every allowed CPU
    }
    cores.emplace(package, core);
  }
  return cores.empty() ? 1 : static_cast<int>(cores.size());
#else
  return omp_get_num_procs();
#endif
}

}  // namespace

int physical_cores() {
  static const int n = count_physical_cores();
  return n;
}

int threads_or_default(int requested) {
  if (requested <= 0) return physical_cores();
  const int usable = usable_cpus();
  if (requested <= usable) return requested;
  static std::atomic<bool> noted{false};
  if (!noted.exchange(true)) {
    std::fprintf(stderr, "qkv: %d threads asked for, %d CPU%s usable: running %d (threads beyond the CPUs only wait)\n",
                 requested, usable, usable == 1 ? "" : "s", usable);
  }
  return usable;
}

OmpThreadsScope::OmpThreadsScope(int threads) {
  if (threads <= 0) return;
  saved_ = omp_get_max_threads();
  omp_set_num_threads(threads_or_default(threads));
}

OmpThreadsScope::~OmpThreadsScope() {
  if (saved_ > 0) omp_set_num_threads(saved_);
}

}  // namespace qkv

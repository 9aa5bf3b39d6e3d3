#include "kernels/threads/cores.h"

#include <omp.h>

#include <fstream>
#include <set>
#include <string>
#include <utility>

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

OmpThreadsScope::OmpThreadsScope(int threads) {
  if (threads <= 0) return;
  saved_ = omp_get_max_threads();
  omp_set_num_threads(threads);
}

OmpThreadsScope::~OmpThreadsScope() {
  if (saved_ > 0) omp_set_num_threads(saved_);
}

}  // namespace qkv

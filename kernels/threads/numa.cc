#include "kernels/threads/numa.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "kernels/error.h"

#if QKV_HAVE_NUMA
#include <numa.h>
#include <numaif.h>
#endif

namespace qkv {

namespace {
std::atomic<uint64_t> g_placed{0};
}  // namespace

#if QKV_HAVE_NUMA

bool numa_supported() {
  static const bool available = numa_available() >= 0;
  return available;
}

int numa_node_slots() { return numa_supported() ? numa_max_node() + 1 : 1; }

int numa_node_of(int cpu) {
  if (!numa_supported()) return 0;
  const int node = numa_node_of_cpu(cpu);
  return node < 0 ? 0 : node;
}

bool prefer_node(const void* data, size_t bytes, int node) {
  if (!numa_supported()) return false;
  QKV_CHECK(node >= 0 && node < numa_node_slots(), "prefer_node: node ", node, " is not one of this machine's ",
            numa_node_slots());
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t lo = (begin + page - 1) / page * page, hi = (begin + bytes) / page * page;
  if (hi <= lo) return false;
  // mbind's mask is an array of unsigned long of maxnode bits; one word per
  // 64 nodes, sized for the node asked for.
  constexpr size_t kBits = 8 * sizeof(unsigned long);
  unsigned long mask[16] = {};
  QKV_CHECK(static_cast<size_t>(node) < 16 * kBits, "prefer_node: node ", node, " is beyond ", 16 * kBits,
            " nodes");
  mask[static_cast<size_t>(node) / kBits] = 1UL << (static_cast<size_t>(node) % kBits);
  if (mbind(reinterpret_cast<void*>(lo), hi - lo, MPOL_PREFERRED, mask, 16 * kBits, MPOL_MF_MOVE) != 0) {
    const int err = errno;
    fail("asking for ", hi - lo, " bytes at ", reinterpret_cast<void*>(lo), " on NUMA node ", node,
         " (mbind): ", std::strerror(err));
  }
  g_placed.fetch_add(1, std::memory_order_relaxed);
  return true;
}

#else

bool numa_supported() { return false; }
int numa_node_slots() { return 1; }
int numa_node_of(int) { return 0; }
bool prefer_node(const void*, size_t, int) { return false; }

#endif

uint64_t numa_ranges_placed() { return g_placed.load(std::memory_order_relaxed); }

}  // namespace qkv

// The machine's NUMA nodes and where memory lives on them, through libnuma
// (Debian's libnuma-dev) when qkv is built with it (QKV_NUMA, found or not:
// third_party/numa.cmake); without it, or on a kernel without NUMA support,
// the machine is one node 0 and nothing here asks the kernel anything.
#pragma once

#include <cstddef>
#include <cstdint>

namespace qkv {

// Whether placement requests reach the kernel: built with libnuma and
// numa_available() says the kernel supports NUMA.
bool numa_supported();
// The highest node number + 1 (>= 1; nodes may have no CPUs).
int numa_node_slots();
// The node of a CPU (0 without NUMA support or for a CPU libnuma does not know).
int numa_node_of(int cpu);

// Asks the kernel to keep the whole pages inside [data, data + bytes) on
// `node` (mbind MPOL_PREFERRED, moving the pages already there: a preference,
// so a full node spills rather than fails). Returns false, asking nothing,
// without NUMA support or when the range holds no whole page; a refused
// request is a qkv::Error naming the range and the kernel's reason.
bool prefer_node(const void* data, size_t bytes, int node);
// Ranges prefer_node has placed in this process.
uint64_t numa_ranges_placed();

}  // namespace qkv

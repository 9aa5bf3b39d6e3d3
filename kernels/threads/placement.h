// Where qkv's worker threads run and where the weights they read are kept:
// the --cpu-mask / --cpu-range / --cpu-strict pinning and the --numa modes of
// llama.cpp, with the same meanings.
//
// Pinning: the CPUs given (default: the process's affinity when the placement
// is set) become the affinity of the thread that sets it, so every thread made
// after it (OpenMP's pool, a server's threads) inherits them; each member of a
// thread team (run_team, kernels/threads/team.h) then pins itself to its own
// set as it joins: the whole set, or with strict one CPU (member i the i-th,
// wrapping). NUMA modes narrow a member's set to a node: distribute gives
// member i of T the node (i * nodes / T), so consecutive members share a node
// and the nodes get equal numbers of members; isolate keeps every member on the
// node of the CPU the process ran on when the placement was set; numactl pins
// nothing further (the cpuset numactl gave is the affinity already).
//
// Weights: a matrix's rows are read by the team in contiguous shares (member i
// of T takes about rows [n*i/T, n*(i+1)/T), Team::share and Team::take), so
// under distribute node k's members read about rows [n*k/N, n*(k+1)/N) of
// every matrix whatever T is: place_rows asks the kernel to keep those pages on
// node k (isolate: the whole matrix on its node). Memory placement needs
// libnuma (kernels/threads/numa.h); without it only the pinning applies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace qkv {

enum class NumaMode { kNone, kDistribute, kIsolate, kNumactl };

struct Placement {
  std::vector<int> cpus;  // ascending; empty: the process's affinity when set
  bool strict = false;    // one CPU per team member
  NumaMode numa = NumaMode::kNone;
};

// llama.cpp's spellings, each a qkv::Error naming the bad text:
// a hex mask with or without 0x ("3", "0xff": bit i is CPU i),
std::vector<int> parse_cpu_mask(const std::string& hex);
// an inclusive range "LO-HI" (or one CPU "N"),
std::vector<int> parse_cpu_range(const std::string& range);
// distribute, isolate or numactl.
NumaMode parse_numa_mode(const std::string& mode);
const char* numa_mode_name(NumaMode mode);

// Makes p the process's placement (see above); fails (qkv::Error) when a CPU
// given is not one the process may run on, or isolate finds no allowed CPU on
// its node. Call it before any worker thread exists, on the main thread.
void set_placement(const Placement& p);
// Back to no placement: the affinity the first set_placement found is restored
// on the calling thread; team members keep theirs until a new placement.
void clear_placement();
bool placement_active();

// How many CPUs a team's members may run on: the placement's, else the
// process's affinity when first asked (at least 1).
int usable_cpus();

// The CPUs member `thread` of a team of `size` runs on under the current
// placement (empty: no placement, it is not pinned).
std::vector<int> member_cpus(int thread, int size);
// Pins the calling thread as member `thread` of a team of `size` (nothing
// without a placement, or when it is already so pinned).
void pin_team_member(int thread, int size);

// Asks for the pages of a weight matrix of `rows` rows in [data, data + bytes)
// to be kept on the nodes whose members read them (see above); nothing
// without a distribute or isolate placement or without libnuma. Returns the
// ranges asked for.
int place_rows(const void* data, size_t bytes, int64_t rows);

}  // namespace qkv

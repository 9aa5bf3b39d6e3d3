// ctest-labels: asan kernels
// --cpu-mask / --cpu-range / --numa (kernels/threads/placement.h): the
// spellings parse or fail with a message naming the text; a placement pins the
// members of a thread team (their own sched_getaffinity, read inside the
// team); with libnuma, weights are asked for on a node (the policy the kernel
// reports for their pages with get_mempolicy(MPOL_F_ADDR), and move_pages'
// node of each touched page); without a placement nothing is asked and no
// thread is pinned.
#include <doctest/doctest.h>
#include <linux/mempolicy.h>
#include <omp.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "kernels/threads/cores.h"
#include "kernels/threads/numa.h"
#include "kernels/threads/placement.h"
#include "kernels/threads/team.h"
#include "runtime/model.h"
#include "runtime/synthetic.h"
#include "runtime/weight_placement.h"

using namespace qkv;

namespace {

std::vector<int> my_cpus() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &mask)) cpus.push_back(c);
  }
  return cpus;
}

// Each member's affinity, read by the member itself inside a team of `threads`.
std::vector<std::vector<int>> team_affinities(int threads) {
  std::vector<std::vector<int>> seen(static_cast<size_t>(threads));
  std::mutex m;
  int size = 0;
  run_team(threads, [&] {
    Team* team = current_team();
    const std::vector<int> cpus = my_cpus();
    std::lock_guard<std::mutex> lock(m);
    size = team->size();
    seen[static_cast<size_t>(team->thread())] = cpus;
  });
  seen.resize(static_cast<size_t>(size));
  return seen;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The policy the kernel holds for the page at p: {mode, nodemask word 0}.
std::pair<int, unsigned long> policy_at(const void* p) {
  int mode = -1;
  unsigned long mask[16] = {};
  const long rc = syscall(SYS_get_mempolicy, &mode, mask, 16 * 8 * sizeof(unsigned long), p, MPOL_F_ADDR);
  REQUIRE(rc == 0);
  return {mode, mask[0]};
}

}  // namespace

TEST_CASE("CPU masks and ranges parse as llama.cpp spells them") {
  CHECK(parse_cpu_mask("3") == std::vector<int>{0, 1});
  CHECK(parse_cpu_mask("0x5") == std::vector<int>{0, 2});
  CHECK(parse_cpu_mask("0X10") == std::vector<int>{4});
  CHECK(parse_cpu_mask("f0") == std::vector<int>{4, 5, 6, 7});
  CHECK(parse_cpu_range("0-3") == std::vector<int>{0, 1, 2, 3});
  CHECK(parse_cpu_range("2") == std::vector<int>{2});
  CHECK(parse_numa_mode("distribute") == NumaMode::kDistribute);
  CHECK(parse_numa_mode("isolate") == NumaMode::kIsolate);
  CHECK(parse_numa_mode("numactl") == NumaMode::kNumactl);

  CHECK(error_of([] { parse_cpu_mask("0xg1"); }).find("not hexadecimal ('g')") != std::string::npos);
  CHECK(error_of([] { parse_cpu_mask("0x"); }).find("no hex digits") != std::string::npos);
  CHECK(error_of([] { parse_cpu_mask("0"); }).find("selects no CPU") != std::string::npos);
  CHECK(error_of([] { parse_cpu_mask(std::string(300, 'f')); }).find("longer than") != std::string::npos);
  CHECK(error_of([] { parse_cpu_range("3-1"); }).find("ends before it starts") != std::string::npos);
  CHECK(error_of([] { parse_cpu_range("a-b"); }).find("'a-b' is not LO-HI") != std::string::npos);
  CHECK(error_of([] { parse_cpu_range("-1"); }).find("is not LO-HI") != std::string::npos);
  CHECK(error_of([] { parse_cpu_range("0-99999"); }).find("beyond") != std::string::npos);
  CHECK(error_of([] { parse_numa_mode("fast"); }).find("not 'fast'") != std::string::npos);
  CHECK(error_of([] { parse_numa_mode("mirror"); }).find("not implemented") != std::string::npos);
}

TEST_CASE("a placement pins each team member, and clearing it unpins them") {
  const std::vector<int> all = my_cpus();
  REQUIRE(!all.empty());
  // Without a placement nobody is pinned: members keep the process's CPUs.
  for (const std::vector<int>& cpus : team_affinities(2)) CHECK(cpus == all);
  CHECK(member_cpus(0, 2).empty());

  // One CPU for the whole team (--cpu-mask with the first allowed CPU).
  Placement one;
  one.cpus = {all[0]};
  set_placement(one);
  CHECK(my_cpus() == one.cpus);  // the thread that set it, and so every thread made after it
  for (const std::vector<int>& cpus : team_affinities(2)) CHECK(cpus == one.cpus);
  // A thread count beyond the placement's CPUs runs on as many as it has.
  CHECK(usable_cpus() == 1);
  CHECK(threads_or_default(8) == 1);
  CHECK(threads_or_default(1) == 1);
  CHECK(threads_or_default(0) == physical_cores());

  if (all.size() >= 2) {
    // Two CPUs: each member may use both; strict: a CPU each, in order.
    Placement two;
    two.cpus = {all[0], all[1]};
    set_placement(two);
    for (const std::vector<int>& cpus : team_affinities(2)) CHECK(cpus == two.cpus);
    two.strict = true;
    set_placement(two);
    const auto strict = team_affinities(2);
    REQUIRE(strict.size() == 2);
    CHECK(strict[0] == std::vector<int>{all[0]});
    CHECK(strict[1] == std::vector<int>{all[1]});
    CHECK(member_cpus(2, 3) == std::vector<int>{all[0]});  // a third member wraps
  } else {
    MESSAGE("only one CPU is allowed here: the two-CPU pinning checks are skipped");
  }

  // A CPU the process may not use is refused, naming it and the allowed ones.
  Placement outside;
  outside.cpus = {CPU_SETSIZE - 1};
  CHECK(error_of([&] { set_placement(outside); }).find("is not one this process may run on") != std::string::npos);

  clear_placement();
  CHECK(!placement_active());
  CHECK(my_cpus() == all);
  CHECK(threads_or_default(static_cast<int>(all.size())) == static_cast<int>(all.size()));
  CHECK(threads_or_default(static_cast<int>(all.size()) + 6) == static_cast<int>(all.size()));
  for (const std::vector<int>& cpus : team_affinities(2)) CHECK(cpus == all);
}

TEST_CASE("distribute gives consecutive members the same node, each node its CPUs") {
  Placement p;
  p.numa = NumaMode::kDistribute;
  set_placement(p);
  const std::vector<int> all = my_cpus();
  for (int t = 0; t < 4; ++t) {
    const std::vector<int> cpus = member_cpus(t, 4);
    REQUIRE(!cpus.empty());
    const int node = numa_node_of(cpus[0]);
    for (int c : cpus) CHECK(numa_node_of(c) == node);
    // Members 0..T/N-1 on the first node, and so on: never a lower node than the member before.
    if (t > 0) CHECK(numa_node_of(member_cpus(t - 1, 4)[0]) <= node);
  }
  clear_placement();
}

TEST_CASE("without a NUMA placement no memory placement is asked for") {
  std::vector<float> rows(1 << 16, 1.0f);
  const uint64_t before = numa_ranges_placed();
  CHECK(place_rows(rows.data(), rows.size() * sizeof(float), 64) == 0);  // no placement at all
  Placement pinned_only;
  set_placement(pinned_only);
  CHECK(place_rows(rows.data(), rows.size() * sizeof(float), 64) == 0);  // pinning, no --numa
  clear_placement();
  CHECK(numa_ranges_placed() == before);
}

TEST_CASE("distribute asks for a matrix's rows on the nodes that read them") {
  if (!numa_supported()) {
    MESSAGE("SKIPPED: built without libnuma (QKV_NUMA) or the kernel has no NUMA support");
    return;
  }
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t pages = 32;
  void* mem = mmap(nullptr, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(mem != MAP_FAILED);
  auto* bytes = static_cast<unsigned char*>(mem);
  for (size_t i = 0; i < pages; ++i) bytes[i * page] = 1;  // resident before: MPOL_MF_MOVE moves them

  Placement p;
  p.numa = NumaMode::kDistribute;
  set_placement(p);
  const uint64_t before = numa_ranges_placed();
  std::vector<int> nodes;
  for (int c : my_cpus()) nodes.push_back(numa_node_of(c));
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  const int asked = place_rows(mem, pages * page, 64);
  CHECK(asked == static_cast<int>(nodes.size()));
  CHECK(numa_ranges_placed() == before + static_cast<uint64_t>(asked));

  // The first page's rows belong to the first node's members, the last page's to the last node's.
  const auto first = policy_at(bytes);
  const auto last = policy_at(bytes + (pages - 1) * page);
  CHECK(first.first == MPOL_PREFERRED);
  CHECK(first.second == 1UL << nodes.front());
  CHECK(last.first == MPOL_PREFERRED);
  CHECK(last.second == 1UL << nodes.back());
  // move_pages with no target nodes reports the node each page is on.
  std::vector<void*> addrs = {bytes, bytes + (pages - 1) * page};
  std::vector<int> status(addrs.size(), -1);
  REQUIRE(syscall(SYS_move_pages, 0, addrs.size(), addrs.data(), nullptr, status.data(), 0) == 0);
  CHECK(status[0] == nodes.front());
  CHECK(status[1] == nodes.back());

  clear_placement();
  munmap(mem, pages * page);
}

TEST_CASE("a model's weights are placed by place_weights under --numa distribute only") {
  if (!numa_supported()) {
    MESSAGE("SKIPPED: built without libnuma (QKV_NUMA) or the kernel has no NUMA support");
    return;
  }
  const Model m = make_synthetic_model(synthetic_preset("tiny"), DType::F32);
  CHECK(place_weights(m) == 0);  // no placement: the 1-node default path asks nothing
  Placement p;
  p.numa = NumaMode::kDistribute;
  set_placement(p);
  const int asked = place_weights(m);
  CHECK(asked > 0);
  // A page wholly inside layer 0's wq (F32 rows) carries the preference.
  const Matrix& wq = m.layers[0].wq;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const auto lo = (reinterpret_cast<uintptr_t>(wq.data) + page - 1) / page * page;
  REQUIRE(lo + page <= reinterpret_cast<uintptr_t>(wq.data) + static_cast<size_t>(wq.rows * wq.cols) * sizeof(float));
  CHECK(policy_at(reinterpret_cast<const void*>(lo)).first == MPOL_PREFERRED);
  clear_placement();
}

TEST_CASE("OmpThreadsScope sets the OpenMP count for its life, 0 leaves it") {
  const int outer = omp_get_max_threads();
  {
    const OmpThreadsScope one(1);
    CHECK(omp_get_max_threads() == 1);
    {
      const OmpThreadsScope keep(0);
      CHECK(omp_get_max_threads() == 1);
    }
    CHECK(omp_get_max_threads() == 1);
  }
  CHECK(omp_get_max_threads() == outer);
}

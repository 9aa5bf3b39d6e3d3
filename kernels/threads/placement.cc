#include "kernels/threads/placement.h"

#include <algorithm>
#include <atomic>
#include <mutex>

#include "kernels/error.h"
#include "kernels/threads/numa.h"

#if defined(__linux__)
#include <sched.h>
#endif

namespace qkv {

namespace {

#if defined(__linux__)
constexpr int kMaxCpus = CPU_SETSIZE;
#else
constexpr int kMaxCpus = 1024;
#endif

struct NumaModeName {
  NumaMode mode;
  const char* name;
};
const NumaModeName kNumaModes[] = {
    {NumaMode::kDistribute, "distribute"},
    {NumaMode::kIsolate, "isolate"},
    {NumaMode::kNumactl, "numactl"},
};

// "0-3,6": how an error names a set of CPUs.
std::string cpu_list_text(const std::vector<int>& cpus) {
  std::string s;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!s.empty()) s += ',';
    s += std::to_string(cpus[i]);
    if (j > i) s += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return s.empty() ? "none" : s;
}

int digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The process's placement: written under the mutex by set/clear, read under it
// by members whose pinning is older than `epoch`.
std::mutex g_mutex;
Placement g_placement;  // cpus resolved (never empty while active)
bool g_active = false;
int g_isolate_node = 0;
std::vector<int> g_original;  // the affinity the first set_placement found
bool g_have_original = false;
std::atomic<uint64_t> g_epoch{0};
std::atomic<int> g_placed_cpus{0};  // the placement's CPU count; 0: none

thread_local uint64_t t_epoch = 0;
thread_local int t_thread = -1, t_size = -1;

#if defined(__linux__)
std::vector<int> thread_affinity() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &mask)) cpus.push_back(c);
  }
  return cpus;
}

void set_thread_affinity(const std::vector<int>& cpus) {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  for (int c : cpus) CPU_SET(c, &mask);
  QKV_CHECK(sched_setaffinity(0, sizeof(mask), &mask) == 0, "pinning a thread to CPUs ", cpu_list_text(cpus),
            " (sched_setaffinity) failed");
}

int current_cpu() {
  const int c = sched_getcpu();
  return c < 0 ? 0 : c;
}
#else
std::vector<int> thread_affinity() { return {}; }
void set_thread_affinity(const std::vector<int>&) {}
int current_cpu() { return 0; }
#endif

// The nodes of cpus, ascending.
std::vector<int> nodes_of(const std::vector<int>& cpus) {
  std::vector<int> nodes;
  for (int c : cpus) nodes.push_back(numa_node_of(c));
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  return nodes;
}

std::vector<int> member_cpus_locked(int thread, int size) {
  if (!g_active || size < 1 || thread < 0 || thread >= size) return {};
  std::vector<int> set = g_placement.cpus;
  int index = thread;  // the member's place among those sharing `set`
  if (g_placement.numa == NumaMode::kDistribute) {
    const std::vector<int> nodes = nodes_of(set);
    const int n = static_cast<int>(nodes.size());
    const int k = static_cast<int>(int64_t{thread} * n / size);
    std::vector<int> on_node;
    for (int c : set) {
      if (numa_node_of(c) == nodes[static_cast<size_t>(k)]) on_node.push_back(c);
    }
    set = on_node;
    index = thread - static_cast<int>((int64_t{k} * size + n - 1) / n);  // the node's first member
  }
  if (g_placement.strict) return {set[static_cast<size_t>(index) % set.size()]};
  return set;
}

}  // namespace

std::vector<int> parse_cpu_mask(const std::string& hex) {
  std::string digits = hex;
  if (digits.size() >= 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) digits = digits.substr(2);
  QKV_CHECK(!digits.empty(), "CPU mask '", hex, "' has no hex digits (e.g. 0x3: CPUs 0 and 1)");
  QKV_CHECK(digits.size() <= static_cast<size_t>(kMaxCpus / 4), "CPU mask '", hex, "' is longer than ", kMaxCpus,
            " CPUs");
  std::vector<int> cpus;
  const int n = static_cast<int>(digits.size());
  for (int i = 0; i < n; ++i) {
    const int v = digit_value(digits[static_cast<size_t>(n - 1 - i)]);  // the last digit holds CPUs 0-3
    QKV_CHECK(v >= 0, "CPU mask '", hex, "' is not hexadecimal ('", digits[static_cast<size_t>(n - 1 - i)], "')");
    for (int b = 0; b < 4; ++b) {
      if (v & (1 << b)) cpus.push_back(4 * i + b);
    }
  }
  QKV_CHECK(!cpus.empty(), "CPU mask '", hex, "' selects no CPU");
  return cpus;
}

std::vector<int> parse_cpu_range(const std::string& range) {
  auto number = [&](const std::string& s) {
    QKV_CHECK(!s.empty() && s.size() <= 6 && s.find_first_not_of("0123456789") == std::string::npos, "CPU range '",
              range, "' is not LO-HI (two CPU numbers, e.g. 0-3)");
    const int v = std::stoi(s);
    QKV_CHECK(v < kMaxCpus, "CPU range '", range, "': CPU ", v, " is beyond the ", kMaxCpus, " qkv can pin to");
    return v;
  };
  const size_t dash = range.find('-');
  const int lo = number(range.substr(0, dash));
  const int hi = dash == std::string::npos ? lo : number(range.substr(dash + 1));
  QKV_CHECK(lo <= hi, "CPU range '", range, "' ends before it starts");
  std::vector<int> cpus;
  for (int c = lo; c <= hi; ++c) cpus.push_back(c);
  return cpus;
}

NumaMode parse_numa_mode(const std::string& mode) {
  for (const NumaModeName& m : kNumaModes) {
    if (mode == m.name) return m.mode;
  }
  if (mode == "mirror") {
    fail("--numa mirror (a copy of the weights per node) is not implemented: qkv keeps one copy, its rows "
         "placed on the nodes that read them (--numa distribute)");
  }
  fail("--numa takes distribute, isolate or numactl, not '", mode, "'");
}

const char* numa_mode_name(NumaMode mode) {
  for (const NumaModeName& m : kNumaModes) {
    if (m.mode == mode) return m.name;
  }
  return "none";
}

void set_placement(const Placement& p) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_have_original) {
    g_original = thread_affinity();
    g_have_original = true;
  }
  Placement resolved = p;
  if (resolved.cpus.empty()) {
    resolved.cpus = g_original;
  } else {
    std::sort(resolved.cpus.begin(), resolved.cpus.end());
    resolved.cpus.erase(std::unique(resolved.cpus.begin(), resolved.cpus.end()), resolved.cpus.end());
    for (int c : resolved.cpus) {
      QKV_CHECK(std::binary_search(g_original.begin(), g_original.end(), c), "CPU ", c,
                " is not one this process may run on (allowed: ", cpu_list_text(g_original), ")");
    }
  }
  QKV_CHECK(!resolved.cpus.empty(), "the process's CPU affinity could not be read (sched_getaffinity)");
  if (resolved.numa == NumaMode::kIsolate) {
    g_isolate_node = numa_node_of(current_cpu());
    std::vector<int> on_node;
    for (int c : resolved.cpus) {
      if (numa_node_of(c) == g_isolate_node) on_node.push_back(c);
    }
    QKV_CHECK(!on_node.empty(), "--numa isolate: none of CPUs ", cpu_list_text(resolved.cpus), " is on node ",
              g_isolate_node, ", where the process runs");
    resolved.cpus = on_node;
  }
  set_thread_affinity(resolved.cpus);
  g_placement = resolved;
  g_active = true;
  g_placed_cpus.store(static_cast<int>(resolved.cpus.size()), std::memory_order_relaxed);
  g_epoch.fetch_add(1, std::memory_order_release);
}

void clear_placement() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_active) return;
  set_thread_affinity(g_original);
  g_active = false;
  g_placement = Placement{};
  g_placed_cpus.store(0, std::memory_order_relaxed);
  g_epoch.fetch_add(1, std::memory_order_release);
}

bool placement_active() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_active;
}

int usable_cpus() {
  static const int process = std::max(1, static_cast<int>(thread_affinity().size()));
  const int placed = g_placed_cpus.load(std::memory_order_relaxed);
  return placed > 0 ? placed : process;
}

std::vector<int> member_cpus(int thread, int size) {
  std::lock_guard<std::mutex> lock(g_mutex);
  return member_cpus_locked(thread, size);
}

void pin_team_member(int thread, int size) {
  // The common case, every team of every step: one atomic load.
  const uint64_t epoch = g_epoch.load(std::memory_order_acquire);
  if (epoch == 0 || (epoch == t_epoch && thread == t_thread && size == t_size)) return;  // 0: never placed
  std::vector<int> cpus;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    cpus = member_cpus_locked(thread, size);
    // A member pinned under a placement since cleared goes back to the affinity it had.
    if (cpus.empty() && t_epoch != 0 && g_have_original) cpus = g_original;
  }
  if (!cpus.empty()) set_thread_affinity(cpus);
  t_epoch = cpus.empty() ? 0 : epoch;
  t_thread = thread;
  t_size = size;
}

int place_rows(const void* data, size_t bytes, int64_t rows) {
  NumaMode mode;
  std::vector<int> nodes;
  int isolate_node;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (!g_active) return 0;
    mode = g_placement.numa;
    nodes = nodes_of(g_placement.cpus);
    isolate_node = g_isolate_node;
  }
  if (data == nullptr || bytes == 0 || rows < 1 || !numa_supported()) return 0;
  if (mode == NumaMode::kIsolate) return prefer_node(data, bytes, isolate_node) ? 1 : 0;
  if (mode != NumaMode::kDistribute) return 0;
  // Rows take equal bytes (row groups of 16 interleave 16 rows; the split
  // lands within a page of a share's edge either way).
  const auto* base = static_cast<const uint8_t*>(data);
  const auto n = static_cast<int64_t>(nodes.size());
  const double per_row = static_cast<double>(bytes) / static_cast<double>(rows);
  int asked = 0;
  for (int64_t k = 0; k < n; ++k) {
    const auto lo = static_cast<size_t>(per_row * static_cast<double>(rows * k / n));
    const size_t hi = k + 1 == n ? bytes : static_cast<size_t>(per_row * static_cast<double>(rows * (k + 1) / n));
    if (prefer_node(base + lo, hi - lo, nodes[static_cast<size_t>(k)])) ++asked;
  }
  return asked;
}

}  // namespace qkv

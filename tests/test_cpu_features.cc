// ctest-labels: kernels
// cpu_features() (kernels/machine/cpu_features.h) against the kernel's own
// reading of the CPU: the vendor and flags of /proc/cpuinfo. Skips where that
// file is absent (not Linux) or the CPU is not x86.
#include <doctest/doctest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "kernels/machine/cpu_features.h"

using namespace qkv;

namespace {

struct CpuInfo {
  bool found = false;
  std::string vendor;
  std::set<std::string> flags;
};

// The first processor's vendor_id and flags.
CpuInfo read_cpuinfo() {
  CpuInfo info;
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    key.erase(key.find_last_not_of(" \t") + 1);
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "vendor_id" && info.vendor.empty()) info.vendor = value;
    if (key == "flags" && !info.found) {
      std::istringstream words(value);
      for (std::string w; words >> w;) info.flags.insert(w);
      info.found = true;
    }
  }
  return info;
}

}  // namespace

TEST_CASE("cpu_features agrees with /proc/cpuinfo") {
#if !(defined(__x86_64__) || defined(__i386__))
  MESSAGE("skipped: not an x86 CPU");
  return;
#endif
  const CpuInfo info = read_cpuinfo();
  if (!info.found) {
    MESSAGE("skipped: no /proc/cpuinfo flags here");
    return;
  }
  // The host's features: cpu_features() itself is capped under QKV_ISA (test_isa_cap.cc).
  const CpuFeatures& f = host_cpu_features();
  CAPTURE(info.vendor);
  CHECK(f.intel == (info.vendor == "GenuineIntel"));
  CHECK(f.amd == (info.vendor == "AuthenticAMD"));
  // The kernel lists a flag only when it supports the feature, state included.
  CHECK(f.avx512 == (info.flags.count("avx512f") == 1));
  CHECK(f.avx512_vnni == (info.flags.count("avx512f") == 1 && info.flags.count("avx512_vnni") == 1));
  CHECK(f.avx512_bf16 == (info.flags.count("avx512f") == 1 && info.flags.count("avx512_bf16") == 1));
  CHECK(f.amx_bf16 == (info.flags.count("amx_bf16") == 1));
  CHECK(f.amx_int8 == (info.flags.count("amx_int8") == 1));
  CHECK(f.avx2 == (info.flags.count("avx2") == 1 && info.flags.count("fma") == 1));
  CHECK(f.avx_vnni == (info.flags.count("avx2") == 1 && info.flags.count("fma") == 1 && info.flags.count("avx_vnni") == 1));
  CHECK(&host_cpu_features() == &f);  // read once
}

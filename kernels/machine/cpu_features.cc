#include "kernels/machine/cpu_features.h"

#include "kernels/machine/isa_cap.h"

#include <atomic>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace qkv {

namespace {

#if defined(__x86_64__) || defined(__i386__)
// XCR0: which register states the OS saves (and so lets programs use).
unsigned long long read_xcr0() {
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<unsigned long long>(hi) << 32) | lo;
}

CpuFeatures read_features() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return f;
  const unsigned max_leaf = a;
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  f.intel = std::strcmp(vendor, "GenuineIntel") == 0;
  f.amd = std::strcmp(vendor, "AuthenticAMD") == 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return f;  // OSXSAVE: xgetbv works
  const unsigned leaf1_ecx = c;
  const unsigned long long xcr0 = read_xcr0();
  constexpr unsigned long long kAvxState = 0x6;                          // SSE, AVX (YMM upper halves)
  constexpr unsigned long long kAvx512State = 0xE6;                      // SSE, AVX, opmask, ZMM halves
  constexpr unsigned long long kTileState = (1ull << 17) | (1ull << 18);  // XTILECFG, XTILEDATA
  if (max_leaf < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  const unsigned leaf7_ebx = b, leaf7_ecx = c, leaf7_edx = d;
  __cpuid_count(7, 1, a, b, c, d);
  const unsigned leaf7_1_eax = a;
  const bool ymm = (xcr0 & kAvxState) == kAvxState;
  f.avx2 = ymm && (leaf7_ebx & (1u << 5)) && (leaf1_ecx & (1u << 12));  // AVX2, FMA
  f.avx_vnni = f.avx2 && (leaf7_1_eax & (1u << 4));
  f.avx512 = (leaf7_ebx & (1u << 16)) && (xcr0 & kAvx512State) == kAvx512State;
  f.avx512_vnni = f.avx512 && (leaf7_ecx & (1u << 11));
  f.avx512_bf16 = f.avx512 && (leaf7_1_eax & (1u << 5));
  const bool tiles = (xcr0 & kTileState) == kTileState;
  f.amx_bf16 = tiles && (leaf7_edx & (1u << 22));
  f.amx_int8 = tiles && (leaf7_edx & (1u << 25));
  return f;
}
#else
CpuFeatures read_features() { return {}; }
#endif

std::atomic<bool> g_features_read{false};

// The host's features with those above the cap turned off.
CpuFeatures capped(CpuFeatures f) {
  const std::optional<IsaLevel> cap = isa_cap();
  if (!cap.has_value()) return f;
  const IsaLevel level = *cap;
  if (level < IsaLevel::kAvx512 || level > IsaLevel::kAmx) f.avx512 = f.avx512_vnni = f.avx512_bf16 = false;
  if (level < IsaLevel::kAvx2Vnni || level > IsaLevel::kAmx) f.avx_vnni = false;
  if (level < IsaLevel::kAvx2 || level > IsaLevel::kAmx) f.avx2 = false;
  if (level == IsaLevel::kAvx512) f.avx512_vnni = f.avx512_bf16 = false;
  if (level != IsaLevel::kAmx) f.amx_bf16 = f.amx_int8 = false;
  return f;
}

}  // namespace

const CpuFeatures& host_cpu_features() {
  static const CpuFeatures f = read_features();
  return f;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = [] {
    g_features_read = true;
    return capped(host_cpu_features());
  }();
  return f;
}

bool cpu_features_read() { return g_features_read; }

}  // namespace qkv

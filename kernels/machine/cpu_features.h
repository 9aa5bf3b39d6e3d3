// The CPU features qkv's kernels choose between at run time, read from CPUID
// and XCR0 once for the whole tree: the same answer from g++ and clang (whose
// __builtin_cpu_supports names differ: clang 14 knows neither "amx-bf16" nor
// "avx512bf16"), and only what the operating system has enabled (XCR0's
// AVX-512 and AMX tile state). cpu_features() is capped by the ISA cap
// (kernels/machine/isa_cap.h): under QKV_ISA=avx2 it reports no AVX-512,
// VNNI, BF16 or AMX whatever the CPU has.
#pragma once

namespace qkv {

struct CpuFeatures {
  bool intel = false, amd = false;
  bool avx2 = false;        // AVX2 and FMA, and the OS saves the YMM state
  bool avx_vnni = false;    // AVX-VNNI: {vex} vpdpbusd on 256-bit vectors
  bool avx512 = false;      // AVX-512 F, and the OS saves its state
  bool avx512_bf16 = false;  // vdpbf16ps
  bool avx512_vnni = false;  // vpdpbusd on 512-bit vectors
  bool amx_bf16 = false, amx_int8 = false;  // the tiles, where the OS saves their state
};

// This CPU's under the ISA cap, read once (all false on other architectures).
const CpuFeatures& cpu_features();
// This CPU's whatever the cap.
const CpuFeatures& host_cpu_features();
// Whether cpu_features() has been read (after that the cap cannot change).
bool cpu_features_read();

}  // namespace qkv

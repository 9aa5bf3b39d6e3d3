// The CPU features qkv's kernels choose between at run time, read from CPUID
// and XCR0 once for the whole tree: the same answer from g++ and clang (whose
// __builtin_cpu_supports names differ: clang 14 knows neither "amx-bf16" nor
// "avx512bf16"), and only what the operating system has enabled (XCR0's
// AVX-512 and AMX tile state).
#pragma once

namespace qkv {

struct CpuFeatures {
  bool intel = false, amd = false;
  bool avx512 = false;      // AVX-512 F, and the OS saves its state
  bool avx512_bf16 = false;  // vdpbf16ps
  bool avx512_vnni = false;  // vpdpbusd on 512-bit vectors
  bool amx_bf16 = false, amx_int8 = false;  // the tiles, where the OS saves their state
};

// This CPU's, read once (all false on other architectures).
const CpuFeatures& cpu_features();

}  // namespace qkv

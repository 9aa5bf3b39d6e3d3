// The Armv8/Armv9 features of an aarch64 CPU that qkv reports (qkv info --cpu)
// and that Highway's ARM targets and the ARM int8/bf16 instructions need, read
// once from the kernel's hardware capabilities (getauxval AT_HWCAP/AT_HWCAP2,
// the bits of <asm/hwcap.h>): what the kernel lets user space run, which under
// qemu-user is the emulated core's (-cpu / QEMU_CPU). The SVE vector length is
// the thread's, from prctl(PR_SVE_GET_VL). All false on other architectures.
#pragma once

#include <string>

namespace qkv {

struct ArmFeatures {
  bool neon = false;     // Advanced SIMD (every Armv8-A Linux CPU)
  bool fp16 = false;     // half-precision vector arithmetic (ASIMDHP)
  bool dotprod = false;  // SDOT/UDOT: int8 dot products into int32 lanes
  bool i8mm = false;     // SMMLA/UMMLA/USMMLA: 2x8 by 8x2 int8 matrix multiply
  bool bf16 = false;     // BFDOT/BFMMLA
  bool sve = false, sve2 = false;
  int sve_vector_bytes = 0;  // 16..256 where SVE is present, else 0
  bool sme = false;          // the Scalable Matrix Extension
};

// This CPU's, read once.
const ArmFeatures& arm_features();

// One line naming them: "NEON yes, FP16 yes, dot product yes, i8mm no, BF16 no,
// SVE yes (256-bit vectors), SVE2 no, SME no".
std::string describe_arm_features(const ArmFeatures& f);

}  // namespace qkv

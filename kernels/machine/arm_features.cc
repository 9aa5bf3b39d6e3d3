#include "kernels/machine/arm_features.h"

#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#endif

namespace qkv {

namespace {

#if defined(__aarch64__) && defined(__linux__)
// Bits a kernel's headers may predate (<asm/hwcap.h> of Linux 6.1 has them
// all; the values are the ABI's, fixed).
#ifndef HWCAP2_SME
#define HWCAP2_SME (1 << 23)
#endif
#ifndef PR_SVE_GET_VL
#define PR_SVE_GET_VL 51
#endif
#ifndef PR_SVE_VL_LEN_MASK
#define PR_SVE_VL_LEN_MASK 0xffff
#endif

ArmFeatures read_arm_features() {
  ArmFeatures f;
  const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
  f.neon = (hw & HWCAP_ASIMD) != 0;
  f.fp16 = (hw & HWCAP_ASIMDHP) != 0;
  f.dotprod = (hw & HWCAP_ASIMDDP) != 0;
  f.i8mm = (hw2 & HWCAP2_I8MM) != 0;
  f.bf16 = (hw2 & HWCAP2_BF16) != 0;
  f.sve = (hw & HWCAP_SVE) != 0;
  f.sve2 = f.sve && (hw2 & HWCAP2_SVE2) != 0;
  f.sme = (hw2 & HWCAP2_SME) != 0;
  if (f.sve) {
    // The low bits: this thread's vector length in bytes (the rest are flags).
    const int vl = prctl(PR_SVE_GET_VL, 0, 0, 0, 0);
    f.sve_vector_bytes = vl > 0 ? (vl & PR_SVE_VL_LEN_MASK) : 0;
  }
  return f;
}
#else
ArmFeatures read_arm_features() { return {}; }
#endif

const char* yes_no(bool b) { return b ? "yes" : "no"; }

}  // namespace

const ArmFeatures& arm_features() {
  static const ArmFeatures f = read_arm_features();
  return f;
}

std::string describe_arm_features(const ArmFeatures& f) {
  std::string s = std::string("NEON ") + yes_no(f.neon) + ", FP16 " + yes_no(f.fp16) + ", dot product " +
                  yes_no(f.dotprod) + ", i8mm " + yes_no(f.i8mm) + ", BF16 " + yes_no(f.bf16) + ", SVE " +
                  yes_no(f.sve);
  if (f.sve) s += " (" + std::to_string(f.sve_vector_bytes * 8) + "-bit vectors)";
  s += std::string(", SVE2 ") + yes_no(f.sve2) + ", SME " + yes_no(f.sme);
  return s;
}

}  // namespace qkv

// Which kernel quant_dot_rows and quant_gemm take for a block type on this
// CPU beyond the Highway dispatch: the Armv8 SDOT kernels
// (kernels/quant/vec_dot_arm_dotprod.h) where the core has the dot product,
// read from AT_HWCAP, and the i8mm GEMM (kernels/quant/gemm_arm_i8mm.h) where
// it has the int8 matrix multiply, read from AT_HWCAP2, else the SDOT GEMM
// (kernels/quant/gemm_arm_dotprod.h) for those batches where it has the dot
// product, since Highway 1.0.3's NEON and SVE targets use neither.
#include "kernels/machine/arm_features.h"
#include "kernels/machine/isa_cap.h"
#include "kernels/quant/gemm_arm_dotprod.h"
#include "kernels/quant/gemm_arm_i8mm.h"
#include "kernels/quant/vec_dot.h"
#include "kernels/quant/vec_dot_arm_dotprod.h"

namespace qkv {

namespace {

// A cap at "scalar" or "neon" (QKV_ISA / --isa) leaves out the Armv8.2+ int8
// dot products (SDOT, SMMLA): "neon" is the baseline Armv8 core, as a
// Cortex-A53 has it; "sve" and "sve2" keep them (every SVE core has SDOT).
bool capped_below_dot_product() {
  const std::optional<IsaLevel> cap = isa_cap();
  return cap.has_value() && (*cap == IsaLevel::kScalar || *cap == IsaLevel::kNeon);
}

}  // namespace

bool arm_dotprod_takes(DType t) {
  if (!arm_dotprod_kernel(t) || !arm_features().dotprod) return false;
  return !capped_below_dot_product();
}

bool arm_i8mm_takes(DType t) {
  if (!arm_i8mm_kernel(t) || !arm_features().i8mm) return false;
  return !capped_below_dot_product();
}

bool arm_dotprod_gemm_takes(DType t) {
  if (!arm_dotprod_gemm_kernel(t) || !arm_features().dotprod || arm_i8mm_takes(t)) return false;
  return !capped_below_dot_product();
}

const char* arm_matvec_kernel_name(DType t) {
  if (arm_dotprod_takes(t)) return "SDOT int8 dot product";
  if (!arm_features().dotprod) return "scalar (this core has no dot product)";
  return arm_dotprod_kernel(t) ? "scalar (ISA cap)" : "scalar (no SDOT kernel for the type)";
}

}  // namespace qkv

// ctest-labels: kernels asan
// The Armv8.2 SDOT GEMM of the block types' batches on cores without i8mm
// (kernels/quant/gemm_arm_dotprod.h) against the scalar matvec reference
// quant_dot_rows_scalar, input by input, bit for bit: the integer sums of
// each SDOT are exact and the f32 epilogue is the reference's operation by
// operation. Batches and row counts leave partial tiles (2 rows x 4 inputs);
// matmul takes the kernel through the block GEMM (kernels/block_gemm.cc) on
// 1 and 2 threads. They run only on an aarch64 core with the dot product and
// without i8mm (QEMU_CPU=neoverse-n1 or cortex-a76 under qemu: tests/
// arm_caps.cmake) and skip with a message elsewhere (Cortex-A53, max, x86).
#include <doctest/doctest.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/linear.h"
#include "kernels/linear_internal.h"
#include "kernels/machine/arm_features.h"
#include "kernels/quant/gemm_arm_dotprod.h"
#include "kernels/quant/gemm_arm_i8mm.h"
#include "kernels/quant/vec_dot.h"
#include "tests/arm_batch_fixture.h"
#include "tests/arm_kernel_fixture.h"
#include "tests/quant_fixture.h"

using namespace qkv;
using testing::kArmInt8Types;

namespace {

bool sdot_gemm_here() {
#if defined(__aarch64__)
  if (!arm_features().dotprod) {
    MESSAGE("skipped: this aarch64 core has no dot product (SDOT); run under QEMU_CPU=neoverse-n1");
    return false;
  }
  if (testing::isa_cap_below_dot_product()) {
    MESSAGE("skipped: QKV_ISA caps the kernels below the int8 dot products, so quant_gemm and matmul leave SDOT out");
    return false;
  }
  if (arm_features().i8mm) {
    MESSAGE("skipped: this aarch64 core has i8mm, whose GEMM takes the batches; run under QEMU_CPU=neoverse-n1");
    return false;
  }
  return true;
#else
  MESSAGE("skipped: not an aarch64 CPU (the SDOT GEMM is aarch64 only)");
  return false;
#endif
}

}  // namespace

TEST_CASE("arm_dotprod_gemm: the GEMM exists exactly on aarch64, and runs where the core has SDOT but not i8mm") {
  for (DType t : kArmInt8Types) {
    const std::string type = dtype_name(t);
    CAPTURE(type);
#if defined(__aarch64__)
    const bool cap = testing::isa_cap_below_dot_product();
    CHECK(arm_dotprod_gemm_kernel(t));
    CHECK(arm_dotprod_gemm_takes(t) == (arm_features().dotprod && !arm_features().i8mm && !cap));
    // Never both: a core with i8mm keeps its batches on the i8mm GEMM.
    CHECK_FALSE((arm_dotprod_gemm_takes(t) && arm_i8mm_takes(t)));
#else
    CHECK_FALSE(arm_dotprod_gemm_kernel(t));
    CHECK_FALSE(arm_dotprod_gemm_takes(t));
#endif
  }
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    const std::string type = dtype_name(t);
    CAPTURE(type);
    CHECK_FALSE(arm_dotprod_gemm_kernel(t));
    CHECK_FALSE(arm_dotprod_gemm_takes(t));
  }
  if (arm_dotprod_gemm_takes(DType::Q4_0)) {
    CHECK(std::string(quant_gemm_name()) == kArmDotprodGemmName);
    // Every batch of the block types takes it in matmul, from 2 inputs.
    CHECK(detail::block_gemm_type(DType::Q4_0, 2));
    CHECK(detail::block_gemm_type(DType::Q6_K, 17));
    CHECK(std::string(matmul_small_kernel_name(DType::Q4_K)) == kArmDotprodGemmName);
    CHECK(std::string(prefill_gemm_kernel_name(DType::Q8_0)) == kArmDotprodGemmName);
  } else {
    CHECK(std::string(quant_gemm_name()) != kArmDotprodGemmName);
  }
}

TEST_CASE("arm_dotprod_gemm: every type's GEMM equals the scalar matvec bit for bit, partial tiles included") {
  if (!sdot_gemm_here()) return;
  testing::check_batch_kernel(arm_dotprod_gemm, {1, 3, 17, 33}, {1, 2, 3, 4, 5, 7, 16, 33}, 53);
}

TEST_CASE("arm_dotprod_gemm: extreme blocks (every quant byte 0xFF, activations +-127 after quantization) stay exact") {
  if (!sdot_gemm_here()) return;
  testing::check_batch_kernel_extremes(arm_dotprod_gemm, 5);
}

TEST_CASE("arm_dotprod_gemm: matmul's block GEMM on 1 and 2 threads equals the scalar matvec bit for bit") {
  if (!sdot_gemm_here()) return;
  testing::check_matmul_block_gemm({std::begin(kArmInt8Types), std::end(kArmInt8Types)}, {2, 7, 33});
}

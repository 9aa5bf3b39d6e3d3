// ctest-labels: kernels asan
// The Armv8.6 i8mm GEMM of the block types' batches
// (kernels/quant/gemm_arm_i8mm.h) against the scalar matvec reference
// quant_dot_rows_scalar, input by input, bit for bit: the integer sums of
// each SMMLA are exact and the f32 epilogue is the reference's operation by
// operation. Batches and row counts leave partial tiles (2 rows x 4 inputs);
// matmul takes the kernel through the block GEMM (kernels/block_gemm.cc) on
// 1 and 2 threads. They run only on an aarch64 core with i8mm (QEMU_CPU=max
// under qemu) and skip with a message elsewhere (Cortex-A53, x86).
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
#include "kernels/quant/gemm_arm_i8mm.h"
#include "kernels/quant/vec_dot.h"
#include "tests/arm_batch_fixture.h"
#include "tests/arm_kernel_fixture.h"
#include "tests/quant_fixture.h"

using namespace qkv;
using testing::kArmInt8Types;

namespace {

bool i8mm_here() {
#if defined(__aarch64__)
  if (!arm_features().i8mm) {
    MESSAGE("skipped: this aarch64 core has no int8 matrix multiply (i8mm); run under QEMU_CPU=max");
    return false;
  }
  if (testing::isa_cap_below_dot_product()) {
    MESSAGE("skipped: QKV_ISA caps the kernels below the int8 dot products, so quant_gemm and matmul leave i8mm out");
    return false;
  }
  return true;
#else
  MESSAGE("skipped: not an aarch64 CPU (the i8mm GEMM is aarch64 only)");
  return false;
#endif
}

}  // namespace

TEST_CASE("arm_i8mm: the GEMM exists exactly on aarch64, and runs where the core has i8mm") {
  for (DType t : kArmInt8Types) {
    const std::string type = dtype_name(t);
    CAPTURE(type);
#if defined(__aarch64__)
    CHECK(arm_i8mm_kernel(t));
    CHECK(arm_i8mm_takes(t) == (arm_features().i8mm && !testing::isa_cap_below_dot_product()));
#else
    CHECK_FALSE(arm_i8mm_kernel(t));
    CHECK_FALSE(arm_i8mm_takes(t));
#endif
  }
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    const std::string type = dtype_name(t);
    CAPTURE(type);
    CHECK_FALSE(arm_i8mm_kernel(t));
    CHECK_FALSE(arm_i8mm_takes(t));
  }
  if (arm_i8mm_takes(DType::Q4_0)) {
    CHECK(std::string(quant_gemm_name()) == kArmI8mmGemmName);
    // Every batch of the block types takes it in matmul, from 2 inputs.
    CHECK(detail::block_gemm_type(DType::Q4_0, 2));
    CHECK(detail::block_gemm_type(DType::Q6_K, 17));
    CHECK(std::string(matmul_small_kernel_name(DType::Q4_K)) == kArmI8mmGemmName);
    CHECK(std::string(prefill_gemm_kernel_name(DType::Q8_0)) == kArmI8mmGemmName);
  }
}

TEST_CASE("arm_i8mm: every type's GEMM equals the scalar matvec bit for bit, partial tiles included") {
  if (!i8mm_here()) return;
  testing::check_batch_kernel(arm_i8mm_gemm, {1, 3, 7}, {1, 2, 3, 5, 16}, 53);
}

TEST_CASE("arm_i8mm: extreme blocks (every quant byte 0xFF, activations +-127 after quantization) stay exact") {
  if (!i8mm_here()) return;
  testing::check_batch_kernel_extremes(arm_i8mm_gemm, 3);
}

TEST_CASE("arm_i8mm: matmul's block GEMM on 1 and 2 threads equals the scalar matvec bit for bit") {
  if (!i8mm_here()) return;
  testing::check_matmul_block_gemm({DType::Q8_0, DType::Q4_0, DType::Q5_1, DType::Q4_K, DType::Q6_K, DType::IQ4_XS}, {2, 5, 33});
}

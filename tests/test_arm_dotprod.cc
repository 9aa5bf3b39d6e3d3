// ctest-labels: kernels asan
// The Armv8 SDOT kernels of the block types' matvec
// (kernels/quant/vec_dot_arm_dotprod.h) against the scalar reference
// quant_dot_rows_scalar, bit for bit: the integer block sums are exact and
// the f32 epilogue is the reference's operation by operation. They run only
// on an aarch64 core with the dot product (QEMU_CPU=max under qemu) and skip
// with a message elsewhere (Cortex-A53, x86).
#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/machine/arm_features.h"
#include "kernels/quant/vec_dot.h"
#include "kernels/quant/vec_dot_arm_dotprod.h"
#include "tests/arm_kernel_fixture.h"
#include "tests/quant_fixture.h"

using namespace qkv;

namespace {

using testing::kArmInt8Types;
using testing::random_activation;

bool sdot_here() {
#if defined(__aarch64__)
  if (!arm_features().dotprod) {
    MESSAGE("skipped: this aarch64 core has no dot product (SDOT); run under QEMU_CPU=max");
    return false;
  }
  return true;
#else
  MESSAGE("skipped: not an aarch64 CPU (the SDOT kernels are aarch64 only)");
  return false;
#endif
}

}  // namespace

TEST_CASE("arm_dotprod: the SDOT kernels exist exactly on aarch64, and run where the core has the dot product") {
  for (DType t : kArmInt8Types) {
    const std::string type = dtype_name(t);
    CAPTURE(type);
#if defined(__aarch64__)
    CHECK(arm_dotprod_kernel(t));
    CHECK(arm_dotprod_takes(t) == (arm_features().dotprod && !testing::isa_cap_below_dot_product()));
#else
    CHECK_FALSE(arm_dotprod_kernel(t));
    CHECK_FALSE(arm_dotprod_takes(t));
#endif
  }
  // The unquantized types have other kernels everywhere.
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    const std::string type = dtype_name(t);
    CAPTURE(type);
    CHECK_FALSE(arm_dotprod_kernel(t));
    CHECK_FALSE(arm_dotprod_takes(t));
  }
}

TEST_CASE("arm_dotprod: every SDOT kernel equals the scalar reference bit for bit") {
  if (!sdot_here()) return;
  std::mt19937 g(53);
  for (DType t : kArmInt8Types) {
    const std::string type = dtype_name(t);
    CAPTURE(type);
    const size_t bv = dtype_block_values(t);
    for (size_t cols : {bv, 2 * bv, 3 * bv, bv == 32 ? size_t(608) : size_t(2048)}) {
      for (size_t rows : {size_t(1), size_t(3), size_t(17)}) {
        CAPTURE(cols);
        CAPTURE(rows);
        const std::vector<uint8_t> w = testing::random_rows(t, rows, cols, g);
        const std::vector<float> x = random_activation(cols, g);
        std::vector<uint8_t> xa(act_bytes(t, cols));
        quantize_activation(t, x.data(), cols, xa.data());
        std::vector<float> want(rows), direct(rows, -1.0f), via(rows, -1.0f);
        quant_dot_rows_scalar(t, w.data(), cols, xa.data(), want.data(), rows);
        // The kernel itself, and quant_dot_rows, which takes it here.
        REQUIRE(arm_dotprod_dot_rows(t, w.data(), cols, xa.data(), direct.data(), rows));
        quant_dot_rows(t, w.data(), cols, xa.data(), via.data(), rows);
        for (size_t r = 0; r < rows; ++r) {
          CAPTURE(r);
          CHECK(std::memcmp(&direct[r], &want[r], sizeof(float)) == 0);
          CHECK(std::memcmp(&via[r], &want[r], sizeof(float)) == 0);
        }
      }
    }
  }
}

TEST_CASE("arm_dotprod: extreme blocks (every quant byte 0xFF, activations +-127 after quantization) stay exact") {
  // The largest |int32| sums a block can make: 32 * 128 * 127 per 32 values,
  // times the K-quants' scales (at most 128) over 256 values, far inside int32.
  if (!sdot_here()) return;
  for (DType t : kArmInt8Types) {
    const std::string type = dtype_name(t);
    CAPTURE(type);
    const size_t cols = 2 * dtype_block_values(t);
    std::mt19937 g(7);
    const std::vector<uint8_t> w = testing::extreme_rows(t, 2, cols, g);
    std::vector<float> x(cols);
    for (size_t k = 0; k < cols; ++k) x[k] = (k % 5 == 0) ? -1.0f : 1.0f;
    std::vector<uint8_t> xa(act_bytes(t, cols));
    quantize_activation(t, x.data(), cols, xa.data());
    std::vector<float> want(2), got(2);
    quant_dot_rows_scalar(t, w.data(), cols, xa.data(), want.data(), 2);
    REQUIRE(arm_dotprod_dot_rows(t, w.data(), cols, xa.data(), got.data(), 2));
    CHECK(want[0] != 0.0f);
    CHECK(std::memcmp(got.data(), want.data(), 2 * sizeof(float)) == 0);
  }
}

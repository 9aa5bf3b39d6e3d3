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
#include "tests/quant_fixture.h"

using namespace qkv;

namespace {

constexpr DType kSdotTypes[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::IQ4_NL, DType::Q4_K, DType::Q6_K};

std::vector<float> random_activation(size_t cols, std::mt19937& g) {
  std::vector<float> x(cols);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto& v : x) v = nd(g);
  x[cols / 3] = 6.0f;  // an outlier sets one block's scale
  return x;
}

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
  for (DType t : kSdotTypes) {
    const std::string type = dtype_name(t);
    CAPTURE(type);
#if defined(__aarch64__)
    CHECK(arm_dotprod_kernel(t));
    CHECK(arm_dotprod_takes(t) == arm_features().dotprod);
#else
    CHECK_FALSE(arm_dotprod_kernel(t));
    CHECK_FALSE(arm_dotprod_takes(t));
#endif
  }
  // Types without an SDOT kernel keep the Highway/scalar kernels everywhere.
  for (DType t : {DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K, DType::Q5_K, DType::IQ4_XS, DType::F32}) {
    const std::string type = dtype_name(t);
    CAPTURE(type);
    CHECK_FALSE(arm_dotprod_kernel(t));
    CHECK_FALSE(arm_dotprod_takes(t));
  }
}

TEST_CASE("arm_dotprod: every SDOT kernel equals the scalar reference bit for bit") {
  if (!sdot_here()) return;
  std::mt19937 g(53);
  for (DType t : kSdotTypes) {
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
  // times Q4_K's 63 and Q6_K's 127 scales over 256 values, far inside int32.
  if (!sdot_here()) return;
  for (DType t : kSdotTypes) {
    const std::string type = dtype_name(t);
    CAPTURE(type);
    const size_t cols = 2 * dtype_block_values(t);
    std::mt19937 g(7);
    std::vector<uint8_t> w = testing::random_rows(t, 2, cols, g);
    // Every byte but the f16 scales random_rows set becomes 0xFF: maximal
    // nibbles and 6-bit scales, Q8_0 -1, Q6_K's high bits set, its scales -1.
    const size_t bb = dtype_block_bytes(t);
    for (size_t off = 0; off < w.size(); off += bb) {
      for (size_t k = 0; k < bb; ++k) {
        const bool f16_scale = t == DType::Q6_K ? k >= 208 : k < (t == DType::Q4_K || t == DType::Q4_1 ? 4u : 2u);
        if (!f16_scale) w[off + k] = 0xFF;
      }
    }
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

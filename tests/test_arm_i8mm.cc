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

// M inputs of cols values quantized for weights of type t, back to back.
std::vector<uint8_t> quantized_inputs(DType t, size_t cols, size_t M, std::mt19937& g) {
  const size_t ab = act_bytes(t, cols);
  std::vector<uint8_t> xa(ab * M);
  for (size_t m = 0; m < M; ++m) {
    const std::vector<float> x = testing::random_activation(cols, g);
    quantize_activation(t, x.data(), cols, xa.data() + m * ab);
  }
  return xa;
}

// y (M outputs of ldy, rows each) against the scalar matvec of each input,
// bit for bit; the rows past n_rows of each output untouched (-7).
void check_against_scalar(DType t, const std::vector<uint8_t>& w, size_t rows, size_t cols,
                          const std::vector<uint8_t>& xa, size_t M, const std::vector<float>& y, size_t ldy) {
  const size_t ab = act_bytes(t, cols);
  std::vector<float> want(rows);
  int bad = 0;
  for (size_t m = 0; m < M; ++m) {
    quant_dot_rows_scalar(t, w.data(), cols, xa.data() + m * ab, want.data(), rows);
    for (size_t r = 0; r < rows; ++r) {
      if (std::memcmp(&y[m * ldy + r], &want[r], sizeof(float)) != 0 && bad++ < 3) {
        CHECK_MESSAGE(false, "input ", m, " row ", r, ": got ", y[m * ldy + r], ", want ", want[r]);
      }
    }
    for (size_t r = rows; r < ldy; ++r) {
      if (y[m * ldy + r] != -7.0f && bad++ < 3) CHECK_MESSAGE(false, "input ", m, " row ", r, " past the rows written");
    }
  }
  CHECK(bad == 0);
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
  std::mt19937 g(53);
  for (DType t : kArmInt8Types) {
    const std::string type = dtype_name(t);
    CAPTURE(type);
    const size_t bv = dtype_block_values(t);
    for (size_t cols : {bv, 3 * bv, bv == 32 ? size_t(608) : size_t(1280)}) {
      for (size_t rows : {size_t(1), size_t(3), size_t(7)}) {
        for (size_t M : {size_t(1), size_t(2), size_t(3), size_t(5), size_t(16)}) {
          CAPTURE(cols);
          CAPTURE(rows);
          CAPTURE(M);
          const std::vector<uint8_t> w = testing::random_rows(t, rows, cols, g);
          const std::vector<uint8_t> xa = quantized_inputs(t, cols, M, g);
          const size_t ldy = rows + 2;
          std::vector<float> direct(ldy * M, -7.0f), via(ldy * M, -7.0f);
          // The kernel itself, and quant_gemm, which takes it here.
          REQUIRE(arm_i8mm_gemm(t, w.data(), cols, xa.data(), M, direct.data(), ldy, rows));
          quant_gemm(t, w.data(), cols, xa.data(), M, via.data(), ldy, rows);
          check_against_scalar(t, w, rows, cols, xa, M, direct, ldy);
          check_against_scalar(t, w, rows, cols, xa, M, via, ldy);
        }
      }
    }
  }
}

TEST_CASE("arm_i8mm: extreme blocks (every quant byte 0xFF, activations +-127 after quantization) stay exact") {
  if (!i8mm_here()) return;
  for (DType t : kArmInt8Types) {
    const std::string type = dtype_name(t);
    CAPTURE(type);
    const size_t cols = 2 * dtype_block_values(t), rows = 3, M = 3;
    std::mt19937 g(7);
    const std::vector<uint8_t> w = testing::extreme_rows(t, rows, cols, g);
    const size_t ab = act_bytes(t, cols);
    std::vector<uint8_t> xa(ab * M);
    for (size_t m = 0; m < M; ++m) {
      std::vector<float> x(cols);
      for (size_t k = 0; k < cols; ++k) x[k] = ((k + m) % 5 == 0) ? -1.0f : 1.0f;
      quantize_activation(t, x.data(), cols, xa.data() + m * ab);
    }
    std::vector<float> y(rows * M, -7.0f);
    REQUIRE(arm_i8mm_gemm(t, w.data(), cols, xa.data(), M, y.data(), rows, rows));
    CHECK(y[0] != 0.0f);
    check_against_scalar(t, w, rows, cols, xa, M, y, rows);
  }
}

TEST_CASE("arm_i8mm: matmul's block GEMM on 1 and 2 threads equals the scalar matvec bit for bit") {
  if (!i8mm_here()) return;
  std::mt19937 g(11);
  const int saved = omp_get_max_threads();
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q5_1, DType::Q4_K, DType::Q6_K, DType::IQ4_XS}) {
    const std::string type = dtype_name(t);
    CAPTURE(type);
    // 43 rows: several row blocks of the block GEMM's work split and a partial one.
    const size_t rows = 43, cols = dtype_block_values(t) == 32 ? 608 : 1280;
    const std::vector<uint8_t> w = testing::random_rows(t, rows, cols, g);
    Matrix W;
    W.type = t;
    W.rows = static_cast<int64_t>(rows);
    W.cols = static_cast<int64_t>(cols);
    W.data = w.data();
    for (int64_t M : {int64_t(2), int64_t(5), int64_t(33)}) {
      REQUIRE(detail::matmul_takes_block_gemm(W, M));
      std::vector<float> X(static_cast<size_t>(M) * cols);
      for (int64_t m = 0; m < M; ++m) {
        const std::vector<float> x = testing::random_activation(cols, g);
        std::copy(x.begin(), x.end(), X.begin() + m * static_cast<int64_t>(cols));
      }
      // The reference quantizes each input as the block GEMM does.
      const size_t ab = act_bytes(t, cols);
      std::vector<uint8_t> xa(ab * static_cast<size_t>(M));
      for (int64_t m = 0; m < M; ++m) quantize_activation(t, X.data() + m * cols, cols, xa.data() + m * ab);
      for (int threads : {1, 2}) {
        CAPTURE(M);
        CAPTURE(threads);
        omp_set_num_threads(threads);
        std::vector<float> Y(static_cast<size_t>(M) * rows, -7.0f);
        matmul(W, X.data(), M, Y.data());
        check_against_scalar(t, w, rows, cols, xa, static_cast<size_t>(M), Y, rows);
      }
    }
  }
  omp_set_num_threads(saved);
}

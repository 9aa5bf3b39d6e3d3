// The checks the aarch64 batch kernels share (test_arm_i8mm.cc,
// test_arm_dotprod_gemm.cc): a kernel with quant_gemm's contract without
// tables, run directly and through quant_gemm and matmul, against the scalar
// matvec of each input, bit for bit.
#pragma once

#include <doctest/doctest.h>
#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/linear.h"
#include "kernels/linear_internal.h"
#include "kernels/quant/vec_dot.h"
#include "tests/arm_kernel_fixture.h"

namespace qkv {
namespace testing {

using BatchKernel = bool (*)(DType t, const void* rows, size_t cols, const void* xa, size_t M, float* y, size_t ldy,
                             size_t n_rows);

// Every type at one block, a few blocks and a model's row length, for each
// row count and batch size: the kernel itself and quant_gemm (which takes it
// where the test runs), with partial tiles and an output stride past the rows.
inline void check_batch_kernel(BatchKernel kernel, std::initializer_list<size_t> row_counts,
                               std::initializer_list<size_t> batches, uint32_t seed) {
  std::mt19937 g(seed);
  for (DType t : kArmInt8Types) {
    const std::string type = dtype_name(t);
    CAPTURE(type);
    const size_t bv = dtype_block_values(t);
    for (size_t cols : {bv, 3 * bv, bv == 32 ? size_t(608) : size_t(1280)}) {
      for (size_t rows : row_counts) {
        const std::vector<uint8_t> w = random_rows(t, rows, cols, g);
        for (size_t M : batches) {
          CAPTURE(cols);
          CAPTURE(rows);
          CAPTURE(M);
          const std::vector<uint8_t> xa = quantized_inputs(t, cols, M, g);
          const size_t ldy = rows + 2;
          std::vector<float> direct(ldy * M, -7.0f), via(ldy * M, -7.0f);
          REQUIRE(kernel(t, w.data(), cols, xa.data(), M, direct.data(), ldy, rows));
          quant_gemm(t, w.data(), cols, xa.data(), M, via.data(), ldy, rows);
          check_against_scalar(t, w, rows, cols, xa, M, direct, ldy);
          check_against_scalar(t, w, rows, cols, xa, M, via, ldy);
        }
      }
    }
  }
}

// Blocks with every quant byte 0xFF and activations quantized to +-127: the
// integer sums at their extremes.
inline void check_batch_kernel_extremes(BatchKernel kernel, size_t M) {
  for (DType t : kArmInt8Types) {
    const std::string type = dtype_name(t);
    CAPTURE(type);
    const size_t cols = 2 * dtype_block_values(t), rows = 3;
    std::mt19937 g(7);
    const std::vector<uint8_t> w = extreme_rows(t, rows, cols, g);
    const size_t ab = act_bytes(t, cols);
    std::vector<uint8_t> xa(ab * M);
    for (size_t m = 0; m < M; ++m) {
      std::vector<float> x(cols);
      for (size_t k = 0; k < cols; ++k) x[k] = ((k + m) % 5 == 0) ? -1.0f : 1.0f;
      quantize_activation(t, x.data(), cols, xa.data() + m * ab);
    }
    std::vector<float> y(rows * M, -7.0f);
    REQUIRE(kernel(t, w.data(), cols, xa.data(), M, y.data(), rows, rows));
    CHECK(y[0] != 0.0f);
    check_against_scalar(t, w, rows, cols, xa, M, y, rows);
  }
}

// matmul on 43 rows (several row blocks of the block GEMM's work split and a
// partial one) for each batch size, on 1 and 2 threads; each input quantized
// for the reference as the block GEMM quantizes it.
inline void check_matmul_block_gemm(const std::vector<DType>& types, std::initializer_list<int64_t> batches) {
  std::mt19937 g(11);
  const int saved = omp_get_max_threads();
  for (DType t : types) {
    const std::string type = dtype_name(t);
    CAPTURE(type);
    const size_t rows = 43, cols = dtype_block_values(t) == 32 ? 608 : 1280;
    const std::vector<uint8_t> w = random_rows(t, rows, cols, g);
    Matrix W;
    W.type = t;
    W.rows = static_cast<int64_t>(rows);
    W.cols = static_cast<int64_t>(cols);
    W.data = w.data();
    for (int64_t M : batches) {
      REQUIRE(detail::matmul_takes_block_gemm(W, M));
      std::vector<float> X(static_cast<size_t>(M) * cols);
      for (int64_t m = 0; m < M; ++m) {
        const std::vector<float> x = random_activation(cols, g);
        std::copy(x.begin(), x.end(), X.begin() + m * static_cast<int64_t>(cols));
      }
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

}  // namespace testing
}  // namespace qkv

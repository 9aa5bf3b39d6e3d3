// Test fixtures shared by the linear-layer tests (test_linear.cc,
// test_matmul_small.cc): weight matrices of every dtype with their exactly
// decoded values, random inputs, and the check against matmul_reference.
#pragma once

#include <doctest/doctest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/batch_activations.h"
#include "kernels/dtype.h"
#include "kernels/linear.h"

namespace qkv {
namespace testing {

// X as the batched paths (M >= 2) take it for weights of type t: quantized
// types see ggml's activation blocks (kernels/batch_activations.h).
inline std::vector<float> batch_inputs(DType t, const std::vector<float>& X, int64_t M, int64_t cols) {
  if (M < 2 || !dtype_is_quantized(t)) return X;
  std::vector<float> xr(X.size());
  detail::activation_round_trip(t, X.data(), M, static_cast<size_t>(cols), xr.data());
  return xr;
}

constexpr DType kAllTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0};

struct TestMatrix {
  std::vector<uint8_t> bytes;
  std::vector<float> decoded;  // the exact f32 values the kernels must use
  Matrix m;
};

// slack: bytes allocated past the last row (1 keeps data() non-null for empty
// shapes; 0 makes the weights end exactly at the end of their allocation).
inline TestMatrix make_matrix(DType t, int64_t rows, int64_t cols, uint32_t seed, size_t slack = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  TestMatrix tm;
  const size_t rb = dtype_row_bytes(t, static_cast<size_t>(cols));
  tm.bytes.resize(rb * static_cast<size_t>(rows) + slack);
  tm.decoded.resize(static_cast<size_t>(rows * cols));
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    // Rows of different magnitudes, so a mixed-up row or block scale shows.
    const float scale = std::ldexp(1.0f, static_cast<int>(r % 7) - 3);
    for (auto& v : row) v = u(rng) * scale;
    encode_row(t, row.data(), static_cast<size_t>(cols), tm.bytes.data() + r * rb);
    decode_row(t, tm.bytes.data() + r * rb, static_cast<size_t>(cols), tm.decoded.data() + r * cols);
  }
  tm.m = Matrix{tm.bytes.data(), t, rows, cols};
  return tm;
}

inline std::vector<float> random_vec(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// Checks Y (M x rows) against the fp64 reference: |error| <= ((cols + 4) * 2^-24
// + extra_rel) * sum_i |w_i x_i| per output (the including test derives it).
inline void check_result(const TestMatrix& tm, const std::vector<float>& X, int64_t M, const std::vector<float>& Y,
                  double extra_rel) {
  const int64_t rows = tm.m.rows, cols = tm.m.cols;
  std::vector<float> ref(static_cast<size_t>(M * rows));
  matmul_reference(tm.m, X.data(), M, ref.data());
  const double gamma = (cols + 4) * 0x1p-24 + extra_rel;
  int bad = 0;
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t r = 0; r < rows; ++r) {
      double abs_sum = 0;
      for (int64_t i = 0; i < cols; ++i) abs_sum += std::fabs(double(tm.decoded[r * cols + i]) * X[m * cols + i]);
      const double err = std::fabs(double(Y[m * rows + r]) - ref[m * rows + r]);
      if (!(err <= gamma * abs_sum) && bad++ < 5) {
        FAIL_CHECK("m=", m, " r=", r, " got ", Y[m * rows + r], " want ", ref[m * rows + r], " err ", err,
                   " bound ", gamma * abs_sum);
      }
    }
  }
  CHECK(bad == 0);
}

// Runs f with OpenMP limited to n threads, restoring the previous limit.
template <typename F>
void with_threads(int n, F f) {
  const int old = omp_get_max_threads();
  omp_set_num_threads(n);
  f();
  omp_set_num_threads(old);
}

// M inputs of `cols` values, each input with its own magnitude, so mixed-up
// inputs show.
inline std::vector<float> make_inputs(int64_t M, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> X(static_cast<size_t>(M * cols));
  for (int64_t m = 0; m < M; ++m) {
    // And each input with its own magnitude, so mixed-up inputs show too.
    const float scale = std::ldexp(1.0f, static_cast<int>(m % 4));
    for (int64_t i = 0; i < cols; ++i) X[m * cols + i] = u(rng) * scale;
  }
  return X;
}

}  // namespace testing
}  // namespace qkv

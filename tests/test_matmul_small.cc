// ctest-labels: asan kernels
// The small-batch matmul kernel (kernels/matmul_small.cc, 2 <= M <= 16) on
// shapes that exercise each of its pieces: row counts that leave a partial row
// block, rows split into several column chunks of unequal width, column tails
// that are not whole vectors, every batch size (groups of inputs of every
// size), and results that do not depend on the thread count.
//
// Tolerance. The kernel decodes weights exactly to f32 (F16, BF16 and Q8_0's
// d*q are all exact in f32) and multiplies by f32 inputs without rounding them,
// so only the f32 summation differs from the fp64 reference: whatever the
// order, an n-term f32 dot product is within gamma_n * sum_i |w_i x_i| of the
// exact value, gamma_n ~ n * 2^-24 (Higham, ch. 3). We allow
// (cols + 4) * 2^-24 * sum|w x|, as tests/test_linear.cc does (+4 for the
// transpose-add tree's last levels and the chunk boundaries). A wrong weight,
// scale, row, input or chunk shows as an error of order |w x| itself, orders
// of magnitude outside the bound.
#include <doctest/doctest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/linear.h"
#include "kernels/linear_internal.h"

using namespace qkv;

namespace {

struct Weights {
  std::vector<uint8_t> bytes;
  std::vector<float> decoded;  // the exact values the kernel must multiply by
  Matrix m;
};

Weights make_weights(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Weights w;
  const size_t rb = dtype_row_bytes(t, static_cast<size_t>(cols));
  w.bytes.resize(rb * static_cast<size_t>(rows));
  w.decoded.resize(static_cast<size_t>(rows * cols));
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    // Each row with its own magnitude, so outputs landing in the wrong row show.
    const float scale = std::ldexp(1.0f, static_cast<int>(r % 5) - 2);
    for (auto& v : row) v = u(rng) * scale;
    encode_row(t, row.data(), static_cast<size_t>(cols), w.bytes.data() + r * rb);
    decode_row(t, w.bytes.data() + r * rb, static_cast<size_t>(cols), w.decoded.data() + r * cols);
  }
  w.m = Matrix{w.bytes.data(), t, rows, cols};
  return w;
}

std::vector<float> make_inputs(int64_t M, int64_t cols, uint32_t seed) {
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

// Number of outputs of Y (M x rows) outside the bound described at the top.
int count_bad(const Weights& w, const std::vector<float>& X, int64_t M, const std::vector<float>& Y) {
  const int64_t rows = w.m.rows, cols = w.m.cols;
  std::vector<float> ref(static_cast<size_t>(M * rows));
  matmul_reference(w.m, X.data(), M, ref.data());
  const double gamma = (cols + 4) * 0x1p-24;
  int bad = 0;
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t r = 0; r < rows; ++r) {
      double abs_sum = 0;
      for (int64_t i = 0; i < cols; ++i) abs_sum += std::fabs(double(w.decoded[r * cols + i]) * X[m * cols + i]);
      const double err = std::fabs(double(Y[m * rows + r]) - ref[m * rows + r]);
      if (!(err <= gamma * abs_sum) && bad++ < 3) {
        FAIL_CHECK("m=", m, " r=", r, " got ", Y[m * rows + r], " want ", ref[m * rows + r], " err ", err,
                   " bound ", gamma * abs_sum);
      }
    }
  }
  return bad;
}

template <typename F>
void with_threads(int n, F f) {
  const int old = omp_get_max_threads();
  omp_set_num_threads(n);
  f();
  omp_set_num_threads(old);
}

constexpr DType kTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0};

}  // namespace

TEST_CASE("matmul_small matches the reference for every batch size, with partial blocks and tails") {
  for (DType t : kTypes) {
    // 43 rows: several row blocks plus a partial one on any target. Columns:
    // one short chunk; one chunk with a tail that is not a whole vector
    // (F32/F16/BF16); several unequal chunks (2080 = 704 + 704 + 672 on every target).
    const std::vector<int64_t> cols_list =
        t == DType::Q8_0 ? std::vector<int64_t>{64, 576, 2080} : std::vector<int64_t>{40, 583, 2080};
    for (int64_t cols : cols_list) {
      const auto w = make_weights(t, 43, cols, static_cast<uint32_t>(cols));
      for (int64_t M = 2; M <= kMatmulSmallMaxM; ++M) {
        CAPTURE(dtype_name(t));
        CAPTURE(cols);
        CAPTURE(M);
        const auto X = make_inputs(M, cols, static_cast<uint32_t>(M));
        std::vector<float> Y(static_cast<size_t>(M * w.m.rows), NAN);
        detail::matmul_small(w.m, X.data(), M, Y.data());
        CHECK(count_bad(w, X, M, Y) == 0);
      }
    }
  }
}

TEST_CASE("matmul_small gives bit-identical results on 1 and 2 threads") {
  // Large enough to go parallel; 301 rows split unevenly over 2 threads, and
  // 2080 columns in several chunks.
  for (DType t : kTypes) {
    const auto w = make_weights(t, 301, 2080, 3);
    for (int64_t M : {2, 4, 5, 9, 16}) {
      CAPTURE(dtype_name(t));
      CAPTURE(M);
      const auto X = make_inputs(M, 2080, 4);
      std::vector<float> y1(static_cast<size_t>(M * w.m.rows), NAN), y2(y1.size(), NAN);
      with_threads(1, [&] { detail::matmul_small(w.m, X.data(), M, y1.data()); });
      with_threads(2, [&] { detail::matmul_small(w.m, X.data(), M, y2.data()); });
      CHECK(y1 == y2);
      CHECK(count_bad(w, X, M, y1) == 0);
    }
  }
}

TEST_CASE("matmul_small called from inside a parallel region runs serially and correctly") {
  const auto w = make_weights(DType::F16, 100, 1100, 5);
  const int64_t M = 11;
  const auto X = make_inputs(M, 1100, 6);
  std::vector<float> serial(static_cast<size_t>(M * w.m.rows)), nested(serial.size(), NAN);
  with_threads(1, [&] { detail::matmul_small(w.m, X.data(), M, serial.data()); });
#pragma omp parallel num_threads(2)
  {
#pragma omp single
    detail::matmul_small(w.m, X.data(), M, nested.data());
  }
  CHECK(nested == serial);
}

TEST_CASE("matmul_small reads no weight row outside the matrix") {
  // The weights end exactly at the end of their allocation (prefetches may
  // look past it; loads must not: AddressSanitizer checks this in the asan
  // build). One row, and a partial row block, for each dtype.
  for (DType t : kTypes) {
    for (int64_t rows : {1, 7}) {
      const int64_t cols = 96;
      const auto w = make_weights(t, rows, cols, 9);
      std::vector<uint8_t> exact(w.bytes);  // a copy sized exactly rows * row_bytes
      const Matrix m{exact.data(), t, rows, cols};
      const auto X = make_inputs(3, cols, 10);
      std::vector<float> Y(static_cast<size_t>(3 * rows), NAN);
      CAPTURE(dtype_name(t));
      CAPTURE(rows);
      detail::matmul_small(m, X.data(), 3, Y.data());
      CHECK(count_bad(w, X, 3, Y) == 0);
    }
  }
}

TEST_CASE("matmul_small with no columns gives zeros") {
  const uint16_t none = 0;  // a valid pointer; no weight is read
  for (DType t : kTypes) {
    std::vector<float> Y(3 * 5, NAN);
    const float x = 1.0f;
    detail::matmul_small(Matrix{&none, t, 5, 0}, &x, 3, Y.data());
    for (float y : Y) CHECK(y == 0.0f);
  }
}

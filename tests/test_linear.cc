// ctest-labels: kernels asan
// matvec / matvec_multi / matmul against the fp64 reference for every dtype and
// awkward tilings, thread-count independence, and rejection of bad shapes.
//
// Tolerances. Every kernel computes sum_i w_i x_i in f32 with the weights decoded
// exactly (F16, BF16 and Q8_0's d*q are exact in f32). Whatever the summation
// order, the rounding error of an n-term f32 dot product is at most
// gamma_n * sum_i |w_i x_i| with gamma_n ~ n * 2^-24 (Higham, ch. 3); we allow
// (cols + 4) * 2^-24 * sum|w x| (the +4 covers the Q8_0 block-scale product and
// the horizontal reduction). The bf16 GEMM path also rounds each activation
// (and each F16/Q8_0 weight) to bf16, a relative error of at most 2^-9 each, so
// each product may be off by (1 + 2^-9)^2 - 1 < 2^-8 + 2^-17 relative: we allow
// (2^-8 + 2^-17) * sum|w x| on top. A wrong element, row or scale gives errors
// of order |w x| itself, far outside either bound.
#include <doctest/doctest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/error.h"
#include "kernels/linear.h"
#include "kernels/linear_internal.h"
#include "tests/linear_fixture.h"

using namespace qkv;
using namespace qkv::testing;

TEST_CASE("matmul_reference on a hand-computed case") {
  const float w[6] = {1, 2, 3, -4, 5, -6};
  const float x[6] = {1, 1, 1, 0.5f, 0.25f, 2};
  float y[4] = {};
  matmul_reference(Matrix{w, DType::F32, 2, 3}, x, 2, y);
  CHECK(y[0] == 6.0f);             // 1+2+3
  CHECK(y[1] == -5.0f);            // -4+5-6
  CHECK(y[2] == 7.0f);             // 0.5+0.5+6
  CHECK(y[3] == -12.75f);          // -2+1.25-12
}

TEST_CASE("matvec matches the reference for every dtype and awkward tilings") {
  // Q8_0 here with f32 activations (exact weights); the int8-activation mode has its own bound below.
  const detail::Q8Dot saved = detail::q8_matvec_mode();
  detail::set_q8_matvec_mode(detail::Q8Dot::kDequantF32);
  for (DType t : kAllTypes) {
    const std::vector<int64_t> cols_list =
        t == DType::Q8_0 ? std::vector<int64_t>{32, 96, 608} : std::vector<int64_t>{1, 7, 17, 33, 100, 200, 577};
    for (int64_t cols : cols_list) {
      for (int64_t rows : {1, 3, 4, 5, 13, 67}) {
        CAPTURE(dtype_name(t));
        CAPTURE(rows);
        CAPTURE(cols);
        const auto tm = make_matrix(t, rows, cols, static_cast<uint32_t>(rows * 1000 + cols));
        const auto x = random_vec(static_cast<size_t>(cols), 7);
        std::vector<float> y(static_cast<size_t>(rows), NAN);
        matvec(tm.m, x.data(), y.data());
        check_result(tm, x, 1, y, 0.0);
      }
    }
  }
  detail::set_q8_matvec_mode(saved);
}

TEST_CASE("Q8_0 matvec with int8 activations stays within the activation-quantization bound") {
  // Quantizing x per 32-block moves each x_i by at most half a step d_b / 2
  // (d_b = max|x in block| / 127), so the result may differ from the exact dot
  // product by sum_b d_b/2 * sum_{i in b} |w_i|, plus f32 rounding as above.
  const detail::Q8Dot saved = detail::q8_matvec_mode();
  for (auto mode : {detail::Q8Dot::kInt8, detail::Q8Dot::kDequantF32}) {
    detail::set_q8_matvec_mode(mode);
    for (int64_t cols : {32, 96, 2048}) {
      for (int64_t rows : {1, 5, 67}) {
        CAPTURE(static_cast<int>(mode));
        CAPTURE(rows);
        CAPTURE(cols);
        const auto tm = make_matrix(DType::Q8_0, rows, cols, static_cast<uint32_t>(rows + cols));
        auto x = random_vec(static_cast<size_t>(cols), 3);
        x[0] = 0.0f;  // an all-zero block must not divide by zero
        if (cols >= 64) std::fill(x.begin() + 32, x.begin() + 64, 0.0f);
        std::vector<float> y(static_cast<size_t>(rows)), ref(static_cast<size_t>(rows));
        matvec(tm.m, x.data(), y.data());
        matmul_reference(tm.m, x.data(), 1, ref.data());
        for (int64_t r = 0; r < rows; ++r) {
          double abs_sum = 0, quant = 0;
          for (int64_t b = 0; b < cols / 32; ++b) {
            double amax = 0, wsum = 0;
            for (int64_t i = b * 32; i < b * 32 + 32; ++i) {
              amax = std::max(amax, double(std::fabs(x[i])));
              wsum += std::fabs(tm.decoded[r * cols + i]);
              abs_sum += std::fabs(double(tm.decoded[r * cols + i]) * x[i]);
            }
            quant += amax / 127 / 2 * wsum;
          }
          const double bound = (cols + 4) * 0x1p-24 * (abs_sum + quant) * 1.01 +
                               (mode == detail::Q8Dot::kInt8 ? quant * 1.001 : 0.0);
          CHECK(std::fabs(y[r] - ref[r]) <= bound);
        }
      }
    }
  }
  detail::set_q8_matvec_mode(saved);
}

TEST_CASE("matmul matches the reference for every dtype and batch size") {
  // M = 1 is matvec: use its exact-weight Q8_0 mode so one bound covers every M.
  const detail::Q8Dot saved = detail::q8_matvec_mode();
  detail::set_q8_matvec_mode(detail::Q8Dot::kDequantF32);
  for (DType t : kAllTypes) {
    const int64_t cols = t == DType::Q8_0 ? 160 : 131;
    const int64_t rows = 70;
    const auto tm = make_matrix(t, rows, cols, 11);
    for (int64_t M : {1, 2, 3, 7, 16, 17, 64, 300}) {
      CAPTURE(dtype_name(t));
      CAPTURE(M);
      const auto X = random_vec(static_cast<size_t>(M * cols), static_cast<uint32_t>(M));
      std::vector<float> Y(static_cast<size_t>(M * rows), NAN);
      matmul(tm.m, X.data(), M, Y.data());
      // bf16 products: the oneDNN GEMM above kMatmulSmallMaxM, matmul_small's
      // bf16 path (AVX512_BF16 CPUs) from 2 up to it.
      const detail::GemmPrecision p = M > kMatmulSmallMaxM ? detail::default_gemm_precision(t)
                                      : M >= 2            ? detail::matmul_small_precision(t)
                                                          : detail::GemmPrecision::kF32;
      const bool bf16 = t != DType::F32 && p == detail::GemmPrecision::kBF16;
      check_result(tm, batch_inputs(t, X, M, cols), M, Y, bf16 ? 0x1p-8 + 0x1p-17 : 0.0);
    }
  }
  detail::set_q8_matvec_mode(saved);
}

// Built without oneDNN (QKV_ONEDNN off) matmul_onednn only throws.
TEST_CASE("both oneDNN precisions stay within their bounds" * doctest::skip(!QKV_HAVE_ONEDNN)) {
  for (DType t : kAllTypes) {
    // More rows than one decoded tile (about 2 MB), so tiling is exercised.
    const int64_t cols = 1024, rows = 600, M = 33;
    const auto tm = make_matrix(t, rows, cols, 5);
    const auto X = random_vec(static_cast<size_t>(M * cols), 9);
    for (auto p : {detail::GemmPrecision::kF32, detail::GemmPrecision::kBF16}) {
      CAPTURE(dtype_name(t));
      CAPTURE(static_cast<int>(p));
      std::vector<float> Y(static_cast<size_t>(M * rows), NAN);
      detail::matmul_onednn(tm.m, X.data(), M, Y.data(), p);
      const bool bf16 = p == detail::GemmPrecision::kBF16 && t != DType::F32;
      check_result(tm, X, M, Y, bf16 ? 0x1p-8 + 0x1p-17 : 0.0);
    }
  }
}

TEST_CASE("matvec_multi equals separate matvecs") {
  // Different rows and dtypes, one shared input; big enough to run on 2 threads.
  const int64_t cols = 256;
  const auto a = make_matrix(DType::F16, 257, cols, 1);
  const auto b = make_matrix(DType::Q8_0, 66, cols, 2);
  const auto c = make_matrix(DType::BF16, 3, cols, 3);
  const auto x = random_vec(cols, 4);
  const Matrix Ws[3] = {a.m, b.m, c.m};
  std::vector<float> ya(257), yb(66), yc(3), ra(257), rb(66), rc(3);
  float* ys[3] = {ya.data(), yb.data(), yc.data()};
  with_threads(2, [&] { matvec_multi(Ws, ys, 3, x.data()); });
  matvec(a.m, x.data(), ra.data());
  matvec(b.m, x.data(), rb.data());
  matvec(c.m, x.data(), rc.data());
  CHECK(ya == ra);
  CHECK(yb == rb);
  CHECK(yc == rc);
  check_result(a, x, 1, ya, 0.0);
}

TEST_CASE("matmul_multi equals separate matmuls") {
  // Different rows and dtypes, one shared input, every kind of batch: the
  // matvec (M = 1), the small-batch GEMM (one pass over all matrices on its
  // bf16 path), oneDNN (M > 16). A row's arithmetic does not depend on the
  // other matrices, so the results are identical. With an F32 matrix in the
  // list the small GEMM runs them one by one, on the same kernels.
  const int64_t cols = 256;
  const auto a = make_matrix(DType::F16, 257, cols, 1);
  const auto b = make_matrix(DType::Q8_0, 66, cols, 2);
  const auto c = make_matrix(DType::BF16, 3, cols, 3);
  const auto f = make_matrix(DType::F32, 20, cols, 4);
  for (bool with_f32 : {false, true}) {
    for (int64_t M : {1, 5, 16, 40}) {
      CAPTURE(with_f32);
      CAPTURE(M);
      const auto X = random_vec(static_cast<size_t>(M * cols), static_cast<uint32_t>(M));
      const Matrix Ws[4] = {a.m, b.m, c.m, f.m};
      const int count = with_f32 ? 4 : 3;
      std::vector<std::vector<float>> ys(4), refs(4);
      float* out[4];
      for (int i = 0; i < 4; ++i) {
        ys[i].assign(static_cast<size_t>(M * Ws[i].rows), NAN);
        refs[i].assign(ys[i].size(), NAN);
        out[i] = ys[i].data();
      }
      with_threads(2, [&] { matmul_multi(Ws, out, count, X.data(), M); });
      for (int i = 0; i < count; ++i) {
        with_threads(2, [&] { matmul(Ws[i], X.data(), M, refs[i].data()); });
        CHECK(ys[i] == refs[i]);
      }
    }
  }
}

TEST_CASE("1 and 2 threads give the same results") {
  for (DType t : kAllTypes) {
    CAPTURE(dtype_name(t));
    const int64_t rows = 301, cols = 512;  // above the parallel threshold
    const auto tm = make_matrix(t, rows, cols, 21);
    for (int64_t M : {1, 5, 16, 40}) {
      CAPTURE(M);
      const auto X = random_vec(static_cast<size_t>(M * cols), 22);
      std::vector<float> y1(static_cast<size_t>(M * rows)), y2(y1.size());
      with_threads(1, [&] { matmul(tm.m, X.data(), M, y1.data()); });
      with_threads(2, [&] { matmul(tm.m, X.data(), M, y2.data()); });
      if (M <= kMatmulSmallMaxM || (dtype_is_quantized(t) && t != DType::Q8_0)) {
        // Highway paths (ggml block types: input by input, as in decode): each row
        // is computed by the same code on any thread.
        CHECK(y1 == y2);
      } else {
        // oneDNN may split the reduction differently: both within the bound.
        const bool bf16 = t != DType::F32 && detail::default_gemm_precision(t) == detail::GemmPrecision::kBF16;
        check_result(tm, batch_inputs(t, X, M, cols), M, y1, bf16 ? 0x1p-8 + 0x1p-17 : 0.0);
        check_result(tm, batch_inputs(t, X, M, cols), M, y2, bf16 ? 0x1p-8 + 0x1p-17 : 0.0);
      }
    }
  }
}

TEST_CASE("called inside a parallel region, the kernels run serially and correctly") {
  const auto tm = make_matrix(DType::F16, 200, 512, 8);
  const auto x = random_vec(512 * 20, 9);
  std::vector<float> y0(200), y1(200), yb(20 * 200), ref(20 * 200);
  matvec(tm.m, x.data(), y0.data());
  matmul(tm.m, x.data(), 20, ref.data());
#pragma omp parallel num_threads(2)
  {
#pragma omp single
    {
      matvec(tm.m, x.data(), y1.data());
      matmul(tm.m, x.data(), 20, yb.data());
    }
  }
  CHECK(y0 == y1);
  // The serial fallback is matmul_small, in bf16 on AVX512_BF16 CPUs.
  const bool bf16 = detail::matmul_small_precision(DType::F16) == detail::GemmPrecision::kBF16;
  check_result(tm, x, 20, yb, bf16 ? 0x1p-8 + 0x1p-17 : 0.0);
}

TEST_CASE("empty shapes are no-ops") {
  float y = 42.0f;
  const float x = 1.0f;
  matvec(Matrix{nullptr, DType::F32, 0, 8}, &x, &y);
  matmul(Matrix{nullptr, DType::F16, 0, 8}, &x, 3, &y);
  const uint16_t w16[32] = {};
  matmul(Matrix{w16, DType::F16, 4, 8}, &x, 0, &y);
  matvec_multi(nullptr, nullptr, 0, &x);
  CHECK(y == 42.0f);
  // Zero columns: every dot product is empty, so 0.
  float z[2] = {5, 5};
  const float dummy = 0;
  matvec(Matrix{&dummy, DType::F32, 2, 0}, &x, z);
  CHECK(z[0] == 0.0f);
  CHECK(z[1] == 0.0f);
}

TEST_CASE("bad shapes and pointers are rejected with qkv::Error") {
  const auto tm = make_matrix(DType::F32, 4, 40, 1);
  const auto x = random_vec(64 * 40, 2);
  std::vector<float> y(64 * 4);
  std::vector<uint8_t> q8(34 * 10);
  CHECK_THROWS_AS(matvec(Matrix{q8.data(), DType::Q8_0, 2, 40}, x.data(), y.data()), Error);
  CHECK_THROWS_AS(matmul(Matrix{q8.data(), DType::Q8_0, 2, 40}, x.data(), 64, y.data()), Error);
  CHECK_THROWS_AS(matvec(Matrix{nullptr, DType::F32, 4, 40}, x.data(), y.data()), Error);
  CHECK_THROWS_AS(matvec(tm.m, nullptr, y.data()), Error);
  CHECK_THROWS_AS(matvec(tm.m, x.data(), nullptr), Error);
  CHECK_THROWS_AS(matmul(tm.m, nullptr, 3, y.data()), Error);
  CHECK_THROWS_AS(matmul(tm.m, x.data(), 3, nullptr), Error);
  CHECK_THROWS_AS(matmul(tm.m, x.data(), -1, y.data()), Error);
  CHECK_THROWS_AS(matvec(Matrix{tm.bytes.data(), DType::F32, -1, 40}, x.data(), y.data()), Error);
  CHECK_THROWS_AS(matvec(Matrix{tm.bytes.data(), static_cast<DType>(9), 4, 40}, x.data(), y.data()), Error);
  CHECK_THROWS_AS(matmul_reference(Matrix{nullptr, DType::F32, 4, 40}, x.data(), 1, y.data()), Error);

  const auto other = make_matrix(DType::F32, 4, 41, 2);
  const Matrix Ws[2] = {tm.m, other.m};
  float* ys[2] = {y.data(), y.data() + 4};
  CHECK_THROWS_WITH_AS(matvec_multi(Ws, ys, 2, x.data()), doctest::Contains("columns"), Error);
  float* null_ys[2] = {y.data(), nullptr};
  const Matrix same[2] = {tm.m, tm.m};
  CHECK_THROWS_AS(matvec_multi(same, null_ys, 2, x.data()), Error);
  CHECK_THROWS_AS(matvec_multi(same, ys, -1, x.data()), Error);
  CHECK_THROWS_AS(matvec_multi(nullptr, ys, 2, x.data()), Error);
  CHECK_THROWS_WITH_AS(matmul_multi(Ws, ys, 2, x.data(), 3), doctest::Contains("columns"), Error);
  CHECK_THROWS_AS(matmul_multi(same, null_ys, 2, x.data(), 3), Error);
  CHECK_THROWS_AS(matmul_multi(same, ys, -1, x.data(), 3), Error);
  CHECK_THROWS_AS(matmul_multi(same, ys, 2, x.data(), -1), Error);
  CHECK_THROWS_AS(matmul_multi(nullptr, ys, 2, x.data(), 3), Error);
}

TEST_CASE("matvec software prefetch changes no result, at any distance") {
  // Prefetching only moves data into cache: every distance (0 = off) must give
  // bit-identical results, including distances that wrap past a row's end into
  // later passes, and rows whose byte length is not a multiple of a cache line.
  size_t saved_prefetch[4];
  for (DType t : kAllTypes) saved_prefetch[static_cast<int>(t)] = detail::matvec_prefetch_bytes(t);
  const detail::Q8Dot saved_mode = detail::q8_matvec_mode();
  for (DType t : kAllTypes) {
    for (auto mode : {detail::Q8Dot::kInt8, detail::Q8Dot::kDequantF32}) {
      if (t != DType::Q8_0 && mode == detail::Q8Dot::kDequantF32) continue;
      detail::set_q8_matvec_mode(mode);
      const std::vector<int64_t> cols_list =
          t == DType::Q8_0 ? std::vector<int64_t>{32, 96, 608, 2048} : std::vector<int64_t>{33, 100, 577, 2048};
      for (int64_t cols : cols_list) {
        const int64_t rows = 79;  // passes of 8 (AVX-512 F32/F16/BF16) and 4 rows, then 3 single rows
        CAPTURE(dtype_name(t));
        CAPTURE(static_cast<int>(mode));
        CAPTURE(cols);
        const auto tm = make_matrix(t, rows, cols, static_cast<uint32_t>(cols));
        const auto x = random_vec(static_cast<size_t>(cols), 5);
        const size_t row_bytes = dtype_row_bytes(t, static_cast<size_t>(cols));
        detail::set_matvec_prefetch_bytes(t, 0);
        std::vector<float> off(static_cast<size_t>(rows));
        with_threads(1, [&] { matvec(tm.m, x.data(), off.data()); });
        if (mode == detail::Q8Dot::kDequantF32 || t != DType::Q8_0) check_result(tm, x, 1, off, 0.0);
        for (size_t pf : {size_t{1}, size_t{64}, row_bytes - 1, row_bytes, 3 * row_bytes + 5,
                          detail::kDefaultMatvecPrefetchBytes, detail::kDefaultMatvecPrefetchBytesQ8,
                          size_t{1} << 20}) {
          CAPTURE(pf);
          detail::set_matvec_prefetch_bytes(t, pf);
          std::vector<float> on(static_cast<size_t>(rows), NAN);
          with_threads(1, [&] { matvec(tm.m, x.data(), on.data()); });
          CHECK(on == off);
        }
      }
    }
  }
  CHECK_THROWS_AS(detail::set_matvec_prefetch_bytes(DType::F16, (size_t{1} << 20) + 1), Error);
  CHECK_THROWS_AS(detail::set_matvec_prefetch_bytes(static_cast<DType>(kDTypeCount), 0), Error);
  for (DType t : kAllTypes) detail::set_matvec_prefetch_bytes(t, saved_prefetch[static_cast<int>(t)]);
  detail::set_q8_matvec_mode(saved_mode);
}

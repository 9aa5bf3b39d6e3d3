// ctest-labels: asan kernels
// The small-batch matmul kernel (kernels/matmul_small.cc, 2 <= M <= 16) on
// shapes that exercise each of its pieces: row counts that leave a partial row
// block, rows split into several column chunks of unequal width, column tails
// that are not whole vectors, every batch size (groups of inputs of every
// size), and results that do not depend on the thread count.
//
// Tolerance. The f32 path decodes weights exactly to f32 (F16, BF16 and
// Q8_0's d*q are all exact in f32) and multiplies by f32 inputs without
// rounding them, so only the f32 summation differs from the fp64 reference:
// whatever the order, an n-term f32 dot product is within gamma_n * sum_i
// |w_i x_i| of the exact value, gamma_n ~ n * 2^-24 (Higham, ch. 3). We allow
// (cols + 4) * 2^-24 * sum|w x|, as tests/test_linear.cc does (+4 for the
// transpose-add tree's last levels and the chunk boundaries). The bf16 path
// (AVX512_BF16 CPUs, non-F32 weights) also rounds each input and each weight
// to bf16, a relative error of at most 2^-9 each, so each product is within
// (2^-8 + 2^-18) of its value: 2^-8 + 2^-17 * sum|w x| more, as for the oneDNN
// bf16 GEMM in tests/test_linear.cc. A wrong weight, scale, row, input or
// chunk shows as an error of order |w x| itself, far outside either bound.
// The AMX path (AMX-BF16 CPUs) rounds the same way and sums in another order,
// within the same bound. The aarch64 BFMMLA path (F16/BF16 weights) rounds
// the same way and rounds its additions to odd (within 2^-23, not 2^-24):
// tests/test_arm_bf16.cc checks it against that worst case. Each test runs
// the f32 path, and each bf16 kernel the CPU has.
#include <doctest/doctest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/linear.h"
#include "kernels/linear_internal.h"
#include "kernels/matmul_small/arm_bf16.h"
#include "kernels/quant/vec_dot.h"
#include "tests/linear_fixture.h"

using namespace qkv;
using namespace qkv::testing;

namespace {

// Runs f once per kernel matmul_small has here (f32; bf16 on AVX512_BF16
// CPUs; bf16 on AMX tiles where the CPU has AMX-BF16), with the extra
// relative tolerance of that precision for dtype t.
template <class F>
void for_each_precision(DType t, const F& f) {
  struct Kernel {
    bool bf16, amx;
  };
  for (const Kernel k : {Kernel{false, false}, Kernel{true, false}, Kernel{true, true}}) {
    detail::set_matmul_small_bf16(k.bf16);
    detail::set_matmul_small_amx(k.amx);
    const bool bf16 = detail::matmul_small_precision(t) == detail::GemmPrecision::kBF16;
    if (bf16 == k.bf16 && (!bf16 || detail::matmul_small_uses_amx() == k.amx)) {
      CAPTURE(k.bf16);
      CAPTURE(k.amx);
      f(k.bf16 ? 0x1p-8 + 0x1p-17 : 0.0);
    }
  }
  detail::set_matmul_small_bf16(true);
  detail::set_matmul_small_amx(true);
}

}  // namespace

TEST_CASE("matmul_small matches the reference for every batch size, with partial blocks and tails") {
  for (DType t : kAllTypes) {
    // 43 rows: several row blocks plus a partial one on any target. Columns:
    // one short chunk; one chunk with a tail that is not a whole vector
    // (F32/F16/BF16); several unequal chunks (2080 = 704 + 704 + 672 on every target).
    const std::vector<int64_t> cols_list =
        t == DType::Q8_0 ? std::vector<int64_t>{64, 576, 2080} : std::vector<int64_t>{40, 583, 2080};
    for (int64_t cols : cols_list) {
      const auto w = make_matrix(t, 43, cols, static_cast<uint32_t>(cols));
      for (int64_t M = 2; M <= kMatmulSmallMaxM; ++M) {
        CAPTURE(dtype_name(t));
        CAPTURE(cols);
        CAPTURE(M);
        const auto X = make_inputs(M, cols, static_cast<uint32_t>(M));
        for_each_precision(t, [&](double extra) {
          std::vector<float> Y(static_cast<size_t>(M * w.m.rows), NAN);
          detail::matmul_small(w.m, X.data(), M, Y.data());
          check_result(w, X, M, Y, extra);
        });
      }
    }
  }
}

TEST_CASE("matmul_small gives bit-identical results on 1 and 2 threads") {
  // Large enough to go parallel; 301 rows split unevenly over 2 threads, and
  // 2080 columns in several chunks.
  for (DType t : kAllTypes) {
    const auto w = make_matrix(t, 301, 2080, 3);
    for (int64_t M : {2, 4, 5, 9, 16}) {
      CAPTURE(dtype_name(t));
      CAPTURE(M);
      const auto X = make_inputs(M, 2080, 4);
      for_each_precision(t, [&](double extra) {
        std::vector<float> y1(static_cast<size_t>(M * w.m.rows), NAN), y2(y1.size(), NAN);
        with_threads(1, [&] { detail::matmul_small(w.m, X.data(), M, y1.data()); });
        with_threads(2, [&] { detail::matmul_small(w.m, X.data(), M, y2.data()); });
        CHECK(y1 == y2);
        check_result(w, X, M, y1, extra);
      });
    }
  }
}

TEST_CASE("matmul_small called from inside a parallel region runs serially and correctly") {
  const auto w = make_matrix(DType::F16, 100, 1100, 5);
  const int64_t M = 11;
  const auto X = make_inputs(M, 1100, 6);
  for_each_precision(DType::F16, [&](double) {
    std::vector<float> serial(static_cast<size_t>(M * w.m.rows)), nested(serial.size(), NAN);
    with_threads(1, [&] { detail::matmul_small(w.m, X.data(), M, serial.data()); });
#pragma omp parallel num_threads(2)
    {
#pragma omp single
      detail::matmul_small(w.m, X.data(), M, nested.data());
    }
    CHECK(nested == serial);
  });
}

TEST_CASE("matmul_small reads no weight row outside the matrix") {
  // The weights end exactly at the end of their allocation (prefetches may
  // look past it; loads must not: AddressSanitizer checks this in the asan
  // build). One row, and a partial row block, for each dtype.
  for (DType t : kAllTypes) {
    for (int64_t rows : {1, 7}) {
      const int64_t cols = 96;
      const auto w = make_matrix(t, rows, cols, 9, /*slack=*/0);
      std::vector<uint8_t> exact(w.bytes);  // a copy sized exactly rows * row_bytes
      const Matrix m{exact.data(), t, rows, cols};
      const auto X = make_inputs(3, cols, 10);
      CAPTURE(dtype_name(t));
      CAPTURE(rows);
      for_each_precision(t, [&](double extra) {
        std::vector<float> Y(static_cast<size_t>(3 * rows), NAN);
        detail::matmul_small(m, X.data(), 3, Y.data());
        check_result(w, X, 3, Y, extra);
      });
    }
  }
}

TEST_CASE("matmul_small_kernel_name names the kernel each weight type runs on") {
  CHECK(std::string(matmul_small_kernel_name(DType::F32)) == "f32 FMA");
  // The bf16 kernel without AMX: BFMMLA on aarch64 (F16 and BF16 weights only).
  const std::string bf16_name = detail::arm_bf16_matmul_available() ? kArmBF16MatmulName : "AVX512_BF16 dot products";
  for (DType t : {DType::F16, DType::BF16, DType::Q8_0}) {
    CAPTURE(dtype_name(t));
    const std::string name = matmul_small_kernel_name(t);
    // Q8_0 batches take the integer block GEMM where the CPU has AVX-512 VNNI or AVX2.
    const bool block = detail::block_gemm_type(t, kMatmulSmallMaxM);
    if (block) {
      CHECK(name == quant_gemm_name());
    } else if (detail::matmul_small_precision(t) == detail::GemmPrecision::kF32) {
      CHECK(name == "f32 FMA");
    } else {
      CHECK(name == (detail::matmul_small_uses_amx() ? "AMX bf16 tiles" : bf16_name));
    }
    detail::set_matmul_small_amx(false);
    if (!block && detail::matmul_small_precision(t) == detail::GemmPrecision::kBF16) {
      CHECK(std::string(matmul_small_kernel_name(t)) == bf16_name);
    }
    detail::set_matmul_small_amx(true);
    detail::set_matmul_small_bf16(false);
    // Q8_0 without the bf16 path: the integer block GEMM where the CPU has one.
    CHECK(std::string(matmul_small_kernel_name(t)) ==
          (detail::block_gemm_type(t, kMatmulSmallMaxM) ? quant_gemm_name() : "f32 FMA"));
    detail::set_matmul_small_bf16(true);
  }
  // The K-quants: the integer block GEMM where the CPU has one.
  if (detail::block_gemm_type(DType::Q4_K, kMatmulSmallMaxM)) {
    CHECK(std::string(matmul_small_kernel_name(DType::Q4_K)) == quant_gemm_name());
  }
}

TEST_CASE("matmul_small with no columns gives zeros") {
  const uint16_t none = 0;  // a valid pointer; no weight is read
  for (DType t : kAllTypes) {
    std::vector<float> Y(3 * 5, NAN);
    const float x = 1.0f;
    for_each_precision(t, [&](double) {
      std::fill(Y.begin(), Y.end(), NAN);
      detail::matmul_small(Matrix{&none, t, 5, 0}, &x, 3, Y.data());
      for (float y : Y) CHECK(y == 0.0f);
    });
  }
}

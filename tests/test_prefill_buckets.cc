// ctest-labels: kernels asan
// The prefill GEMM's row buckets (kernels/gemm_onednn.cc): a batch of any
// size runs as GEMMs of a fixed set of row counts and still equals the fp64
// reference at every piece boundary, through whole weights and decoded tiles;
// prepare_matmul builds each bucket's primitive once, ahead, and nothing for
// weights that the project's own kernels take. Tolerances as test_linear.cc's.
#include <doctest/doctest.h>

#include <vector>

#include "kernels/dtype.h"
#include "kernels/linear.h"
#include "kernels/linear_internal.h"
#include "tests/linear_fixture.h"

using namespace qkv;
using namespace qkv::testing;

namespace {

// 16 row counts up to 256 (every multiple of 16), 4 from 320 to 512 (every
// multiple of 64 above 256).
constexpr int64_t kBucketsUpTo512 = 20;

}  // namespace

// Built without oneDNN (QKV_ONEDNN off) there are no primitives to build.
TEST_CASE("prepare_matmul builds each row bucket's GEMM once, ahead of the batches" *
          doctest::skip(!QKV_HAVE_ONEDNN)) {
  // Shapes no other case here uses, so the primitive cache starts without them.
  const auto f16 = make_matrix(DType::F16, 40, 72, 3);
  CHECK(prepare_matmul(f16.m, 512) == kBucketsUpTo512);
  CHECK(prepare_matmul(f16.m, 512) == 0);  // all built
  CHECK(prepare_matmul(f16.m, 4000) == 0);  // beyond 512 rows: pieces of 512 and the same buckets
  const auto f32 = make_matrix(DType::F32, 24, 88, 4);
  CHECK(prepare_matmul(f32.m, 100) == 7);  // 16, 32, ..., 112
  CHECK(prepare_matmul(f32.m, 300) == 16 - 7);  // up to 256: 300 rows run as 256 + 48
  CHECK(prepare_matmul(f32.m, 16) == 0);  // 16 rows go to the small-batch kernel
  // Wider than one decoded tile (2048 columns of bf16 or f32: 512 or 256 rows
  // a tile): a whole tile's width and the last tile's, each bucket.
  const auto tiled = make_matrix(DType::F16, 600, 2048, 5);
  CHECK(prepare_matmul(tiled.m, 512) == 2 * kBucketsUpTo512);
  const auto q8 = make_matrix(DType::Q8_0, 32, 96, 6);
  CHECK(prepare_matmul(q8.m, 512) == (detail::block_gemm_type(DType::Q8_0, 512) ? 0 : kBucketsUpTo512));
}

TEST_CASE("a batch of any size equals the reference across the row pieces") {
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    const int64_t cols = 64, rows = 48;
    const auto tm = make_matrix(t, rows, cols, 7);
    // One piece, a multiple of 64 and its rest, 512-row pieces and a rest.
    for (int64_t M : {17, 100, 255, 256, 257, 300, 447, 511, 512, 513, 577, 1100}) {
      CAPTURE(dtype_name(t));
      CAPTURE(M);
      const auto X = random_vec(static_cast<size_t>(M * cols), static_cast<uint32_t>(M));
      std::vector<float> Y(static_cast<size_t>(M * rows), NAN);
      matmul(tm.m, X.data(), M, Y.data());
      const bool bf16 = t != DType::F32 && detail::default_gemm_precision(t) == detail::GemmPrecision::kBF16;
      check_result(tm, X, M, Y, bf16 ? 0x1p-8 + 0x1p-17 : 0.0);
    }
  }
}

TEST_CASE("decoded tiles by row pieces equal the reference") {
  const auto tm = make_matrix(DType::F16, 600, 2048, 8);  // tiles of 512 (bf16) or 256 (f32) rows and a rest
  const int64_t M = 300;                                   // 256 + 44 padded to 48
  const auto X = random_vec(static_cast<size_t>(M * 2048), 9);
  std::vector<float> Y(static_cast<size_t>(M * 600), NAN);
  matmul(tm.m, X.data(), M, Y.data());
  const bool bf16 = detail::default_gemm_precision(DType::F16) == detail::GemmPrecision::kBF16;
  check_result(tm, X, M, Y, bf16 ? 0x1p-8 + 0x1p-17 : 0.0);
}

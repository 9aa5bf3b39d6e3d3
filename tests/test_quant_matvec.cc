// ctest-labels: kernels asan
// Matvec on ggml block types against an fp64 reference computed from the
// dequantized weights and the same quantized activation, at several shapes,
// row counts and thread counts; and the activation quantizers' rules.
// (Batches of these types: tests/test_quant_matmul.cc.)
#include <doctest/doctest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "kernels/dtype.h"
#include "kernels/linear.h"
#include "kernels/quant/activation.h"
#include "kernels/quant/vec_dot.h"
#include "tests/quant_fixture.h"
#include "tests/simd_targets.h"

using namespace qkv;

namespace {

using testing::ActRef;
using testing::dequantized_activation;
using testing::kTypes;
using testing::random_rows;
using testing::row_reference;
using testing::RowRef;

}  // namespace

TEST_CASE("matvec of every ggml block type against the fp64 reference") {
  // matvec runs the SIMD kernels where the CPU has them (kernels/quant/vec_dot.h).
  // Tolerance from f32 arithmetic (ggml's own is f32 too): per block one f32
  // scale product and one fused multiply-add into a lane whose partial sums stay
  // below sum |w * x|, then a few f32 sums at the end, plus up to 2 roundings in
  // the f32 dequantized weights of the reference: (blocks + 16) * 2^-24 of
  // sum |w * x|. The block integer sums are exact.
  std::mt19937 g(7);
  for (DType t : kTypes) {
    CAPTURE(dtype_name(t));
    const size_t bv = dtype_block_values(t);
    for (size_t cols : {bv, 2 * bv, 3 * bv, bv == 32 ? size_t(608) : size_t(2048)}) {
      for (size_t rows : {size_t(1), size_t(3), size_t(4), size_t(5), size_t(17), size_t(130)}) {
        CAPTURE(cols);
        CAPTURE(rows);
        const std::vector<uint8_t> w = random_rows(t, rows, cols, g);
        std::vector<float> x(cols);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        for (auto& v : x) v = nd(g);
        x[cols / 3] = 6.0f;  // an outlier sets one block's scale
        std::vector<uint8_t> xa(act_bytes(t, cols));
        quantize_activation(t, x.data(), cols, xa.data());
        const ActRef a = dequantized_activation(t, xa, cols);
        const Matrix W{w.data(), t, int64_t(rows), int64_t(cols)};
        std::vector<float> y1(rows), y2(rows);
        omp_set_num_threads(1);
        matvec(W, x.data(), y1.data());
        omp_set_num_threads(2);
        matvec(W, x.data(), y2.data());
        for (size_t r = 0; r < rows; ++r) {
          CHECK(y1[r] == y2[r]);  // every row computed the same way on any thread count
          const RowRef ref = row_reference(t, w.data() + r * dtype_row_bytes(t, cols), cols, a);
          const double tol = (double(cols / bv) + 16.0) * std::ldexp(1.0, -24) * ref.mag + 1e-30;
          CHECK(std::fabs(y1[r] - ref.value) <= tol);
        }
      }
    }
  }
  omp_set_num_threads(2);
}

TEST_CASE("SIMD block-type kernels equal the scalar reference kernels") {
  // The SIMD kernels sum the same exact integer block sums and do the same f32
  // operations in the same order as the scalar ones (kernels/quant/vec_dot.h),
  // so the two agree bit for bit; row counts cover 4-row passes, stream splits
  // and leftover rows, column counts odd and even block counts (18: a group
  // of 16 blocks and a short last one, whose scales the VNNI kernel reads
  // one by one).
  // Every compiled target: AVX3_DL runs the VNNI kernels, AVX2 and AVX3 the
  // 256-bit ones (kernels/quant/vec_dot_hwy-inl.h), the others the scalar
  // kernels compiled for them. With `flat`, every activation quantizes to
  // -127: the largest int16 pair sums of the 256-bit kernels (2 * 127 * 127 for
  // the IQ4 levels), which must not saturate.
  std::mt19937 g(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const auto targets = hwy::SupportedAndGeneratedTargets();
  REQUIRE(!targets.empty());
  for (const int64_t target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    const std::string target_name = hwy::TargetName(target);
    CAPTURE(target_name);
    for (DType t : kTypes) {
      CAPTURE(dtype_name(t));
      const size_t bv = dtype_block_values(t);
      for (size_t blocks : {size_t(1), size_t(2), size_t(3), size_t(7), size_t(18), size_t(22)}) {
        for (size_t rows : {size_t(1), size_t(2), size_t(4), size_t(7), size_t(8), size_t(33)}) {
          const size_t cols = blocks * bv;
          CAPTURE(cols);
          CAPTURE(rows);
          const std::vector<uint8_t> w = random_rows(t, rows, cols, g);
          for (bool flat : {false, true}) {
            CAPTURE(flat);
            std::vector<float> x(cols, -1.0f);
            if (!flat) {
              for (auto& v : x) v = nd(g);
              x[cols / 2] = -9.0f;
            }
            std::vector<uint8_t> xa(act_bytes(t, cols));
            quantize_activation(t, x.data(), cols, xa.data());
            std::vector<float> ys(rows), yr(rows);
            quant_dot_rows(t, w.data(), cols, xa.data(), ys.data(), rows);
            quant_dot_rows_scalar(t, w.data(), cols, xa.data(), yr.data(), rows);
            for (size_t r = 0; r < rows; ++r) CHECK(ys[r] == yr[r]);
          }
        }
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

TEST_CASE("activation quantizers: ggml's x86 rules") {
  std::vector<float> x(256);
  for (size_t i = 0; i < 256; ++i) x[i] = 0.01f * (float(i) - 100.0f);
  SUBCASE("Q8_0: f16 scale amax/127, q = round-half-even(x * 127 / amax)") {
    BlockQ8_0 b[8];
    quantize_row_q8_0(x.data(), 256, b);
    for (size_t i = 0; i < 8; ++i) {
      float amax = 0;
      for (size_t k = 0; k < 32; ++k) amax = std::fmax(amax, std::fabs(x[32 * i + k]));
      CHECK(b[i].d == f32_to_f16(amax / 127.0f));
      for (size_t k = 0; k < 32; ++k) CHECK(b[i].qs[k] == int(std::nearbyint(x[32 * i + k] * (127.0f / amax))));
    }
    std::vector<float> ties(32, 0.0f);
    ties[0] = 127.0f;  // id = 1: 2.5 -> 2, 3.5 -> 4, -0.5 -> 0
    ties[1] = 2.5f, ties[2] = 3.5f, ties[3] = -0.5f;
    quantize_row_q8_0(ties.data(), 32, b);
    CHECK(b[0].qs[1] == 2);
    CHECK(b[0].qs[2] == 4);
    CHECK(b[0].qs[3] == 0);
    std::vector<float> zero(32, 0.0f);
    quantize_row_q8_0(zero.data(), 32, b);
    CHECK(b[0].d == 0);
    for (int8_t q : b[0].qs) CHECK(q == 0);
  }
  SUBCASE("Q8_1: s = f16(d * sum q) with the f32 d") {
    BlockQ8_1 b[8];
    quantize_row_q8_1(x.data(), 256, b);
    for (size_t i = 0; i < 8; ++i) {
      float amax = 0;
      for (size_t k = 0; k < 32; ++k) amax = std::fmax(amax, std::fabs(x[32 * i + k]));
      int sum = 0;
      for (int8_t q : b[i].qs) sum += q;
      CHECK(b[i].s == f32_to_f16(amax / 127.0f * float(sum)));
    }
  }
  SUBCASE("Q8_K: scale from the signed max, bsums, d = 1 / iscale") {
    BlockQ8_K b;
    quantize_row_q8_K(x.data(), 256, &b);  // max |x| is 1.55 at i = 255
    const float iscale = -127.0f / x[255];
    CHECK(b.d == 1.0f / iscale);
    CHECK(b.qs[255] == -127);
    for (size_t j = 0; j < 16; ++j) {
      int s = 0;
      for (size_t k = 0; k < 16; ++k) {
        CHECK(b.qs[16 * j + k] == std::min(127, int(std::nearbyint(iscale * x[16 * j + k]))));
        s += b.qs[16 * j + k];
      }
      CHECK(b.bsums[j] == s);
    }
    x[3] = -1.55f;  // the first of equal |x| sets the sign: iscale > 0 now
    quantize_row_q8_K(x.data(), 256, &b);
    CHECK(b.d > 0.0f);
    CHECK(b.qs[3] == -127);
    CHECK(b.qs[255] == 127);
  }
}

TEST_CASE("activation quantizers: every SIMD target gives the scalar reference's bytes") {
  // Random values at several magnitudes, with NaN, infinities, signed zeros,
  // exact halves after scaling, all-zero blocks and equal |x| of both signs.
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const size_t n = 256 * 12;
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = normal(rng) * std::ldexp(1.0f, static_cast<int>(i / 256) * 3 - 12);
  x[5] = std::numeric_limits<float>::quiet_NaN();
  x[300] = std::numeric_limits<float>::infinity();
  x[301] = -std::numeric_limits<float>::infinity();
  x[600] = -0.0f;
  for (size_t i = 768; i < 1024; ++i) x[i] = 0.0f;  // an all-zero Q8_K block (and 8 Q8_0 blocks)
  for (size_t i = 1024; i < 1056; ++i) x[i] = 0.5f * static_cast<float>(static_cast<int>(i % 9) - 4);  // halves: 127 * k / 4
  x[1024] = 127.0f;
  x[1300] = 3.0f, x[1301] = -3.0f;  // the first of equal |x| is the Q8_K max
  for (size_t i = 1536; i < 1792; ++i) x[i] = std::numeric_limits<float>::quiet_NaN();  // all NaN
  x[1800] = std::numeric_limits<float>::denorm_min();
  std::vector<BlockQ8_0> a0(n / 32), r0(n / 32);
  std::vector<BlockQ8_1> a1(n / 32), r1(n / 32);
  std::vector<BlockQ8_K> ak(n / 256), rk(n / 256);
  quantize_row_q8_0_scalar(x.data(), n, r0.data());
  quantize_row_q8_1_scalar(x.data(), n, r1.data());
  quantize_row_q8_K_scalar(x.data(), n, rk.data());
  testing::for_each_simd_target([&] {
    quantize_row_q8_0(x.data(), n, a0.data());
    quantize_row_q8_1(x.data(), n, a1.data());
    quantize_row_q8_K(x.data(), n, ak.data());
    for (size_t b = 0; b < n / 32; ++b) {
      CAPTURE(b);
      CHECK(std::memcmp(&a0[b], &r0[b], sizeof(BlockQ8_0)) == 0);
      CHECK(std::memcmp(&a1[b], &r1[b], sizeof(BlockQ8_1)) == 0);
    }
    for (size_t b = 0; b < n / 256; ++b) {
      CAPTURE(b);
      CHECK(std::memcmp(&ak[b], &rk[b], sizeof(BlockQ8_K)) == 0);
    }
    // 21 blocks from x[1008]: groups of a vector's lanes in blocks and a
    // tail of single blocks (with the halves, the NaN-free and zero blocks).
    const size_t tail = 32 * 21;
    std::vector<BlockQ8_0> t0(21), s0(21);
    std::vector<BlockQ8_1> t1(21), s1(21);
    quantize_row_q8_0_scalar(x.data() + 1008, tail, s0.data());
    quantize_row_q8_1_scalar(x.data() + 1008, tail, s1.data());
    quantize_row_q8_0(x.data() + 1008, tail, t0.data());
    quantize_row_q8_1(x.data() + 1008, tail, t1.data());
    for (size_t b = 0; b < 21; ++b) {
      CAPTURE(b);
      CHECK(std::memcmp(&t0[b], &s0[b], sizeof(BlockQ8_0)) == 0);
      CHECK(std::memcmp(&t1[b], &s1[b], sizeof(BlockQ8_1)) == 0);
    }
  });
}


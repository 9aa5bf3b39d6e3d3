// ctest-labels: kernels
// The Armv8.6 BF16 small-batch matmul of F16 and BF16 weights
// (kernels/matmul_small/arm_bf16.h), the tiles themselves and through
// matmul(), against an fp64 reference computed from the bf16-rounded
// operands.
//
// Tolerance. The kernel rounds every input and weight to bf16 (nearest even;
// F16 through its exact f32 value) and the reference rounds them the same way
// (f32_to_bf16), so the products agree exactly (two bf16 multiply exactly in
// f32) and only the summation differs. BFMMLA rounds each addition to f32 to
// odd (the Arm ARM's BFMMLA without FEAT_EBF16), within one ulp (2^-23
// relative) where round-to-nearest is within half of one; the kernel's own
// additions (its accumulator sets, its passes of columns) round to nearest.
// However the cols products are summed, that is n - 1 = cols - 1 rounded
// additions, so each output is within (cols - 1) * 2^-23 * (1 + small) of the
// exact sum, relative to sum |w x| (Higham, ch. 3, with unit 2^-23); we allow
// (cols + 1) * 2^-23. A wrong row, input, weight or column shows as an error
// of order |w x| itself, and skipping the rounding of inputs or weights as
// about 2^-9 relative, far outside the bound for every shape here
// (cols <= 1031: at most 2^-13). Runs on an aarch64 core with BF16 (under
// qemu: QEMU_CPU=max); elsewhere checks that the kernel is not taken, and skips
// the rest with a message.
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
#include "kernels/machine/arm_features.h"
#include "kernels/matmul_small/arm_bf16.h"
#include "kernels/matmul_small/arm_bf16_tiles.h"
#include "tests/arm_kernel_fixture.h"

using namespace qkv;

namespace {

bool bf16_here() {
#if defined(__aarch64__)
  if (!arm_features().bf16) {
    MESSAGE("skipped: this aarch64 core has no BF16 (BFMMLA); run under QEMU_CPU=max");
    return false;
  }
  if (testing::isa_cap_below_dot_product()) {
    MESSAGE("skipped: QKV_ISA caps the kernels at the baseline Armv8 core, which leaves BF16 out");
    return false;
  }
  return true;
#else
  MESSAGE("skipped: not an aarch64 CPU (the BFMMLA kernel is aarch64 only)");
  return false;
#endif
}

struct Weights {
  std::vector<uint16_t> raw;      // rows x cols f16 or bf16
  std::vector<double> rounded;    // each weight as bf16, the value the kernel multiplies
  std::vector<double> exact;      // each weight's own value (f16 / bf16 decoded)
};

// Rows of different magnitudes (a mixed-up row shows), values in (-1, 1) * 2^k.
Weights make_weights(DType t, size_t rows, size_t cols, std::mt19937& g) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Weights w;
  w.raw.resize(rows * cols);
  w.rounded.resize(rows * cols);
  w.exact.resize(rows * cols);
  for (size_t r = 0; r < rows; ++r) {
    const float scale = std::ldexp(1.0f, static_cast<int>(r % 5) - 2);
    for (size_t c = 0; c < cols; ++c) {
      const size_t i = r * cols + c;
      const float v = u(g) * scale;
      w.raw[i] = t == DType::F16 ? f32_to_f16(v) : f32_to_bf16(v);
      const float e = t == DType::F16 ? f16_to_f32(w.raw[i]) : bf16_to_f32(w.raw[i]);
      w.exact[i] = e;
      w.rounded[i] = bf16_to_f32(f32_to_bf16(e));
    }
  }
  return w;
}

// M inputs of cols values, each input with its own magnitude.
std::vector<float> make_inputs(size_t M, size_t cols, std::mt19937& g) {
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> X(M * cols);
  for (size_t m = 0; m < M; ++m) {
    const float scale = std::ldexp(1.0f, static_cast<int>(m % 4) - 1);
    for (size_t c = 0; c < cols; ++c) X[m * cols + c] = u(g) * scale;
  }
  return X;
}

// Y (M outputs of ldy values, rows of them written) against the fp64 sums of
// the bf16-rounded operands, within (cols + 1) * 2^-23 * sum |w x| (see the
// top of the file); the values past `rows` in each output untouched (-7).
void check_bf16(const Weights& w, size_t rows, size_t cols, const std::vector<float>& X, size_t M,
                const std::vector<float>& Y, size_t ldy) {
  int bad = 0;
  const double gamma = (static_cast<double>(cols) + 1) * 0x1p-23;
  for (size_t m = 0; m < M; ++m) {
    for (size_t r = 0; r < rows; ++r) {
      double sum = 0, abs_sum = 0;
      for (size_t c = 0; c < cols; ++c) {
        const double p = w.rounded[r * cols + c] * bf16_to_f32(f32_to_bf16(X[m * cols + c]));
        sum += p;
        abs_sum += std::fabs(p);
      }
      const double got = Y[m * ldy + r], err = std::fabs(got - sum);
      if (!(err <= gamma * abs_sum) && bad++ < 5) {
        FAIL_CHECK("input ", m, " row ", r, ": got ", got, " want ", sum, " err ", err, " bound ", gamma * abs_sum);
      }
    }
    for (size_t r = rows; r < ldy; ++r) {
      if (Y[m * ldy + r] != -7.0f && bad++ < 5) FAIL_CHECK("input ", m, " row ", r, " past the rows written");
    }
  }
  CHECK(bad == 0);
}

constexpr DType kTypes[] = {DType::F16, DType::BF16};

}  // namespace

TEST_CASE("arm_bf16: matmul_small takes the kernel for F16 and BF16 weights exactly where the core has BF16") {
#if defined(__aarch64__)
  const bool expected = arm_features().bf16 && !testing::isa_cap_below_dot_product();
#else
  const bool expected = false;
#endif
  CHECK(detail::arm_bf16_matmul_available() == expected);
  for (DType t : kTypes) {
    const std::string type = dtype_name(t);
    CAPTURE(type);
    if (expected) {
      CHECK(detail::matmul_small_precision(t) == detail::GemmPrecision::kBF16);
      CHECK(std::string(matmul_small_kernel_name(t)) == kArmBF16MatmulName);
#if !QKV_HAVE_ONEDNN
      // Prefill runs on the small-batch kernel in slices.
      CHECK(std::string(prefill_gemm_kernel_name(t)) == kArmBF16MatmulName);
#endif
    }
    // The f32 switch forces the f32 FMA kernel.
    detail::set_matmul_small_bf16(false);
    CHECK(detail::matmul_small_precision(t) == detail::GemmPrecision::kF32);
    CHECK(std::string(matmul_small_kernel_name(t)) == "f32 FMA");
    detail::set_matmul_small_bf16(true);
  }
  // F32 weights keep f32; on aarch64 the block types keep their own kernels.
  CHECK(detail::matmul_small_precision(DType::F32) == detail::GemmPrecision::kF32);
#if defined(__aarch64__)
  CHECK(detail::matmul_small_precision(DType::Q8_0) == detail::GemmPrecision::kF32);
  CHECK(detail::matmul_small_precision(DType::Q4_K) == detail::GemmPrecision::kF32);
  if (!expected) {
    CHECK(detail::matmul_small_precision(DType::F16) == detail::GemmPrecision::kF32);
    CHECK(std::string(matmul_small_kernel_name(DType::BF16)) != kArmBF16MatmulName);
  }
#endif
}

TEST_CASE("arm_bf16: the tiles match the bf16-rounded reference for every batch, partial blocks and column tails") {
  if (!bf16_here()) return;
#if defined(__aarch64__)  // only aarch64 builds define the tiles
  std::mt19937 g(53);
  // Column counts: shorter than a step of 8, a partial step, whole steps, one
  // pass of 512 plus one column, two passes and a tail.
  for (DType t : kTypes) {
    for (size_t cols : {size_t(1), size_t(3), size_t(8), size_t(13), size_t(96), size_t(513), size_t(1031)}) {
      // Rows: one, a partial block of 8, one block, blocks plus a partial one.
      for (size_t rows : {size_t(1), size_t(7), size_t(8), size_t(21)}) {
        const Weights w = make_weights(t, rows, cols, g);
        // Batched decode sizes, and the slices prefill feeds (9 .. 16).
        for (size_t M : {size_t(2), size_t(3), size_t(5), size_t(8), size_t(9), size_t(11), size_t(13), size_t(16)}) {
          const std::string type = dtype_name(t);
          CAPTURE(type);
          CAPTURE(cols);
          CAPTURE(rows);
          CAPTURE(M);
          const std::vector<float> X = make_inputs(M, cols, g);
          std::vector<uint16_t> xp(arm_bf16::packed_inputs_size(M, cols));
          arm_bf16::pack_inputs(X.data(), M, cols, xp.data());
          const size_t ldy = rows + 3;
          std::vector<float> Y(M * ldy, -7.0f);
          for (size_t m = 0; m < M; ++m)
            for (size_t r = 0; r < rows; ++r) Y[m * ldy + r] = NAN;  // every output must be written
          arm_bf16::matmul_rows(t == DType::F16, w.raw.data(), cols, rows, xp.data(), M, Y.data(), ldy);
          check_bf16(w, rows, cols, X, M, Y, ldy);
        }
      }
    }
  }
#endif
}

TEST_CASE("arm_bf16: rounding to bf16 is nearest even, for the inputs and the F16 weights") {
  if (!bf16_here()) return;
#if defined(__aarch64__)
  // 1 + 2^-8 lies halfway between the bf16 values 1 and 1 + 2^-7: nearest
  // even gives 1 (half away from zero: 1 + 2^-7). 1 + 3 * 2^-8 lies halfway
  // between 1 + 2^-7 and 1 + 2^-6: nearest even gives 1 + 2^-6 (truncation:
  // 1 + 2^-7).
  const size_t cols = 2, M = 2;
  const float x[M * cols] = {1.0f + 0x1p-8f, 0.0f, 0.0f, 1.0f + 3 * 0x1p-8f};
  std::vector<uint16_t> xp(arm_bf16::packed_inputs_size(M, cols));
  arm_bf16::pack_inputs(x, M, cols, xp.data());
  // Weights: row 0 (1, 0), row 1 (0, 1) in BF16, row 2 the same halfway
  // values as f16 (exact in f16) times input 0 = (1, 0) after rounding.
  const uint16_t bf16_w[2 * cols] = {f32_to_bf16(1.0f), 0, 0, f32_to_bf16(1.0f)};
  float y[M * 2];
  arm_bf16::matmul_rows(false, bf16_w, cols, 2, xp.data(), M, y, 2);
  CHECK(y[0] == 1.0f);                    // input 0 . row 0: bf16(1 + 2^-8) = 1
  CHECK(y[1 * 2 + 1] == 1.0f + 0x1p-6f);  // input 1 . row 1: bf16(1 + 3 * 2^-8)
  const uint16_t f16_w[2 * cols] = {f32_to_f16(1.0f + 0x1p-8f), 0, f32_to_f16(1.0f + 3 * 0x1p-8f), 0};
  arm_bf16::matmul_rows(true, f16_w, cols, 2, xp.data(), M, y, 2);
  CHECK(y[0] == 1.0f);            // row 0 . input 0: 1 * 1
  CHECK(y[1] == 1.0f + 0x1p-6f);  // row 1 . input 0
#endif
}

TEST_CASE("arm_bf16: matmul takes the kernel, bit-identical on 1 and 2 threads, prefill in slices") {
  if (!bf16_here()) return;
  std::mt19937 g(11);
  const int saved = omp_get_max_threads();
  // 301 rows over 2 threads in uneven shares (blocks of 8), 1031 columns in
  // three passes: enough weights to go parallel.
  const size_t rows = 301, cols = 1031;
  for (DType t : kTypes) {
    const Weights w = make_weights(t, rows, cols, g);
    const Matrix W{w.raw.data(), t, static_cast<int64_t>(rows), static_cast<int64_t>(cols)};
    // 2 .. 16: batched decode; 17 (slices 9 + 8) and 37 (13 + 12 + 12): prefill.
    for (size_t M : {size_t(2), size_t(5), size_t(16), size_t(17), size_t(37)}) {
      const std::string type = dtype_name(t);
      CAPTURE(type);
      CAPTURE(M);
      const std::vector<float> X = make_inputs(M, cols, g);
      std::vector<float> y1(M * rows, NAN), y2(M * rows, NAN);
      omp_set_num_threads(1);
      matmul(W, X.data(), static_cast<int64_t>(M), y1.data());
      omp_set_num_threads(2);
      matmul(W, X.data(), static_cast<int64_t>(M), y2.data());
      CHECK(y1 == y2);
      // Within the bound of the bf16-rounded operands: the f32 kernel, whose
      // inputs are not rounded, misses it by about 2^-9 relative.
      check_bf16(w, rows, cols, X, M, y2, rows);
    }
  }
  omp_set_num_threads(saved);
}

TEST_CASE("arm_bf16: set_matmul_small_bf16(false) gives f32 results, unrounded inputs") {
  if (!bf16_here()) return;
  std::mt19937 g(5);
  const size_t rows = 19, cols = 300, M = 6;
  for (DType t : kTypes) {
    const std::string type = dtype_name(t);
    CAPTURE(type);
    const Weights w = make_weights(t, rows, cols, g);
    const Matrix W{w.raw.data(), t, static_cast<int64_t>(rows), static_cast<int64_t>(cols)};
    const std::vector<float> X = make_inputs(M, cols, g);
    std::vector<float> Y(M * rows, NAN);
    detail::set_matmul_small_bf16(false);
    matmul(W, X.data(), static_cast<int64_t>(M), Y.data());
    detail::set_matmul_small_bf16(true);
    // The f32 kernel's bound on the exact weights and unrounded inputs
    // (tests/test_matmul_small.cc): (cols + 4) * 2^-24 relative, which the
    // bf16 inputs' rounding (about 2^-9) would exceed.
    int bad = 0;
    for (size_t m = 0; m < M; ++m) {
      for (size_t r = 0; r < rows; ++r) {
        double sum = 0, abs_sum = 0;
        for (size_t c = 0; c < cols; ++c) {
          const double p = w.exact[r * cols + c] * double(X[m * cols + c]);
          sum += p;
          abs_sum += std::fabs(p);
        }
        const double err = std::fabs(Y[m * rows + r] - sum);
        if (!(err <= (cols + 4) * 0x1p-24 * abs_sum) && bad++ < 5) {
          FAIL_CHECK("input ", m, " row ", r, ": got ", Y[m * rows + r], " want ", sum, " err ", err);
        }
      }
    }
    CHECK(bad == 0);
  }
}

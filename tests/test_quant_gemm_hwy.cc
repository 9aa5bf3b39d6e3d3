// ctest-labels: kernels asan
// The batched GEMM without tables (quant_gemm, the tile kernel on rows) on
// every compiled SIMD target that has one: the AVX-512 VNNI tile kernel, and
// the 256-bit GEMM of AVX2 and AVX3 (kernels/quant/gemm_hwy-inl.h). Every
// output must equal the scalar kernel's dot product for its input bit for bit
// (integer block sums exact, the f32 steps in the scalar order), for batches
// and row counts that leave partial tiles, block counts that leave partial
// groups of 8 scales, random weights (Q8_0's include -128), and activations all
// at -127 (the largest int16 pair sums vpmaddubsw makes, which must not
// saturate).
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "kernels/dtype.h"
#include "kernels/machine/isa_cap.h"
#include "kernels/quant/vec_dot.h"
#include "kernels/quant/gemm_avx2_lanes.h"
#include "kernels/quant/vec_dot_avxvnni.h"
#include "tests/quant_fixture.h"
#include "tests/simd_targets.h"

using namespace qkv;

namespace {

constexpr DType kGemmTypes[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1,   DType::Q5_0, DType::Q5_1,  DType::Q2_K,
                                DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS};

}  // namespace

TEST_CASE("quant_gemm without tables equals the scalar dot products bit for bit, on every target") {
  std::mt19937 g(53);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  int targets_with_gemm = 0;
  testing::for_each_simd_target([&] {
    if (!quant_gemm_rows_available(DType::Q4_0)) return;
    ++targets_with_gemm;
    for (DType t : kGemmTypes) {
      CAPTURE(dtype_name(t));
      REQUIRE(quant_gemm_rows_available(t));
      const size_t bv = dtype_block_values(t);
      for (size_t blocks : {size_t(1), size_t(3), size_t(9), size_t(17)}) {
        if (bv == 256 && blocks > 3) continue;
        const size_t cols = blocks * bv;
        for (size_t rows : {size_t(1), size_t(2), size_t(5)}) {
          for (size_t M : {size_t(1), size_t(3), size_t(4), size_t(9)}) {
            for (bool flat : {false, true}) {
              CAPTURE(cols);
              CAPTURE(rows);
              CAPTURE(M);
              CAPTURE(flat);
              const std::vector<uint8_t> w = testing::random_rows(t, rows, cols, g);
              const size_t ab = act_bytes(t, cols);
              std::vector<uint8_t> xa(ab * M);
              std::vector<float> x(cols);
              for (size_t m = 0; m < M; ++m) {
                for (auto& v : x) v = flat ? -1.0f : nd(g);
                quantize_activation(t, x.data(), cols, xa.data() + m * ab);
              }
              // ldy above rows: the kernel must write only its rows of each input.
              const size_t ldy = rows + 3;
              std::vector<float> y(ldy * M, -7.0f), ref(rows);
              quant_gemm(t, w.data(), cols, xa.data(), M, y.data(), ldy, rows);
              for (size_t m = 0; m < M; ++m) {
                quant_dot_rows_scalar(t, w.data(), cols, xa.data() + m * ab, ref.data(), rows);
                for (size_t r = 0; r < rows; ++r) CHECK(y[m * ldy + r] == ref[r]);
                for (size_t r = rows; r < ldy; ++r) CHECK(y[m * ldy + r] == -7.0f);
              }
            }
          }
        }
      }
    }
  });
  // x86 builds compile the AVX2 target; an x86 CPU with AVX2 runs it.
  if ((HWY_TARGETS & HWY_AVX2) != 0 && (supported_simd_targets() & HWY_AVX2) != 0) CHECK(targets_with_gemm >= 1);
  MESSAGE("targets with a GEMM on rows: " << targets_with_gemm);
}

TEST_CASE("the AVX2 targets have the GEMM on rows but neither the packed kernel nor row groups") {
  testing::for_each_simd_target([&] {
    if (!quant_gemm_rows_available(DType::Q4_K) || quant_gemm_available(DType::Q4_K)) return;
    CHECK_FALSE(quant_gemm_packed(16));
    CHECK_FALSE(quant_gemm_lanes(DType::Q4_0, 16));
    // An AVX-VNNI CPU capped below AVX-512 runs the {vex} vpdpbusd kernels
    // whatever the Highway target, and any AVX2 CPU the inputs-in-lanes kernel from 5 inputs.
    CHECK(std::string(quant_gemm_name()) ==
          (avxvnni_takes(DType::Q4_0)                          ? "AVX-VNNI integer block GEMM, inputs in lanes from 5"
           : avx2_lanes_takes(DType::Q4_0, kAvx2LanesMinInputs) ? "AVX2 integer block GEMM, inputs in lanes from 5"
                                                                : "AVX2 integer block GEMM"));
  });
}

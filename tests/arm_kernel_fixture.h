// Inputs and checks shared by the aarch64 int8 kernel tests
// (test_arm_dotprod.cc, test_arm_i8mm.cc, test_arm_dotprod_gemm.cc): the block
// types they cover, activations with an outlier, weight rows at the extremes
// of every field, and the bit-for-bit check of a batch against the scalar matvec.
#pragma once

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/machine/isa_cap.h"
#include "kernels/quant/vec_dot.h"
#include "tests/quant_fixture.h"

namespace qkv {
namespace testing {

constexpr DType kArmInt8Types[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,  DType::IQ4_NL,
                                   DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS};

inline std::vector<float> random_activation(size_t cols, std::mt19937& g) {
  std::vector<float> x(cols);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto& v : x) v = nd(g);
  x[cols / 3] = 6.0f;  // an outlier sets one block's scale
  return x;
}

// Whether byte k of a block of type t belongs to its f16 scales (d, and m /
// dmin where the type has one), the fields random_rows sets.
inline bool f16_scale_byte(DType t, size_t k) {
  switch (t) {
    case DType::Q4_1:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K: return k < 4;
    case DType::Q2_K: return k >= 80;
    case DType::Q3_K: return k >= 108;
    case DType::Q6_K: return k >= 208;
    default: return k < 2;  // Q8_0, Q4_0, Q5_0, IQ4_NL, IQ4_XS: d first
  }
}

// Rows whose every byte but the f16 scales is 0xFF: maximal nibbles, high
// bits and 6-bit scales and mins, Q8_0 -1, Q3_K/Q6_K/IQ4_XS scales at their
// extremes.
inline std::vector<uint8_t> extreme_rows(DType t, size_t rows, size_t cols, std::mt19937& g) {
  std::vector<uint8_t> w = random_rows(t, rows, cols, g);
  const size_t bb = dtype_block_bytes(t);
  for (size_t off = 0; off < w.size(); off += bb) {
    for (size_t k = 0; k < bb; ++k) {
      if (!f16_scale_byte(t, k)) w[off + k] = 0xFF;
    }
  }
  return w;
}

// Whether QKV_ISA caps the kernels below the Armv8.2 int8 dot products
// ("scalar" or "neon"), which then leave SDOT and i8mm out.
inline bool isa_cap_below_dot_product() {
  const auto cap = isa_cap();
  return cap.has_value() && (*cap == IsaLevel::kScalar || *cap == IsaLevel::kNeon);
}

// M inputs of cols values quantized for weights of type t, back to back.
inline std::vector<uint8_t> quantized_inputs(DType t, size_t cols, size_t M, std::mt19937& g) {
  const size_t ab = act_bytes(t, cols);
  std::vector<uint8_t> xa(ab * M);
  for (size_t m = 0; m < M; ++m) {
    const std::vector<float> x = random_activation(cols, g);
    quantize_activation(t, x.data(), cols, xa.data() + m * ab);
  }
  return xa;
}

// y (M outputs of ldy, rows each) against the scalar matvec of each input,
// bit for bit; the rows past n_rows of each output untouched (-7).
inline void check_against_scalar(DType t, const std::vector<uint8_t>& w, size_t rows, size_t cols,
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

}  // namespace testing
}  // namespace qkv

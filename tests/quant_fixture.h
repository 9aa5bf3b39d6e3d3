// Random weights of the ggml block types for the kernel tests
// (test_quant_matvec.cc, test_quant_matmul.cc).
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/dtype.h"

namespace qkv {
namespace testing {

// The block types whose dot products are kernels/quant's (Q8_0 has its own).
constexpr DType kTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K,
                            DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS};

inline uint16_t rand_scale(std::mt19937& g, float lo, float hi) {
  return f32_to_f16(std::uniform_real_distribution<float>(lo, hi)(g));
}

// Random blocks: random bits everywhere, then finite f16 scales of a sane size.
inline std::vector<uint8_t> random_rows(DType t, size_t rows, size_t cols, std::mt19937& g) {
  std::vector<uint8_t> w(rows * dtype_row_bytes(t, cols));
  for (auto& b : w) b = static_cast<uint8_t>(g());
  const size_t bb = dtype_block_bytes(t);
  for (size_t off = 0; off < w.size(); off += bb) {
    uint8_t* p = w.data() + off;
    auto set = [&](size_t at, uint16_t v) { std::memcpy(p + at, &v, 2); };
    switch (t) {
      case DType::Q4_1:
      case DType::Q5_1: set(0, rand_scale(g, 0.001f, 0.1f)); set(2, rand_scale(g, -0.5f, 0.5f)); break;
      case DType::Q2_K: set(80, rand_scale(g, 0.001f, 0.1f)); set(82, rand_scale(g, 0.0f, 0.05f)); break;
      case DType::Q3_K: set(108, rand_scale(g, 0.001f, 0.1f)); break;
      case DType::Q4_K:
      case DType::Q5_K: set(0, rand_scale(g, 0.001f, 0.1f)); set(2, rand_scale(g, 0.0f, 0.05f)); break;
      case DType::Q6_K: set(208, rand_scale(g, 0.001f, 0.1f)); break;
      default: set(0, rand_scale(g, 0.001f, 0.1f)); break;  // d first: Q4_0, Q5_0, Q8_0, IQ4_NL, IQ4_XS
    }
  }
  return w;
}

}  // namespace testing
}  // namespace qkv

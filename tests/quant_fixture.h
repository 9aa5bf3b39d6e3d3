// Random weights of the ggml block types for the kernel tests
// (test_quant_matvec.cc, test_quant_matmul.cc).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/linear.h"
#include "kernels/quant/blocks.h"
#include "kernels/quant/vec_dot.h"

namespace qkv {
namespace testing {

// The block types whose dot products are kernels/quant's (Q8_0 has its own).
constexpr DType kTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K,
                            DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS};

inline uint16_t rand_scale(std::mt19937& g, float lo, float hi) {
  return f32_to_f16(std::uniform_real_distribution<float>(lo, hi)(g));
}

// Byte offset of the f16 scale d in a block of t (the min/dmin, where there is one, at d + 2).
inline size_t d_offset(DType t) {
  switch (t) {
    case DType::Q2_K: return offsetof(BlockQ2_K, d);
    case DType::Q3_K: return offsetof(BlockQ3_K, d);
    case DType::Q6_K: return offsetof(BlockQ6_K, d);
    default: return 0;
  }
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

// The activation as the kernels see it: dequantized blocks, plus for Q8_1 the
// block sums s (ggml's min term uses s, rounded to f16, not d * sum(q)).
struct ActRef {
  std::vector<double> x;
  std::vector<double> s;  // Q8_1 only, per 32-block
};

inline ActRef dequantized_activation(DType t, const std::vector<uint8_t>& xa, size_t cols) {
  ActRef r;
  r.x.resize(cols);
  switch (act_type(t)) {
    case ActType::kQ8_0: {
      const auto* b = reinterpret_cast<const BlockQ8_0*>(xa.data());
      for (size_t k = 0; k < cols; ++k) r.x[k] = double(f16_to_f32(b[k / 32].d)) * b[k / 32].qs[k % 32];
      break;
    }
    case ActType::kQ8_1: {
      const auto* b = reinterpret_cast<const BlockQ8_1*>(xa.data());
      for (size_t k = 0; k < cols; ++k) r.x[k] = double(f16_to_f32(b[k / 32].d)) * b[k / 32].qs[k % 32];
      for (size_t i = 0; i < cols / 32; ++i) r.s.push_back(f16_to_f32(b[i].s));
      break;
    }
    case ActType::kQ8_K: {
      const auto* b = reinterpret_cast<const BlockQ8_K*>(xa.data());
      for (size_t k = 0; k < cols; ++k) r.x[k] = double(b[k / kQK].d) * b[k / kQK].qs[k % kQK];
      break;
    }
  }
  return r;
}

// One weight row's dot product with an activation in fp64 (value), and the
// sum of the magnitudes of its terms (mag, what f32 rounding errors scale with).
struct RowRef {
  double value = 0, mag = 0;
};

inline RowRef row_reference(DType t, const uint8_t* row, size_t cols, const ActRef& a) {
  RowRef r;
  std::vector<float> wr(cols);
  decode_row(t, row, cols, wr.data());
  if (act_type(t) == ActType::kQ8_1) {
    // w = d q + m: the d q part from the dequantized values minus m, the m part as m * s.
    for (size_t i = 0; i < cols / 32; ++i) {
      uint16_t mh;
      std::memcpy(&mh, row + i * dtype_block_bytes(t) + 2, 2);
      const double m = f16_to_f32(mh);
      for (size_t k = 32 * i; k < 32 * i + 32; ++k) {
        r.value += (double(wr[k]) - m) * a.x[k];
        r.mag += std::fabs((double(wr[k]) - m) * a.x[k]);
      }
      r.value += m * a.s[i];
      r.mag += std::fabs(m * a.s[i]);
    }
    return r;
  }
  for (size_t k = 0; k < cols; ++k) {
    r.value += double(wr[k]) * a.x[k];
    r.mag += std::fabs(double(wr[k]) * a.x[k]);
  }
  return r;
}

}  // namespace testing
}  // namespace qkv

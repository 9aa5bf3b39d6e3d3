#include "kernels/quant/dequant.h"

#include <cstring>

#include "kernels/error.h"

namespace qkv {

namespace {

inline int nibble(const uint8_t* qs, size_t k) { return k < 16 ? qs[k] & 15 : qs[k - 16] >> 4; }
inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

template <class Block>
void dequantize_blocks(const void* src, size_t n, float* dst) {
  // Blocks may sit at any 2-byte offset of a mapped file; copy each out.
  const auto* p = static_cast<const uint8_t*>(src);
  for (size_t i = 0; i < n / Block::kValues; ++i) {
    Block b;
    std::memcpy(&b, p + i * sizeof(Block), sizeof(Block));
    dequantize_block(b, dst + i * Block::kValues);
  }
}

}  // namespace

void dequantize_block(const BlockQ4_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (size_t k = 0; k < 32; ++k) y[k] = static_cast<float>(nibble(b.qs, k) - 8) * d;
}

void dequantize_block(const BlockQ4_1& b, float* y) {
  const float d = f16_to_f32(b.d), m = f16_to_f32(b.m);
  for (size_t k = 0; k < 32; ++k) y[k] = static_cast<float>(nibble(b.qs, k)) * d + m;
}

void dequantize_block(const BlockQ5_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  const uint32_t qh = load_u32(b.qh);
  for (size_t k = 0; k < 32; ++k) {
    const int q = (nibble(b.qs, k) | int((qh >> k) & 1) << 4) - 16;
    y[k] = static_cast<float>(q) * d;
  }
}

void dequantize_block(const BlockQ5_1& b, float* y) {
  const float d = f16_to_f32(b.d), m = f16_to_f32(b.m);
  const uint32_t qh = load_u32(b.qh);
  for (size_t k = 0; k < 32; ++k) {
    const int q = nibble(b.qs, k) | int((qh >> k) & 1) << 4;
    y[k] = static_cast<float>(q) * d + m;
  }
}

void dequantize_block(const BlockQ8_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (size_t k = 0; k < 32; ++k) y[k] = static_cast<float>(b.qs[k]) * d;
}

void dequantize_block(const BlockQ2_K& b, float* y) {
  const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
  for (size_t j = 0; j < 16; ++j) {
    const float dl = d * static_cast<float>(b.scales[j] & 15);
    const float ml = dmin * static_cast<float>(b.scales[j] >> 4);
    for (size_t k = 16 * j; k < 16 * j + 16; ++k) {
      const int q = (b.qs[32 * (k / 128) + k % 32] >> (2 * ((k % 128) / 32))) & 3;
      y[k] = dl * static_cast<float>(q) - ml;
    }
  }
}

void dequantize_block(const BlockQ3_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < 16; ++j) {
    const float dl = d * static_cast<float>(q3k_scale(b.scales, j));
    for (size_t k = 16 * size_t(j); k < 16 * size_t(j) + 16; ++k) {
      const int low = (b.qs[32 * (k / 128) + k % 32] >> (2 * ((k % 128) / 32))) & 3;
      const int q = low - ((b.hmask[k % 32] >> (k / 32)) & 1 ? 0 : 4);
      y[k] = dl * static_cast<float>(q);
    }
  }
}

namespace {
// Q4_K and Q5_K: 8 sub-blocks of 32 with packed 6-bit scales and mins; Q5_K
// adds a fifth bit per value from qh (nullptr for Q4_K).
void dequantize_k4(uint16_t dh, uint16_t dminh, const uint8_t* scales, const uint8_t* qs, const uint8_t* qh,
                   float* y) {
  const float d = f16_to_f32(dh), dmin = f16_to_f32(dminh);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    k4_scale_min(scales, j, &sc, &m);
    const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
    for (size_t k = 32 * size_t(j); k < 32 * size_t(j) + 32; ++k) {
      int q = (qs[32 * (k / 64) + k % 32] >> (4 * ((k % 64) / 32))) & 15;
      if (qh) q |= ((qh[k % 32] >> (k / 32)) & 1) << 4;
      y[k] = d1 * static_cast<float>(q) - m1;
    }
  }
}
}  // namespace

void dequantize_block(const BlockQ4_K& b, float* y) { dequantize_k4(b.d, b.dmin, b.scales, b.qs, nullptr, y); }
void dequantize_block(const BlockQ5_K& b, float* y) { dequantize_k4(b.d, b.dmin, b.scales, b.qs, b.qh, y); }

void dequantize_block(const BlockQ6_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (size_t k = 0; k < kQK; ++k) {
    const size_t h = k / 128, r = k % 128;
    const int q = (((b.ql[64 * h + r % 64] >> (4 * (r / 64))) & 15) |
                   ((b.qh[32 * h + r % 32] >> (2 * (r / 32))) & 3) << 4) - 32;
    y[k] = d * static_cast<float>(b.scales[k / 16]) * static_cast<float>(q);
  }
}

void dequantize_block(const BlockIQ4_NL& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (size_t k = 0; k < 32; ++k) y[k] = d * static_cast<float>(kIQ4NLValues[nibble(b.qs, k)]);
}

void dequantize_block(const BlockIQ4_XS& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < 8; ++j) {
    const float dl = d * static_cast<float>(iq4xs_scale(b, j));
    for (size_t k = 0; k < 32; ++k) y[32 * j + k] = dl * static_cast<float>(kIQ4NLValues[nibble(b.qs + 16 * j, k)]);
  }
}

void dequantize_row(DType t, const void* src, size_t n, float* dst) {
  QKV_CHECK(dtype_is_quantized(t) && dtype_row_ok(t, n), "a row of ", n, " values cannot be dequantized as ",
            dtype_name(t), " (needs a multiple of ", dtype_block_values(t), ")");
  switch (t) {
    case DType::Q8_0: return dequantize_blocks<BlockQ8_0>(src, n, dst);
    case DType::Q4_0: return dequantize_blocks<BlockQ4_0>(src, n, dst);
    case DType::Q4_1: return dequantize_blocks<BlockQ4_1>(src, n, dst);
    case DType::Q5_0: return dequantize_blocks<BlockQ5_0>(src, n, dst);
    case DType::Q5_1: return dequantize_blocks<BlockQ5_1>(src, n, dst);
    case DType::Q2_K: return dequantize_blocks<BlockQ2_K>(src, n, dst);
    case DType::Q3_K: return dequantize_blocks<BlockQ3_K>(src, n, dst);
    case DType::Q4_K: return dequantize_blocks<BlockQ4_K>(src, n, dst);
    case DType::Q5_K: return dequantize_blocks<BlockQ5_K>(src, n, dst);
    case DType::Q6_K: return dequantize_blocks<BlockQ6_K>(src, n, dst);
    case DType::IQ4_NL: return dequantize_blocks<BlockIQ4_NL>(src, n, dst);
    case DType::IQ4_XS: return dequantize_blocks<BlockIQ4_XS>(src, n, dst);
    case DType::F32:
    case DType::F16:
    case DType::BF16: break;
  }
}

}  // namespace qkv

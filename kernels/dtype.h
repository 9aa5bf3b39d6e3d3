// Element types that qkv stores weights and KV caches in, and their scalar
// conversions. The SIMD kernels convert in registers; these scalar forms are the
// contract they must match (tests compare against them).
//
//   F32   IEEE binary32.
//   F16   IEEE binary16, round to nearest even on the way in.
//   BF16  upper half of binary32, round to nearest even (Highway 1.0.3's
//         DemoteTo truncates, so we round ourselves): 1.005859375 -> 1.0078125.
//   Q8_0  GGUF's block of 32: an f16 scale d then 32 int8 q; value = d * q.
//         34 bytes per block; a row of n values needs n % 32 == 0.
//   Q4_0 ... IQ4_XS  ggml's block types (kernels/quant/blocks.h).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "kernels/quant/blocks.h"

namespace qkv {

// Weight/KV element types. The numbering is qkv's own (stable); GGUF files use
// ggml's type ids, mapped by dtype_from_ggml / dtype_ggml_id. The block layouts
// of the quantized types are in kernels/quant/blocks.h.
enum class DType : int {
  F32 = 0, F16 = 1, BF16 = 2, Q8_0 = 3,
  Q4_0 = 4, Q4_1 = 5, Q5_0 = 6, Q5_1 = 7,
  Q2_K = 8, Q3_K = 9, Q4_K = 10, Q5_K = 11, Q6_K = 12,
  IQ4_NL = 13, IQ4_XS = 14,
};
constexpr int kDTypeCount = 15;

struct DTypeInfo {
  const char* name;       // lower case, as flags take it ("q4_k")
  const char* ggml_name;  // ggml's spelling ("Q4_K")
  uint32_t ggml_id;       // ggml_type / GGUF tensor type id
  size_t block_values;    // values per storage block
  size_t block_bytes;     // bytes per storage block
};

// Indexed by DType.
constexpr DTypeInfo kDTypeInfo[kDTypeCount] = {
    {"f32", "F32", 0, 1, 4},
    {"f16", "F16", 1, 1, 2},
    {"bf16", "BF16", 30, 1, 2},
    {"q8_0", "Q8_0", 8, 32, sizeof(BlockQ8_0)},
    {"q4_0", "Q4_0", 2, 32, sizeof(BlockQ4_0)},
    {"q4_1", "Q4_1", 3, 32, sizeof(BlockQ4_1)},
    {"q5_0", "Q5_0", 6, 32, sizeof(BlockQ5_0)},
    {"q5_1", "Q5_1", 7, 32, sizeof(BlockQ5_1)},
    {"q2_k", "Q2_K", 10, kQK, sizeof(BlockQ2_K)},
    {"q3_k", "Q3_K", 11, kQK, sizeof(BlockQ3_K)},
    {"q4_k", "Q4_K", 12, kQK, sizeof(BlockQ4_K)},
    {"q5_k", "Q5_K", 13, kQK, sizeof(BlockQ5_K)},
    {"q6_k", "Q6_K", 14, kQK, sizeof(BlockQ6_K)},
    {"iq4_nl", "IQ4_NL", 20, 32, sizeof(BlockIQ4_NL)},
    {"iq4_xs", "IQ4_XS", 23, kQK, sizeof(BlockIQ4_XS)},
};

constexpr const DTypeInfo& dtype_info(DType t) { return kDTypeInfo[static_cast<int>(t)]; }
inline const char* dtype_name(DType t) {
  return static_cast<unsigned>(t) < unsigned(kDTypeCount) ? dtype_info(t).name : "?";
}
// Whether values are stored in multi-value blocks (everything but F32/F16/BF16).
constexpr bool dtype_is_quantized(DType t) { return dtype_info(t).block_values > 1; }
// ggml's type id of t.
constexpr uint32_t dtype_ggml_id(DType t) { return dtype_info(t).ggml_id; }
// The DType of a ggml type id; false for ids qkv does not compute with.
inline bool dtype_from_ggml(uint32_t ggml_id, DType* out) {
  for (int i = 0; i < kDTypeCount; ++i) {
    if (kDTypeInfo[i].ggml_id == ggml_id) {
      *out = static_cast<DType>(i);
      return true;
    }
  }
  return false;
}

// Parses a type name, case-insensitive ("f32", "Q4_K", "iq4_xs", ...); false if unknown.
bool parse_dtype(const std::string& name, DType* out);

constexpr size_t kQ8BlockSize = 32;

// Values per storage block: 32 or 256 for the block types, 1 otherwise.
constexpr size_t dtype_block_values(DType t) { return dtype_info(t).block_values; }
// Bytes per storage block.
constexpr size_t dtype_block_bytes(DType t) { return dtype_info(t).block_bytes; }
// Whether a row of n values can be stored in this type.
constexpr bool dtype_row_ok(DType t, size_t n) { return n % dtype_block_values(t) == 0; }
// Bytes of a row of n values (n must satisfy dtype_row_ok).
constexpr size_t dtype_row_bytes(DType t, size_t n) {
  return n / dtype_block_values(t) * dtype_block_bytes(t);
}

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// binary16 -> binary32, exact (subnormals, inf and NaN included).
inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0x1f) return f32_from_bits(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    if (mant == 0) return f32_from_bits(sign);
    // Subnormal: value = mant * 2^-24.
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  return f32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
}

// binary32 -> binary16 with round to nearest even; overflow gives inf, NaN stays NaN.
inline uint16_t f32_to_f16(float f) {
  const uint32_t u = f32_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs >= 0x7f800000u) return sign | 0x7c00 | (abs > 0x7f800000u ? 0x200 : 0);
  if (abs >= 0x477ff000u) return sign | 0x7c00;  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {                         // below 2^-14: f16 subnormal or zero
    // Scale into the subnormal grid (units of 2^-24) and round to nearest even.
    const float a = f32_from_bits(abs);
    const float scaled = a * 16777216.0f;  // exact: power of two
    const uint32_t m = static_cast<uint32_t>(std::nearbyint(scaled));
    return sign | static_cast<uint16_t>(m);
  }
  // Normal: rebias exponent, round mantissa from 23 to 10 bits, ties to even.
  uint32_t r = abs - (112u << 23);
  r += 0xfffu + ((r >> 13) & 1u);
  return sign | static_cast<uint16_t>(r >> 13);
}

inline float bf16_to_f32(uint16_t b) { return f32_from_bits(uint32_t(b) << 16); }

// binary32 -> bfloat16 with round to nearest even; NaN stays a quiet NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// GGUF's reference Q8_0 quantization of one block of 32 values:
// d = max|x| / 127, q = round(x / d) (half away from zero), d stored as f16.
// A block so small that 1/d overflows stores zeros (its f16 scale is 0 anyway),
// and NaN stores 0: casting either to int8 would be undefined behaviour.
inline void quantize_q8_0_block(const float* x, BlockQ8_0* out) {
  float amax = 0.0f;
  for (size_t i = 0; i < kQ8BlockSize; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  out->d = f32_to_f16(d);
  if (!std::isfinite(id)) {
    std::memset(out->qs, 0, sizeof(out->qs));
    return;
  }
  for (size_t i = 0; i < kQ8BlockSize; ++i) {
    const float q = std::round(x[i] * id);
    out->qs[i] = q >= -127.0f && q <= 127.0f ? static_cast<int8_t>(q) : q > 127.0f ? 127 : q < -127.0f ? -127 : 0;
  }
}

inline void dequantize_q8_0_block(const BlockQ8_0& b, float* out) {
  const float d = f16_to_f32(b.d);
  for (size_t i = 0; i < kQ8BlockSize; ++i) out[i] = d * static_cast<float>(b.qs[i]);
}

// Converts n floats into a row of type t at dst (dtype_row_bytes(t, n) bytes).
void encode_row(DType t, const float* src, size_t n, void* dst);
// Converts a row of n values of type t at src into floats.
void decode_row(DType t, const void* src, size_t n, float* dst);

}  // namespace qkv

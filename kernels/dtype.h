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
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace qkv {

enum class DType : int { F32 = 0, F16 = 1, BF16 = 2, Q8_0 = 3 };

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::Q8_0: return "q8_0";
  }
  return "?";
}

// Parses "f32", "f16", "bf16", "q8_0" (also upper case); false if unknown.
bool parse_dtype(const std::string& name, DType* out);

constexpr size_t kQ8BlockSize = 32;

struct BlockQ8_0 {
  uint16_t d;  // f16 scale
  int8_t qs[kQ8BlockSize];
};
static_assert(sizeof(BlockQ8_0) == 34, "Q8_0 block must be 34 bytes as in GGUF");

// Values per storage block: 32 for Q8_0, 1 otherwise.
constexpr size_t dtype_block_values(DType t) { return t == DType::Q8_0 ? kQ8BlockSize : 1; }
// Bytes per storage block.
constexpr size_t dtype_block_bytes(DType t) {
  return t == DType::F32 ? 4 : t == DType::Q8_0 ? sizeof(BlockQ8_0) : 2;
}
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

#include "kernels/dtype.h"

#include <algorithm>
#include <cctype>

#include "kernels/error.h"
#include "kernels/quant/dequant.h"

namespace qkv {

bool parse_dtype(const std::string& name, DType* out) {
  std::string s = name;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  for (int i = 0; i < kDTypeCount; ++i) {
    if (s == kDTypeInfo[i].name) {
      *out = static_cast<DType>(i);
      return true;
    }
  }
  return false;
}

void encode_row(DType t, const float* src, size_t n, void* dst) {
  QKV_CHECK(dtype_row_ok(t, n), "a row of ", n, " values cannot be stored as ", dtype_name(t),
            " (needs a multiple of ", dtype_block_values(t), ")");
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case DType::F16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) h[i] = f32_to_f16(src[i]);
      return;
    }
    case DType::BF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) h[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::Q8_0: {
      auto* b = static_cast<BlockQ8_0*>(dst);
      for (size_t i = 0; i < n / kQ8BlockSize; ++i) quantize_q8_0_block(src + i * kQ8BlockSize, b + i);
      return;
    }
    default:
      fail("encode_row: no encoder for ", dtype_name(t), " here (block quantizers live with `qkv quantize`)");
  }
}

void decode_row(DType t, const void* src, size_t n, float* dst) {
  QKV_CHECK(dtype_row_ok(t, n), "a row of ", n, " values cannot be read as ", dtype_name(t));
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case DType::F16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(h[i]);
      return;
    }
    case DType::BF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(h[i]);
      return;
    }
    default:
      dequantize_row(t, src, n, dst);
      return;
  }
}

}  // namespace qkv

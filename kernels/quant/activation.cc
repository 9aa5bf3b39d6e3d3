#include "kernels/quant/activation.h"

#include <cmath>
#include <cstring>

#include "kernels/dtype.h"

namespace qkv {

namespace {

// Returns d (f32) and writes the 32 q of one block; sum gets sum(q).
float q8_block(const float* x, int8_t* q, int* sum) {
  float amax = 0.0f;
  for (size_t i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  int s = 0;
  for (size_t i = 0; i < 32; ++i) {
    const float v = std::nearbyint(x[i] * id);  // |v| <= 127 (NaN input: 0)
    const int qi = v >= -127.0f && v <= 127.0f ? static_cast<int>(v) : 0;
    q[i] = static_cast<int8_t>(qi);
    s += qi;
  }
  *sum = s;
  return d;
}

}  // namespace

void quantize_row_q8_0(const float* x, size_t n, BlockQ8_0* y) {
  for (size_t b = 0; b < n / 32; ++b) {
    int sum;
    y[b].d = f32_to_f16(q8_block(x + 32 * b, y[b].qs, &sum));
  }
}

void quantize_row_q8_1(const float* x, size_t n, BlockQ8_1* y) {
  for (size_t b = 0; b < n / 32; ++b) {
    int sum;
    const float d = q8_block(x + 32 * b, y[b].qs, &sum);
    y[b].d = f32_to_f16(d);
    y[b].s = f32_to_f16(d * static_cast<float>(sum));
  }
}

void quantize_row_q8_K(const float* x, size_t n, BlockQ8_K* y) {
  for (size_t b = 0; b < n / kQK; ++b, x += kQK) {
    float amax = 0.0f, max = 0.0f;
    for (size_t j = 0; j < kQK; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      std::memset(&y[b], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = -127.0f / max;
    for (size_t j = 0; j < kQK; ++j) {
      const float v = std::nearbyint(iscale * x[j]);
      const int qi = v >= -128.0f && v <= 127.0f ? static_cast<int>(v) : v > 127.0f ? 127 : 0;
      y[b].qs[j] = static_cast<int8_t>(qi);
    }
    for (size_t j = 0; j < kQK / 16; ++j) {
      int s = 0;
      for (size_t i = 0; i < 16; ++i) s += y[b].qs[16 * j + i];
      y[b].bsums[j] = static_cast<int16_t>(s);
    }
    y[b].d = 1.0f / iscale;
  }
}

}  // namespace qkv

// The 32-value block quantizers (ggml's quantize_row_q4_0_ref ... q5_1_ref;
// Q8_0's lives in kernels/dtype.h). The symmetric types scale by the signed
// value of largest magnitude so that it lands on the most negative level; the
// asymmetric ones spread [min, max] over all levels.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "kernels/quant/quantize.h"
#include "kernels/quant/quantize_search.h"

namespace qkv {

namespace {

using quant::truncate_to_int8;

// The value of largest magnitude (the first when several tie).
float signed_absmax(const float* x) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

void min_max(const float* x, float* mn, float* mx) {
  float lo = FLT_MAX, hi = -FLT_MAX;
  for (int j = 0; j < 32; ++j) {
    if (x[j] < lo) lo = x[j];
    if (x[j] > hi) hi = x[j];
  }
  *mn = lo;
  *mx = hi;
}

// Levels of a symmetric block: truncate(x * id + offset), at most top.
inline uint8_t symmetric_level(float x, float id, float offset, int top) {
  const float v = x * id;
  return static_cast<uint8_t>(std::min<int>(top, truncate_to_int8(v + offset)));
}

}  // namespace

void quantize_block(const float* x, BlockQ4_0* y) {
  const float d = signed_absmax(x) / -8;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  y->d = f32_to_f16(d);
  for (int j = 0; j < 16; ++j) {
    const uint8_t lo = symmetric_level(x[j], id, 8.5f, 15);
    const uint8_t hi = symmetric_level(x[16 + j], id, 8.5f, 15);
    y->qs[j] = static_cast<uint8_t>(lo | hi << 4);
  }
}

void quantize_block(const float* x, BlockQ4_1* y) {
  float mn, mx;
  min_max(x, &mn, &mx);
  const float d = (mx - mn) / 15;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  y->d = f32_to_f16(d);
  y->m = f32_to_f16(mn);
  for (int j = 0; j < 16; ++j) {
    const float v0 = (x[j] - mn) * id;
    const float v1 = (x[16 + j] - mn) * id;
    const uint8_t lo = static_cast<uint8_t>(std::min<int>(15, truncate_to_int8(v0 + 0.5f)));
    const uint8_t hi = static_cast<uint8_t>(std::min<int>(15, truncate_to_int8(v1 + 0.5f)));
    y->qs[j] = static_cast<uint8_t>(lo | hi << 4);
  }
}

void quantize_block(const float* x, BlockQ5_0* y) {
  const float d = signed_absmax(x) / -16;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  y->d = f32_to_f16(d);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const uint8_t l0 = symmetric_level(x[j], id, 16.5f, 31);
    const uint8_t l1 = symmetric_level(x[16 + j], id, 16.5f, 31);
    y->qs[j] = static_cast<uint8_t>((l0 & 0x0F) | (l1 & 0x0F) << 4);
    qh |= uint32_t((l0 & 0x10u) >> 4) << j;
    qh |= uint32_t((l1 & 0x10u) >> 4) << (j + 16);
  }
  std::memcpy(y->qh, &qh, sizeof(qh));
}

void quantize_block(const float* x, BlockQ5_1* y) {
  float mn, mx;
  min_max(x, &mn, &mx);
  const float d = (mx - mn) / 31;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  y->d = f32_to_f16(d);
  y->m = f32_to_f16(mn);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const float v0 = (x[j] - mn) * id;
    const float v1 = (x[16 + j] - mn) * id;
    // ggml converts straight to uint8_t here (no clamp): the low byte.
    const uint8_t l0 = static_cast<uint8_t>(truncate_to_int8(v0 + 0.5f));
    const uint8_t l1 = static_cast<uint8_t>(truncate_to_int8(v1 + 0.5f));
    y->qs[j] = static_cast<uint8_t>((l0 & 0x0F) | (l1 & 0x0F) << 4);
    qh |= uint32_t((l0 & 0x10u) >> 4) << j;
    qh |= uint32_t((l1 & 0x10u) >> 4) << (j + 16);
  }
  std::memcpy(y->qh, &qh, sizeof(qh));
}

void quantize_block(const float* x, BlockQ8_0* y) { quantize_q8_0_block(x, y); }

}  // namespace qkv

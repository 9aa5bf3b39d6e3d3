// IQ4_NL and IQ4_XS quantizers: levels on the fixed non-linear table
// kIQ4NLValues, a scale per 32 values found by trying 15 scales around
// max/127 and keeping the one of least x^2-weighted squared error (ggml's
// quantize_row_iq4_nl_impl as quantize_iq4_nl / quantize_iq4_xs call it
// without an importance matrix: ntry 7).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/quant/quantize.h"
#include "kernels/quant/quantize_search.h"

namespace qkv {

namespace {

using quant::best_index_int8;
using quant::nearest_int;

constexpr int kTry = 7;
const int8_t* const kValues = kIQ4NLValues;

inline uint8_t nearest_level(float v) { return static_cast<uint8_t>(best_index_int8(16, kValues, v)); }

// The scale of one group of 32 values (0 for an all-zero group); L receives
// the levels of the first trial, which callers recompute from the final scale.
float iq4_group_scale(const float* xb, uint8_t* L) {
  float weight[32];
  for (int j = 0; j < 32; ++j) weight[j] = xb[j] * xb[j];
  float amax = 0, max = 0;
  for (int j = 0; j < 32; ++j) {
    const float ax = std::fabs(xb[j]);
    if (ax > amax) {
      amax = ax;
      max = xb[j];
    }
  }
  if (amax < quant::kGroupMaxEps) return 0.0f;
  float d = -max / static_cast<float>(kValues[0]);
  float id = 1 / d;
  float sumqx = 0, sumq2 = 0;
  for (int j = 0; j < 32; ++j) {
    const int l = best_index_int8(16, kValues, id * xb[j]);
    L[j] = static_cast<uint8_t>(l);
    const float q = kValues[l];
    const float w = weight[j];
    sumqx += w * q * xb[j];
    sumq2 += w * q * q;
  }
  d = sumqx / sumq2;
  float best = d * sumqx;
  for (int itry = -kTry; itry <= kTry; ++itry) {
    id = static_cast<float>(itry + kValues[0]) / max;
    sumqx = sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
      const float q = kValues[best_index_int8(16, kValues, id * xb[j])];
      const float w = weight[j];
      sumqx += w * q * xb[j];
      sumq2 += w * q * q;
    }
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// Levels 0..15 two per byte: byte j of a 16-byte group holds values j and j + 16.
void pack_nibbles(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(L[j] | L[16 + j] << 4);
}

}  // namespace

void quantize_block(const float* x, BlockIQ4_NL* y) {
  uint8_t L[32];
  const float scale = iq4_group_scale(x, L);
  y->d = f32_to_f16(scale);
  const float id = scale != 0.0f ? 1 / scale : 0;
  for (int j = 0; j < 32; ++j) L[j] = nearest_level(id * x[j]);
  pack_nibbles(L, y->qs);
}

void quantize_block(const float* x, BlockIQ4_XS* y) {
  uint8_t L[256];
  float scales[8];
  float max_scale = 0, amax_scale = 0;
  for (int ib = 0; ib < 8; ++ib) {
    scales[ib] = iq4_group_scale(x + 32 * ib, L + 32 * ib);
    const float abs_d = std::fabs(scales[ib]);
    if (abs_d > amax_scale) {
      amax_scale = abs_d;
      max_scale = scales[ib];
    }
  }
  // 6-bit signed sub-block scales against d = -max_scale / 32; the levels
  // use the unrounded d (as ggml does), the file keeps d as f16.
  const float d = -max_scale / 32;
  y->d = f32_to_f16(d);
  const float id = d != 0.0f ? 1 / d : 0.f;
  uint16_t scales_h = 0;
  for (int ib = 0; ib < 8; ++ib) {
    int l = std::max(-32, std::min(31, nearest_int(id * scales[ib])));
    const float dl = d * static_cast<float>(l);
    const float idl = dl != 0.0f ? 1 / dl : 0.f;
    for (int j = 0; j < 32; ++j) L[32 * ib + j] = nearest_level(idl * x[32 * ib + j]);
    l += 32;
    const uint8_t l_l = static_cast<uint8_t>(l & 0xf);
    const uint8_t l_h = static_cast<uint8_t>(l >> 4);
    if (ib % 2 == 0) {
      y->scales_l[ib / 2] = l_l;
    } else {
      y->scales_l[ib / 2] |= static_cast<uint8_t>(l_l << 4);
    }
    scales_h = static_cast<uint16_t>(scales_h | l_h << (2 * ib));
  }
  y->scales_h = scales_h;
  for (int i = 0; i < 8; ++i) pack_nibbles(L + 32 * i, y->qs + 16 * i);
}

}  // namespace qkv

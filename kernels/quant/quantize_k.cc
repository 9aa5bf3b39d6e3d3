// The K-quant super-block quantizers (ggml's quantize_row_q2_K_ref ...
// q6_K_ref, which llama-quantize uses when there is no importance matrix).
// Each finds a scale (and min) per sub-block, quantizes those to 4, 6 or 8
// bits against an f16 super-block scale, then re-derives every level from the
// stored (rounded) scales so the levels fit what dequantization will compute.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/quant/quantize.h"
#include "kernels/quant/quantize_search.h"

namespace qkv {

namespace {

using quant::make_q3_quants;
using quant::make_qkx2_quants_lanes;
using quant::make_qx_quants;
using quant::nearest_int;

inline int clamp(int l, int lo, int hi) { return std::max(lo, std::min(hi, l)); }

// 2-bit levels, four per byte: byte l of each 32-byte group holds values l,
// l + 32, l + 64 and l + 96 of its 128 (Q2_K's and Q3_K's qs).
void pack_2bit(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < 256; j += 128) {
    for (int l = 0; l < 32; ++l) {
      qs[j / 4 + l] = static_cast<uint8_t>(L[j + l] | L[j + l + 32] << 2 | L[j + l + 64] << 4 | L[j + l + 96] << 6);
    }
  }
}

// Q4_K / Q5_K: 8 sub-blocks of 32, asymmetric levels in [0, nmax] from
// make_qkx2_quants weighted by |x| + rms(x); 6-bit scales and mins against
// f16 d and dmin; levels re-derived from the stored scales into L.
template <class Block>
void quantize_k4_scales(const float* x, int nmax, float rmin, float rdelta, int nstep, Block* y, uint8_t* L) {
  float mins[8], scales[8], weights[256];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xb = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xb[l] * xb[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[32 * j + l] = av_x + std::fabs(xb[l]);
  }
  make_qkx2_quants_lanes<8>(32, nmax, x, weights, L, mins, scales, rmin, rdelta, nstep, false);
  for (int j = 0; j < 8; ++j) {
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < 8; ++j) {
    const uint8_t ls = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
    const uint8_t lm = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
    if (j < 4) {
      y->scales[j] = ls;
      y->scales[j + 4] = lm;
    } else {
      y->scales[j + 4] = static_cast<uint8_t>((ls & 0xF) | (lm & 0xF) << 4);
      y->scales[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      y->scales[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  y->d = f32_to_f16(max_scale / 63.f);
  y->dmin = f32_to_f16(max_min / 63.f);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    k4_scale_min(y->scales, j, &sc, &m);
    const float d = f16_to_f32(y->d) * static_cast<float>(sc);
    if (d == 0.0f) continue;
    const float dm = f16_to_f32(y->dmin) * static_cast<float>(m);
    for (int ii = 0; ii < 32; ++ii) {
      L[32 * j + ii] = static_cast<uint8_t>(clamp(nearest_int((x[32 * j + ii] + dm) / d), 0, nmax));
    }
  }
}

}  // namespace

void quantize_block(const float* x, BlockQ2_K* y) {
  uint8_t L[256];
  float weights[256], mins[16], scales[16];
  const float q4scale = 15.f;
  float max_scale = 0, max_min = 0;
  for (int i = 0; i < 256; ++i) weights[i] = std::fabs(x[i]);
  make_qkx2_quants_lanes<16>(16, 3, x, weights, L, mins, scales, -0.5f, 0.1f, 15, true);
  for (int j = 0; j < 16; ++j) {
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  if (max_scale > 0) {
    const float iscale = q4scale / max_scale;
    for (int j = 0; j < 16; ++j) y->scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
    y->d = f32_to_f16(max_scale / q4scale);
  } else {
    std::memset(y->scales, 0, sizeof(y->scales));
    y->d = f32_to_f16(0.f);
  }
  if (max_min > 0) {
    const float iscale = q4scale / max_min;
    for (int j = 0; j < 16; ++j) y->scales[j] |= static_cast<uint8_t>(nearest_int(iscale * mins[j]) << 4);
    y->dmin = f32_to_f16(max_min / q4scale);
  } else {
    y->dmin = f32_to_f16(0.f);
  }
  for (int j = 0; j < 16; ++j) {
    const float d = f16_to_f32(y->d) * static_cast<float>(y->scales[j] & 0xF);
    if (d == 0.0f) continue;
    const float dm = f16_to_f32(y->dmin) * static_cast<float>(y->scales[j] >> 4);
    for (int ii = 0; ii < 16; ++ii) {
      L[16 * j + ii] = static_cast<uint8_t>(clamp(nearest_int((x[16 * j + ii] + dm) / d), 0, 3));
    }
  }
  pack_2bit(L, y->qs);
}

void quantize_block(const float* x, BlockQ3_K* y) {
  int8_t L[256];
  float scales[16];
  float max_scale = 0, amax = 0;
  for (int j = 0; j < 16; ++j) {
    scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
    const float scale = std::fabs(scales[j]);
    if (scale > amax) {
      amax = scale;
      max_scale = scales[j];
    }
  }
  std::memset(y->scales, 0, sizeof(y->scales));
  if (max_scale != 0.0f) {
    const float iscale = -32.f / max_scale;
    for (int j = 0; j < 16; ++j) {
      // ggml keeps this level in an int8_t: 0..63 after the offset.
      int l = clamp(static_cast<int8_t>(nearest_int(iscale * scales[j])), -32, 31) + 32;
      if (j < 8) {
        y->scales[j] = static_cast<uint8_t>(l & 0xF);
      } else {
        y->scales[j - 8] |= static_cast<uint8_t>((l & 0xF) << 4);
      }
      l >>= 4;
      y->scales[j % 4 + 8] |= static_cast<uint8_t>(l << (2 * (j / 4)));
    }
    y->d = f32_to_f16(1 / iscale);
  } else {
    y->d = f32_to_f16(0.f);
  }
  for (int j = 0; j < 16; ++j) {
    const float d = f16_to_f32(y->d) * static_cast<float>(q3k_scale(y->scales, j));
    if (d == 0.0f) continue;
    for (int ii = 0; ii < 16; ++ii) {
      L[16 * j + ii] = static_cast<int8_t>(clamp(nearest_int(x[16 * j + ii] / d), -4, 3) + 4);
    }
  }
  // The high bit of value j goes to bit j / 32 of hmask[j % 32].
  std::memset(y->hmask, 0, sizeof(y->hmask));
  uint8_t low[256];
  for (int j = 0; j < 256; ++j) {
    int l = L[j];
    if (l > 3) {
      y->hmask[j % 32] |= static_cast<uint8_t>(1u << (j / 32));
      l -= 4;
    }
    low[j] = static_cast<uint8_t>(l);
  }
  pack_2bit(low, y->qs);
}

void quantize_block(const float* x, BlockQ4_K* y) {
  uint8_t L[256];
  quantize_k4_scales(x, 15, -1.f, 0.1f, 20, y, L);
  uint8_t* q = y->qs;
  for (int j = 0; j < 256; j += 64) {
    for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | L[j + l + 32] << 4);
    q += 32;
  }
}

void quantize_block(const float* x, BlockQ5_K* y) {
  uint8_t L[256];
  quantize_k4_scales(x, 31, -0.5f, 0.1f, 15, y, L);
  std::memset(y->qh, 0, sizeof(y->qh));
  uint8_t* ql = y->qs;
  uint8_t m1 = 1, m2 = 2;
  for (int n = 0; n < 256; n += 64) {
    for (int j = 0; j < 32; ++j) {
      int l1 = L[n + j];
      if (l1 > 15) {
        l1 -= 16;
        y->qh[j] |= m1;
      }
      int l2 = L[n + j + 32];
      if (l2 > 15) {
        l2 -= 16;
        y->qh[j] |= m2;
      }
      ql[j] = static_cast<uint8_t>(l1 | l2 << 4);
    }
    m1 = static_cast<uint8_t>(m1 << 2);
    m2 = static_cast<uint8_t>(m2 << 2);
    ql += 32;
  }
}

void quantize_block(const float* x, BlockQ6_K* y) {
  int8_t L[256];
  float scales[16];
  float max_scale = 0, max_abs_scale = 0;
  for (int ib = 0; ib < 16; ++ib) {
    const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
    scales[ib] = scale;
    const float abs_scale = std::fabs(scale);
    if (abs_scale > max_abs_scale) {
      max_abs_scale = abs_scale;
      max_scale = scale;
    }
  }
  if (max_abs_scale < quant::kGroupMaxEps) {
    std::memset(y, 0, sizeof(*y));
    y->d = f32_to_f16(0.f);
    return;
  }
  const float iscale = -128.f / max_scale;
  y->d = f32_to_f16(1 / iscale);
  for (int ib = 0; ib < 16; ++ib) {
    y->scales[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
  }
  for (int j = 0; j < 16; ++j) {
    const float d = f16_to_f32(y->d) * static_cast<float>(y->scales[j]);
    if (d == 0.0f) continue;
    for (int ii = 0; ii < 16; ++ii) {
      L[16 * j + ii] = static_cast<int8_t>(clamp(nearest_int(x[16 * j + ii] / d), -32, 31) + 32);
    }
  }
  uint8_t* ql = y->ql;
  uint8_t* qh = y->qh;
  for (int j = 0; j < 256; j += 128) {
    for (int l = 0; l < 32; ++l) {
      const int v0 = L[j + l], v1 = L[j + l + 32], v2 = L[j + l + 64], v3 = L[j + l + 96];
      ql[l] = static_cast<uint8_t>((v0 & 0xF) | (v2 & 0xF) << 4);
      ql[l + 32] = static_cast<uint8_t>((v1 & 0xF) | (v3 & 0xF) << 4);
      qh[l] = static_cast<uint8_t>(v0 >> 4 | (v1 >> 4) << 2 | (v2 >> 4) << 4 | (v3 >> 4) << 6);
    }
    ql += 64;
    qh += 32;
  }
}

}  // namespace qkv

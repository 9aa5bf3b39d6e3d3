// The scale searches behind ggml's reference quantizers (internal to
// kernels/quant/quantize_*.cc). Each follows ggml's arithmetic step for step:
// the same products and sums in the same order, float throughout, so that the
// chosen scales and levels are bit-identical with llama-quantize's.
#pragma once

#include <cstdint>
#include <cstring>

namespace qkv::quant {

// Below this a group counts as all zero (ggml's GROUP_MAX_EPS).
constexpr float kGroupMaxEps = 1e-15f;

// Round to nearest, ties to even, for |f| < 2^22: the float addition of
// 1.5 * 2^23 puts the integer in the low mantissa bits (ggml's nearest_int).
inline int nearest_int(float f) {
  const float v = f + 12582912.0f;
  int32_t i;
  std::memcpy(&i, &v, sizeof(i));
  return (i & 0x007fffff) - 0x00400000;
}

// C's float -> int8_t conversion as x86 performs it (truncate toward zero to
// 32 bits, INT_MIN when out of range or NaN, then keep the low byte), without
// the undefined behaviour of the plain cast.
inline int8_t truncate_to_int8(float f) {
  const int32_t i = f > -2147483648.0f && f < 2147483648.0f ? static_cast<int32_t>(f) : INT32_MIN;
  return static_cast<int8_t>(static_cast<uint8_t>(static_cast<uint32_t>(i) & 0xffu));
}

// Symmetric levels in [-nmax, nmax) for n values: L[i] = level + nmax. Weights
// x^2 (ggml's make_qx_quants with rmse_type 1 and no importance), 19 trial
// scales around nmax/max|x|. Returns the scale.
float make_qx_quants(int n, int nmax, const float* x, int8_t* L);

// Q3_K's variant: symmetric levels refined one value at a time (ggml's
// make_q3_quants with do_rmse). L[i] = level + nmax.
float make_q3_quants(int n, int nmax, const float* x, int8_t* L);

// Asymmetric levels in [0, nmax] with a min <= 0 for K independent groups of
// n <= 32 values (group k at x + k * n, its weights at weights + k * n): each
// tries nstep + 1 scales (rmin + rdelta * is + nmax) / (max - min) and keeps
// the least weighted error (absolute if use_mad, else squared). L[k * n + i]
// receives the levels, the_min[k] -min, scale[k] the scale (ggml's
// make_qkx2_quants on each group). The groups run interleaved: each search is
// a chain of dependent float sums, and K chains side by side overlap where one
// alone waits on every addition (Q4_K/Q5_K: 8 groups, Q2_K: 16; Q2_K
// quantizes tinystories-3M in 0.10 s of CPU instead of 0.19 s one group at a time).
template <int K>
void make_qkx2_quants_lanes(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                            float* scale, float rmin, float rdelta, int nstep, bool use_mad);

// Index of the entry of the strictly increasing table val[0..n) nearest to x
// (ties to the upper one; NaN gives n - 1), the answer of ggml's
// best_index_int8. ggml bisects; counting the entries <= x finds the same
// bracket val[mu - 1] <= x < val[mu] without branches (the IQ4 searches call
// this 16 times per value, and mispredicted bisection steps dominated them).
inline int best_index_int8(int n, const int8_t* val, float x) {
  if (x <= val[0]) return 0;
  if (!(x < val[n - 1])) return n - 1;  // NaN included
  int mu = 0;
  for (int i = 0; i < n; ++i) mu += x >= static_cast<float>(val[i]);
  return x - val[mu - 1] < val[mu] - x ? mu - 1 : mu;
}

}  // namespace qkv::quant

#include "kernels/quant/quantize_search.h"

#include <algorithm>
#include <cmath>

namespace qkv::quant {

namespace {

inline int clamp_level(int l, int lo, int hi) { return std::max(lo, std::min(hi, l)); }

// Sums of w*x*l and w*l*l for the levels of one trial scale (rounded and
// clamped to [-nmax, nmax - 1]), in ggml's order: ((w*x)*l) and ((w*l)*l).
void level_sums(int n, int nmax, const float* x, float iscale, float* sumlx, float* suml2) {
  float slx = 0, sl2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = clamp_level(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    const float w = x[i] * x[i];
    const float fl = static_cast<float>(l);
    slx += w * x[i] * fl;
    sl2 += w * fl * fl;
  }
  *sumlx = slx;
  *suml2 = sl2;
}

void store_levels(int n, int nmax, const float* x, float iscale, int8_t* L) {
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<int8_t>(nmax + clamp_level(nearest_int(iscale * x[i]), -nmax, nmax - 1));
  }
}

// The value of largest magnitude (the first one when several tie) and its magnitude.
void signed_max(int n, const float* x, float* max, float* amax) {
  float m = 0, a = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > a) {
      a = ax;
      m = x[i];
    }
  }
  *max = m;
  *amax = a;
}

}  // namespace

float make_qx_quants(int n, int nmax, const float* x, int8_t* L) {
  float max, amax;
  signed_max(n, x, &max, &amax);
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, int8_t{0});
    return 0.0f;
  }
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx, suml2;
  level_sums(n, nmax, x, iscale, &sumlx, &suml2);
  store_levels(n, nmax, x, iscale, L);
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    level_sums(n, nmax, x, iscale, &sumlx, &suml2);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      store_levels(n, nmax, x, iscale, L);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

float make_q3_quants(int n, int nmax, const float* x, int8_t* L) {
  float max, amax;
  signed_max(n, x, &max, &amax);
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, int8_t{0});
    return 0.0f;
  }
  const float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = clamp_level(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    const float fl = static_cast<float>(l);
    sumlx += w * x[i] * fl;
    suml2 += w * fl * fl;
  }
  // Move one value at a time to the level that best fits the others' scale;
  // keep a move when it raises sumlx^2 / suml2.
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      const float li = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * li;
      if (slx > 0) {
        float sl2 = suml2 - w * li * li;
        const int new_l = clamp_level(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
        if (new_l != L[i]) {
          const float fl = static_cast<float>(new_l);
          slx += w * x[i] * fl;
          sl2 += w * fl * fl;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (n_changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

template <int K>
void make_qkx2_quants_lanes(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                            float* scale_out, float rmin, float rdelta, int nstep, bool use_mad) {
  // Lane k is ggml's make_qkx2_quants on x + k * n, expression for
  // expression; the lanes only interleave, so each keeps its own order of
  // rounding. Degenerate lanes (max == min) compute garbage that is never used.
  // Lane-minor copies ([i][k]) so the loops over lanes run on adjacent values.
  float xt[32 * K], wt[32 * K];
  uint8_t Lt[32 * K], Laux[32 * K];
  for (int k = 0; k < K; ++k) {
    for (int i = 0; i < n; ++i) {
      xt[i * K + k] = x[k * n + i];
      wt[i * K + k] = weights[k * n + i];
    }
  }
  float min[K], max[K], sum_w[K], sum_x[K], iscale[K], scale[K], best_error[K];
  bool flat[K];
  for (int k = 0; k < K; ++k) {
    min[k] = max[k] = xt[k];
    sum_w[k] = wt[k];
    sum_x[k] = sum_w[k] * xt[k];
  }
  for (int i = 1; i < n; ++i) {
    for (int k = 0; k < K; ++k) {
      const float xi = xt[i * K + k], w = wt[i * K + k];
      if (xi < min[k]) min[k] = xi;
      if (xi > max[k]) max[k] = xi;
      sum_w[k] += w;
      sum_x[k] += w * xi;
    }
  }
  const float fnmax = static_cast<float>(nmax);
  for (int k = 0; k < K; ++k) {
    if (min[k] > 0) min[k] = 0;
    flat[k] = max[k] == min[k];
    iscale[k] = fnmax / (max[k] - min[k]);
    scale[k] = 1 / iscale[k];
    best_error[k] = 0;
  }
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < K; ++k) {
      const float xi = xt[i * K + k];
      const uint8_t l = static_cast<uint8_t>(clamp_level(nearest_int(iscale[k] * (xi - min[k])), 0, nmax));
      Lt[i * K + k] = l;
      float diff = scale[k] * static_cast<float>(l) + min[k] - xi;
      diff = use_mad ? std::fabs(diff) : diff * diff;
      best_error[k] += wt[i * K + k] * diff;
    }
  }
  for (int is = 0; nstep >= 1 && is <= nstep; ++is) {
    float sum_l[K], sum_l2[K], sum_xl[K], this_scale[K], this_min[K], cur_error[K];
    bool solvable[K];
    for (int k = 0; k < K; ++k) {
      iscale[k] = (rmin + rdelta * static_cast<float>(is) + fnmax) / (max[k] - min[k]);
      sum_l[k] = sum_l2[k] = sum_xl[k] = 0;
    }
    for (int i = 0; i < n; ++i) {
      for (int k = 0; k < K; ++k) {
        const float xi = xt[i * K + k];
        const int l = clamp_level(nearest_int(iscale[k] * (xi - min[k])), 0, nmax);
        Laux[i * K + k] = static_cast<uint8_t>(l);
        const float w = wt[i * K + k];
        const float fl = static_cast<float>(l);
        sum_l[k] += w * fl;
        sum_l2[k] += w * fl * fl;
        sum_xl[k] += w * fl * xi;
      }
    }
    for (int k = 0; k < K; ++k) {
      const float D = sum_w[k] * sum_l2[k] - sum_l[k] * sum_l[k];
      solvable[k] = D > 0;
      this_scale[k] = (sum_w[k] * sum_xl[k] - sum_x[k] * sum_l[k]) / D;
      this_min[k] = (sum_l2[k] * sum_x[k] - sum_l[k] * sum_xl[k]) / D;
      if (this_min[k] > 0) {
        this_min[k] = 0;
        this_scale[k] = sum_xl[k] / sum_l2[k];
      }
      cur_error[k] = 0;
    }
    for (int i = 0; i < n; ++i) {
      for (int k = 0; k < K; ++k) {
        float diff = this_scale[k] * static_cast<float>(Laux[i * K + k]) + this_min[k] - xt[i * K + k];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        cur_error[k] += wt[i * K + k] * diff;
      }
    }
    for (int k = 0; k < K; ++k) {
      if (flat[k] || !solvable[k] || !(cur_error[k] < best_error[k])) continue;
      for (int i = 0; i < n; ++i) Lt[i * K + k] = Laux[i * K + k];
      best_error[k] = cur_error[k];
      scale[k] = this_scale[k];
      min[k] = this_min[k];
    }
  }
  for (int k = 0; k < K; ++k) {
    for (int i = 0; i < n; ++i) L[k * n + i] = flat[k] ? uint8_t{0} : Lt[i * K + k];
    if (flat[k]) scale[k] = 0.0f;
    the_min[k] = -min[k];
    scale_out[k] = scale[k];
  }
}

template void make_qkx2_quants_lanes<8>(int, int, const float*, const float*, uint8_t*, float*, float*, float, float,
                                        int, bool);
template void make_qkx2_quants_lanes<16>(int, int, const float*, const float*, uint8_t*, float*, float*, float,
                                         float, int, bool);

}  // namespace qkv::quant

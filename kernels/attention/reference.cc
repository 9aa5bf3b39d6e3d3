// The scalar SDPA oracle: scores materialized per query row, fp64 throughout,
// K/V decoded with decode_row() (the dtype contract the SIMD kernel must match).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/attention.h"
#include "kernels/attention/validate.h"

namespace qkv {

void attention_reference(const AttentionShape& s, const QueryView& q, const KVView& k,
                         const KVView& v, const AttentionMask& mask, const OutputView& out,
                         const AttentionOptions& opts) {
  const attn::MaskInfo mi = attn::validate("attention_reference", s, q, k, v, mask, out, opts);
  const int64_t g = s.Hq / s.Hkv, d = s.d;
  const double scale = opts.scale != 0.0f ? double(opts.scale) : 1.0 / std::sqrt(double(d));
  const double ninf = -std::numeric_limits<double>::infinity();
  std::vector<float> krow(d), vrow(d);
  std::vector<double> score(s.Lk), acc(d);
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t h = 0; h < s.Hq; ++h) {
      const int64_t hk = h / g;
      const auto* kbase = static_cast<const uint8_t*>(k.data) + b * k.batch_stride + hk * k.head_stride;
      const auto* vbase = static_cast<const uint8_t*>(v.data) + b * v.batch_stride + hk * v.head_stride;
      for (int64_t i = 0; i < s.Lq; ++i) {
        const float* qr = q.data + b * q.batch_stride + h * q.head_stride + i * q.row_stride;
        float* o = out.data + b * out.batch_stride + h * out.head_stride + i * out.row_stride;
        int64_t lo, hi;
        mi.key_range(b, mi.pos0(b) + i, &lo, &hi);
        double mx = ninf;
        for (int64_t j = 0; j < s.Lk; ++j) {
          score[j] = ninf;
          if (j < lo || j >= hi) continue;
          const double term = mi.per_key_term(b, i, j);
          if (term == ninf) continue;
          decode_row(k.type, kbase + j * k.row_stride, d, krow.data());
          double dot = 0.0;
          for (int64_t c = 0; c < d; ++c) dot += double(qr[c]) * double(krow[c]);
          score[j] = attn::soft_capped(dot * scale, double(opts.softcap)) + term;
          mx = std::max(mx, score[j]);
        }
        std::fill(acc.begin(), acc.end(), 0.0);
        double l = 0.0;
        if (mx != ninf) {
          for (int64_t j = 0; j < s.Lk; ++j) {
            if (score[j] == ninf) {
              score[j] = 0.0;
              continue;
            }
            const double p = std::exp(score[j] - mx);
            score[j] = p;
            l += p;
            decode_row(v.type, vbase + j * v.row_stride, d, vrow.data());
            for (int64_t c = 0; c < d; ++c) acc[c] += p * double(vrow[c]);
          }
        } else {
          std::fill(score.begin(), score.end(), 0.0);
        }
        // l == 0: every key masked; the row is defined as zeros (weights 0, lse -inf).
        for (int64_t c = 0; c < d; ++c) o[c] = l > 0 ? static_cast<float>(acc[c] / l) : 0.0f;
        const int64_t row = (b * s.Hq + h) * s.Lq + i;
        if (opts.lse) opts.lse[row] = l > 0 ? static_cast<float>(mx + std::log(l)) : -INFINITY;
        if (opts.weights) {
          float* w = opts.weights + row * s.Lk;
          for (int64_t j = 0; j < s.Lk; ++j) w[j] = l > 0 ? static_cast<float>(score[j] / l) : 0.0f;
        }
      }
    }
  }
}

}  // namespace qkv

// Rotary position embedding: the angle table of a position (rope_angles) and
// the rotation of heads by it (rope_rotate), llama2.c's float operations.
// The rotation runs a vector of pairs at a time, each product and sum
// rounded on its own (this file builds with -ffp-contract=off, so neither it
// nor the scalar tail fuses them): the same bits as the scalar formula. The
// scalar loop took ~10 us of a layer in a 16-sequence step of 143M (perf:
// rope_rotate 1.7% of the samples, each thread rotating 8 rows of 12 heads).
#include <cmath>
#include <vector>

#include "kernels/error.h"
#include "kernels/ops.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/rope.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace qkv {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Pair k of a head is (v[k * step], v[k * step + other]), rotated by
// cs[2k] (cos) and cs[2k + 1] (sin): a = v0 * c - v1 * s, b = v0 * s + v1 * c.
HWY_INLINE void RotatePairs(float* v, const float* cs, size_t k0, size_t k1, size_t step, size_t other) {
  for (size_t k = k0; k < k1; ++k) {
    float& a = v[k * step];
    float& b = v[k * step + other];
    const float v0 = a, v1 = b;
    const float fcr = cs[2 * k], fci = cs[2 * k + 1];
    a = v0 * fcr - v1 * fci;
    b = v0 * fci + v1 * fcr;
  }
}

void RopeRotateHeads(float* HWY_RESTRICT x, size_t n_heads, size_t head_dim, size_t rope_dim,
                     const float* HWY_RESTRICT cs, bool neox) {
  const size_t half = rope_dim / 2;
  for (size_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    size_t done = 0;  // pairs rotated by vectors
#if HWY_TARGET != HWY_SCALAR
    const hn::ScalableTag<float> d;
    const size_t N = hn::Lanes(d);
    if (!neox) {
      // Pairs interleaved in v and in cs alike: lane i of a vector of v and of
      // cs belong to the same pair. swapped = (v1, v0) per pair; even lanes
      // take v0 * c - v1 * s, odd lanes v1 * c + v0 * s.
      for (; 2 * done + N <= rope_dim; done += N / 2) {
        const auto xv = hn::LoadU(d, v + 2 * done);
        const auto csv = hn::LoadU(d, cs + 2 * done);
        const auto c = hn::DupEven(csv), s = hn::DupOdd(csv);
        const auto t = hn::Mul(hn::Shuffle2301(xv), s);
        hn::StoreU(hn::Add(hn::Mul(xv, c), hn::OddEven(t, hn::Neg(t))), d, v + 2 * done);
      }
    } else {
      // Pairs (k, k + half): the first and second halves as vectors, the
      // cos and sin of N pairs from two vectors of cs.
      for (; done + N <= half; done += N) {
        const auto lo = hn::LoadU(d, cs + 2 * done), hi = hn::LoadU(d, cs + 2 * done + N);
        const auto c = hn::ConcatEven(d, hi, lo), s = hn::ConcatOdd(d, hi, lo);
        const auto a = hn::LoadU(d, v + done), b = hn::LoadU(d, v + done + half);
        hn::StoreU(hn::Sub(hn::Mul(a, c), hn::Mul(b, s)), d, v + done);
        hn::StoreU(hn::Add(hn::Mul(a, s), hn::Mul(b, c)), d, v + done + half);
      }
    }
#endif
    RotatePairs(v, cs, done, half, neox ? 1 : 2, neox ? half : 1);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace qkv
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qkv {

HWY_EXPORT(RopeRotateHeads);

namespace {
void check_rope_dims(size_t head_dim, size_t rope_dim) {
  QKV_CHECK(rope_dim % 2 == 0 && rope_dim <= head_dim, "rope: rope_dim ", rope_dim,
            " must be even and at most head_dim ", head_dim);
}
}  // namespace

void rope_angles(size_t rope_dim, int64_t pos, float base, float* cs) {
  RopeParams p;
  p.base = base;
  rope_angles(rope_dim, pos, p, cs);
}

void rope_angles(size_t rope_dim, int64_t pos, const RopeParams& p, float* cs) {
  if (rope_dim == 0) return;
  QKV_CHECK(cs != nullptr, "rope_angles: null pointer");
  QKV_CHECK(rope_dim % 2 == 0, "rope: rope_dim ", rope_dim, " must be even");
  QKV_CHECK(pos >= 0, "rope: negative position ", pos);
  QKV_CHECK(p.base > 0.0f, "rope: base must be positive, got ", p.base);
  QKV_CHECK(p.freq_scale > 0.0f, "rope: frequency scale must be positive, got ", p.freq_scale);
  // llama2.c: freq = 1 / powf(10000, head_dim_index / (float)head_size);
  // val = pos * freq; fcr = cosf(val); fci = sinf(val). Same float operations here
  // (std::pow/cos/sin on floats are powf/cosf/sinf); the scale, factors and
  // attention factor are exact no-ops at their defaults.
  const float fpos = static_cast<float>(pos);
  for (size_t k = 0; k < rope_dim / 2; ++k) {
    const float freq = 1.0f / std::pow(p.base, static_cast<float>(2 * k) / static_cast<float>(rope_dim));
    float val = fpos * freq * p.freq_scale;
    if (p.factors != nullptr) val /= p.factors[k];
    cs[2 * k] = std::cos(val) * p.attn_factor;
    cs[2 * k + 1] = std::sin(val) * p.attn_factor;
  }
}

void rope_rotate(float* x, size_t n_heads, size_t head_dim, size_t rope_dim, const float* cs) {
  rope_rotate(x, n_heads, head_dim, rope_dim, cs, RopeStyle::Adjacent);
}

void rope_rotate(float* x, size_t n_heads, size_t head_dim, size_t rope_dim, const float* cs, RopeStyle style) {
  if (n_heads == 0 || rope_dim == 0) return;
  QKV_CHECK(x != nullptr && cs != nullptr, "rope: null pointer");
  check_rope_dims(head_dim, rope_dim);
  HWY_DYNAMIC_DISPATCH(RopeRotateHeads)(x, n_heads, head_dim, rope_dim, cs, style == RopeStyle::Neox);
}

void rope(float* x, size_t n_heads, size_t head_dim, size_t rope_dim, int64_t pos, float base) {
  if (n_heads == 0 || rope_dim == 0) return;
  QKV_CHECK(x != nullptr, "rope: null pointer");
  check_rope_dims(head_dim, rope_dim);
  float cs_small[128];
  std::vector<float> cs_large;
  float* cs = cs_small;
  if (rope_dim > 128) {
    cs_large.resize(rope_dim);
    cs = cs_large.data();
  }
  rope_angles(rope_dim, pos, base, cs);
  rope_rotate(x, n_heads, head_dim, rope_dim, cs);
}

}  // namespace qkv
#endif  // HWY_ONCE

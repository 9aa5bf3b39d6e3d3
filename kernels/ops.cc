// Element-wise and row-wise transformer kernels. RMSNorm, LayerNorm, softmax, SwiGLU, GELU,
// soft-capping and the residual add are Highway loops (they touch whole activation rows every layer);
// llama.cpp's table GELU is a scalar lookup (its fp16 rounding is the point);
// RoPE is scalar because it must reproduce llama2.c's float angle formula
// exactly (greedy output is compared with llama2.c byte for byte) and its cost
// is a few hundred sin/cos per token.
#include "kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/error.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/ops.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace qkv {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Highway's Exp is valid on [-FLT_MAX, 104]; below -88 e^x is under FLT_MIN and
// only matters as 0 next to terms of order 1, so arguments are clamped there and
// the result forced to 0 (this also maps -inf to 0 instead of NaN).
HWY_INLINE VF ExpClamped(DF df, VF v) {
  const VF lo = hn::Set(df, -88.0f);
  const auto tiny = hn::Lt(v, lo);
  return hn::IfThenZeroElse(tiny, hn::CallExp(df, hn::Max(v, lo)));
}

void RmsNormRow(const float* HWY_RESTRICT x, const float* HWY_RESTRICT w, float* out, size_t n, float eps) {
  const DF df;
  const size_t N = hn::Lanes(df);
  VF s0 = hn::Zero(df), s1 = hn::Zero(df);
  size_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    const VF a = hn::LoadU(df, x + i), b = hn::LoadU(df, x + i + N);
    s0 = hn::MulAdd(a, a, s0);
    s1 = hn::MulAdd(b, b, s1);
  }
  for (; i + N <= n; i += N) {
    const VF a = hn::LoadU(df, x + i);
    s0 = hn::MulAdd(a, a, s0);
  }
  float ss = hn::GetLane(hn::SumOfLanes(df, hn::Add(s0, s1)));
  for (; i < n; ++i) ss += x[i] * x[i];
  // Same order of operations as llama2.c: w * (scale * x).
  const float scale = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  const VF vs = hn::Set(df, scale);
  i = 0;
  for (; i + N <= n; i += N) {
    hn::StoreU(hn::Mul(hn::LoadU(df, w + i), hn::Mul(vs, hn::LoadU(df, x + i))), df, out + i);
  }
  for (; i < n; ++i) out[i] = w[i] * (scale * x[i]);
}

// ggml_norm's steps: mean, deviations, their mean square, then
// (x - mean) * scale, times w, plus b (each rounded on its own, as ggml's
// separate norm, mul and add ops do). Sums in f32 lanes (ggml: double); over
// a row of 128-1024 values the difference is a few ulp of the mean.
void LayerNormRow(const float* x, const float* HWY_RESTRICT w, const float* HWY_RESTRICT b, float* out, size_t n,
                  float eps) {
  const DF df;
  const size_t N = hn::Lanes(df);
  VF s = hn::Zero(df);
  size_t i = 0;
  for (; i + N <= n; i += N) s = hn::Add(s, hn::LoadU(df, x + i));
  float sum = hn::GetLane(hn::SumOfLanes(df, s));
  for (; i < n; ++i) sum += x[i];
  const float mean = sum / static_cast<float>(n);
  const VF vm = hn::Set(df, mean);
  VF s2 = hn::Zero(df);
  for (i = 0; i + N <= n; i += N) {
    const VF v = hn::Sub(hn::LoadU(df, x + i), vm);
    s2 = hn::Add(s2, hn::Mul(v, v));
  }
  float sum2 = hn::GetLane(hn::SumOfLanes(df, s2));
  for (; i < n; ++i) sum2 += (x[i] - mean) * (x[i] - mean);
  const float scale = 1.0f / std::sqrt(sum2 / static_cast<float>(n) + eps);
  const VF vs = hn::Set(df, scale);
  for (i = 0; i + N <= n; i += N) {
    const VF y = hn::Mul(hn::Sub(hn::LoadU(df, x + i), vm), vs);
    hn::StoreU(hn::Add(hn::Mul(y, hn::LoadU(df, w + i)), hn::LoadU(df, b + i)), df, out + i);
  }
  for (; i < n; ++i) out[i] = (x[i] - mean) * scale * w[i] + b[i];
}

// Returns the maximum; exponentiates in place and returns their sum in *sum.
float ExpShifted(float* x, size_t n, float* sum) {
  const DF df;
  const size_t N = hn::Lanes(df);
  float mx = -std::numeric_limits<float>::infinity();
  size_t i = 0;
  if (n >= N) {
    VF m = hn::LoadU(df, x);
    for (i = N; i + N <= n; i += N) m = hn::Max(m, hn::LoadU(df, x + i));
    mx = hn::GetLane(hn::MaxOfLanes(df, m));
  }
  for (; i < n; ++i) mx = std::max(mx, x[i]);
  const VF vm = hn::Set(df, mx);
  VF s = hn::Zero(df);
  float tail = 0.0f;
  for (i = 0; i + N <= n; i += N) {
    const VF e = ExpClamped(df, hn::Sub(hn::LoadU(df, x + i), vm));
    hn::StoreU(e, df, x + i);
    s = hn::Add(s, e);
  }
  for (; i < n; ++i) {
    x[i] = x[i] - mx < -88.0f ? 0.0f : std::exp(x[i] - mx);
    tail += x[i];
  }
  *sum = hn::GetLane(hn::SumOfLanes(df, s)) + tail;
  return mx;
}

void Scale(float* x, size_t n, float inv) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const VF v = hn::Set(df, inv);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Mul(hn::LoadU(df, x + i), v), df, x + i);
  for (; i < n; ++i) x[i] *= inv;
}

void SiluMul(float* HWY_RESTRICT gate, const float* HWY_RESTRICT up, size_t n) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const VF one = hn::Set(df, 1.0f);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const VF z = hn::LoadU(df, gate + i);
    // e^-z for z < -88 would overflow: clamp, silu is then ~0 (|z| e^z < 1e-36).
    const VF e = hn::CallExp(df, hn::Min(hn::Neg(z), hn::Set(df, 88.0f)));
    hn::StoreU(hn::Mul(hn::Div(z, hn::Add(one, e)), hn::LoadU(df, up + i)), df, gate + i);
  }
  for (; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(std::min(-gate[i], 88.0f))) * up[i];
}

// Highway's tanh (a few ulp); saturates to +-1 on its own.
HWY_INLINE VF TanhF(DF df, VF u) { return hn::Tanh(df, u); }

float TanhScalar(float u) { return std::tanh(u); }

void GeluTanhMul(float* HWY_RESTRICT gate, const float* HWY_RESTRICT up, size_t n) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const VF half = hn::Set(df, 0.5f), one = hn::Set(df, 1.0f);
  const VF k0 = hn::Set(df, 0.7978845608028654f), k1 = hn::Set(df, 0.044715f);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const VF z = hn::LoadU(df, gate + i);
    const VF u = hn::Mul(k0, hn::MulAdd(hn::Mul(k1, z), hn::Mul(z, z), z));
    const VF g = hn::Mul(hn::Mul(half, z), hn::Add(one, TanhF(df, u)));
    hn::StoreU(hn::Mul(g, hn::LoadU(df, up + i)), df, gate + i);
  }
  for (; i < n; ++i) {
    const float z = gate[i];
    const float u = 0.7978845608028654f * (z + 0.044715f * z * z * z);
    gate[i] = 0.5f * z * (1.0f + TanhScalar(u)) * up[i];
  }
}

void Softcap(float* x, size_t n, float cap) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const VF c = hn::Set(df, cap), inv = hn::Set(df, 1.0f / cap);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Mul(c, TanhF(df, hn::Mul(hn::LoadU(df, x + i), inv))), df, x + i);
  for (; i < n; ++i) x[i] = cap * TanhScalar(x[i] * (1.0f / cap));
}

void AddInplace(float* HWY_RESTRICT y, const float* HWY_RESTRICT x, size_t n) {
  const DF df;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Add(hn::LoadU(df, y + i), hn::LoadU(df, x + i)), df, y + i);
  for (; i < n; ++i) y[i] += x[i];
}

}  // namespace HWY_NAMESPACE
}  // namespace qkv
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qkv {
HWY_EXPORT(RmsNormRow);
HWY_EXPORT(ExpShifted);
HWY_EXPORT(Scale);
HWY_EXPORT(SiluMul);
HWY_EXPORT(AddInplace);
HWY_EXPORT(GeluTanhMul);
HWY_EXPORT(Softcap);
HWY_EXPORT(LayerNormRow);

namespace {

// ggml's ggml_gelu_f32, the same float operations in the same order.
float gelu_tanh_ggml(float x) {
  constexpr float kCoefA = 0.044715f, kSqrt2OverPi = 0.79788456080286535587989211986876f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoefA * x * x)));
}

// ggml_table_gelu_f16: for every fp16 bit pattern h, fp16(gelu(float(h))).
// Built once, on first use (128 KiB).
const uint16_t* gelu_f16_lookup() {
  static const std::vector<uint16_t> table = [] {
    std::vector<uint16_t> t(size_t{1} << 16);
    for (size_t h = 0; h < t.size(); ++h) t[h] = f32_to_f16(gelu_tanh_ggml(f16_to_f32(static_cast<uint16_t>(h))));
    return t;
  }();
  return table.data();
}

}  // namespace

void layernorm(const float* x, const float* w, const float* b, float* out, size_t n, float eps, size_t M) {
  if (n == 0 || M == 0) return;
  QKV_CHECK(x != nullptr && w != nullptr && b != nullptr && out != nullptr, "layernorm: null pointer");
  QKV_CHECK(eps >= 0.0f, "layernorm: negative eps ", eps);
  auto* const row = HWY_DYNAMIC_DISPATCH(LayerNormRow);
  for (size_t m = 0; m < M; ++m) row(x + m * n, w, b, out + m * n, n, eps);
}

void gelu_f16_table(float* x, size_t n) {
  if (n == 0) return;
  QKV_CHECK(x != nullptr, "gelu_f16_table: null pointer");
  const uint16_t* table = gelu_f16_lookup();
  for (size_t i = 0; i < n; ++i) {
    const float v = x[i];
    if (v <= -10.0f) {
      x[i] = 0.0f;
    } else if (v < 10.0f) {
      x[i] = f16_to_f32(table[f32_to_f16(v)]);
    }  // v >= 10 (and NaN, whose fp16 entry is NaN too) stay
  }
}

void rmsnorm(const float* x, const float* w, float* out, size_t n, float eps, size_t M) {
  if (n == 0 || M == 0) return;
  QKV_CHECK(x != nullptr && w != nullptr && out != nullptr, "rmsnorm: null pointer");
  QKV_CHECK(eps >= 0.0f, "rmsnorm: negative eps ", eps);
  auto* const row = HWY_DYNAMIC_DISPATCH(RmsNormRow);
  for (size_t m = 0; m < M; ++m) row(x + m * n, w, out + m * n, n, eps);
}

void softmax(float* x, size_t n) {
  if (n == 0) return;
  QKV_CHECK(x != nullptr, "softmax: null pointer");
  float sum = 0.0f;
  const float mx = HWY_DYNAMIC_DISPATCH(ExpShifted)(x, n, &sum);
  QKV_CHECK(mx != -std::numeric_limits<float>::infinity(), "softmax: all ", n, " values are -inf");
  HWY_DYNAMIC_DISPATCH(Scale)(x, n, 1.0f / sum);
}

void silu_mul(float* gate, const float* up, size_t n) {
  if (n == 0) return;
  QKV_CHECK(gate != nullptr && up != nullptr, "silu_mul: null pointer");
  HWY_DYNAMIC_DISPATCH(SiluMul)(gate, up, n);
}

void gelu_tanh_mul(float* gate, const float* up, size_t n) {
  if (n == 0) return;
  QKV_CHECK(gate != nullptr && up != nullptr, "gelu_tanh_mul: null pointer");
  HWY_DYNAMIC_DISPATCH(GeluTanhMul)(gate, up, n);
}

void softcap(float* x, size_t n, float cap) {
  if (n == 0) return;
  QKV_CHECK(x != nullptr, "softcap: null pointer");
  QKV_CHECK(cap > 0.0f && std::isfinite(cap), "softcap: the cap must be positive, got ", cap);
  HWY_DYNAMIC_DISPATCH(Softcap)(x, n, cap);
}

void add_inplace(float* y, const float* x, size_t n) {
  if (n == 0) return;
  QKV_CHECK(y != nullptr && x != nullptr, "add_inplace: null pointer");
  HWY_DYNAMIC_DISPATCH(AddInplace)(y, x, n);
}

}  // namespace qkv
#endif  // HWY_ONCE

// Activation quantizers (rules in activation.h): the scalar reference and the
// Highway version that decode runs, the same bytes for every input (NaN and
// infinity included: test_quant_matvec). Each matvec input is quantized once,
// but a decode step of a small model quantizes ~150 of them: the scalar loops
// (a libm call per value for the rounding, one for each max) took 4-6% of
// its samples (perf, 143M Q4_0).
#include "kernels/quant/activation.h"

#include <cmath>
#include <cstring>

#include "kernels/dtype.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/quant/activation.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace qkv {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DI = hn::RebindToSigned<DF>;
using DQ = hn::Rebind<int8_t, DF>;

// max |x| of x[0, n), NaN as 0 (as the scalar fmax and > comparisons treat it).
HWY_INLINE float Amax(const float* HWY_RESTRICT x, size_t n) {
  const DF d;
  auto m = hn::Zero(d);
  for (size_t i = 0; i < n; i += hn::Lanes(d)) {
    const auto v = hn::LoadU(d, x + i);
    m = hn::Max(m, hn::IfThenElseZero(hn::Eq(v, v), hn::Abs(v)));
  }
  return hn::GetLane(hn::MaxOfLanes(d, m));
}

// q[i] = round-half-even(x[i] * s) where that lies in [lo, 127], `above`
// where it is over 127, 0 otherwise (NaN included); returns the sum of the q.
HWY_INLINE int32_t Round8(const float* HWY_RESTRICT x, size_t n, float s, float lo, float above,
                          int8_t* HWY_RESTRICT q) {
  const DF d;
  const DI di;
  const DQ dq;
  const auto vs = hn::Set(d, s), vlo = hn::Set(d, lo), vhi = hn::Set(d, 127.0f), vabove = hn::Set(d, above);
  auto sum = hn::Zero(di);
  for (size_t i = 0; i < n; i += hn::Lanes(d)) {
    const auto v = hn::Round(hn::Mul(hn::LoadU(d, x + i), vs));
    const auto in = hn::And(hn::Ge(v, vlo), hn::Le(v, vhi));
    const auto r = hn::ConvertTo(di, hn::IfThenElse(in, v, hn::IfThenElseZero(hn::Gt(v, vhi), vabove)));
    sum = hn::Add(sum, r);
    hn::StoreU(hn::DemoteTo(dq, r), dq, q + i);
  }
  return hn::GetLane(hn::SumOfLanes(di, sum));
}

// kind 0: Q8_0, 1: Q8_1, 2: Q8_K.
void QuantizeRow(int kind, const float* HWY_RESTRICT x, size_t n, void* out) {
  if (kind == 2) {
    auto* y = static_cast<BlockQ8_K*>(out);
    const DF d;
    for (size_t b = 0; b < n / kQK; ++b, x += kQK) {
      const float amax = Amax(x, kQK);
      if (amax == 0.0f) {
        std::memset(&y[b], 0, sizeof(BlockQ8_K));
        continue;
      }
      float max = 0.0f;  // the first x with |x| = amax
      for (size_t i = 0; i < kQK; i += hn::Lanes(d)) {
        const intptr_t k = hn::FindFirstTrue(d, hn::Eq(hn::Abs(hn::LoadU(d, x + i)), hn::Set(d, amax)));
        if (k >= 0) {
          max = x[i + static_cast<size_t>(k)];
          break;
        }
      }
      const float iscale = -127.0f / max;
      Round8(x, kQK, iscale, -128.0f, 127.0f, y[b].qs);
      for (size_t j = 0; j < kQK / 16; ++j) {
        int s = 0;
        for (size_t i = 0; i < 16; ++i) s += y[b].qs[16 * j + i];
        y[b].bsums[j] = static_cast<int16_t>(s);
      }
      y[b].d = 1.0f / iscale;
    }
    return;
  }
  for (size_t b = 0; b < n / 32; ++b) {
    const float* xb = x + 32 * b;
    const float amax = Amax(xb, 32);
    const float dq = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int8_t* q = kind == 0 ? static_cast<BlockQ8_0*>(out)[b].qs : static_cast<BlockQ8_1*>(out)[b].qs;
    const int32_t sum = Round8(xb, 32, id, -127.0f, 0.0f, q);
    if (kind == 0) {
      static_cast<BlockQ8_0*>(out)[b].d = f32_to_f16(dq);
    } else {
      static_cast<BlockQ8_1*>(out)[b].d = f32_to_f16(dq);
      static_cast<BlockQ8_1*>(out)[b].s = f32_to_f16(dq * static_cast<float>(sum));
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace qkv
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qkv {

HWY_EXPORT(QuantizeRow);

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

void quantize_row_q8_0(const float* x, size_t n, BlockQ8_0* y) { HWY_DYNAMIC_DISPATCH(QuantizeRow)(0, x, n, y); }
void quantize_row_q8_1(const float* x, size_t n, BlockQ8_1* y) { HWY_DYNAMIC_DISPATCH(QuantizeRow)(1, x, n, y); }
void quantize_row_q8_K(const float* x, size_t n, BlockQ8_K* y) { HWY_DYNAMIC_DISPATCH(QuantizeRow)(2, x, n, y); }

void quantize_row_q8_0_scalar(const float* x, size_t n, BlockQ8_0* y) {
  for (size_t b = 0; b < n / 32; ++b) {
    int sum;
    y[b].d = f32_to_f16(q8_block(x + 32 * b, y[b].qs, &sum));
  }
}

void quantize_row_q8_1_scalar(const float* x, size_t n, BlockQ8_1* y) {
  for (size_t b = 0; b < n / 32; ++b) {
    int sum;
    const float d = q8_block(x + 32 * b, y[b].qs, &sum);
    y[b].d = f32_to_f16(d);
    y[b].s = f32_to_f16(d * static_cast<float>(sum));
  }
}

void quantize_row_q8_K_scalar(const float* x, size_t n, BlockQ8_K* y) {
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
#endif  // HWY_ONCE

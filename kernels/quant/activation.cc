// Activation quantizers (rules in activation.h): the scalar reference and the
// Highway version that decode runs, the same bytes for every input (NaN and
// infinity included: test_quant_matvec). Each matvec input is quantized once,
// but a decode step of a small model quantizes ~150 of them: the scalar loops
// (a libm call per value for the rounding, one for each max) took 4-6% of
// its samples (perf, 143M Q4_0). The 32-value blocks go a vector's lanes of
// blocks at a time, their max |x| and sums reduced together rather than
// block by block, and Q8_K's 16-value sums from vectors: `bench_linear
// --benchmark_filter='^quantize_activation'` (one input of 2048 from L1,
// Zen 5 guest), G values/s against one block at a time with scalar Q8_K
// sums: Q8_0 5.73 / 3.37, Q8_1 4.69 / 2.65, Q8_K 3.74 / 3.22. A batched
// decode step quantizes most of its inputs ahead, in the passes that write
// them (QuantizedInputs, kernels/linear.h): where the block GEMM quantizes
// its inputs itself, every team thread quantizes every input.
#include "kernels/sve_excluded.h"  // first: it decides Highway's targets here
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
// where it is over 127, 0 otherwise (NaN included), for one vector of x;
// returns the q as int32 lanes.
HWY_INLINE hn::Vec<DI> Round8Vec(hn::Vec<DF> x, hn::Vec<DF> vs, hn::Vec<DF> vlo, hn::Vec<DF> vabove,
                                 int8_t* HWY_RESTRICT q) {
  const DF d;
  const DI di;
  const DQ dq;
  const auto vhi = hn::Set(d, 127.0f);
  const auto v = hn::Round(hn::Mul(x, vs));
  const auto in = hn::And(hn::Ge(v, vlo), hn::Le(v, vhi));
  const auto r = hn::ConvertTo(di, hn::IfThenElse(in, v, hn::IfThenElseZero(hn::Gt(v, vhi), vabove)));
  hn::StoreU(hn::DemoteTo(dq, r), dq, q);
  return r;
}

// Round8Vec over x[0, n) (n a multiple of the vector); returns the sum of the q
// as int32 lanes (each lane a partial sum).
HWY_INLINE hn::Vec<DI> Round8(const float* HWY_RESTRICT x, size_t n, float s, float lo, float above,
                              int8_t* HWY_RESTRICT q) {
  const DF d;
  const auto vs = hn::Set(d, s), vlo = hn::Set(d, lo), vabove = hn::Set(d, above);
  auto sum = hn::Zero(DI());
  for (size_t i = 0; i < n; i += hn::Lanes(d)) sum = hn::Add(sum, Round8Vec(hn::LoadU(d, x + i), vs, vlo, vabove, q + i));
  return sum;
}

// v[0 .. N) (N the vector's lanes) to one vector whose lane i is v[i]'s
// lanes reduced by op: log2(N) levels of adjacent-pair reductions, each
// halving the vectors, which leaves the lanes in natural order (lanes
// [0, N/2) of a level's result come from the first vector of its pair).
// The horizontal reduction of a block at a time cost a shuffle tree per block.
template <class D, class V, class Op>
HWY_INLINE V ReduceEach(D d, V* v, const Op& op) {
#if HWY_TARGET == HWY_SCALAR
  (void)d, (void)op;
#else
  for (size_t n = hn::Lanes(d); n > 1; n /= 2) {
    for (size_t i = 0; i < n / 2; ++i) {
      v[i] = op(hn::ConcatEven(d, v[2 * i + 1], v[2 * i]), hn::ConcatOdd(d, v[2 * i + 1], v[2 * i]));
    }
  }
#endif
  return v[0];
}

constexpr size_t kMaxLanes = hn::MaxLanes(DF());
static_assert(kMaxLanes <= 16 && 16 % kMaxLanes == 0, "a vector within a Q8_K 16-value group and a 32-value block");

// Q8_0 / Q8_1 (kind 0 / 1) of n <= N blocks of 32 at x (N the vector's
// lanes): the blocks' max |x| and (Q8_1) sums reduced together, their
// scales as vectors (lanes from n on: no block, max 0). kFull: n == N, a
// bound the loops unroll over (with a run-time n, bench_linear
// '^quantize_activation' measured Q8_0 4-9% slower).
template <bool kFull>
HWY_INLINE void QuantizeBlocks32(int kind, const float* HWY_RESTRICT x, size_t n_blocks, void* out) {
  const DF d;
  const DI di;
  const size_t n = kFull ? hn::Lanes(d) : n_blocks;
  hn::Vec<DF> m[kMaxLanes];
  hn::Vec<DI> sums[kMaxLanes];
  for (size_t i = 0; i < n; ++i) {
    auto mv = hn::Zero(d);
    for (size_t k = 0; k < 32; k += hn::Lanes(d)) {
      const auto v = hn::LoadU(d, x + 32 * i + k);
      mv = hn::Max(mv, hn::IfThenElseZero(hn::Eq(v, v), hn::Abs(v)));
    }
    m[i] = mv;
  }
  for (size_t i = n; i < hn::Lanes(d); ++i) {
    m[i] = hn::Zero(d);
    sums[i] = hn::Zero(di);
  }
  const auto amax = ReduceEach(d, m, [](hn::Vec<DF> a, hn::Vec<DF> b) { return hn::Max(a, b); });
  const auto v127 = hn::Set(d, 127.0f);
  HWY_ALIGN float dq[kMaxLanes], id[kMaxLanes];
  hn::Store(hn::Div(amax, v127), d, dq);
  hn::Store(hn::IfThenElseZero(hn::Ne(amax, hn::Zero(d)), hn::Div(v127, amax)), d, id);
  for (size_t i = 0; i < n; ++i) {
    int8_t* q = kind == 0 ? static_cast<BlockQ8_0*>(out)[i].qs : static_cast<BlockQ8_1*>(out)[i].qs;
    sums[i] = Round8(x + 32 * i, 32, id[i], -127.0f, 0.0f, q);
  }
  if (kind == 0) {
    for (size_t i = 0; i < n; ++i) static_cast<BlockQ8_0*>(out)[i].d = f32_to_f16(dq[i]);
    return;
  }
  HWY_ALIGN int32_t sum[kMaxLanes];
  hn::Store(ReduceEach(di, sums, [](hn::Vec<DI> a, hn::Vec<DI> b) { return hn::Add(a, b); }), di, sum);
  for (size_t i = 0; i < n; ++i) {
    static_cast<BlockQ8_1*>(out)[i].d = f32_to_f16(dq[i]);
    static_cast<BlockQ8_1*>(out)[i].s = f32_to_f16(dq[i] * static_cast<float>(sum[i]));
  }
}

// kind 0: Q8_0, 1: Q8_1, 2: Q8_K.
void QuantizeRow(int kind, const float* HWY_RESTRICT x, size_t n, void* out) {
  const DF d;
  const DI di;
  const size_t N = hn::Lanes(d);
  if (kind == 2) {
    auto* y = static_cast<BlockQ8_K*>(out);
    for (size_t b = 0; b < n / kQK; ++b, x += kQK) {
      const float amax = Amax(x, kQK);
      if (amax == 0.0f) {
        std::memset(&y[b], 0, sizeof(BlockQ8_K));
        continue;
      }
      float max = 0.0f;  // the first x with |x| = amax
      for (size_t i = 0; i < kQK; i += N) {
        const intptr_t k = hn::FindFirstTrue(d, hn::Eq(hn::Abs(hn::LoadU(d, x + i)), hn::Set(d, amax)));
        if (k >= 0) {
          max = x[i + static_cast<size_t>(k)];
          break;
        }
      }
      const float iscale = -127.0f / max;
      // The sums of each 16 values (bsums): one vector of partial sums per
      // 16, reduced N at a time.
      const auto vs = hn::Set(d, iscale), vlo = hn::Set(d, -128.0f), vabove = hn::Set(d, 127.0f);
      hn::Vec<DI> g[16];
      for (size_t j = 0; j < 16; ++j) {
        g[j] = hn::Zero(di);
        for (size_t i = 16 * j; i < 16 * j + 16; i += N) {
          g[j] = hn::Add(g[j], Round8Vec(hn::LoadU(d, x + i), vs, vlo, vabove, y[b].qs + i));
        }
      }
      HWY_ALIGN int32_t bs[kMaxLanes];
      for (size_t j = 0; j < 16; j += N) {
        hn::Store(ReduceEach(di, g + j, [](hn::Vec<DI> a, hn::Vec<DI> c) { return hn::Add(a, c); }), di, bs);
        for (size_t i = 0; i < N; ++i) y[b].bsums[j + i] = static_cast<int16_t>(bs[i]);
      }
      y[b].d = 1.0f / iscale;
    }
    return;
  }
  // N blocks at a time, the last group possibly fewer.
  for (size_t b = 0; b < n / 32; b += N) {
    void* o = kind == 0 ? static_cast<void*>(static_cast<BlockQ8_0*>(out) + b)
                        : static_cast<void*>(static_cast<BlockQ8_1*>(out) + b);
    if (b + N <= n / 32) {
      QuantizeBlocks32<true>(kind, x + 32 * b, N, o);
    } else {
      QuantizeBlocks32<false>(kind, x + 32 * b, n / 32 - b, o);
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

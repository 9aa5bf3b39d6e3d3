#include "runtime/kv_encode.h"

#include <cmath>
#include <cstring>

#include "kernels/error.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/kv_encode.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace qkv {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;

// f16: x86 F16C (AVX2 and up) rounds to nearest even with subnormals, overflow to
// inf and NaN handled in hardware. Highway 1.0.3 emulates it on SSE4 by
// truncation, so narrower targets use the scalar contract instead.
void RowF16(const float* src, size_t d, uint16_t* dst) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  const DF df;
  const hn::Rebind<hwy::float16_t, DF> dh;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  for (; i + N <= d; i += N) {
    hn::StoreU(hn::DemoteTo(dh, hn::LoadU(df, src + i)), dh, reinterpret_cast<hwy::float16_t*>(dst + i));
  }
  for (; i < d; ++i) dst[i] = f32_to_f16(src[i]);
#else
  for (size_t i = 0; i < d; ++i) dst[i] = f32_to_f16(src[i]);
#endif
}

// bf16: round to nearest even on the bits (DemoteTo would truncate):
// u + 0x7fff + (bit 16 of u), keep the high half; NaN keeps its sign and high
// payload bits and gets the quiet bit, exactly as f32_to_bf16.
void RowBF16(const float* src, size_t d, uint16_t* dst) {
  const DF df;
  const hn::RebindToUnsigned<DF> du;
  const hn::Rebind<uint16_t, DF> du16;
  const size_t N = hn::Lanes(df);
  const auto round_bias = hn::Set(du, 0x7fffu);
  const auto one = hn::Set(du, 1u);
  const auto quiet = hn::Set(du, 0x400000u);
  size_t i = 0;
  for (; i + N <= d; i += N) {
    const auto x = hn::LoadU(df, src + i);
    const auto u = hn::BitCast(du, x);
    const auto rounded = hn::Add(hn::Add(u, round_bias), hn::And(hn::ShiftRight<16>(u), one));
    const auto is_nan = hn::RebindMask(du, hn::Ne(x, x));
    const auto bits = hn::IfThenElse(is_nan, hn::Or(u, quiet), rounded);
    hn::StoreU(hn::TruncateTo(du16, hn::ShiftRight<16>(bits)), du16, dst + i);
  }
  for (; i < d; ++i) dst[i] = f32_to_bf16(src[i]);
}

// q8_0, as quantize_q8_0_block: s = max|x| / 127, q = round(x / s) half away
// from zero (GGUF's roundf; Highway's Round is half to even, so the tie is
// fixed up from the truncated value), s stored as f16. The multiply by 1/s and
// the divisions are the same IEEE operations, so the blocks are bit-identical.
// When 1/s overflows (max|x| < ~3.7e-37) the reference casts inf to int8, which
// is undefined; here q is 0 (the f16 scale is 0 there, so the block decodes to
// zeros either way).
void RowQ8(const float* src, size_t d, BlockQ8_0* dst) {
  const DF df;
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<int8_t, DF> di8;
  const size_t N = hn::Lanes(df);
  const auto half = hn::Set(df, 0.5f);
  const auto one = hn::Set(df, 1.0f);
  for (size_t b = 0; b < d / kQ8BlockSize; ++b) {
    const float* x = src + b * kQ8BlockSize;
    BlockQ8_0& out = dst[b];
    auto vmax = hn::Zero(df);
    for (size_t i = 0; i < kQ8BlockSize; i += N) vmax = hn::Max(vmax, hn::Abs(hn::LoadU(df, x + i)));
    const float amax = hn::GetLane(hn::MaxOfLanes(df, vmax));
    const float s = amax / 127.0f;
    const float inv = s != 0.0f ? 1.0f / s : 0.0f;
    out.d = f32_to_f16(s);
    if (!std::isfinite(inv)) {
      std::memset(out.qs, 0, sizeof(out.qs));
      continue;
    }
    const auto vinv = hn::Set(df, inv);
    for (size_t i = 0; i < kQ8BlockSize; i += N) {
      const auto y = hn::Mul(hn::LoadU(df, x + i), vinv);
      const auto t = hn::Trunc(y);
      const auto away = hn::Ge(hn::Abs(hn::Sub(y, t)), half);
      const auto r = hn::IfThenElse(away, hn::Add(t, hn::CopySignToAbs(one, y)), t);
      hn::StoreU(hn::DemoteTo(di8, hn::ConvertTo(di, r)), di8, out.qs + i);
    }
  }
}

void EncodeRows(int type, const float* src, int64_t src_stride, int64_t n, int64_t d, uint8_t* dst) {
  const DType t = static_cast<DType>(type);
  const size_t dd = static_cast<size_t>(d);
  const size_t row = dtype_row_bytes(t, dd);
  for (int64_t r = 0; r < n; ++r) {
    const float* x = src + r * src_stride;
    uint8_t* y = dst + static_cast<size_t>(r) * row;
    switch (t) {
      case DType::F32: std::memcpy(y, x, row); break;
      case DType::F16: RowF16(x, dd, reinterpret_cast<uint16_t*>(y)); break;
      case DType::BF16: RowBF16(x, dd, reinterpret_cast<uint16_t*>(y)); break;
      case DType::Q8_0: RowQ8(x, dd, reinterpret_cast<BlockQ8_0*>(y)); break;
      default: break;  // KV caches hold only the four types above (kv_cache.cc checks)
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace qkv
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qkv {
HWY_EXPORT(EncodeRows);

void encode_rows(DType t, const float* src, int64_t src_stride, int64_t n, int64_t d, uint8_t* dst) {
  QKV_CHECK(d > 0 && dtype_row_ok(t, static_cast<size_t>(d)), "a row of ", d,
            " values cannot be stored as ", dtype_name(t));
  HWY_DYNAMIC_DISPATCH(EncodeRows)(static_cast<int>(t), src, src_stride, n, d, dst);
}
}  // namespace qkv
#endif

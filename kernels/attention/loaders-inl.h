// The vector types of the attention kernel and its K/V element loaders: N
// values of an F32/F16/BF16/Q8_0 cache row as f32 lanes, a run of column
// vectors, and whole rows decoded to f32.
//
// A Highway "-inl" header of the attention kernel: kernels/attention/attention.cc
// includes it once per SIMD target (foreach_target), after hwy/highway.h.
#if defined(QKV_KERNELS_ATTENTION_LOADERS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef QKV_KERNELS_ATTENTION_LOADERS_INL_H_
#undef QKV_KERNELS_ATTENTION_LOADERS_INL_H_
#else
#define QKV_KERNELS_ATTENTION_LOADERS_INL_H_
#endif

#include "hwy/highway.h"
#include "kernels/attention/call.h"
#include "kernels/dtype.h"

HWY_BEFORE_NAMESPACE();
namespace qkv {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
using attn::Call;

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
constexpr int kVecRegs = 32;
#else
constexpr int kVecRegs = 16;
#endif

// K/V element access: N values starting at element c of a row, as f32 lanes.

template <DType T>
struct Elem;

template <>
struct Elem<DType::F32> {
  static HWY_INLINE VF Load(DF df, const uint8_t* row, size_t c) {
    return hn::LoadU(df, reinterpret_cast<const float*>(row) + c);
  }
  static float Scalar(const uint8_t* row, size_t c) {
    float f;
    std::memcpy(&f, row + 4 * c, 4);
    return f;
  }
};

template <>
struct Elem<DType::F16> {
  static HWY_INLINE VF Load(DF df, const uint8_t* row, size_t c) {
    const hn::Rebind<hwy::float16_t, DF> dh;
    return hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(row) + c));
  }
  static float Scalar(const uint8_t* row, size_t c) {
    uint16_t h;
    std::memcpy(&h, row + 2 * c, 2);
    return f16_to_f32(h);
  }
};

template <>
struct Elem<DType::BF16> {
  static HWY_INLINE VF Load(DF df, const uint8_t* row, size_t c) {
    const hn::Rebind<uint16_t, DF> du16;
    const hn::RebindToUnsigned<DF> du32;
    const auto wide = hn::PromoteTo(du32, hn::LoadU(du16, reinterpret_cast<const uint16_t*>(row) + c));
    return hn::BitCast(df, hn::ShiftLeft<16>(wide));
  }
  static float Scalar(const uint8_t* row, size_t c) {
    uint16_t h;
    std::memcpy(&h, row + 2 * c, 2);
    return bf16_to_f32(h);
  }
};

template <>
struct Elem<DType::Q8_0> {
  static HWY_INLINE const uint8_t* Block(const uint8_t* row, size_t c) {
    return row + (c / kQ8BlockSize) * sizeof(BlockQ8_0);
  }
  // A block's scale in every lane, converted by the vector unit (broadcast,
  // then f16 -> f32): the scalar f16_to_f32 costs branches on every vector of
  // every key.
  static HWY_INLINE VF Scale(DF df, const uint8_t* blk) {
    uint16_t dh;
    std::memcpy(&dh, blk, 2);
    const hn::Rebind<uint16_t, DF> du16;
    const hn::Rebind<hwy::float16_t, DF> dh16;
    return hn::PromoteTo(df, hn::BitCast(dh16, hn::Set(du16, dh)));
  }
  // N values of a block from its value i, times its scale.
  static HWY_INLINE VF Values(DF df, const uint8_t* blk, size_t i, VF scale) {
    const hn::Rebind<int8_t, DF> di8;
    const hn::RebindToSigned<DF> di32;
    const auto q = hn::PromoteTo(di32, hn::LoadU(di8, reinterpret_cast<const int8_t*>(blk + 2) + i));
    return hn::Mul(hn::ConvertTo(df, q), scale);
  }
  // c is a multiple of N and N divides 32, so the N values lie in one block.
  static HWY_INLINE VF Load(DF df, const uint8_t* row, size_t c) {
    const uint8_t* blk = Block(row, c);
    return Values(df, blk, c % kQ8BlockSize, Scale(df, blk));
  }
  static float Scalar(const uint8_t* row, size_t c) {
    const uint8_t* blk = Block(row, c);
    uint16_t dh;
    std::memcpy(&dh, blk, 2);
    return f16_to_f32(dh) * static_cast<float>(static_cast<int8_t>(blk[2 + c % kQ8BlockSize]));
  }
};

// XB vectors of a row from column x (v[i] = Elem<T>::Load at x + i*N). A Q8_0
// run inside one 32-value block converts the block's scale once, not per vector.
template <DType T, int XB>
HWY_INLINE void LoadCols(DF df, const uint8_t* row, size_t x, VF* v) {
  const size_t N = hn::Lanes(df);
  if constexpr (T == DType::Q8_0 && XB > 1) {
    if (x % kQ8BlockSize + XB * N <= kQ8BlockSize) {
      const uint8_t* blk = Elem<T>::Block(row, x);
      const VF scale = Elem<T>::Scale(df, blk);
      for (int i = 0; i < XB; ++i) v[i] = Elem<T>::Values(df, blk, x % kQ8BlockSize + i * N, scale);
      return;
    }
  }
  for (int i = 0; i < XB; ++i) v[i] = Elem<T>::Load(df, row, x + i * N);
}

// Decodes n rows of d values (row stride rs bytes) into dst (row stride ld floats).
template <DType T>
HWY_INLINE void DecodeRows(const uint8_t* src, int64_t rs, size_t n, size_t d, float* dst, size_t ld) {
  const DF df;
  const size_t N = hn::Lanes(df);
  for (size_t j = 0; j < n; ++j) {
    const uint8_t* row = src + static_cast<int64_t>(j) * rs;
    float* o = dst + j * ld;
    size_t c = 0;
    for (; c + N <= d; c += N) hn::StoreU(Elem<T>::Load(df, row, c), df, o + c);
    for (; c < d; ++c) o[c] = Elem<T>::Scalar(row, c);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace qkv
HWY_AFTER_NAMESPACE();

#endif  // QKV_KERNELS_ATTENTION_LOADERS_INL_H_

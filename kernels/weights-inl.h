// Reading F32/F16/BF16 weight rows as f32 vectors, for the Highway kernels of
// kernels/linear.cc (matvec) and kernels/matmul_small/ (batched decode).
// Q8_0 rows are block-structured; each kernel decodes those itself.
//
// A Highway "-inl" header: included once per SIMD target from inside a
// foreach_target translation unit, after hwy/highway.h.
#if defined(QKV_KERNELS_WEIGHTS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef QKV_KERNELS_WEIGHTS_INL_H_
#undef QKV_KERNELS_WEIGHTS_INL_H_
#else
#define QKV_KERNELS_WEIGHTS_INL_H_
#endif

#include <cstring>

#include "hwy/highway.h"
#include "kernels/dtype.h"

HWY_BEFORE_NAMESPACE();
namespace qkv {
namespace HWY_NAMESPACE {

// Lanes(df) weights of a row starting at column i, converted to f32.
template <DType T, class DF>
HWY_INLINE hwy::HWY_NAMESPACE::Vec<DF> LoadWeights(DF df, const uint8_t* HWY_RESTRICT row, size_t i) {
  namespace hn = hwy::HWY_NAMESPACE;
  static_assert(T != DType::Q8_0, "Q8_0 rows are decoded block by block by each kernel");
  if constexpr (T == DType::F32) {
    return hn::LoadU(df, reinterpret_cast<const float*>(row) + i);
  } else if constexpr (T == DType::F16) {
    const hn::Rebind<hwy::float16_t, DF> dh;
    return hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(row) + i));
  } else {
    const hn::Rebind<hwy::bfloat16_t, DF> db;
    return hn::PromoteTo(df, hn::LoadU(db, reinterpret_cast<const hwy::bfloat16_t*>(row) + i));
  }
}

// One weight of a row, for the column tail.
template <DType T>
HWY_INLINE float LoadWeight(const uint8_t* row, size_t i) {
  static_assert(T != DType::Q8_0, "Q8_0 rows are decoded block by block by each kernel");
  if constexpr (T == DType::F32) {
    float v;
    std::memcpy(&v, row + 4 * i, 4);
    return v;
  } else {
    uint16_t h;
    std::memcpy(&h, row + 2 * i, 2);
    return T == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace qkv
HWY_AFTER_NAMESPACE();

#endif  // include guard toggled per target

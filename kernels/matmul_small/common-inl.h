// What every path of the small-batch matmul shares per target: the vector
// types, the f32 tile shape, the chunk constants, a tile's prefetch request
// and the dispatch over a run-time group size.
//
// A Highway "-inl" header of the small-batch matmul:
// kernels/matmul_small/matmul_small.cc includes it once per SIMD target
// (foreach_target), after hwy/highway.h.
#if defined(QKV_KERNELS_MATMUL_SMALL_COMMON_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef QKV_KERNELS_MATMUL_SMALL_COMMON_INL_H_
#undef QKV_KERNELS_MATMUL_SMALL_COMMON_INL_H_
#else
#define QKV_KERNELS_MATMUL_SMALL_COMMON_INL_H_
#endif

#include "hwy/highway.h"
#include "kernels/dtype.h"
#include "kernels/matmul_small/schedule.h"
#include "kernels/weights-inl.h"

HWY_BEFORE_NAMESPACE();
namespace qkv {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
constexpr size_t kLanes = HWY_LANES(float);

// Tile shape: kRows x kMaxInputs accumulators plus the group's inputs and one
// weight vector must fit the register file (32 vectors on AVX-512, 16 below).
#if HWY_TARGET <= HWY_AVX3
// 6 x 4 measured faster than 4 x 6 (fewer input loads per FMA, and the
// input loads come from L2 for long rows), and faster than 3 x 8 tiles that
// convert the weights in registers in every group with no scratch (which run
// at the FMA peak in isolation, but then load 8 inputs per step from L2).
constexpr size_t kRows = 6;
constexpr size_t kMaxInputs = 4;  // 24 accumulators + 4 inputs + 1 weight
#elif HWY_TARGET == HWY_SCALAR
constexpr size_t kRows = 4;
constexpr size_t kMaxInputs = 4;
#else
constexpr size_t kRows = 4;
constexpr size_t kMaxInputs = 2;  // 8 accumulators + 2 inputs + 1 weight
#endif

// Chunk widths are multiples of 32 (ChunkWidth), hence of every target's lanes
// and of the Q8_0 block, so only the last chunk of a row can have a column tail.
using matmul_small::kChunk;
using matmul_small::kXStride;
static_assert(kChunk % kQ8BlockSize == 0 && kChunk / kQ8BlockSize % kLanes == 0,
              "chunks hold whole blocks, and whole vectors of block scales");

// What a tile prefetches, spread over its steps: the weights needed next, R
// row pieces of `bytes` bytes at p (row stride `stride`); p == nullptr: none.
struct Prefetch {
  const uint8_t* p;
  size_t stride;
  size_t bytes;
};

template <size_t MB>
using InputsTag = std::integral_constant<size_t, MB>;

// Calls f(InputsTag<mb>()) for a run-time group size 1 <= mb <= kMaxInputs
// (the bf16 path: a number of quads).
template <class F>
HWY_INLINE void WithGroupSize(size_t mb, const F& f) {
  switch (mb) {
    case 1: return f(InputsTag<1>());
    case 2: return f(InputsTag<2>());
    case 3: if constexpr (kMaxInputs >= 3) return f(InputsTag<3>()); break;
    case 4: if constexpr (kMaxInputs >= 4) return f(InputsTag<4>()); break;
    case 5: if constexpr (kMaxInputs >= 5) return f(InputsTag<5>()); break;
    case 6: if constexpr (kMaxInputs >= 6) return f(InputsTag<6>()); break;
  }
}
static_assert(kMaxInputs >= 2 && kMaxInputs <= 6, "WithGroupSize covers 1..6 inputs per group");

}  // namespace HWY_NAMESPACE
}  // namespace qkv
HWY_AFTER_NAMESPACE();

#endif  // QKV_KERNELS_MATMUL_SMALL_COMMON_INL_H_

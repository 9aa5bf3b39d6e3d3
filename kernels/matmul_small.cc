// Small-batch matmul (batched decode): Y[m][r] = dot(W[r], X[m]) for 2 <= M <=
// kMatmulSmallMaxM inputs. One read of the weights serves every input: each
// block of 4 weight rows is decoded once into an f32 scratch that stays in L1/L2
// and reused for all inputs. Rows are split over threads in contiguous ranges of
// whole 4-row blocks, so each row is computed by the same code on any thread.
#include <omp.h>

#include <algorithm>
#include <vector>

#include "kernels/linear_internal.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matmul_small.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace qkv {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Dot products of R f32 rows (ld = cols) with MB inputs: Y[m*ldy + r].
template <size_t R, size_t MB>
HWY_INLINE void DotBlock(const float* const* HWY_RESTRICT w, const float* HWY_RESTRICT X,
                         size_t cols, float* HWY_RESTRICT Y, size_t ldy) {
  const DF df;
  const size_t N = hn::Lanes(df);
  VF acc[R][MB];
  for (size_t r = 0; r < R; ++r)
    for (size_t m = 0; m < MB; ++m) acc[r][m] = hn::Zero(df);
  size_t i = 0;
  for (; i + N <= cols; i += N) {
    VF xv[MB];
    for (size_t m = 0; m < MB; ++m) xv[m] = hn::LoadU(df, X + m * cols + i);
    for (size_t r = 0; r < R; ++r) {
      const VF wv = hn::LoadU(df, w[r] + i);
      for (size_t m = 0; m < MB; ++m) acc[r][m] = hn::MulAdd(wv, xv[m], acc[r][m]);
    }
  }
  for (size_t r = 0; r < R; ++r) {
    for (size_t m = 0; m < MB; ++m) {
      float s = hn::GetLane(hn::SumOfLanes(df, acc[r][m]));
      for (size_t j = i; j < cols; ++j) s += w[r][j] * X[m * cols + j];
      Y[m * ldy + r] = s;
    }
  }
}

// Inputs per pass: 4 rows x 4 inputs = 16 accumulators fit AVX-512's 32
// registers; AVX2 and narrower have 16 registers, so 2 inputs.
#if HWY_TARGET <= HWY_AVX3
constexpr size_t kInputsPerPass = 4;
#else
constexpr size_t kInputsPerPass = 2;
#endif

template <size_t R>
HWY_INLINE void RowsTimesInputs(const float* const* w, const float* X, size_t M, size_t cols,
                                float* Y, size_t ldy) {
  size_t m = 0;
  for (; m + kInputsPerPass <= M; m += kInputsPerPass) {
    DotBlock<R, kInputsPerPass>(w, X + m * cols, cols, Y + m * ldy, ldy);
  }
  for (; m < M; ++m) DotBlock<R, 1>(w, X + m * cols, cols, Y + m * ldy, ldy);
}

// Y[m][r] for rows [r0, r1), every m < M. Each block of 4 weight rows is decoded
// once into scratch (4 * cols floats; unused for F32) and reused for all inputs.
void MatmulSmallRange(const Matrix& W, const float* X, int64_t M, float* Y, int64_t r0, int64_t r1,
                      float* scratch) {
  const size_t cols = static_cast<size_t>(W.cols);
  const size_t ldy = static_cast<size_t>(W.rows);
  const size_t row_bytes = dtype_row_bytes(W.type, cols);
  const uint8_t* base = static_cast<const uint8_t*>(W.data);
  int64_t r = r0;
  while (r < r1) {
    const int64_t rows = std::min<int64_t>(4, r1 - r);
    const float* w[4];
    if (W.type == DType::F32) {
      for (int64_t k = 0; k < rows; ++k) w[k] = reinterpret_cast<const float*>(base + (r + k) * row_bytes);
    } else {
      detail::decode_rows_f32(W, r, r + rows, scratch);
      for (int64_t k = 0; k < rows; ++k) w[k] = scratch + k * cols;
    }
    if (rows == 4) {
      RowsTimesInputs<4>(w, X, static_cast<size_t>(M), cols, Y + r, ldy);
    } else {
      for (int64_t k = 0; k < rows; ++k) RowsTimesInputs<1>(w + k, X, static_cast<size_t>(M), cols, Y + r + k, ldy);
    }
    r += rows;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace qkv
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qkv {
HWY_EXPORT(MatmulSmallRange);

namespace detail {

void matmul_small(const Matrix& W, const float* X, int64_t M, float* Y) {
  constexpr int64_t kRowBlock = 4;
  const int64_t blocks = (W.rows + kRowBlock - 1) / kRowBlock;
  const size_t bytes = static_cast<size_t>(W.rows) * dtype_row_bytes(W.type, static_cast<size_t>(W.cols));
  auto* const kernel = HWY_DYNAMIC_DISPATCH(MatmulSmallRange);
#pragma omp parallel if (!omp_in_parallel() && omp_get_max_threads() > 1 && bytes >= kMinParallelBytes)
  {
    const int parts = omp_get_num_threads(), part = omp_get_thread_num();
    const int64_t b0 = blocks * part / parts, b1 = blocks * (part + 1) / parts;
    if (b0 < b1) {
      std::vector<float> scratch(W.type == DType::F32 ? 0 : kRowBlock * static_cast<size_t>(W.cols));
      kernel(W, X, M, Y, b0 * kRowBlock, std::min(W.rows, b1 * kRowBlock), scratch.data());
    }
  }
}

}  // namespace detail
}  // namespace qkv
#endif  // HWY_ONCE

// Internals of kernels/linear.cc shared with its oneDNN back end and the
// benchmarks (which compare the alternatives). Not part of the public interface.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/linear.h"

namespace qkv {

// matmul() uses the Highway small-batch kernel up to this many inputs, oneDNN above.
constexpr int64_t kMatmulSmallMaxM = 16;

namespace detail {

// How oneDNN multiplies non-F32 weights: decode weight tiles to f32 and run an
// f32 GEMM, or round weights and activations to bf16 and run bf16 x bf16 -> f32.
enum class GemmPrecision { kF32, kBF16 };

// The precision matmul() uses for W's dtype (F32 weights always use kF32).
GemmPrecision default_gemm_precision(DType t);

// Y = X·Wᵀ through oneDNN (M > 0, W checked by the caller, not inside a parallel region).
void matmul_onednn(const Matrix& W, const float* X, int64_t M, float* Y);
void matmul_onednn(const Matrix& W, const float* X, int64_t M, float* Y, GemmPrecision p);

// Rows [r0, r1) of W decoded to f32 (row stride W.cols), vectorized.
void decode_rows_f32(const Matrix& W, int64_t r0, int64_t r1, float* out);
// n floats rounded to bf16 (nearest even), vectorized.
void round_to_bf16(const float* in, size_t n, uint16_t* out);

}  // namespace detail
}  // namespace qkv

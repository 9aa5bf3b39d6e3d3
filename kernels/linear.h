// Linear layers: y = W·x with W row-major [rows][cols], each row `cols` values of
// one DType (F32, F16, BF16, Q8_0 and the ggml block types; block types need
// cols to be a multiple of their block's values). x and y are f32.
// Threads: OpenMP over rows inside each call (omp_get_max_threads()). Called by
// every thread of a running Team (kernels/threads/team.h), a call shares its rows among
// the team's threads instead, and returns on each once all of them are done.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/dtype.h"

namespace qkv {

struct Matrix {  // a read-only weight matrix
  const void* data = nullptr;
  DType type = DType::F32;
  int64_t rows = 0, cols = 0;
  // The rows laid out in row groups of 16 (kernels/quant/row_groups.h; types
  // with row_groups_layout, rows a multiple of 16): matvec reads them
  // with row_group_dot, batches of 3 or more with the packed block GEMM on
  // CPUs with AVX-512 VNNI, other batches input by input.
  bool row_groups = false;
};

// Decode: y[r] = dot(W[r], x) for every row r.
void matvec(const Matrix& W, const float* x, float* y);

// Several matrices that share one input x, in one parallel pass (Q/K/V together,
// gate and up together): ys[i] = Ws[i]·x. All Ws[i].cols must be equal.
void matvec_multi(const Matrix* Ws, float* const* ys, int count, const float* x);

// Batched: Y[m][r] = dot(W[r], X[m]) for m < M; X is [M][cols], Y is [M][rows]
// (row strides cols and rows). Prefill and batched decode.
void matmul(const Matrix& W, const float* X, int64_t M, float* Y);

// Several matrices that share one input X (Ws[i].cols all equal): Ys[i] =
// X·Ws[i]ᵀ, in one parallel pass where the kernel allows (matvec_multi for
// M = 1, the small-batch GEMM's bf16 path for M <= 16).
void matmul_multi(const Matrix* Ws, float* const* Ys, int count, const float* X, int64_t M);

// The scalar reference (fp64 accumulation, rows decoded with decode_row()).
void matmul_reference(const Matrix& W, const float* X, int64_t M, float* Y);

// Which kernel matmul() runs for 2..16 inputs (batched decode) on weights of
// type t here: "AMX bf16 tiles", "AVX512_BF16 dot products", "f32 FMA" or,
// for the ggml block types without a bf16 path, "one matvec per input"
// (`qkv info --cpu` prints it; the bf16 kernels round weights and inputs to bf16),
// or for the block types on CPUs with AVX-512 VNNI "AVX-512 VNNI integer block
// GEMM" (ggml's arithmetic, kernels/block_gemm.cc; also above 16 inputs).
const char* matmul_small_kernel_name(DType t);
// The GEMM matmul() runs for more than 16 inputs (prefill) on weights of type t:
// "oneDNN bf16", "oneDNN f32" or "AVX-512 VNNI integer block GEMM".
const char* prefill_gemm_kernel_name(DType t);

}  // namespace qkv

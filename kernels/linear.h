// Linear layers: y = W·x with W row-major [rows][cols], each row `cols` values of
// one DType (F32, F16, BF16, Q8_0 and the ggml block types; block types need
// cols to be a multiple of their block's values). x and y are f32.
// Threads: OpenMP over rows inside each call (omp_get_max_threads()). Called by
// every thread of a running Team (kernels/threads/team.h), a call shares its rows among
// the team's threads instead, and returns on each once all of them are done.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

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

// A batch's inputs quantized ahead of the matmul that reads them: the pass
// that writes rows of X (a norm, an activation) quantizes them while they are
// in its core's cache, each thread its own rows, where the integer block GEMM
// would otherwise quantize every input on every thread of the call, before
// any thread starts on its blocks (in a 16-sequence step of 143M Q4_K_M,
// 7.7% of the samples).
class QuantizedInputs {
 public:
  // Buffers for M inputs of cols values feeding the matrices Ws[0 .. count)
  // (cols equal): one per activation type of those the block GEMM takes at M
  // (none where it takes none). Allocates: call it outside a team's shares.
  void reserve(const Matrix* Ws, int count, int64_t M);
  // Rows [m0, m1) of X (the M inputs of reserve, row stride cols) quantized
  // for the reserved activation types that Ws[0 .. count) take, the matrices
  // of the next matmul handed this object, on the same X. Threads may
  // quantize disjoint ranges at once.
  void quantize_rows(const float* X, int64_t m0, int64_t m1, const Matrix* Ws, int count);
  bool empty() const { return types_.empty(); }
  // The inputs quantized as weights of type t take them, when reserved for M
  // inputs of cols values; else null.
  const uint8_t* for_type(DType t, int64_t M, int64_t cols) const;

 private:
  int64_t M_ = 0, cols_ = 0;
  std::vector<DType> types_;  // one weight type per activation type held
  std::vector<std::vector<uint8_t>> bufs_;
};

// Batched: Y[m][r] = dot(W[r], X[m]) for m < M; X is [M][cols], Y is [M][rows]
// (row strides cols and rows). Prefill and batched decode. xq: X's rows
// quantized ahead (QuantizedInputs; its contents are the caller's promise),
// read where the block GEMM runs and holds their type.
void matmul(const Matrix& W, const float* X, int64_t M, float* Y, const QuantizedInputs* xq = nullptr);

// Builds ahead what matmul(W, ...) needs for batches of up to max_rows rows,
// so that no call pays for it: oneDNN's GEMM primitives, one per row bucket
// (kernels/gemm_onednn.cc) where W's prefill goes to oneDNN. Returns how many
// it built (0 for weights the project's own kernels take, or built before).
int64_t prepare_matmul(const Matrix& W, int64_t max_rows);

// Several matrices that share one input X (Ws[i].cols all equal): Ys[i] =
// X·Ws[i]ᵀ, in one parallel pass where the kernel allows (matvec_multi for
// M = 1, the small-batch GEMM's bf16 path for M <= 16).
void matmul_multi(const Matrix* Ws, float* const* Ys, int count, const float* X, int64_t M,
                  const QuantizedInputs* xq = nullptr);

// The scalar reference (fp64 accumulation, rows decoded with decode_row()).
void matmul_reference(const Matrix& W, const float* X, int64_t M, float* Y);

// Which kernel matmul() runs for 2..16 inputs (batched decode) on weights of
// type t here: "AMX bf16 tiles", "AVX512_BF16 dot products", "f32 FMA" or,
// for the ggml block types without a bf16 path, "one matvec per input"
// (`qkv info --cpu` prints it; the bf16 kernels round weights and inputs to bf16),
// or for the block types on CPUs with AVX-512 VNNI "AVX-512 VNNI integer block
// GEMM", on AVX2 ones "AVX2 integer block GEMM, inputs in lanes from 5" (quant_gemm_name: ggml's
// arithmetic, kernels/block_gemm.cc; also above 16 inputs).
const char* matmul_small_kernel_name(DType t);
// The GEMM matmul() runs for more than 16 inputs (prefill) on weights of type t:
// "oneDNN bf16", "oneDNN f32" or an integer block GEMM's name; built
// without oneDNN (QKV_ONEDNN off), matmul_small_kernel_name's on slices of 16.
const char* prefill_gemm_kernel_name(DType t);

}  // namespace qkv

// The large-batch GEMM's entry points in a build without oneDNN (QKV_ONEDNN
// off: the aarch64 cross build, where no arm64 oneDNN package installs beside
// the amd64 one). linear.cc's takes_onednn is then false for every matrix, so
// batches above kMatmulSmallMaxM run on qkv's own kernels: the integer block
// GEMM where block_gemm_type says so, else the small-batch kernel on slices of
// at most kMatmulSmallMaxM inputs (matmul_small_or_sliced), in f32 unless the
// small-batch kernel has a bf16 path. Nothing here computes.
#include "kernels/error.h"
#include "kernels/linear_internal.h"
#include "kernels/quant/vec_dot.h"

namespace qkv {
namespace detail {

// What matmul's batches above kMatmulSmallMaxM compute in: the small-batch
// kernel's precision, which they run on.
GemmPrecision default_gemm_precision(DType t) { return matmul_small_precision(t); }

void matmul_onednn(const Matrix& W, const float*, int64_t M, float*) {
  fail("matmul: this qkv was built without oneDNN (QKV_ONEDNN=OFF); ", M, " inputs times ", dtype_name(W.type),
       " ", W.rows, "x", W.cols, " go through matmul()");
}

void matmul_onednn(const Matrix& W, const float* X, int64_t M, float* Y, GemmPrecision) {
  matmul_onednn(W, X, M, Y);
}

int64_t prepare_matmul_onednn(const Matrix&, int64_t, GemmPrecision) { return 0; }

}  // namespace detail

// The kernels batches of 16 inputs take (block GEMM, else the small-batch kernel's), per slice.
const char* prefill_gemm_kernel_name(DType t) {
  if (detail::block_gemm_type(t, kMatmulSmallMaxM + 1)) return quant_gemm_name();
  return matmul_small_kernel_name(t);
}

}  // namespace qkv

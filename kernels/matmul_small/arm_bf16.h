// The small-batch matmul of F16 and BF16 weights on aarch64 CPUs with BF16
// (Armv8.6's BFMMLA, read from AT_HWCAP2: kernels/machine/arm_features.h):
// the aarch64 counterpart of the AVX512_BF16 path (bf16-inl.h), with its
// contract and precision. Weights and inputs are rounded to bf16 (nearest
// even; F16 weights through their exact f32 value), products of two bf16
// are exact and sums are f32 (GemmPrecision::kBF16, each product within
// about 2^-8 relative). matmul_small.cc takes it for F16 and BF16 weights
// where arm_bf16_matmul_available(); the other weight types keep their paths
// (the block types: SDOT / i8mm, or the f32 FMA kernel). Prefill without
// oneDNN reaches it too, in slices of up to kMatmulSmallMaxM inputs
// (kernels/gemm_without_onednn.cc). The tiles are in arm_bf16_tiles.cc.
#pragma once

#include <cstdint>

#include "kernels/linear_internal.h"

namespace qkv {

// matmul_small_kernel_name for F16 and BF16 weights where this kernel takes them.
inline constexpr const char kArmBF16MatmulName[] = "Armv8.6 BF16 (BFMMLA) matrix multiply";

namespace detail {

// Rows per block: the threads share a matrix's rows in whole blocks.
constexpr int64_t kArmBF16Rows = 8;

// Whether this CPU and build run the kernel: an aarch64 core with BF16 and no
// ISA cap at "scalar" or "neon" (the baseline Armv8 core, which has no BF16;
// as kernels/quant/vec_dot_select.cc leaves SDOT and i8mm out). False on
// other architectures. Read at each call, so that a cap set later counts.
bool arm_bf16_matmul_available();

// One thread's share of count F16/BF16 matrices with equal cols > 0 that share
// the M inputs X (1 <= M <= kMatmulSmallMaxM): rounds X to bf16 (its own copy),
// then computes the row blocks of `block` (kArmBF16Rows) rows that it takes
// from the queue, which numbers the matrices' blocks one after the other:
// Ys[i][m * rows + r] = Ws[i] row r . X[m]. The signature of the x86 paths'
// MatmulSmallBF16, for matmul_small_multi's share_blocks.
void matmul_small_arm_bf16(const Matrix* Ws, float* const* Ys, int count, const float* X, int64_t M,
                           BlockQueue* queue, int64_t block);

}  // namespace detail
}  // namespace qkv

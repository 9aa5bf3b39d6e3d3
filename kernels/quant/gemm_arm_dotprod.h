// The Armv8.2 int8 dot product (SDOT, ACLE vdotq_s32) for the block types'
// batches on aarch64 cores without i8mm (Cortex-A76, Neoverse N1, Apple M1):
// quant_gemm without tables (kernels/quant/vec_dot.h), every output equal to
// quant_dot_rows_scalar's for its input bit for bit.
//
// The arithmetic is the SDOT matvec's (kernels/quant/vec_dot_arm_dotprod.h):
// per 32 values of one row and one input, two SDOTs give the reference's 8
// int32 lanes of 4 products, each converted to f32 and fused-multiply-added
// with the block scale d_w * d_a, the final pairwise sum in the reference's
// order. What the batch gains is the tile: 2 rows x 4 inputs, each weight
// block decoded once per tile and reused for its 4 inputs (the matvec decodes
// it once per input), each input block loaded once for the tile's 2 rows.
//
// The kernels live in gemm_arm_dotprod.cc, built with +dotprod on aarch64
// only, like the matvec; arm_dotprod_gemm_takes reads the CPU's AT_HWCAP and
// AT_HWCAP2 (kernels/machine/arm_features.h): a core with i8mm keeps its
// batches on the i8mm GEMM (gemm_arm_i8mm.h), a core without the dot product
// (Cortex-A53) never reaches these.
#pragma once

#include <cstddef>

#include "kernels/dtype.h"

namespace qkv {

// quant_gemm_name() where the SDOT GEMM takes the batches.
inline constexpr const char kArmDotprodGemmName[] = "Armv8.2 dot product (SDOT) integer block GEMM";

// Whether this build has an SDOT GEMM for t (whatever the CPU): aarch64
// builds, every block type.
bool arm_dotprod_gemm_kernel(DType t);

// Whether quant_gemm takes the SDOT GEMM for t here: arm_dotprod_gemm_kernel(t),
// a CPU with the dot product on which the i8mm GEMM does not take t, and no
// ISA cap at "scalar" or "neon" (kernels/quant/vec_dot_select.cc).
bool arm_dotprod_gemm_takes(DType t);

// quant_gemm's contract without tables (arguments already checked):
// y[m * ldy + r] = dot(row r, input m), the M inputs' activation blocks back
// to back in xa (act_bytes(t, cols) bytes each). Only on a CPU with the dot
// product: it runs SDOT. False, computing nothing, where this build has no
// SDOT GEMM for t.
bool arm_dotprod_gemm(DType t, const void* rows, size_t cols, const void* xa, size_t M, float* y, size_t ldy,
                      size_t n_rows);

}  // namespace qkv

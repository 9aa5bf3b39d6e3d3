// The Armv8.6 int8 matrix multiply (i8mm: SMMLA, ACLE vmmlaq_s32) for the
// block types' batches on aarch64: quant_gemm without tables (kernels/quant/
// vec_dot.h), every output equal to quant_dot_rows_scalar's for its input bit
// for bit, as the x86 tile kernels' (gemm_vnni-inl.h, gemm_hwy-inl.h).
//
// SMMLA multiplies a 2x8 int8 matrix by an 8x2 one into 2x2 int32 sums of 8
// products. The reference (ggml's x86 arithmetic) keeps 8 separate lanes of
// 4 products per 32 values, each converted to f32 and multiplied by the
// block's scale on its own, so an 8-product sum cannot be used whole: each
// SMMLA takes one weight row as its 2x8 operand, the row's 8 values split in
// two rows of 4 values and 4 zeros (lanes 2g and 2g + 1), and two inputs'
// same 8 values as the 8x2 operand. Its 2x2 result is then 2 lanes x 2
// inputs of exact 4-product sums: 4 SMMLAs per 32 values of one row and two
// inputs, 8 per 2x2 outputs, as many as SDOT needs (docs/design.md, aarch64
// kernels). The f32 epilogue keeps the reference's
// operations lane by lane (vec_dot.cc's Acc8), the block scales d_w * d_a
// per (row, input). What a batch gains is each weight block decoded once
// per tile of 2 rows x 4 inputs and read from memory once per call.
//
// The kernels live in gemm_arm_i8mm.cc, built with +i8mm on aarch64 only
// (Highway 1.0.3 has no int8 matrix-multiply op); arm_i8mm_takes reads the
// CPU's AT_HWCAP2 (kernels/machine/arm_features.h) so a core without the
// instruction (Cortex-A53, Cortex-A76) never reaches them.
#pragma once

#include <cstddef>

#include "kernels/dtype.h"

namespace qkv {

// quant_gemm_name() where the i8mm GEMM takes the batches.
inline constexpr const char kArmI8mmGemmName[] = "Armv8.6 i8mm (SMMLA) integer block GEMM";

// Whether this build has an i8mm GEMM for t (whatever the CPU): aarch64
// builds, every block type.
bool arm_i8mm_kernel(DType t);

// Whether quant_gemm takes the i8mm GEMM for t here: arm_i8mm_kernel(t), a
// CPU with i8mm and no ISA cap at "scalar" (kernels/quant/vec_dot_select.cc).
bool arm_i8mm_takes(DType t);

// quant_gemm's contract without tables (arguments already checked):
// y[m * ldy + r] = dot(row r, input m), the M inputs' activation blocks back
// to back in xa (act_bytes(t, cols) bytes each). Only where
// arm_i8mm_takes(t): it runs SMMLA. False, computing nothing, where this
// build has no i8mm kernel for t.
bool arm_i8mm_gemm(DType t, const void* rows, size_t cols, const void* xa, size_t M, float* y, size_t ldy,
                   size_t n_rows);

}  // namespace qkv

// The Armv8.2 int8 dot product (SDOT, ACLE vdotq_s32) for the block types'
// matvec on aarch64: quant_dot_rows' arithmetic with the block's integer sums
// in SDOT's four int32 lanes. SDOT lane i of a 16-byte product sums bytes
// 4i..4i+3, so the two products of a 32-value block are exactly the 8 lanes
// (k % 32) / 4 of the scalar reference (kernels/quant/vec_dot.h); their f32
// conversion, the fused multiply-add with the block scale and the final
// pairwise sum follow it operation by operation: every output equals
// quant_dot_rows_scalar's bit for bit.
//
// The kernels live in vec_dot_arm_dotprod.cc (the weights' NEON decoders in
// arm_neon_blocks.h, shared with the i8mm GEMM), built with +dotprod on aarch64
// only (Highway 1.0.3 has no int8 dot-product op); the selection here reads
// the CPU's AT_HWCAP (kernels/machine/arm_features.h) so a core without the
// instruction (Cortex-A53) never reaches them and keeps the scalar kernels.
#pragma once

#include <cstddef>

#include "kernels/dtype.h"

namespace qkv {

// Whether quant_dot_rows takes the SDOT kernel for t here: an aarch64 build,
// a CPU with the dot product, no ISA cap at "scalar", and t a block type
// (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS).
bool arm_dotprod_takes(DType t);

// y[r] = dot(row r, xa) for n_rows rows (quant_dot_rows' contract, arguments
// already checked). Only where arm_dotprod_takes(t): it runs SDOT. False,
// computing nothing, where this build has no SDOT kernel for t.
bool arm_dotprod_dot_rows(DType t, const void* rows, size_t cols, const void* xa, float* y, size_t n_rows);

// Whether this build has an SDOT kernel for t (whatever the CPU).
bool arm_dotprod_kernel(DType t);

// What quant_dot_rows runs for t on an aarch64 core, for qkv info --cpu:
// "SDOT int8 dot product" or "scalar (why)" (Highway's NEON target has no
// block kernel; the scalar one is the reference).
const char* arm_matvec_kernel_name(DType t);

}  // namespace qkv

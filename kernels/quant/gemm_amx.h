// Batches of the ggml block types on AMX int8 tiles (TDPBUSD), where the CPU
// has AMX-INT8 (Xeon Sapphire Rapids and later) under the ISA cap
// (kernels/machine/isa_cap.h: QKV_ISA=avx512-vnni keeps them off) and Linux
// grants the tile state. Every quantized type (Q4_0 .. Q6_K, IQ4_NL, IQ4_XS,
// Q8_0), weights in rows or in row groups (kernels/quant/row_groups.h; each
// group turned back into its rows before the unpacking).
//
// y[m * ldy + r] = dot(row r, input m) for n_rows rows of `cols` values of
// type t and M inputs, xa holding the inputs' quantize_activation(t, ...)
// blocks back to back, as quant_gemm. Each weight is unpacked once per call
// (to unsigned bytes in 16-row tiles), each sub-block of 16 rows x 16 inputs
// is one TDPBUSD into int32 sums, and the scales are applied in an f32
// epilogue in the packed VNNI GEMM's order: every output equals that
// kernel's (quant_gemm with tables) bit for bit, and so differs from
// quant_dot_rows' by f32 rounding only (kernels/quant/gemm_amx_kernel-inl.h
// says why the matvec's 8-lane order is out of reach).
#pragma once

#include <cstddef>

#include "kernels/dtype.h"

namespace qkv {

// Inputs from which block_gemm takes the AMX kernel: a full C tile of 16
// inputs (below, the tile products run partly empty while the unpacking per
// call stays). Chosen, not measured: to be measured on an AMX host
// (bench_linear '^matmul(_amx)?/...' beside the VNNI rows).
constexpr size_t kQuantGemmAmxMinInputs = 16;

// Whether the AMX kernel covers t (on any CPU; the model runs it anywhere).
bool quant_gemm_amx_type(DType t);
// Whether the AMX kernel runs here: cpu_features().amx_int8, Linux's grant
// of the tile state (asked once; refused: one note on stderr and the VNNI
// kernels stay), and not set_quant_gemm_amx(false).
bool quant_gemm_amx_usable();
void set_quant_gemm_amx(bool allowed);
// Tests: with true, quant_gemm_amx runs the kernel on the model of the
// instructions and quant_gemm_amx_usable says yes on any CPU, so that
// block_gemm's AMX path (its row blocks, panels and threads) runs here.
void set_quant_gemm_amx_on_model(bool on_model);
// Calls of quant_gemm_amx so far (tests: which path block_gemm took).
size_t quant_gemm_amx_calls();
// Whether a batch of M inputs of W's type (rows, or row groups) takes it:
// from kQuantGemmAmxMinInputs where quant_gemm_amx_usable.
bool quant_gemm_amx_takes(DType t, size_t M, bool row_groups);
// On the tile instructions; throws qkv::Error unless quant_gemm_amx_usable().
// row_groups: rows holds n_rows / kRowGroup row groups (types with row_groups_layout).
void quant_gemm_amx(DType t, const void* rows, size_t cols, const void* xa, size_t M, float* y, size_t ldy,
                    size_t n_rows, bool row_groups = false);
// The same kernel on the scalar model of the instructions
// (kernels/quant/gemm_amx_model.h), on any CPU: the same results.
void quant_gemm_amx_model(DType t, const void* rows, size_t cols, const void* xa, size_t M, float* y, size_t ldy,
                          size_t n_rows, bool row_groups = false);
// The arguments' checks both make (qkv::Error naming the problem).
void check_quant_gemm_amx_args(const char* what, DType t, size_t cols, size_t M, size_t ldy, size_t n_rows,
                               bool row_groups);
// "AMX int8 tiles", or why not ("no AMX-INT8 on this CPU", ...).
const char* quant_gemm_amx_status();

}  // namespace qkv

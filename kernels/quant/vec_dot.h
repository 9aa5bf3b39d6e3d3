// Dot products of quantized weight rows with quantized activations, with
// ggml's x86 arithmetic (its AVX2 vec_dot / llamafile tinyBLAS kernels): per
// block, exact int32 sums in 8 lanes (lane l takes the values k with
// (k % 32) / 4 == l), each lane converted to f32 and fused-multiply-added with
// the block's combined scale into 8 f32 accumulators, which are summed at the
// end as (a0 + a4 + a2 + a6) + (a1 + a5 + a3 + a7) pairwise. The mins of
// Q4_1/Q5_1/Q2_K/Q4_K/Q5_K are accumulated as ggml does for each type.
// On targets without FMA (SSE4, SCALAR) the fused operations come from libm:
// the same results, slower.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/dtype.h"

namespace qkv {

// The activation block type ggml multiplies weights of type t with.
enum class ActType { kQ8_0, kQ8_1, kQ8_K };
ActType act_type(DType t);  // t quantized
// Bytes of n activation values quantized for weights of type t (n % block == 0).
size_t act_bytes(DType t, size_t n);
// x (n values) into act_bytes(t, n) bytes at out.
void quantize_activation(DType t, const float* x, size_t n, void* out);

// y[i] = dot(row i, xa) for n_rows rows of `cols` values of type t at rows
// (row stride dtype_row_bytes(t, cols)); xa from quantize_activation(t, ...).
// AVX-512 VNNI kernels where the CPU has them (kernels/quant/vec_dot_vnni-inl.h),
// the AVX-VNNI ones on AVX2 CPUs with it (kernels/quant/vec_dot_avxvnni.h),
// 256-bit vpmaddubsw kernels on AVX2 / AVX-512 without VNNI
// (kernels/quant/vec_dot_hwy-inl.h), the Armv8 SDOT kernels on aarch64 cores
// with the dot product (kernels/quant/vec_dot_arm_dotprod.h), else the scalar
// ones; all give the same results.
void quant_dot_rows(DType t, const void* rows, size_t cols, const void* xa, float* y, size_t n_rows);
// The same with the scalar kernels on any CPU (the reference for the SIMD ones).
void quant_dot_rows_scalar(DType t, const void* rows, size_t cols, const void* xa, float* y, size_t n_rows);

// Batches: y[m * ldy + r] = dot(row r, input m) for n_rows rows and M inputs,
// xa holding the M inputs' quantize_activation(t, ...) blocks back to back
// (act_bytes(t, cols) bytes each). Each weight block is unpacked once per tile
// of rows x inputs (kernels/quant/gemm_vnni-inl.h); every output equals
// quant_dot_rows for its input bit for bit. Only where quant_gemm_available(t):
// CPUs with AVX-512 VNNI, every quantized t (Q8_0 included).
// With tables (from quant_gemm_tables on the same xa), the packed-weight
// kernel instead (kernels/quant/gemm_vnni_packed-inl.h: rows in lanes, each
// row block decoded once for all the inputs): the same integer sums and
// ggml's f32 terms in another order, so its outputs differ from
// quant_dot_rows' by f32 rounding only. The tables hold the inputs
// interleaved in tiles of kQuantGemmTileInputs and the packed kernel reads
// them alone (not xa): a call may take the inputs [m0, m0 + M) of the batch
// they were made for, the table pointer at input m0, when m0 is a multiple
// of kQuantGemmTileInputs and m0 + M is one too or the batch's end. quant_gemm_packed(M) says whether a
// batch of M inputs takes it: from kQuantGemmPackedMinInputs (below, the
// decoding outweighs the dot products: 143M Q4_K_M, 2 sequences, 14.1 ms a
// step against 11.3 ms for two single steps, so batches of 2 of the ggml
// block types go input by input through quant_dot_rows), never after
// set_quant_gemm_packed(false) (tests and benchmarks), and only where
// quant_gemm_available.
// Batches of kQuantGemmLanesMinInputs (the 32-value types) or
// kQuantGemmLanesMinInputsK (the K-quants) to kQuantGemmLanesMaxInputs inputs
// take the inputs-in-lanes kernel instead where quant_gemm_lanes(t, M)
// (kernels/quant/gemm_vnni_lanes-inl.h: no transposition of the weights; the
// same f32 operations per output as the packed kernel, so the same results):
// its tables cover the whole batch, which a call must then take whole.
// `batch`: the inputs the tables were made for (0: M), whose count chose their layout.
// row_groups: rows holds n_rows / kRowGroup row groups (kernels/quant/row_groups.h,
// types with row_groups_layout), which the packed kernel reads in place
// of rows, without transposing them (the same results as on the rows); its
// tables then in the packed layout whatever M (quant_gemm_tables with lanes false).
bool quant_gemm_available(DType t);
// Whether quant_gemm without tables (the tile kernel, on rows) runs t here:
// where quant_gemm_available, and on CPUs with AVX2 but no AVX-512 VNNI the
// 256-bit GEMM (kernels/quant/gemm_hwy-inl.h: every output equal to
// quant_dot_rows' bit for bit, as the VNNI tile kernel's; with AVX-VNNI its
// vpdpbusd tiles, kernels/quant/vec_dot_avxvnni.h). Those CPUs have no
// packed kernel (quant_gemm_packed is false) and no row groups.
bool quant_gemm_rows_available(DType t);
// The name of the GEMM quant_gemm runs here ("AVX-512 VNNI integer block
// GEMM", "AVX-VNNI integer block GEMM, inputs in lanes from 5", "AVX2
// integer block GEMM, inputs in lanes from 5" (kernels/quant/gemm_avx2_lanes.h),
// "AVX2 integer block GEMM"; "none"),
// or, where block_gemm takes the AMX kernel (kernels/quant/gemm_amx.h), "AMX
// int8 tiles from 16 inputs, ...".
const char* quant_gemm_name();
void quant_gemm(DType t, const void* rows, size_t cols, const void* xa, size_t M, float* y, size_t ldy,
                size_t n_rows, const float* tables = nullptr, size_t batch = 0, bool row_groups = false);
// The tables of a batch of M inputs for weights of type t (the layout of the
// kernel that the batch takes; lanes false: the packed kernel's whatever M):
// quant_gemm_table_floats(t, cols, M, lanes) floats.
size_t quant_gemm_table_floats(DType t, size_t cols, size_t M, bool lanes = true);
void quant_gemm_tables(DType t, const void* xa, size_t cols, size_t M, float* tables, bool lanes = true);
constexpr size_t kQuantGemmPackedMinInputs = 3;
constexpr size_t kQuantGemmTileInputs = 6;
constexpr size_t kQuantGemmLanesMinInputs = 8;
constexpr size_t kQuantGemmLanesMinInputsK = 12;
constexpr size_t kQuantGemmLanesMaxInputs = 16;
bool quant_gemm_packed(size_t M);
void set_quant_gemm_packed(bool allowed);
bool quant_gemm_lanes(DType t, size_t M);
void set_quant_gemm_lanes(bool allowed);
// Batches of 2 .. kQuantGemmFewMaxInputs inputs of the 256-value types take
// the tile kernel in one pass where quant_gemm_few(t, M) (quant_gemm without
// tables; kernels/quant/gemm_vnni-inl.h KFewVnni: each row against every
// input, each block unpacked once; every output equal to quant_dot_rows' bit
// for bit), not the packed kernel, whose decoding outweighs a few inputs'
// dot products, nor one matvec per input, which reads the weights M times: a
// 5632x2048 Q4_K matrix streamed from memory, 2 threads, 5 inputs: 0.57 ms
// against 0.93 (packed) and 0.74 (per input), 0.26 for one input
// (bench_linear '^verify_stream(_nofew|_per_input)?/q4_k/5632x2048/[0-9]+/2').
// Never after set_quant_gemm_few(false) (tests and benchmarks).
constexpr size_t kQuantGemmFewMaxInputs = 11;
static_assert(kQuantGemmFewMaxInputs < kQuantGemmLanesMinInputsK, "the lanes kernel takes the K-quants' larger batches");
bool quant_gemm_few(DType t, size_t M);
void set_quant_gemm_few(bool allowed);

}  // namespace qkv

// Row groups: 16 weight rows of a block type interleaved so that one 512-bit
// register holds the same 4 bytes of the same block of all 16 rows (rows
// along the lanes), for a decode matvec without horizontal sums or per-row
// scale gathers.
//
// Layout of a group of kRowGroup rows of `cols` values: for each block column
// i (cols / block values of them) the 16 rows' blocks i as 16 x block_bytes
// bytes: first each 2-byte field (d; Q4_1 / Q5_1: then m; Q4_K / Q5_K: then
// dmin) of the 16 rows side by side (32 bytes a field), then the rest of the
// block in order (qh, qs; the K-quants' scales first) in 4-byte words, word j
// of the 16 rows side by side (64 bytes a word). A group takes
// exactly the bytes of its 16 rows, so a matrix of whole groups keeps its
// size and row r0 of a group starts where it did (r0 * row_bytes).
//
// Arithmetic of row_group_dot, per row, over the 32-value blocks in order:
//   acc = fma(float(isum_i), dw_i * da_i, acc)   [Q4_1 / Q5_1: then
//   acc = fma(mw_i, sa_i, acc)],   y = acc,
// isum_i the exact integer dot product of the block's values (ggml's
// integers: Q4_0 nibble - 8, Q5_0 five bits - 16, Q4_1 / Q5_1 unsigned,
// IQ4_NL's table) with the activation block's int8 values, dw_i and da_i the
// f16 scales of the weight and activation blocks (Q8_0, or Q8_1 with its
// sum sa_i for the types with a min mw_i). Over the K-quants' super-blocks,
// against Q8_K (da its f32 scale), per sub-block j of 32 values (Q4_K, Q5_K):
//   acc = fma(float(isum_j), da * (d * sc_j), acc),
//   acc = fma(da * float(asum_j), -dmin * m_j, acc),
// asum_j the sub-block's activation sum; Q6_K sums its 16 sub-blocks of 16
// in integers first: acc = fma(float(sum_j sc_j * isum_j), da * d, acc).
// These are the packed block GEMM's terms in its order
// (kernels/quant/gemm_vnni_packed-inl.h), so a row group's outputs equal it
// bit for bit; they are not quant_dot_rows' order (8 lanes per block, ggml's
// AVX2 kernels): the two differ by f32 rounding.
#pragma once

#include <cstddef>

#include "kernels/dtype.h"

namespace qkv {

constexpr size_t kRowGroup = 16;

// Whether t has the row-group layout (the 32-value block types: Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0, IQ4_NL; and Q4_K, Q5_K, Q6_K); row_group_dot computes
// with every one.
bool row_groups_layout(DType t);

// n_rows rows of `cols` values (row-major, n_rows a multiple of kRowGroup)
// into the row-group layout at out, and back. out must not overlap rows.
void pack_row_groups(DType t, const void* rows, size_t n_rows, size_t cols, void* out);
void unpack_row_groups(DType t, const void* groups, size_t n_rows, size_t cols, void* rows);
// Row r of the matrix whose groups start at `groups`, as its row bytes
// (dtype_row_bytes(t, cols) of them) at row.
void row_group_row(DType t, const void* groups, size_t cols, size_t r, void* row);

// y[16 g + r] = dot(row r of group g, xa) for n_groups groups at `groups`
// (each kRowGroup * dtype_row_bytes(t, cols) bytes); xa from
// quantize_activation(t, ...). AVX-512 VNNI where the CPU has it, else AVX2
// for Q4_0, Q4_1, Q5_0 and Q5_1 (row_groups_avx2-inl.h), else the scalar
// kernel; all give the same results (kernels/quant/vec_dot.cc).
void row_group_dot(DType t, const void* groups, size_t cols, const void* xa, float* y, size_t n_groups);
// Whether row_group_dot has a SIMD kernel for t on this CPU (under the ISA cap).
bool row_group_dot_simd(DType t);
// Whether models lay t's matrices out in row groups on this CPU: a 32-value
// type (the K-quants' group matvec is slower than their row kernel from
// DRAM, docs/design.md) whose group matvec has a SIMD kernel and whose
// batches one on groups (AVX-512 VNNI's packed GEMM, or the 256-bit
// inputs-in-lanes kernel).
bool row_groups_chosen(DType t);
// The scalar kernel on any CPU (the reference for the SIMD one).
void row_group_dot_scalar(DType t, const void* groups, size_t cols, const void* xa, float* y, size_t n_groups);

}  // namespace qkv

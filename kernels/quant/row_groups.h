// Row groups: 16 weight rows of a 32-value block type interleaved so that one
// 512-bit register holds the same 4 bytes of the same block of all 16 rows
// (rows along the lanes), for a decode matvec without horizontal sums or
// per-row scale gathers.
//
// Layout of a group of kRowGroup rows of `cols` values: for each block column
// i (cols / 32 of them) the 16 rows' blocks i as 16 x block_bytes bytes:
// first each 2-byte field (d; Q4_1 / Q5_1: then m) of the 16 rows side by
// side (32 bytes a field), then the rest of the block (qh, qs) in 4-byte
// words, word j of the 16 rows side by side (64 bytes a word). A group takes
// exactly the bytes of its 16 rows, so a matrix of whole groups keeps its
// size and row r0 of a group starts where it did (r0 * row_bytes).
//
// Arithmetic of row_group_dot, per row, over the blocks in order:
//   acc = fma(float(isum_i), dw_i * da_i, acc),   y = acc,
// isum_i the exact integer dot product of the block's values (ggml's
// integers: Q4_0 nibble - 8, IQ4_NL's table) with the activation block's
// int8 values, dw_i and da_i the f16 scales of the weight and activation
// blocks. This is not quant_dot_rows' order (8 lanes per block, ggml's AVX2
// kernels): the two differ by f32 rounding.
#pragma once

#include <cstddef>

#include "kernels/dtype.h"

namespace qkv {

constexpr size_t kRowGroup = 16;

// Whether t has the row-group layout (the 32-value block types) and whether
// row_group_dot computes with it (Q4_0, IQ4_NL).
bool row_groups_layout(DType t);
bool row_group_dot_available(DType t);

// n_rows rows of `cols` values (row-major, n_rows a multiple of kRowGroup)
// into the row-group layout at out, and back. out must not overlap rows.
void pack_row_groups(DType t, const void* rows, size_t n_rows, size_t cols, void* out);
void unpack_row_groups(DType t, const void* groups, size_t n_rows, size_t cols, void* rows);

// y[16 g + r] = dot(row r of group g, xa) for n_groups groups at `groups`
// (each kRowGroup * dtype_row_bytes(t, cols) bytes); xa from
// quantize_activation(t, ...). AVX-512 VNNI where the CPU has it, else the
// scalar kernel; both give the same results.
void row_group_dot(DType t, const void* groups, size_t cols, const void* xa, float* y, size_t n_groups);
// The scalar kernel on any CPU (the reference for the SIMD one).
void row_group_dot_scalar(DType t, const void* groups, size_t cols, const void* xa, float* y, size_t n_groups);

}  // namespace qkv

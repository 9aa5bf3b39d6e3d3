// The BFMMLA tiles of the small-batch matmul on aarch64 CPUs with BF16
// (kernels/matmul_small/arm_bf16.h says when they run). They live in
// arm_bf16_tiles.cc, the one file built with +bf16 (kernels/CMakeLists.txt):
// plain functions over arrays, nothing else of the library, so that no copy
// of a shared inline function compiled with Armv8.2+ instructions can reach
// a core without them. Callers check sizes and pointers; only aarch64 builds
// define these.
#pragma once

#include <cstddef>
#include <cstdint>

namespace qkv {
namespace arm_bf16 {

// Weight rows per block: 4 row pairs (the 2-row A operand of BFMMLA).
constexpr size_t kBlockRows = 8;

// uint16_t values (bf16) that pack_inputs writes for M inputs of cols values.
size_t packed_inputs_size(size_t M, size_t cols);

// The M inputs X (M x cols f32, row-major) rounded to bf16 (BFCVTN: nearest
// even) in the tiles' layout (arm_bf16_tiles.cc), zero past the last column
// and, for odd M, as the missing second input of the last pair.
void pack_inputs(const float* X, size_t M, size_t cols, uint16_t* out);

// Y[m * ldy + r] = w_r . x_m for r < rows, m < M: w the rows of F16 (f16)
// or BF16 weights at w (row stride cols), xp from pack_inputs. Weights are
// rounded to bf16 (nearest even; F16 through its exact f32 value) a block of
// kBlockRows rows at a time, for all inputs; products and sums by BFMMLA.
void matmul_rows(bool f16, const uint16_t* w, size_t cols, size_t rows, const uint16_t* xp, size_t M, float* Y,
                 size_t ldy);

}  // namespace arm_bf16
}  // namespace qkv

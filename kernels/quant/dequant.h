// Scalar dequantization of ggml block types to f32, bit-identical with ggml's
// dequantize_row_* (the same float operations in the same order; this file is
// compiled without FMA contraction, see kernels/CMakeLists.txt).
#pragma once

#include <cstddef>

#include "kernels/dtype.h"

namespace qkv {

// n values (n % dtype_block_values(t) == 0) of quantized type t at src into dst.
void dequantize_row(DType t, const void* src, size_t n, float* dst);

// One block of each type (kValues floats out).
void dequantize_block(const BlockQ4_0& b, float* y);
void dequantize_block(const BlockQ4_1& b, float* y);
void dequantize_block(const BlockQ5_0& b, float* y);
void dequantize_block(const BlockQ5_1& b, float* y);
void dequantize_block(const BlockQ8_0& b, float* y);
void dequantize_block(const BlockQ2_K& b, float* y);
void dequantize_block(const BlockQ3_K& b, float* y);
void dequantize_block(const BlockQ4_K& b, float* y);
void dequantize_block(const BlockQ5_K& b, float* y);
void dequantize_block(const BlockQ6_K& b, float* y);
void dequantize_block(const BlockIQ4_NL& b, float* y);
void dequantize_block(const BlockIQ4_XS& b, float* y);

}  // namespace qkv

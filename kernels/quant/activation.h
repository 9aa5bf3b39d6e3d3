// Matmul inputs quantized as ggml's x86 CPU back end quantizes them for each
// weight type's vec_dot_type (Q8_0 for Q4_0/Q5_0/Q8_0/IQ4_NL, Q8_1 for
// Q4_1/Q5_1, Q8_K for the K-quants and IQ4_XS):
//
//   Q8_0, Q8_1 (32 values): amax = max|x|, d = amax / 127 (stored as f16),
//     q = round-half-even(x * (127 / amax)) (0 when amax is 0); Q8_1 also
//     stores s = f16(d * sum(q)) with d the unrounded f32 scale.
//   Q8_K (256 values): max = the x of largest |x| (first one on ties),
//     iscale = -127 / max, q = min(127, round-half-even(iscale * x)),
//     d = 1 / iscale (f32), bsums = sums of 16 q; an all-zero block is d = 0.
#pragma once

#include <cstddef>

#include "kernels/quant/blocks.h"

namespace qkv {

// n % 32 == 0 (Q8_0, Q8_1) or n % 256 == 0 (Q8_K) values of x into n / kValues
// blocks, on the best SIMD target of the CPU.
void quantize_row_q8_0(const float* x, size_t n, BlockQ8_0* y);
void quantize_row_q8_1(const float* x, size_t n, BlockQ8_1* y);
void quantize_row_q8_K(const float* x, size_t n, BlockQ8_K* y);

// The scalar reference of each: the same bytes for every input.
void quantize_row_q8_0_scalar(const float* x, size_t n, BlockQ8_0* y);
void quantize_row_q8_1_scalar(const float* x, size_t n, BlockQ8_1* y);
void quantize_row_q8_K_scalar(const float* x, size_t n, BlockQ8_K* y);

}  // namespace qkv

// Float -> ggml block quantizers, byte-identical with the reference
// quantization llama.cpp's llama-quantize writes without an importance matrix
// (ggml's quantize_row_*_ref for Q4_0 ... Q6_K, and the non-linear search of
// quantize_iq4_nl / quantize_iq4_xs with its 7 scale trials). The float
// operations and their order follow ggml's exactly; these files are compiled
// without FMA contraction (kernels/CMakeLists.txt), so every product and sum
// rounds on its own as ggml's do.
//
// Scalar by design: a tensor is quantized once, and callers split rows over
// threads (runtime/quantize_model.cc). Blocks are independent, so any split of
// a row's blocks gives the same bytes.
#pragma once

#include <cstddef>

#include "kernels/dtype.h"

namespace qkv {

// n values (n % dtype_block_values(t) == 0, else qkv::Error) into type t at dst
// (dtype_row_bytes(t, n) bytes). F32, F16 and BF16 convert element by element
// (round to nearest even), the block types quantize block by block.
void quantize_row(DType t, const float* src, size_t n, void* dst);

// One block of each type from kValues floats.
void quantize_block(const float* x, BlockQ4_0* y);
void quantize_block(const float* x, BlockQ4_1* y);
void quantize_block(const float* x, BlockQ5_0* y);
void quantize_block(const float* x, BlockQ5_1* y);
void quantize_block(const float* x, BlockQ8_0* y);
void quantize_block(const float* x, BlockQ2_K* y);
void quantize_block(const float* x, BlockQ3_K* y);
void quantize_block(const float* x, BlockQ4_K* y);
void quantize_block(const float* x, BlockQ5_K* y);
void quantize_block(const float* x, BlockQ6_K* y);
void quantize_block(const float* x, BlockIQ4_NL* y);
void quantize_block(const float* x, BlockIQ4_XS* y);

}  // namespace qkv

// Batch inputs of the ggml block types as ggml's activation blocks hold them.
//
// llama.cpp multiplies a block-type weight with its input quantized to int8
// blocks (Q8_0 / Q8_1 for the 32-value types, Q8_K for the K-quants and
// IQ4_XS: kernels/quant/activation.h). The batch GEMMs (bf16 on decoded
// weights) take each input through the same quantization and back to f32
// first, so that their products carry the same activation error as
// llama.cpp's (the GEMM then adds only its own rounding). Measured mean KL
// divergence from llama.cpp's logits (tinystories-3M, 20 chunks of 128, bf16
// GEMMs): the K-quant presets 1.7e-4 without this, which for Q4_K_M is 12% of
// its own divergence from F32.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/dtype.h"

namespace qkv {
namespace detail {

// out[m] = x[m] (M inputs of cols values) quantized as ggml quantizes the
// input of a type-t weight (t a ggml block type but Q8_0, cols a multiple of
// its block), then dequantized: d * q per value (Q8_0, Q8_1, Q8_K blocks).
void activation_round_trip(DType t, const float* X, int64_t M, size_t cols, float* out);

}  // namespace detail
}  // namespace qkv

// Small element-wise and row-wise kernels of a llama-style decoder.
#pragma once

#include <cstddef>
#include <cstdint>

namespace qkv {

// out = x / sqrt(mean(x²) + eps) * w, for M rows of n (x and out may alias).
void rmsnorm(const float* x, const float* w, float* out, size_t n, float eps, size_t M = 1);

// RoPE, adjacent pairs as in llama2.c and GGUF `llama`: for each of n_heads heads
// of head_dim values in x (contiguous, head after head) and k < rope_dim/2,
// theta = pos * base^(-2k/rope_dim); (x[2k], x[2k+1]) is rotated by theta.
void rope(float* x, size_t n_heads, size_t head_dim, size_t rope_dim, int64_t pos, float base);
// rope() in two steps, so that a position's angles are computed once for every
// layer: cs[2k], cs[2k+1] = cos, sin of theta_k (rope_dim floats), then the
// rotation of n_heads heads by them. rope() is exactly these two.
void rope_angles(size_t rope_dim, int64_t pos, float base, float* cs);
void rope_rotate(float* x, size_t n_heads, size_t head_dim, size_t rope_dim, const float* cs);

// In-place numerically stable softmax of n values.
void softmax(float* x, size_t n);

// gate[i] = silu(gate[i]) * up[i], silu(z) = z / (1 + e^-z).
void silu_mul(float* gate, const float* up, size_t n);

// y[i] += x[i].
void add_inplace(float* y, const float* x, size_t n);

}  // namespace qkv

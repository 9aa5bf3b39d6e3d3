// Small element-wise and row-wise kernels of a transformer (decoder and encoder).
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

// Which dims a rotation pair k < rope_dim/2 takes: (2k, 2k+1) (llama2.c, GGUF
// `llama`) or (k, k + rope_dim/2) (GPT-NeoX style: qwen2/3, phi3, gemma).
enum class RopeStyle { Adjacent, Neox };

// The general angle table: theta_k = pos * base^(-2k/rope_dim) * freq_scale /
// factors[k] (factors may be null: all 1), cs = cos, sin of theta_k, times
// attn_factor. With freq_scale = attn_factor = 1 and no factors it is
// rope_angles() exactly.
struct RopeParams {
  float base = 10000.0f;
  float freq_scale = 1.0f;
  float attn_factor = 1.0f;
  const float* factors = nullptr;  // [rope_dim/2] or null
};
void rope_angles(size_t rope_dim, int64_t pos, const RopeParams& p, float* cs);
void rope_rotate(float* x, size_t n_heads, size_t head_dim, size_t rope_dim, const float* cs, RopeStyle style);

// LayerNorm as ggml_norm then the weight and bias (bert): for M rows of n,
// out = (x - mean(x)) / sqrt(var(x) + eps) * w + b, var the mean of the
// squared deviations (x and out may alias).
void layernorm(const float* x, const float* w, const float* b, float* out, size_t n, float eps, size_t M = 1);

// In-place numerically stable softmax of n values.
void softmax(float* x, size_t n);

// gate[i] = silu(gate[i]) * up[i], silu(z) = z / (1 + e^-z).
void silu_mul(float* gate, const float* up, size_t n);

// gate[i] = gelu(gate[i]) * up[i], gelu the tanh form
// 0.5 z (1 + tanh(sqrt(2/pi) (z + 0.044715 z³))), computed in f32 (no table).
void gelu_tanh_mul(float* gate, const float* up, size_t n);

// GELU in place as llama.cpp's CPU backend computes it (ggml-cpu's
// GGML_GELU_FP16): x <= -10 gives 0, x >= 10 gives x, otherwise the table
// entry of x rounded to fp16, which holds fp16(gelu_tanh(that fp16 value)),
// gelu_tanh(z) = 0.5 z (1 + tanh(sqrt(2/pi) z (1 + 0.044715 z²))) in float.
void gelu_f16_table(float* x, size_t n);

// Soft-capping in place: x[i] = cap * tanh(x[i] / cap) (cap > 0).
void softcap(float* x, size_t n, float cap);

// y[i] += x[i].
void add_inplace(float* y, const float* x, size_t n);

}  // namespace qkv

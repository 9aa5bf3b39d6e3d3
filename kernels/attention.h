// Scaled dot-product attention: out = softmax(Q·Kᵀ·scale + mask)·V.
//
// With a soft-cap (AttentionOptions::softcap = c > 0) the scores are
// c * tanh(Q·Kᵀ·scale / c) + mask: the cap applies to the scaled score.
//
// Shapes: batch B, query heads Hq, key/value heads Hkv (Hq % Hkv == 0; query head
// h reads KV head h / (Hq/Hkv): MHA is Hkv == Hq, MQA is Hkv == 1, GQA between),
// query length Lq, key length Lk, head dim d.
//
// Every tensor is a strided view, so K and V can be read straight out of a KV
// cache: row (b, h, i) of a view starts at
//   data + b*batch_stride + h*head_stride + i*row_stride
// and its d elements are contiguous. Q and out are f32 with strides in floats;
// K and V are of one DType (the same for both) with strides in bytes (Q8_0
// needs d % 32 == 0). Positions (q_pos0 and its per-batch form) are >= 0.
//
// Precision: f32 arithmetic on the stored K/V values, except decode (a few query
// rows per KV head) over a Q8_0 cache on AVX-512 VNNI CPUs, where the scaled query
// is quantized per 32-value block like llama.cpp's q8_0 activations (each element
// moves by <= max|block| / 254) and Q·K is an exact integer dot product.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/dtype.h"

namespace qkv {

struct QueryView {  // f32, strides in floats
  const float* data = nullptr;
  int64_t batch_stride = 0, head_stride = 0, row_stride = 0;
};

struct OutputView {  // f32, strides in floats
  float* data = nullptr;
  int64_t batch_stride = 0, head_stride = 0, row_stride = 0;
};

struct KVView {  // any DType, strides in bytes
  const void* data = nullptr;
  DType type = DType::F32;
  int64_t batch_stride = 0, head_stride = 0, row_stride = 0;
};

// Which keys a query may see. The parts combine (a key is visible only if every
// part allows it). A query row whose keys are all masked gets zeros, never NaN.
struct AttentionMask {
  // Causal: query i sits at position q_pos0 + i and sees keys 0 .. q_pos0 + i.
  bool causal = false;
  int64_t q_pos0 = 0;
  // Per-batch-row override of q_pos0 ([B] entries), for batched decode where each
  // sequence is at its own position. nullptr: q_pos0 for every row.
  const int64_t* q_pos0_per_batch = nullptr;
  // Sliding window (> 0): the query at position p sees only keys p - window + 1 .. p
  // (and, without causal, keys up to p + window - 1). Positions as for causal.
  int64_t window = 0;
  // Additive float mask [Lq][Lk] (row stride additive_row_stride, default Lk),
  // shared across batch and heads; entries like 0, -1e9 or -inf.
  const float* additive = nullptr;
  int64_t additive_row_stride = 0;
  // Key padding [B][Lk] (batch stride key_padding_batch_stride, default Lk):
  // a nonzero byte masks that key for that batch row.
  const uint8_t* key_padding = nullptr;
  int64_t key_padding_batch_stride = 0;
  // Per-batch-row key count ([B] entries, each <= Lk): keys at or past it do not
  // exist for that row (sequences of different lengths in one cache). nullptr: Lk.
  const int64_t* kv_len_per_batch = nullptr;
};

struct AttentionShape {
  int64_t B = 1, Hq = 1, Hkv = 1, Lq = 1, Lk = 1, d = 1;
};

struct AttentionOptions {
  float scale = 0.0f;  // 0: 1/sqrt(d)
  // Score soft-capping (> 0, gemma2's attn_logit_softcapping): each scaled score
  // s becomes softcap * tanh(s / softcap) before the mask and the softmax.
  // 0: off. Finite and >= 0.
  float softcap = 0.0f;
  int threads = 0;     // 0: OpenMP's current maximum; in a Team (kernels/threads/team.h) its threads share
                       // the call (each thread makes it) and this is ignored
  // Optional outputs. weights: [B][Hq][Lq][Lk] dense f32 (this takes the
  // materialized path, documented as such); lse: [B][Hq][Lq] log-sum-exp of the
  // scaled, soft-capped, masked scores (-inf for a fully masked row).
  float* weights = nullptr;
  float* lse = nullptr;
};

// The production kernel: Highway SIMD, blocked streaming (online) softmax; the
// Lq×Lk score matrix never exists. Throws qkv::Error on bad arguments.
void attention(const AttentionShape& shape, const QueryView& q, const KVView& k, const KVView& v,
               const AttentionMask& mask, const OutputView& out, const AttentionOptions& opts = {});

// Scratch bytes the streaming kernel uses per thread for this shape (O(block),
// not O(Lq·Lk)), including the thread's share of a split-decode merge buffer.
size_t attention_scratch_bytes_per_thread(const AttentionShape& shape, DType kv_type);

// The scalar reference: fp64 accumulation, materialized scores, K/V decoded with
// decode_row(). Tests use it as the oracle. weights/lse optional as above.
void attention_reference(const AttentionShape& shape, const QueryView& q, const KVView& k,
                         const KVView& v, const AttentionMask& mask, const OutputView& out,
                         const AttentionOptions& opts = {});

}  // namespace qkv

// A transformer in memory, a decoder or a bidirectional encoder: its
// configuration (the architecture family's description plus the file's
// sizes) and its weights. Both loaders (GGUF and llama2.c) and the synthetic
// builder produce this; the decoder and the encoder only read it. The
// family-specific parts are data here (runtime/arch.h fills them), not code
// paths per family.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/linear.h"
#include "kernels/ops.h"

namespace qkv {

// The FFN's activation: act(gate) * up when gated, act(up) when not.
// GeluTanhTable is the tanh form as llama.cpp's CPU backend computes GELU,
// through its fp16 table (kernels/ops.h gelu_f16_table; bert).
enum class Activation { SiLU, GeluTanh, GeluTanhTable };

struct ModelConfig {
  std::string architecture = "llama";  // GGUF general.architecture (runtime/arch.h)
  int64_t dim = 0;          // embedding width
  int64_t hidden_dim = 0;   // FFN width
  int64_t n_layers = 0;
  int64_t n_heads = 0;      // query heads
  int64_t n_kv_heads = 0;   // key/value heads (GQA: divides n_heads)
  int64_t head_dim = 0;     // per head (usually dim / n_heads; Qwen3/Gemma may differ)
  int64_t rope_dim = 0;     // rotated dims per head (usually head_dim)
  int64_t vocab_size = 0;
  int64_t context_length = 0;  // trained context (llama2.c seq_len)
  float rope_theta = 10000.0f;
  float norm_eps = 1e-5f;

  // ---- the architecture description (defaults: llama)
  RopeStyle rope_style = RopeStyle::Adjacent;
  Activation activation = Activation::SiLU;
  bool qkv_bias = false;      // Q, K, V biases (qwen2)
  bool qk_norm = false;       // per-head RMSNorm of Q and K before RoPE (qwen3, gemma3)
  bool post_norms = false;    // RMSNorm of each sublayer's output before the residual add (gemma2/3)
  float embed_scale = 1.0f;   // token embedding multiplier (gemma: sqrt(dim))
  float attn_scale = 0.0f;    // score scale; 0: 1/sqrt(head_dim)
  float attn_softcap = 0.0f;  // > 0: score s -> c*tanh(s/c) before the softmax (gemma2)
  float final_softcap = 0.0f; // > 0: logit z -> c*tanh(z/c) (gemma2)
  // Sliding-window attention: the query at p sees keys p-window+1 .. p on the
  // sliding layers. swa_period 0: every layer slides; P > 0: layer l is global
  // when l % P == P - 1 (gemma2: P = 2, gemma3: P = 6), sliding otherwise.
  int64_t sliding_window = 0;
  int64_t swa_period = 0;
  // RoPE: theta_k = pos * base^(-2k/rope_dim) * freq_scale / factor_k, cos and
  // sin times attn_factor. Sliding layers use rope_theta_local (with freq_scale
  // 1) when it is > 0 (gemma3).
  float rope_theta_local = 0.0f;
  float rope_freq_scale = 1.0f;   // rope.scaling.type linear: 1 / rope.scaling.factor
  float rope_attn_factor = 1.0f;  // LongRoPE's attention factor
  // Per-pair frequency factors [rope_dim/2] (Llama 3 rope_freqs, LongRoPE long
  // factors); empty: none. With rope_factors_short set too (LongRoPE), a
  // decoder whose context is at most rope_orig_context uses the short ones.
  std::vector<float> rope_factors, rope_factors_short;
  int64_t rope_orig_context = 0;

  // ---- Encoders (runtime/encoder.h; the defaults are the decoders')
  bool causal = true;         // false: bidirectional attention within each sequence (bert, nomic-bert)
  // The file's <arch>.pooling_type (llama.cpp's llama_pooling_type: 0 none,
  // 1 mean, 2 cls, 3 last, 4 rank); -1 when the file has none.
  int32_t pooling_type = -1;
  // LayerNorm with bias after each sublayer's residual add and on the input
  // embeddings; no output_norm (false: pre-sublayer RMSNorm).
  bool layer_norm = false;
  bool learned_positions = false;  // position_embd rows added to the input, no RoPE
  bool token_types = false;        // token_types row 0 added to the input
  bool out_ffn_bias = false;       // attn_output, ffn_up and ffn_down biases
  bool ffn_gated = true;           // act(gate) * up; false: act(up)
  bool rank_head = false;          // the classifier head cls (+ cls.output) of a rank model

  int64_t q_dim() const { return n_heads * head_dim; }
  int64_t kv_dim() const { return n_kv_heads * head_dim; }
  bool layer_slides(int64_t l) const {
    return sliding_window > 0 && (swa_period == 0 || l % swa_period != swa_period - 1);
  }
};

// Weights of one layer. Norm weights and biases are f32 vectors
// (rows == 1); projections are y = W·x matrices [out][in]. Optional tensors
// have data == nullptr. Fused tensors of a file (phi3's attn_qkv, gate|up)
// appear here as row ranges of it (wq/wk/wv, ffn_gate/ffn_up).
struct LayerWeights {
  Matrix attn_norm;  // [1][dim]
  Matrix wq;         // [q_dim][dim]
  Matrix wk;         // [kv_dim][dim]
  Matrix wv;         // [kv_dim][dim]
  Matrix wo;         // [dim][q_dim]
  Matrix ffn_norm;   // [1][dim]
  Matrix ffn_gate;   // [hidden][dim]  (llama2.c w1)
  Matrix ffn_up;     // [hidden][dim]  (llama2.c w3)
  Matrix ffn_down;   // [dim][hidden]  (llama2.c w2)
  Matrix bq, bk, bv;                     // [1][q_dim], [1][kv_dim] (qkv_bias)
  Matrix q_norm, k_norm;                 // [1][head_dim] (qk_norm)
  Matrix post_attn_norm, post_ffn_norm;  // [1][dim] (post_norms)
  // Encoders (layer_norm): the LayerNorms after the residual adds and the
  // output and FFN biases (out_ffn_bias).
  Matrix attn_out_norm, attn_out_norm_b;    // [1][dim]
  Matrix layer_out_norm, layer_out_norm_b;  // [1][dim]
  Matrix bo;                                // [1][dim]
  Matrix ffn_up_b;                          // [1][hidden]
  Matrix ffn_down_b;                        // [1][dim]
};

struct Model {
  ModelConfig config;
  Matrix token_embd;   // [vocab][dim]
  Matrix output_norm;  // [1][dim]
  Matrix output;       // [vocab][dim]; the same data as token_embd when tied
  // Encoders: no output_norm or output; the input embedding is token_embd +
  // token_types[0] (+ position_embd[pos]), then the token_embd_norm LayerNorm.
  Matrix position_embd;                        // [context][dim] (learned_positions)
  Matrix token_types;                          // [types][dim]
  Matrix token_embd_norm, token_embd_norm_b;   // [1][dim]
  // A rank model's classifier head (rank_head): cls [dim][dim], cls_b [1][dim],
  // cls_out [1][dim] and cls_out_b [1][1] (those two may be absent: llama.cpp
  // then scores with the first value of tanh(cls·h + cls_b)).
  Matrix cls, cls_b, cls_out, cls_out_b;
  std::vector<LayerWeights> layers;
  std::string path;    // the file it came from ("" when built in memory)
  // llama.cpp's general.file_type (llama_ftype) when a preset made the
  // weights; -1: a GGUF writer derives it from the weights' main type.
  int32_t file_type = -1;
  // Keeps the memory behind every Matrix alive (an mmap or owned buffers).
  std::shared_ptr<const void> storage;
  // The read-only file mapping the weights point into, when they do
  // (nullptr for weights built or copied in memory).
  const uint8_t* file_mapping = nullptr;
  uint64_t file_mapping_bytes = 0;

  // Total bytes of all weight tensors (tied output counted once).
  uint64_t weight_bytes() const;
  // Number of parameters (tied output counted once).
  uint64_t parameter_count() const;
};

// Lays out the layer matrices and the output for the kernels, in one new
// block of huge-page memory (runtime/huge_pages.h) that m.storage then keeps
// too: with row_groups, those that row groups speed up (kernels/quant/
// row_groups.h: the 32-value block types, rows a multiple of 16, on CPUs
// that run the block GEMM on them) in row groups; the other quantized ones
// that lie in a file mapping copied as rows. The source's whole pages are
// given back (madvise: a file mapping's dropped and made inaccessible, a heap
// copy's zeroed), so the resident weights stay one copy, and no other Model
// may share m's source memory. An embedding tied to the output shares its
// layout (the decoder gathers one row at a time); an untied one stays where
// it is. Returns how many matrices it laid out in row groups.
int lay_out_weights(Model& m, bool row_groups = true);

// Every present (data != nullptr) weight of the model, a tied output once.
std::vector<const Matrix*> weight_matrices(const Model& m);

// Every present (data != nullptr) matrix of a layer, projections and vectors alike.
std::vector<const Matrix*> layer_matrices(const LayerWeights& l);
std::vector<Matrix*> layer_matrices(LayerWeights& l);

}  // namespace qkv

// A llama-architecture model in memory: its configuration and its weights.
// Both loaders (GGUF and llama2.c) produce this; the decoder only reads it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/linear.h"

namespace qkv {

struct ModelConfig {
  std::string architecture = "llama";
  int64_t dim = 0;          // embedding width
  int64_t hidden_dim = 0;   // FFN width
  int64_t n_layers = 0;
  int64_t n_heads = 0;      // query heads
  int64_t n_kv_heads = 0;   // key/value heads (GQA: divides n_heads)
  int64_t head_dim = 0;     // dim / n_heads
  int64_t rope_dim = 0;     // rotated dims per head (usually head_dim)
  int64_t vocab_size = 0;
  int64_t context_length = 0;  // trained context (llama2.c seq_len)
  float rope_theta = 10000.0f;
  float norm_eps = 1e-5f;

  int64_t kv_dim() const { return n_kv_heads * head_dim; }
};

// Weights of one decoder layer. Norm weights are f32 vectors (rows == 1);
// projections are y = W·x matrices [out][in].
struct LayerWeights {
  Matrix attn_norm;  // [1][dim]
  Matrix wq;         // [dim][dim]
  Matrix wk;         // [kv_dim][dim]
  Matrix wv;         // [kv_dim][dim]
  Matrix wo;         // [dim][dim]
  Matrix ffn_norm;   // [1][dim]
  Matrix ffn_gate;   // [hidden][dim]  (llama2.c w1)
  Matrix ffn_up;     // [hidden][dim]  (llama2.c w3)
  Matrix ffn_down;   // [dim][hidden]  (llama2.c w2)
};

struct Model {
  ModelConfig config;
  Matrix token_embd;   // [vocab][dim]
  Matrix output_norm;  // [1][dim]
  Matrix output;       // [vocab][dim]; the same data as token_embd when tied
  std::vector<LayerWeights> layers;
  std::string path;    // the file it came from ("" when built in memory)
  // Keeps the memory behind every Matrix alive (an mmap or owned buffers).
  std::shared_ptr<const void> storage;

  // Total bytes of all weight tensors (tied output counted once).
  uint64_t weight_bytes() const;
  // Number of parameters (tied output counted once).
  uint64_t parameter_count() const;
};

}  // namespace qkv

// Attention maps of a prompt: the softmax weights of one layer's causal
// self-attention for every query head, from the kernel's materialized path.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/dtype.h"
#include "runtime/model.h"

namespace qkv {

struct AttentionMap {
  int64_t n_tokens = 0, n_heads = 0, n_kv_heads = 0;
  std::vector<float> weights;  // [n_heads][n_tokens][n_tokens]: row = query, column = key
  std::vector<float> queries;  // the layer's rotated queries [n_tokens][dim]
};

// Runs tokens from an empty cache of kv_type in one prefill batch and captures layer's attention.
AttentionMap attention_map(const Model& model, const int32_t* tokens, int64_t n, int64_t layer,
                           DType kv_type = DType::F32);

}  // namespace qkv

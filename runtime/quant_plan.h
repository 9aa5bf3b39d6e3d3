// Which type each tensor gets under a llama-quantize preset (Q4_K_M, IQ4_XS,
// ...) without an importance matrix: llama.cpp's llama_tensor_get_type for the
// dense (non-MoE, non-Falcon) models, as a table of per-preset rules
// (quant_plan.cc) rather than code per preset.
//
// The rules, by tensor (i = the layer, n = the layer count):
//   output.weight (or token_embd.weight when the output is tied): Q6_K, Q8_0
//     under Q8_0, Q8_0 whenever its rows are not a multiple of 256;
//   attn_v, ffn_down, attn_output, attn_qkv: per-preset bumps (more bits in
//     the first layers, in the "use_more_bits" layers i < n/8 || i >= 7n/8 ||
//     (i - n/8) % 3 == 2, or with grouped-query attention of 4+ heads per KV
//     head), and attn_v Q3_K/Q4_K -> Q5_K in 70B llama/qwen2 models;
//   everything else: the preset's base type.
// Then a type whose block does not divide the row length falls back as
// llama-quantize does: Q2_K/Q3_K/IQ4_XS -> IQ4_NL, Q4_K -> Q5_0, Q5_K -> Q5_1,
// Q6_K -> Q8_0, and to F16 when the fallback's block does not divide it either;
// the 32-value types have no fallback (llama-quantize refuses the tensor).
// Tensors that are not quantized at all (1-D ones such as norms, biases) keep
// their type. F16 and BF16 convert every quantizable tensor, without rules.
//
// llama-quantize counts attn_v and ffn_down tensors as it meets them in its
// layer-sorted order, so its counters equal the layer index in dense models;
// the plan takes the layer index from the name (blk.N.).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/dtype.h"

namespace qkv {

struct QuantPreset;

// The preset named `name` (case-insensitive: "q4_k_m", "Q4_K_M"); nullptr if none.
const QuantPreset* find_quant_preset(const std::string& name);
// Every preset name, comma separated ("Q4_0, Q4_1, ...").
std::string quant_preset_names();
// The preset's canonical name ("Q4_K_M"), its general.file_type (llama_ftype)
// and the type most tensors get.
const char* quant_preset_name(const QuantPreset& p);
uint32_t quant_preset_file_type(const QuantPreset& p);
DType quant_preset_base(const QuantPreset& p);

// What the plan needs to know about a model.
struct QuantModelInfo {
  std::string arch;          // general.architecture
  int64_t n_layers = 0;
  int64_t n_heads = 1, n_kv_heads = 1;  // of the first layer (llama.cpp's n_gqa())
  int64_t n_attention_wv = 0;  // attn_v / attn_qkv tensors in the file (llama.cpp's counter bound)
  bool has_output = false;     // a separate output.weight (else token_embd gets its rule)
};

// Whether llama-quantize quantizes a tensor of shape ne (ne[0] innermost): a
// name ending in "weight", at least 2 dimensions not counting trailing 1s,
// not a norm, an expert router, a position or token-type embedding.
bool quant_tensor_quantizable(const std::string& name, const std::vector<uint64_t>& ne);

struct TensorPlan {
  DType type = DType::F32;    // what the tensor is written as
  DType wanted = DType::F32;  // what the rules chose before a row-length fallback
  bool fell_back = false;     // type != wanted because the rows do not fit `wanted`
  bool refused = false;       // no fallback exists (llama-quantize fails); type is F16
};

// The type of a quantizable tensor `name` with rows of `row_length` values.
TensorPlan plan_tensor(const QuantPreset& p, const QuantModelInfo& m, const std::string& name, uint64_t row_length);

// The layer index in a "blk.N." name, -1 for tensors outside the layers.
int64_t tensor_layer(const std::string& name);
// Tensor names in llama-quantize's output order: tensors outside the layers
// first, then by layer, each group by name.
std::vector<size_t> llama_tensor_order(const std::vector<std::string>& names);

}  // namespace qkv

// ctest-labels: asan
// runtime/quant_plan.h: llama-quantize's per-tensor types at shapes the shared
// tinystories-3M files do not reach (22 and 80 layers, 8 query heads per KV
// head, rows that are not multiples of 256), worked out by hand from
// llama_tensor_get_type's rules; and the file order llama-quantize writes.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "runtime/quant_plan.h"

using namespace qkv;

namespace {

QuantModelInfo model(const char* arch, int64_t layers, int64_t heads, int64_t kv_heads, bool has_output) {
  QuantModelInfo m;
  m.arch = arch;
  m.n_layers = layers;
  m.n_heads = heads;
  m.n_kv_heads = kv_heads;
  m.n_attention_wv = layers;
  m.has_output = has_output;
  return m;
}

DType type_of(const char* preset, const QuantModelInfo& m, const std::string& name, uint64_t row = 2048) {
  const QuantPreset* p = find_quant_preset(preset);
  REQUIRE(p != nullptr);
  return plan_tensor(*p, m, name, row).type;
}

std::string blk(int i, const char* t) { return "blk." + std::to_string(i) + "." + t; }

}  // namespace

TEST_CASE("preset names are llama-quantize's, case-insensitive") {
  CHECK(find_quant_preset("q4_k_m") == find_quant_preset("Q4_K_M"));
  REQUIRE(find_quant_preset("iq4_xs") != nullptr);
  CHECK(std::string(quant_preset_name(*find_quant_preset("iq4_xs"))) == "IQ4_XS");
  CHECK(quant_preset_file_type(*find_quant_preset("Q4_K_M")) == 15);
  CHECK(quant_preset_file_type(*find_quant_preset("bf16")) == 32);
  CHECK(find_quant_preset("Q4_K") == nullptr);
  CHECK(find_quant_preset("") == nullptr);
  CHECK(quant_preset_names().find("Q3_K_L") != std::string::npos);
}

TEST_CASE("Q4_K_M on a 22-layer model: attn_v and ffn_down get Q6_K in the use_more_bits layers") {
  const QuantModelInfo m = model("llama", 22, 32, 4, false);
  // i < 22/8 = 2, i >= 7*22/8 = 19, or (i - 2) % 3 == 2.
  const std::vector<int> more = {0, 1, 4, 7, 10, 13, 16, 19, 20, 21};
  for (int i = 0; i < 22; ++i) {
    const bool bump = std::find(more.begin(), more.end(), i) != more.end();
    CAPTURE(i);
    CHECK(type_of("Q4_K_M", m, blk(i, "attn_v.weight")) == (bump ? DType::Q6_K : DType::Q4_K));
    CHECK(type_of("Q4_K_M", m, blk(i, "ffn_down.weight"), 5632) == (bump ? DType::Q6_K : DType::Q4_K));
    CHECK(type_of("Q4_K_M", m, blk(i, "attn_q.weight")) == DType::Q4_K);
    CHECK(type_of("Q5_K_M", m, blk(i, "ffn_down.weight"), 5632) == (bump ? DType::Q6_K : DType::Q5_K));
  }
  // A tied model: the token embedding is quantized as the output would be.
  CHECK(type_of("Q4_K_M", m, "token_embd.weight") == DType::Q6_K);
  CHECK(type_of("Q4_K_M", model("llama", 22, 32, 4, true), "token_embd.weight") == DType::Q4_K);
  CHECK(type_of("Q4_K_M", m, "output.weight") == DType::Q6_K);
  CHECK(type_of("Q8_0", m, "output.weight") == DType::Q8_0);
  CHECK(type_of("Q4_0", m, "output.weight") == DType::Q6_K);
  CHECK(type_of("Q4_K_M", m, blk(3, "attn_qkv.weight")) == DType::Q5_K);
  CHECK(type_of("Q5_K_M", m, blk(3, "attn_qkv.weight")) == DType::Q6_K);
}

TEST_CASE("grouped-query attention of 4+ heads per KV head bumps attn_v for Q2_K and the IQ4 presets") {
  const QuantModelInfo gqa8 = model("llama", 22, 32, 4, true), gqa2 = model("llama", 22, 8, 4, true);
  CHECK(type_of("Q2_K", gqa8, blk(5, "attn_v.weight")) == DType::Q4_K);
  CHECK(type_of("Q2_K", gqa2, blk(5, "attn_v.weight")) == DType::Q3_K);
  CHECK(type_of("Q2_K", gqa2, blk(5, "attn_output.weight")) == DType::Q3_K);
  CHECK(type_of("Q2_K", gqa2, blk(5, "ffn_down.weight")) == DType::Q3_K);
  CHECK(type_of("Q2_K", gqa2, blk(5, "ffn_up.weight")) == DType::Q2_K);
  CHECK(type_of("IQ4_XS", gqa8, blk(5, "attn_v.weight")) == DType::Q5_K);
  CHECK(type_of("IQ4_NL", gqa2, blk(5, "attn_v.weight")) == DType::IQ4_NL);
  // ffn_down: Q5_K in the first n/8 layers.
  CHECK(type_of("IQ4_XS", gqa2, blk(1, "ffn_down.weight")) == DType::Q5_K);
  CHECK(type_of("IQ4_XS", gqa2, blk(2, "ffn_down.weight")) == DType::IQ4_XS);
}

TEST_CASE("Q3_K_M, Q3_K_L and Q4_K_S raise the first layers") {
  const QuantModelInfo m = model("qwen2", 32, 16, 8, true);
  CHECK(type_of("Q3_K_M", m, blk(1, "attn_v.weight")) == DType::Q5_K);
  CHECK(type_of("Q3_K_M", m, blk(2, "attn_v.weight")) == DType::Q4_K);
  CHECK(type_of("Q3_K_M", m, blk(1, "ffn_down.weight")) == DType::Q5_K);  // i < 32/16
  CHECK(type_of("Q3_K_M", m, blk(2, "ffn_down.weight")) == DType::Q4_K);
  CHECK(type_of("Q3_K_M", m, blk(9, "attn_output.weight")) == DType::Q4_K);
  CHECK(type_of("Q3_K_M", m, blk(9, "attn_k.weight")) == DType::Q3_K);
  CHECK(type_of("Q3_K_L", m, blk(9, "attn_v.weight")) == DType::Q5_K);
  CHECK(type_of("Q3_K_L", m, blk(9, "ffn_down.weight")) == DType::Q5_K);
  CHECK(type_of("Q3_K_L", m, blk(9, "attn_qkv.weight")) == DType::Q4_K);
  CHECK(type_of("Q3_K_S", m, blk(0, "attn_v.weight")) == DType::Q3_K);
  CHECK(type_of("Q4_K_S", m, blk(3, "attn_v.weight")) == DType::Q5_K);
  CHECK(type_of("Q4_K_S", m, blk(4, "attn_v.weight")) == DType::Q4_K);
  CHECK(type_of("Q4_K_S", m, blk(3, "ffn_down.weight")) == DType::Q5_K);  // i < 32/8
  CHECK(type_of("Q4_K_S", m, blk(4, "ffn_down.weight")) == DType::Q4_K);
  CHECK(type_of("Q5_K_S", m, blk(0, "attn_v.weight")) == DType::Q5_K);
}

TEST_CASE("70B llama and qwen2 models get Q5_K attn_v where the rules give Q3_K or Q4_K") {
  CHECK(type_of("Q3_K_S", model("llama", 80, 64, 8, true), blk(40, "attn_v.weight")) == DType::Q5_K);
  // Layer 11 of 80 is not a use_more_bits layer (11 >= 80/8, (11 - 10) % 3 != 2); 12 is.
  CHECK(type_of("Q4_K_M", model("qwen2", 80, 64, 8, true), blk(11, "attn_v.weight")) == DType::Q5_K);
  CHECK(type_of("Q4_K_M", model("qwen2", 80, 64, 8, true), blk(12, "attn_v.weight")) == DType::Q6_K);
  // 80 llama layers without grouped KV heads are llama.cpp's 65B: no bump.
  CHECK(type_of("Q3_K_S", model("llama", 80, 64, 64, true), blk(40, "attn_v.weight")) == DType::Q3_K);
  CHECK(type_of("Q3_K_S", model("gemma2", 80, 64, 8, true), blk(40, "attn_v.weight")) == DType::Q3_K);
}

TEST_CASE("rows the planned type cannot hold fall back as llama-quantize does") {
  const QuantModelInfo m = model("llama", 4, 4, 2, true);
  auto plan = [&](const char* preset, const std::string& name, uint64_t row) {
    return plan_tensor(*find_quant_preset(preset), m, name, row);
  };
  TensorPlan p = plan("Q4_K_M", blk(0, "attn_q.weight"), 576);
  CHECK(p.type == DType::Q5_0);
  CHECK(p.wanted == DType::Q4_K);
  CHECK(p.fell_back);
  CHECK_FALSE(p.refused);
  CHECK(plan("Q4_K_M", blk(0, "attn_q.weight"), 100).type == DType::F16);  // Q5_0 does not fit either
  CHECK(plan("Q5_K_S", blk(0, "attn_q.weight"), 576).type == DType::Q5_1);
  CHECK(plan("Q6_K", blk(0, "attn_q.weight"), 576).type == DType::Q8_0);
  CHECK(plan("Q4_K_M", blk(3, "attn_v.weight"), 576).type == DType::Q8_0);  // Q6_K -> Q8_0
  CHECK(plan("Q2_K", blk(0, "attn_q.weight"), 576).type == DType::IQ4_NL);
  CHECK(plan("Q3_K_S", blk(0, "attn_q.weight"), 576).type == DType::IQ4_NL);
  CHECK(plan("IQ4_XS", blk(0, "attn_q.weight"), 576).type == DType::IQ4_NL);
  // The output rule itself picks Q8_0 for such rows (no fallback involved).
  p = plan("Q4_K_M", "output.weight", 576);
  CHECK(p.type == DType::Q8_0);
  CHECK_FALSE(p.fell_back);
  // The 32-value types have no fallback: llama-quantize refuses the tensor.
  p = plan("Q4_0", blk(0, "ffn_down.weight"), 100);
  CHECK(p.refused);
  CHECK(plan("Q8_0", "output.weight", 100).refused);
  // F16 and BF16 hold any row.
  CHECK(plan("F16", blk(0, "ffn_down.weight"), 100).type == DType::F16);
  CHECK(plan("BF16", "output.weight", 7).type == DType::BF16);
}

TEST_CASE("which tensors llama-quantize quantizes") {
  CHECK(quant_tensor_quantizable("blk.0.attn_q.weight", {256, 256}));
  CHECK(quant_tensor_quantizable("token_embd.weight", {256, 512}));
  CHECK_FALSE(quant_tensor_quantizable("blk.0.attn_norm.weight", {256}));
  CHECK_FALSE(quant_tensor_quantizable("blk.0.attn_q_norm.weight", {64, 1}));
  CHECK_FALSE(quant_tensor_quantizable("blk.0.attn_q.weight", {256, 1, 1}));  // 1-D after trailing 1s
  CHECK_FALSE(quant_tensor_quantizable("blk.0.attn_q.bias", {256, 4}));
  CHECK_FALSE(quant_tensor_quantizable("blk.0.ffn_gate_inp.weight", {256, 8}));
  CHECK_FALSE(quant_tensor_quantizable("rope_freqs.weight", {32}));
  CHECK_FALSE(quant_tensor_quantizable("blk.0.attn_q.weight", {0, 4}));
}

TEST_CASE("llama-quantize's tensor order: outside the layers first, then by layer number, then by name") {
  const std::vector<std::string> names = {"token_embd.weight", "blk.10.attn_q.weight", "blk.2.ffn_up.weight",
                                          "blk.2.attn_k.weight", "output.weight", "output_norm.weight"};
  std::vector<std::string> got;
  for (size_t i : llama_tensor_order(names)) got.push_back(names[i]);
  CHECK(got == std::vector<std::string>{"output.weight", "output_norm.weight", "token_embd.weight",
                                        "blk.2.attn_k.weight", "blk.2.ffn_up.weight", "blk.10.attn_q.weight"});
  CHECK(tensor_layer("blk.17.ffn_down.weight") == 17);
  CHECK(tensor_layer("token_embd.weight") == -1);
  CHECK(tensor_layer("blk.x.weight") == -1);
}

#include "runtime/quant_plan.h"

#include <algorithm>
#include <cctype>

#include "kernels/error.h"

namespace qkv {

namespace {

// When a rule's type applies (i = layer, n = layer count for ffn_down, the
// number of attn_v tensors for attn_v).
enum class When : uint8_t {
  Never,
  Always,
  MoreBits,     // i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2
  LayerBelow,   // i < param
  LayerBelowN,  // i < n / param
  GqaAtLeast4,  // n_heads / n_kv_heads >= 4
};

struct Rule {
  When when = When::Never;
  int param = 0;
  DType then = DType::F32;
  int otherwise = -1;  // a DType, or -1: the preset's base type
};

constexpr Rule always(DType t) { return {When::Always, 0, t, -1}; }
constexpr Rule more_bits(DType t) { return {When::MoreBits, 0, t, -1}; }
constexpr Rule layer_below(int k, DType t, int otherwise = -1) { return {When::LayerBelow, k, t, otherwise}; }
constexpr Rule layer_below_n(int div, DType t, int otherwise = -1) { return {When::LayerBelowN, div, t, otherwise}; }
constexpr Rule gqa4(DType t, int otherwise = -1) { return {When::GqaAtLeast4, 0, t, otherwise}; }
constexpr int as_int(DType t) { return static_cast<int>(t); }

}  // namespace

struct QuantPreset {
  const char* name;
  uint32_t file_type;  // llama.cpp's LLAMA_FTYPE_MOSTLY_*
  DType base;
  DType output;  // output.weight (and a tied token_embd) with 256-multiple rows
  Rule attn_v, ffn_down, attn_output, attn_qkv;
};

namespace {

using D = DType;
constexpr Rule kNone{};

const QuantPreset kPresets[] = {
    //  name     ftype base      output   attn_v                                    ffn_down                                   attn_output     attn_qkv
    {"Q4_0",    2,  D::Q4_0,   D::Q6_K, kNone,                                    kNone,                                     kNone,          kNone},
    {"Q4_1",    3,  D::Q4_1,   D::Q6_K, kNone,                                    kNone,                                     kNone,          kNone},
    {"Q5_0",    8,  D::Q5_0,   D::Q6_K, kNone,                                    kNone,                                     kNone,          kNone},
    {"Q5_1",    9,  D::Q5_1,   D::Q6_K, kNone,                                    kNone,                                     kNone,          kNone},
    {"Q8_0",    7,  D::Q8_0,   D::Q8_0, kNone,                                    kNone,                                     kNone,          kNone},
    {"Q2_K",    10, D::Q2_K,   D::Q6_K, gqa4(D::Q4_K, as_int(D::Q3_K)),           always(D::Q3_K),                           always(D::Q3_K), kNone},
    {"Q3_K_S",  11, D::Q3_K,   D::Q6_K, kNone,                                    kNone,                                     kNone,          kNone},
    {"Q3_K_M",  12, D::Q3_K,   D::Q6_K, layer_below(2, D::Q5_K, as_int(D::Q4_K)), layer_below_n(16, D::Q5_K, as_int(D::Q4_K)), always(D::Q4_K), always(D::Q4_K)},
    {"Q3_K_L",  13, D::Q3_K,   D::Q6_K, always(D::Q5_K),                          always(D::Q5_K),                           always(D::Q5_K), always(D::Q4_K)},
    {"Q4_K_S",  14, D::Q4_K,   D::Q6_K, layer_below(4, D::Q5_K),                  layer_below_n(8, D::Q5_K),                 kNone,          kNone},
    {"Q4_K_M",  15, D::Q4_K,   D::Q6_K, more_bits(D::Q6_K),                       more_bits(D::Q6_K),                        kNone,          always(D::Q5_K)},
    {"Q5_K_S",  16, D::Q5_K,   D::Q6_K, kNone,                                    kNone,                                     kNone,          kNone},
    {"Q5_K_M",  17, D::Q5_K,   D::Q6_K, more_bits(D::Q6_K),                       more_bits(D::Q6_K),                        kNone,          always(D::Q6_K)},
    {"Q6_K",    18, D::Q6_K,   D::Q6_K, kNone,                                    kNone,                                     kNone,          kNone},
    {"IQ4_NL",  25, D::IQ4_NL, D::Q6_K, gqa4(D::Q5_K),                            layer_below_n(8, D::Q5_K),                 kNone,          kNone},
    {"IQ4_XS",  30, D::IQ4_XS, D::Q6_K, gqa4(D::Q5_K),                            layer_below_n(8, D::Q5_K),                 kNone,          kNone},
    {"F16",     1,  D::F16,    D::F16,  kNone,                                    kNone,                                     kNone,          kNone},
    {"BF16",    32, D::BF16,   D::BF16, kNone,                                    kNone,                                     kNone,          kNone},
};

// llama-quantize's row-length fallbacks; a type absent here has none.
struct Fallback {
  DType from, to;
};
constexpr Fallback kFallbacks[] = {
    {D::Q2_K, D::IQ4_NL}, {D::Q3_K, D::IQ4_NL}, {D::IQ4_XS, D::IQ4_NL},
    {D::Q4_K, D::Q5_0},   {D::Q5_K, D::Q5_1},   {D::Q6_K, D::Q8_0},
};

// 2-D tensors llama-quantize copies unchanged (routers, position and
// token-type embeddings, small state-space and RWKV matrices, T5's bias).
const char* const kNeverQuantized[] = {
    "_norm.weight",         "ffn_gate_inp.weight",   "position_embd.weight", "token_types.weight",
    "ssm_conv1d.weight",    "ssm_x.weight",          "ssm_dt.weight",        "time_mix_first.weight",
    "time_mix_w1.weight",   "time_mix_w2.weight",    "time_mix_decay_w1.weight", "time_mix_decay_w2.weight",
    "time_mix_lerp_fused.weight", "attn_rel_b.weight",
};

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

bool more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

DType apply(const Rule& r, DType base, int64_t i, int64_t n, const QuantModelInfo& m) {
  bool hit = false;
  switch (r.when) {
    case When::Never: return base;
    case When::Always: hit = true; break;
    case When::MoreBits: hit = more_bits(i, n); break;
    case When::LayerBelow: hit = i < r.param; break;
    case When::LayerBelowN: hit = i < n / r.param; break;
    case When::GqaAtLeast4: hit = m.n_kv_heads > 0 && m.n_heads / m.n_kv_heads >= 4; break;
  }
  if (hit) return r.then;
  return r.otherwise < 0 ? base : static_cast<DType>(r.otherwise);
}

// llama.cpp's LLM_TYPE_70B: 80-layer llama (with grouped KV heads) and qwen2 models.
bool is_70b(const QuantModelInfo& m) {
  return m.n_layers == 80 && ((m.arch == "llama" && m.n_heads != m.n_kv_heads) || m.arch == "qwen2");
}

}  // namespace

const QuantPreset* find_quant_preset(const std::string& name) {
  std::string s = name;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  for (const QuantPreset& p : kPresets) {
    if (s == p.name) return &p;
  }
  return nullptr;
}

std::string quant_preset_names() {
  std::string out;
  for (const QuantPreset& p : kPresets) out += std::string(out.empty() ? "" : ", ") + p.name;
  return out;
}

const char* quant_preset_name(const QuantPreset& p) { return p.name; }
uint32_t quant_preset_file_type(const QuantPreset& p) { return p.file_type; }
DType quant_preset_base(const QuantPreset& p) { return p.base; }

bool quant_tensor_quantizable(const std::string& name, const std::vector<uint64_t>& ne) {
  for (uint64_t d : ne) {
    if (d == 0) return false;  // an empty tensor is copied as it is
  }
  size_t dims = ne.size();
  while (dims > 1 && ne[dims - 1] == 1) --dims;  // ggml_n_dims: trailing 1s do not count
  if (dims < 2 || name.size() < 6 || name.compare(name.size() - 6, 6, "weight") != 0) return false;
  for (const char* part : kNeverQuantized) {
    if (contains(name, part)) return false;
  }
  return true;
}

int64_t tensor_layer(const std::string& name) {
  if (name.compare(0, 4, "blk.") != 0) return -1;
  size_t i = 4;
  int64_t v = 0;
  bool digits = false;
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])) && v < (int64_t(1) << 40)) {
    v = v * 10 + (name[i++] - '0');
    digits = true;
  }
  return digits ? v : -1;
}

std::vector<size_t> llama_tensor_order(const std::vector<std::string>& names) {
  std::vector<size_t> order(names.size());
  std::vector<int64_t> layer(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    order[i] = i;
    layer[i] = tensor_layer(names[i]);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return layer[a] != layer[b] ? layer[a] < layer[b] : names[a] < names[b];
  });
  return order;
}

TensorPlan plan_tensor(const QuantPreset& p, const QuantModelInfo& m, const std::string& name, uint64_t row_length) {
  TensorPlan plan;
  DType t = p.base;
  if (dtype_is_quantized(p.base)) {
    const int64_t i = tensor_layer(name);
    if (name == "output.weight" || (!m.has_output && name == "token_embd.weight")) {
      t = row_length % kQK != 0 ? DType::Q8_0 : p.output;
    } else if (contains(name, "attn_v.weight")) {
      t = apply(p.attn_v, p.base, i, m.n_attention_wv, m);
      if (is_70b(m) && (t == DType::Q3_K || t == DType::Q4_K)) t = DType::Q5_K;
    } else if (contains(name, "ffn_down")) {
      t = apply(p.ffn_down, p.base, i, m.n_layers, m);
    } else if (contains(name, "attn_output.weight")) {
      t = apply(p.attn_output, p.base, i, m.n_layers, m);
    } else if (contains(name, "attn_qkv.weight")) {
      t = apply(p.attn_qkv, p.base, i, m.n_layers, m);
    }
  }
  plan.wanted = plan.type = t;
  if (dtype_row_ok(t, row_length)) return plan;
  plan.fell_back = true;
  plan.type = DType::F16;
  plan.refused = true;
  for (const Fallback& f : kFallbacks) {
    if (f.from == t) {
      plan.refused = false;
      if (dtype_row_ok(f.to, row_length)) plan.type = f.to;
    }
  }
  return plan;
}

}  // namespace qkv

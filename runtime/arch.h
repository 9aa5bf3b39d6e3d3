// The model families qkv runs, as data: for each GGUF `general.architecture`,
// what its forward pass does (norm placement, biases, RoPE style, activation,
// soft-caps, sliding-window pattern, embedding scale) and which tensors its
// files carry, as llama.cpp (b4748; qwen3/gemma3 as ik_llama.cpp) writes them.
// One table entry per family feeds the loader, the GGUF writer, the synthetic
// builder and the one forward pass in decoder.cc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/model.h"

namespace qkv {

enum class Presence { None, Optional, Required };

struct ArchSpec {
  const char* name;  // general.architecture; GGUF keys are "<name>.*"
  RopeStyle rope_style;
  Activation activation;
  Presence qkv_bias;      // attn_{q,k,v}.bias
  bool qk_norm;           // attn_q_norm / attn_k_norm [head_dim]
  bool post_norms;        // post_attention_norm / post_ffw_norm
  bool fused_qkv;         // attn_qkv = [Q; K; V] rows
  bool fused_gate_up;     // ffn_up = [gate; up] rows
  bool embed_scale_sqrt_dim;
  Presence output;        // output.weight (None: always tied to token_embd)
  Presence rope_freqs;    // rope_freqs.weight (Llama 3.1+)
  Presence longrope;      // rope_factors_long/short.weight (phi3)
  bool rope_dim_is_head_dim;  // rope.dimension_count must equal head_dim (llama)
  // Soft-caps when the file has no *_logit_softcapping keys (0: the family has none).
  float default_attn_softcap, default_final_softcap;
  // attention.sliding_window: None (no sliding layers), Optional (default_window
  // when absent; 0 turns it off), Required.
  Presence window_key;
  int64_t default_window;
  int64_t swa_period;        // see ModelConfig::swa_period
  float rope_theta_local;    // sliding layers' RoPE base (0: the file's base)
};

// The entry for a GGUF architecture name, or nullptr.
const ArchSpec* find_arch(const std::string& name);
// The entry or a qkv::Error naming the known families.
const ArchSpec& arch_spec(const std::string& name);
std::vector<std::string> arch_names();  // "llama", "qwen2", ...

// Sets the family's fixed settings in c (architecture, rope style, activation,
// biases, norms, embedding scale, default soft-caps and window pattern). The
// sizes and the file's own keys are the caller's.
void apply_arch(const ArchSpec& spec, ModelConfig* c);

// One line per distinguishing setting ("rope: NEOX halves, base 1e+06", ...),
// for `qkv info`.
std::vector<std::string> describe_arch(const ModelConfig& c);

// The per-layer tensors of a family's files (the fused ones listed whole).
enum class Extent { One, Dim, QDim, KvDim, Hidden, HeadDim, QkvRows, GateUpRows };
struct LayerTensor {
  const char* name;  // after "blk.N.", with its .weight/.bias suffix
  Extent rows, cols;
  bool vector;       // a 1-D tensor of `cols` values (rows One)
  Matrix LayerWeights::*field;  // nullptr for the fused ones (split into wq/wk/wv, ffn_gate/ffn_up)
};
// The tensors a layer of this configuration has, in file order.
std::vector<LayerTensor> layer_tensors(const ArchSpec& spec, const ModelConfig& c);
int64_t extent(const ModelConfig& c, Extent e);

// Rows [row0, row0 + rows) of m (fused tensors' parts).
Matrix row_view(const Matrix& m, int64_t row0, int64_t rows);
// Sets the parts of a fused tensor t (attn_qkv: wq/wk/wv; ffn_up: ffn_gate/ffn_up) as views of whole.
void split_fused(const LayerTensor& t, const Matrix& whole, const ModelConfig& c, LayerWeights* l);
// The parts of fused tensor t, in file order.
std::vector<const Matrix*> fused_parts(const LayerTensor& t, const LayerWeights& l);

}  // namespace qkv

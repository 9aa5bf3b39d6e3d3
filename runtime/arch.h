// The model families qkv runs, as data: for each GGUF `general.architecture`,
// what its forward pass does (norm kind and placement, biases, RoPE style or
// learned positions, activation, gated or plain FFN, causal or bidirectional
// attention, soft-caps, sliding-window pattern, embedding scale) and which
// tensors its files carry, as llama.cpp (b4748; qwen3/gemma3 as ik_llama.cpp)
// writes them. One table entry per family feeds the loader, the GGUF writer,
// the synthetic builder and the forward passes: decoder.cc for the causal
// families, encoder.cc for the bidirectional ones (bert, nomic-bert).
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
  // ---- Encoders (the defaults are every decoder's).
  // attention.causal when the file lacks it; false: a bidirectional encoder
  // (runtime/encoder.h), which reads attention.layer_norm_epsilon.
  bool causal = true;
  // LayerNorm with bias after each sublayer's residual add (attn_output_norm,
  // layer_output_norm) and on the input (token_embd_norm), no output_norm;
  // false: RMSNorm before each sublayer and output_norm.
  bool layer_norm = false;
  bool learned_positions = false;  // position_embd [context][dim] added to the input; no RoPE
  bool token_types = false;        // token_types [types][dim]: its row 0 added to every input
  bool out_ffn_bias = false;       // attn_output.bias, ffn_up.bias, ffn_down.bias
  bool ffn_gated = true;           // act(gate)·up; false: act(up), no ffn_gate
  Presence rank_head = Presence::None;  // cls.{weight,bias}, cls.output.{weight,bias}
};

// The entry for a GGUF architecture name, or nullptr.
const ArchSpec* find_arch(const std::string& name);
// The entry or a qkv::Error naming the known families.
const ArchSpec& arch_spec(const std::string& name);
// The decoder families ("llama", "qwen2", ...: those the synthetic builder
// makes) and the encoder families ("bert", "nomic-bert").
std::vector<std::string> arch_names();
std::vector<std::string> encoder_arch_names();
// Every family, for messages: "llama, ..., bert (embeddings), ...".
std::string known_arch_list();

// Sets the family's fixed settings in c (architecture, rope style, activation,
// biases, norms, embedding scale, default soft-caps and window pattern, the
// encoder settings). The sizes and the file's own keys are the caller's.
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

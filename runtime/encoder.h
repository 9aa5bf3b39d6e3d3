// A bidirectional encoder's forward pass (GGUF `bert`, `nomic-bert`) over a
// Model whose configuration has causal == false: no KV cache; every token of
// a sequence attends to every token of the same sequence. Several sequences of
// different lengths run packed in one pass (varlen): the GEMMs see all their
// rows together and attention runs per sequence, so no padding is computed.
// The family differences (learned positions or RoPE, biases, GELU or SwiGLU
// FFN, post-LayerNorm) are data in the architecture table (runtime/arch.h).
// An Encoder is not thread-safe; many Encoders may share one const Model.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/model.h"

namespace qkv {

class Encoder {
 public:
  // max_tokens: the most tokens one forward() packs (its activation rows).
  Encoder(const Model& model, int64_t max_tokens);

  // Bytes of the activation buffers an Encoder of max_tokens rows holds.
  static uint64_t activation_bytes(const ModelConfig& config, int64_t max_tokens);

  // Runs n sequences packed one after another: tokens[i][0..counts[i]) at
  // positions 0..counts[i]-1, token type 0. Writes the final hidden states
  // [sum counts][dim] (after the last layer's output LayerNorm) to hidden.
  // Fails (qkv::Error) before running anything if a count is < 1 or over the
  // model's context, the counts sum past max_tokens, or an id is out of range.
  void forward(const int32_t* const* tokens, const int64_t* counts, int64_t n, float* hidden);

  // The classifier head of a rank model on one [CLS] hidden state [dim]:
  // cls.output · tanh(cls · h + cls.bias) + cls.output.bias. Fails when the
  // model has no head (has_rank_head()).
  float rank_score(const float* h_cls) const;
  bool has_rank_head() const;

  int64_t max_tokens() const { return max_tokens_; }
  const Model& model() const { return model_; }

 private:
  const Model& model_;
  int64_t max_tokens_ = 0;
  // Activations of up to max_tokens_ rows: the residual stream x_, xb_ (a
  // sublayer's output), q_/k_/v_, att_ (attention output), hb_/hb2_ (FFN),
  // rope_cs_ (each row's RoPE cos/sin; RoPE families only).
  std::vector<float> x_, xb_, q_, k_, v_, att_, hb_, hb2_, rope_cs_;
};

}  // namespace qkv

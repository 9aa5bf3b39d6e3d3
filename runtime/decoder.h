// The decoder's forward pass over a Model, with its own KV cache: one pass for
// every family, steered by the configuration's architecture description
// (runtime/model.h, runtime/arch.h).
//
// One Decoder serves n_seqs sequences (cache slots). prefill() pushes a run of
// prompt tokens of one sequence through batched GEMMs and one causal attention
// call per layer; step_batch() advances several sequences by one token each
// (each weight row read once for all of them); step() is step_batch() of one.
// A Decoder is not thread-safe; many Decoders may share one const Model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/kv_cache.h"
#include "runtime/model.h"

namespace qkv {

struct DecoderOptions {
  int64_t context = 0;          // positions per sequence; 0: the model's context_length
  DType kv_type = DType::F16;   // KV cache element type
  int64_t n_seqs = 1;           // sequences (cache slots)
  int64_t prefill_batch = 256;  // prompt tokens per forward batch
  uint64_t memory_limit = 0;    // KV cache byte limit; 0: none
  // A decode step (up to 16 sequences) runs all its layers in one team of
  // threads with spinning syncs (kernels/threads/team.h); false: a parallel region
  // per kernel call, as a prefill does (same results; for comparisons).
  bool decode_team = true;
  // OpenMP threads of prompt passes (prefill*); 0: the caller's count, as decode steps.
  int threads_batch = 0;
};

// Inspection of one layer's attention during prefill: the softmax weights
// [n_heads][M][pos0 + M] of the layer's causal attention (the kernel's
// materialized path) and its rotated queries [M][q_dim], for the last prefill
// batch that ran the layer.
struct AttentionCapture {
  int64_t layer = -1;
  int64_t rows = 0, keys = 0;  // M and pos0 + M of the captured batch
  std::vector<float> weights, queries;
};

class Decoder {
 public:
  Decoder(const Model& model, const DecoderOptions& options);

  // Bytes of the activation buffers a Decoder of these options holds at most:
  // [max(prefill_batch, n_seqs)] rows of every per-row buffer plus the logits
  // of n_seqs rows (the KV cache is KVCache::bytes_for, the weights
  // Model::weight_bytes).
  static uint64_t activation_bytes(const ModelConfig& config, const DecoderOptions& options);

  // What a Decoder of these options makes resident: the model's weights
  // (mapped pages count once touched), its KV cache and its activations.
  struct ResidentBytes {
    uint64_t weights = 0, kv_cache = 0, activations = 0;
    uint64_t total() const { return weights + kv_cache + activations; }
  };
  static ResidentBytes resident_bytes(const Model& model, const DecoderOptions& options);
  // "" when resident_bytes fits within limit (0: no limit), else the error
  // naming each part and the limit.
  static std::string over_memory_limit(const Model& model, const DecoderOptions& options, uint64_t limit);

  // Runs tokens[0..n) of sequence seq at positions length(seq) .. length(seq)+n-1
  // and returns the logits [vocab] of the last one. Fails (qkv::Error) if the
  // tokens do not fit in the context or a token id is out of range.
  const float* prefill(int64_t seq, const int32_t* tokens, int64_t n);
  // Like prefill(), writing the logits of every token to all_logits [n][vocab]
  // (evaluation: perplexity, KL divergence).
  void prefill_all_logits(int64_t seq, const int32_t* tokens, int64_t n, float* all_logits);
  // Like prefill(), writing instead of logits the final normed hidden state of
  // every token (output_norm applied, the output matrix not) to hidden
  // [n][dim]: what decoder embeddings pool (llama.cpp's result_norm).
  void prefill_hidden(int64_t seq, const int32_t* tokens, int64_t n, float* hidden);
  // prefill_hidden() of n distinct sequences in shared passes (packed as
  // prefill_multi() packs them): hidden [sum counts][dim], the sequences' rows
  // one after another in the order given. The same checks, made before anything runs.
  void prefill_hidden_multi(const int64_t* seqs, const int32_t* const* tokens, const int64_t* counts, int64_t n,
                            float* hidden);

  // One token for each of n sequences seqs[i] (distinct); returns logits [n][vocab].
  const float* step_batch(const int64_t* seqs, const int32_t* tokens, int64_t n);
  const float* step(int64_t seq, int32_t token) { return step_batch(&seq, &token, 1); }
  // The prompt runs of n distinct sequences in one pass (runtime/decoder_multi.cc):
  // tokens[i][0..counts[i]) of sequence seqs[i] at its next positions. The GEMMs
  // run over every sequence's rows together (each weight read once per pass of
  // up to prefill_batch rows); attention is causal per sequence over its own
  // cache. Returns logits [n][vocab], the last token's of each sequence. The same
  // checks as prefill(), all made before anything runs.
  const float* prefill_multi(const int64_t* seqs, const int32_t* const* tokens, const int64_t* counts, int64_t n);
  // prefill_multi() writing the logits of every token to all_logits [sum counts][vocab],
  // the sequences' rows one after another in the order given (speculative
  // decoding's verify pass over several sequences).
  void prefill_multi_all_logits(const int64_t* seqs, const int32_t* const* tokens, const int64_t* counts, int64_t n,
                                float* all_logits);

  // Builds ahead what a prompt pass of up to prefill_batch rows needs (the
  // activation buffers, and oneDNN's GEMM primitives for every row bucket of
  // the layers' matrices), so that no request pays for it; returns the GEMM
  // primitives it built. The classifier is left out: a prompt pass needs its
  // logits for one row a sequence (a matvec or the small-batch kernel).
  int64_t prepare_prefill();

  int64_t position(int64_t seq) const { return cache_.length(seq); }
  int64_t context() const { return cache_.config().capacity; }
  int64_t vocab_size() const { return model_.config.vocab_size; }
  const Model& model() const { return model_; }
  KVCache& cache() { return cache_; }
  // Captures a layer's attention in later prefills (nullptr: none). The capture must outlive its use.
  void set_attention_capture(AttentionCapture* capture) { capture_ = capture; }
  const KVCache& cache() const { return cache_; }

 private:
  // The transformer over M rows of activations in x_: runs of rows of one
  // sequence each at consecutive positions (prefill), or of M sequences at their
  // own positions (decode: no two neighbouring rows of one sequence).
  void forward(int64_t M, const int64_t* seqs, const int64_t* pos);
  // Rows [row0, row0 + M) of q_ (one sequence's run) into the same rows of att_.
  void attention_prefill(int64_t layer, int64_t seq, int64_t pos0, int64_t M, int64_t window, int64_t row0 = 0);
  void check_tokens(const int32_t* tokens, int64_t n) const;
  void embed(const int32_t* tokens, int64_t M);
  void logits_for(int64_t first_row, int64_t rows, float* out = nullptr);  // out null: logits_
  // all_logits or hidden (at most one) receive every token's logits or normed hidden state.
  const float* prefill_impl(int64_t seq, const int32_t* tokens, int64_t n, float* all_logits, float* hidden);
  const float* prefill_multi_impl(const int64_t* seqs, const int32_t* const* tokens, const int64_t* counts, int64_t n,
                                  float* all_logits, float* hidden);
  // Final norm of activation rows [first_row, first_row + rows) into out [rows][dim].
  void hidden_for(int64_t first_row, int64_t rows, float* out);
  void ensure_rows(int64_t M);

  const Model& model_;
  DecoderOptions options_;
  KVCache cache_;
  int64_t rows_ = 0;  // activation rows allocated
  // Activations, [rows][width] each.
  std::vector<float> x_, xb_, q_, k_, v_, att_, hb_, hb2_, logits_;
  // A batched decode step's GEMM inputs xb_, att_ and hb_, quantized by the
  // passes that write them or (att_) a row pass after them (QuantizedInputs).
  QuantizedInputs xb_quantized_, hb_quantized_, att_quantized_;
  // The matrices that read xb_ (every layer's Q/K/V and gate/up), hb_
  // (ffn_down) and att_ (wo): what those are reserved for.
  std::vector<Matrix> xb_readers_, hb_readers_, att_readers_;
  AttentionCapture* capture_ = nullptr;
  std::vector<float> rope_cs_;        // per row of a step: RoPE cos/sin pairs (rope_angles)
  std::vector<float> rope_cs_local_;  // the same for sliding layers with their own base (gemma3)
  const std::vector<float>* rope_factors_ = nullptr;  // the factors this context uses (LongRoPE: long or short)
};

}  // namespace qkv

// Embeddings: token sequences in, one vector per input (or per token) out, as
// llama.cpp's llama-embedding computes them. Encoder models (causal == false:
// bert, nomic-bert) run packed through Encoder::forward; decoder models
// (qwen2/qwen3/llama) run causally through Decoder::prefill_hidden_multi, each
// input its own sequence from position 0, and their final normed hidden states
// (result_norm) are pooled. Pooling, Matryoshka truncation and normalization
// follow; RANK gives the classifier head's score on the [CLS] state instead.
//
// The forward passes' buffers are reused across calls through an EmbedPool;
// one pool may serve many threads at once (each call takes its own runner).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/model.h"

namespace qkv {

class Encoder;
class Decoder;

// Numbered as llama.cpp's llama_pooling_type (and the C API's qkv_pooling).
enum class Pooling : int { None = 0, Mean = 1, Cls = 2, Last = 3, Rank = 4 };

const char* pooling_name(Pooling p);

// The model's own pooling: GGUF <arch>.pooling_type when the file has it;
// otherwise LAST for a decoder (its last token has seen the whole input) and
// MEAN for an encoder.
Pooling model_pooling(const ModelConfig& config);

struct EmbedOptions {
  Pooling pooling = Pooling::Mean;
  // llama-embedding's --embd-normalize: -1 none, 0 max-abs scaled to 32760,
  // 1 taxicab, 2 Euclidean, > 2 p-norm. Ignored for RANK (a score, not a vector).
  int normalize = 2;
  int64_t dimensions = 0;       // > 0: keep the first `dimensions` values before normalizing
  bool truncate = false;        // inputs over the context keep their first context-1 tokens and their last
  int64_t batch_tokens = 2048;  // tokens per forward pass
};

// out[0..n) = in[0..n) normalized as llama.cpp's common_embd_normalize: the
// norm summed in double; a zero vector stays zero. in may equal out.
void normalize_embedding(const float* in, float* out, int64_t n, int mode);

// Floats per output vector: 1 for RANK, else dimensions (when > 0) or the
// model's width. Fails when dimensions is over the width or negative.
int64_t embed_width(const ModelConfig& config, const EmbedOptions& options);

// One input: tokens[0..count), specials in place.
struct EmbedInput {
  const int32_t* tokens = nullptr;
  int64_t count = 0;
};

// The inputs after checking them against the model: each non-empty with ids in
// the vocabulary; one longer than the context fails (ErrorKind::kContextOverflow,
// naming its index and length) unless options.truncate, which keeps its first
// context-1 tokens and its last (the [SEP]/EOS stays). The returned inputs
// point into the given ones and into *storage (the truncated copies).
std::vector<EmbedInput> prepare_inputs(const ModelConfig& config, const std::vector<EmbedInput>& inputs,
                                       const EmbedOptions& options, std::vector<std::vector<int32_t>>* storage);

// How many vectors the inputs give: one per input, or one per token with NONE.
int64_t embed_vector_count(const std::vector<EmbedInput>& inputs, Pooling pooling);

// Reusable forward-pass runners of one model. take_* hands out one that fits
// (or makes one) for the caller's exclusive use; give_back returns it.
class EmbedPool {
 public:
  EmbedPool();
  ~EmbedPool();
  EmbedPool(const EmbedPool&) = delete;
  EmbedPool& operator=(const EmbedPool&) = delete;

  std::unique_ptr<Encoder> take_encoder(const Model& model, int64_t max_tokens);
  void give_back(std::unique_ptr<Encoder> encoder);
  // A decoder of at least n_seqs sequences of `context` positions with an F32
  // KV cache and prefill passes of `batch` rows; its caches are cleared.
  std::unique_ptr<Decoder> take_decoder(const Model& model, int64_t n_seqs, int64_t context, int64_t batch);
  void give_back(std::unique_ptr<Decoder> decoder);

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<Encoder>> encoders_;
  std::vector<std::unique_ptr<Decoder>> decoders_;
};

// Embeds prepared inputs (prepare_inputs) into out, embed_vector_count(...) *
// embed_width(...) floats, inputs in order. pool may be null (runners are then
// made for this call). Fails before running anything when RANK is asked of a
// model without a classifier head.
void embed(const Model& model, EmbedPool* pool, const std::vector<EmbedInput>& inputs, const EmbedOptions& options,
           float* out);

}  // namespace qkv

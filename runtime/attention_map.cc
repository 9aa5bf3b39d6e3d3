#include "runtime/attention_map.h"

#include "kernels/error.h"
#include "runtime/decoder.h"

namespace qkv {

AttentionMap attention_map(const Model& model, const int32_t* tokens, int64_t n, int64_t layer, DType kv_type) {
  const ModelConfig& c = model.config;
  QKV_CHECK(n >= 1, "an attention map needs at least one token");
  QKV_CHECK(layer >= 0 && layer < c.n_layers, "layer ", layer, " does not exist (the model has ", c.n_layers,
            " layers: 0 to ", c.n_layers - 1, ")");
  QKV_CHECK(c.context_length <= 0 || n <= c.context_length, "the prompt's ", n,
            " tokens exceed the model's context of ", c.context_length);
  QKV_CHECK(n <= 4096, "attention maps are limited to 4096 tokens (the weights take n^2 floats per head); got ", n);
  DecoderOptions o;
  o.context = n;
  o.kv_type = kv_type;
  o.prefill_batch = n;  // one batch: every query row sees every earlier key in one call
  Decoder decoder(model, o);
  AttentionCapture capture;
  capture.layer = layer;
  decoder.set_attention_capture(&capture);
  decoder.prefill(0, tokens, n);
  if (n == 1) {  // one token runs as a decode step: it attends to itself alone
    capture.rows = capture.keys = 1;
    capture.weights.assign(static_cast<size_t>(c.n_heads), 1.0f);
  }
  QKV_CHECK(capture.rows == n && capture.keys == n, "internal: the attention capture saw ", capture.rows, " rows");
  AttentionMap m;
  m.n_tokens = n;
  m.n_heads = c.n_heads;
  m.n_kv_heads = c.n_kv_heads;
  m.weights = std::move(capture.weights);
  m.queries = std::move(capture.queries);
  return m;
}

}  // namespace qkv

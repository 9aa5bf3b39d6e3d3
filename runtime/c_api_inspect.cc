// The C API's evaluation and inspection calls: attention on caller arrays
// (and its weights), perplexity and KL divergence, a prompt's attention maps.
#include <cstring>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/threads/cores.h"
#include "runtime/attention_map.h"
#include "runtime/c_api_internal.h"
#include "runtime/perplexity.h"

using namespace qkv::capi;

extern "C" {

void qkv_attention_params_init(qkv_attention_params* params) {
  if (!params) return;
  *params = qkv_attention_params{};
  params->batch = params->q_heads = params->kv_heads = params->q_len = params->kv_len = params->head_dim = 1;
}

}  // extern "C"

namespace {

// qkv_attention and qkv_attention_weights: the checks, then the kernel or the reference.
qkv_status attention_call(const qkv_attention_params* p, const float* q, const void* k, const void* v,
                          qkv_type kv_type, float* out, float* weights, bool reference) {
  QKV_REQUIRE(p);
  QKV_REQUIRE(q);
  QKV_REQUIRE(k);
  QKV_REQUIRE(v);
  QKV_REQUIRE(out);
  return guarded([&] {
    const qkv::DType t = to_dtype(kv_type);
    QKV_CHECK(p->head_dim >= 1 && p->batch >= 1 && p->q_heads >= 1 && p->kv_heads >= 1 && p->q_len >= 0 &&
                  p->kv_len >= 0,
              "qkv_attention: sizes must be positive, lengths non-negative (batch ", p->batch, ", heads ",
              p->q_heads, "/", p->kv_heads, ", lengths ", p->q_len, "/", p->kv_len, ", head_dim ", p->head_dim,
              ")");
    QKV_CHECK(p->q_heads % p->kv_heads == 0, "qkv_attention: ", p->q_heads, " query heads are not a multiple of ",
              p->kv_heads, " KV heads");
    QKV_CHECK(p->q_pos0 >= 0 && p->window >= 0, "qkv_attention: q_pos0 and window must not be negative");
    QKV_CHECK(p->threads >= 0, "qkv_attention: thread count must not be negative");
    QKV_CHECK(qkv::dtype_row_ok(t, static_cast<size_t>(p->head_dim)), "qkv_attention: head_dim ", p->head_dim,
              " cannot be stored as ", qkv::dtype_name(t));
    const int64_t d = p->head_dim;
    const auto row = static_cast<int64_t>(qkv::dtype_row_bytes(t, static_cast<size_t>(d)));
    // Strides and whole-array sizes must be representable, or the kernel's
    // offsets would wrap around.
    const auto q_bytes = checked_product({p->batch, p->q_heads, p->q_len, d, 4});
    const auto kv_bytes = checked_product({p->batch, p->kv_heads, p->kv_len, row});
    const auto mask_bytes = checked_product({p->q_len, p->kv_len, 4});
    QKV_CHECK(q_bytes && kv_bytes && mask_bytes, "qkv_attention: the arrays' sizes overflow 64 bits (batch ",
              p->batch, ", heads ", p->q_heads, "/", p->kv_heads, ", lengths ", p->q_len, "/", p->kv_len,
              ", head_dim ", d, ")");
    qkv::AttentionShape shape{p->batch, p->q_heads, p->kv_heads, p->q_len, p->kv_len, d};
    qkv::QueryView qv{q, p->q_heads * p->q_len * d, p->q_len * d, d};
    qkv::OutputView ov{out, p->q_heads * p->q_len * d, p->q_len * d, d};
    qkv::KVView kv{k, t, p->kv_heads * p->kv_len * row, p->kv_len * row, row};
    qkv::KVView vv{v, t, p->kv_heads * p->kv_len * row, p->kv_len * row, row};
    qkv::AttentionMask mask;
    mask.causal = p->causal != 0;
    mask.q_pos0 = p->q_pos0;
    mask.window = p->window;
    mask.additive = p->additive_mask;
    qkv::AttentionOptions opts;
    opts.scale = p->scale;
    opts.threads = qkv::threads_or_default(p->threads);
    if (weights) {
      QKV_CHECK(checked_product({p->batch, p->q_heads, p->q_len, p->kv_len, 4}),
                "qkv_attention_weights: the weights' size overflows 64 bits");
      opts.weights = weights;
    }
    if (reference) {
      qkv::attention_reference(shape, qv, kv, vv, mask, ov, opts);
    } else {
      qkv::attention(shape, qv, kv, vv, mask, ov, opts);
    }
    return QKV_OK;
  });
}

}  // namespace

extern "C" {

qkv_status qkv_attention(const qkv_attention_params* p, const float* q, const void* k, const void* v,
                         qkv_type kv_type, float* out) {
  return attention_call(p, q, k, v, kv_type, out, nullptr, false);
}

qkv_status qkv_attention_weights(const qkv_attention_params* p, const float* q, const void* k, const void* v,
                                 qkv_type kv_type, float* out, float* weights, qkv_attention_impl impl) {
  const int which = raw_enum(impl);
  if (which != QKV_ATTENTION_KERNEL && which != QKV_ATTENTION_REFERENCE) {
    return set_error(QKV_ERR_INVALID_ARGUMENT, "qkv_attention_weights: unknown implementation " + std::to_string(which));
  }
  return attention_call(p, q, k, v, kv_type, out, weights, which == QKV_ATTENTION_REFERENCE);
}

}  // extern "C"

// ---- evaluation ----

extern "C" {

void qkv_perplexity_options_init(qkv_perplexity_options* options) {
  if (!options) return;
  *options = qkv_perplexity_options{};
  options->n_ctx = 512;
  options->kv_type = QKV_TYPE_F16;
}

qkv_status qkv_perplexity(qkv_model* model, const char* text, const qkv_perplexity_options* options,
                          qkv_perplexity_callback callback, void* user, qkv_perplexity_stats* stats) {
  QKV_REQUIRE(model);
  qkv_perplexity_options o;
  qkv_perplexity_options_init(&o);
  if (options) o = *options;
  if (!o.kl_divergence_read) QKV_REQUIRE(text);
  return guarded([&] {
    QKV_CHECK(o.n_ctx >= 0 && o.batch >= 0 && o.threads >= 0, "qkv_perplexity: n_ctx, batch and threads must not be negative");
    qkv::PerplexityConfig cfg;
    cfg.n_ctx = o.n_ctx > 0 ? o.n_ctx : (o.kl_divergence_read ? 0 : 512);
    cfg.batch = o.batch;
    cfg.chunks = o.chunks;
    cfg.kv_type = to_dtype(o.kv_type);
    if (o.kl_divergence_write) cfg.kld_write = o.kl_divergence_write;
    if (o.kl_divergence_read) cfg.kld_read = o.kl_divergence_read;
    QKV_CHECK(cfg.kld_write.empty() || cfg.kld_write != cfg.kld_read,
              "qkv_perplexity: the base file to write is the one to read");
    const qkv::Tokenizer& tok = tokenizer_of(model);
    std::vector<int32_t> tokens;
    if (cfg.kld_read.empty()) tokens = tok.encode(text, tok.add_bos(), false);
    ThreadScope threads(o.threads);
    const qkv_perplexity_stats s = qkv::evaluate_perplexity(
        model->model, tok.add_bos() ? tok.bos_id() : -1, tokens, cfg,
        [&](const qkv_perplexity_stats& running) { return !callback || callback(&running, user) == 0; });
    if (stats) *stats = s;
    return QKV_OK;
  });
}

}  // extern "C"

// ---- attention maps ----

extern "C" {

qkv_status qkv_attention_map(qkv_model* model, const int32_t* tokens, int64_t n_tokens, int64_t layer, int64_t head,
                             int threads, float* weights, int64_t capacity, int64_t* needed) {
  QKV_REQUIRE(model);
  QKV_REQUIRE(tokens);
  QKV_REQUIRE(needed);
  if (capacity < 0) return set_error(QKV_ERR_INVALID_ARGUMENT, "qkv_attention_map: negative capacity");
  if (capacity > 0) QKV_REQUIRE(weights);
  return guarded([&] {
    const qkv::ModelConfig& c = model->model.config;
    QKV_CHECK(n_tokens >= 1 && n_tokens <= 4096, "qkv_attention_map: 1 to 4096 tokens, not ", n_tokens);
    QKV_CHECK(head >= -1 && head < c.n_heads, "qkv_attention_map: head ", head, " does not exist (", c.n_heads,
              " query heads; -1 for all)");
    QKV_CHECK(threads >= 0, "qkv_attention_map: negative thread count");
    QKV_CHECK(layer >= 0 && layer < c.n_layers, "qkv_attention_map: layer ", layer, " does not exist (the model has ",
              c.n_layers, " layers: 0 to ", c.n_layers - 1, ")");
    const int64_t per_head = n_tokens * n_tokens;
    const int64_t n = head < 0 ? c.n_heads * per_head : per_head;
    *needed = n;
    if (capacity < n) return buffer_too_small(__func__, "weights", capacity, n, "floats");
    for (int64_t i = 0; i < n_tokens; ++i) {
      QKV_CHECK(tokens[i] >= 0 && tokens[i] < c.vocab_size, "token id ", tokens[i], " is outside the vocabulary");
    }
    ThreadScope scope(threads);
    const qkv::AttentionMap m = qkv::attention_map(model->model, tokens, n_tokens, layer);
    const float* src = m.weights.data() + (head < 0 ? 0 : head * per_head);
    std::copy(src, src + n, weights);
    return QKV_OK;
  });
}

qkv_status qkv_vocab_piece(const qkv_model* model, int32_t token, char* text, int64_t capacity, int64_t* length) {
  QKV_REQUIRE(model);
  QKV_REQUIRE(length);
  if (capacity < 0) return set_error(QKV_ERR_INVALID_ARGUMENT, "qkv_vocab_piece: negative capacity");
  if (capacity > 0) QKV_REQUIRE(text);
  return guarded([&] {
    const std::string& p = tokenizer_of(model).piece(token);
    const auto n = static_cast<int64_t>(p.size());
    *length = n;
    if (capacity < n + 1) return buffer_too_small(__func__, "text", capacity, n + 1, "bytes (with the NUL)");
    std::memcpy(text, p.data(), p.size());
    text[p.size()] = '\0';
    return QKV_OK;
  });
}

}  // extern "C"

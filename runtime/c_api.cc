// The C API (include/qkv.h) over the C++ runtime. Every entry point catches
// everything: a qkv::Error becomes its status and message, nothing unwinds
// into the caller's C code.
#include "qkv.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "kernels/attention.h"
#include "kernels/error.h"
#include "kernels/simd_target.h"
#include "runtime/decoder.h"
#include "runtime/generate.h"
#include "runtime/gguf.h"
#include "runtime/model_loader.h"
#include "runtime/sampler.h"
#include "runtime/tokenizer.h"
#include "runtime/version.h"

struct qkv_model {
  qkv::Model model;
  std::optional<qkv::Tokenizer> tokenizer;
};

struct qkv_context {
  qkv_model* model = nullptr;
  std::unique_ptr<qkv::Decoder> decoder;
  int threads = 0;
  std::vector<std::unique_ptr<qkv_session>> slots;
};

struct qkv_session {
  qkv_context* context = nullptr;
  int64_t seq = 0;
  bool owns_context = false;  // made by qkv_session_create
  std::vector<float> last_logits;
  std::optional<qkv::Sampler> sampler;
  qkv::SamplerOptions sampler_options;
};

namespace {

thread_local std::string g_last_error;

qkv_status set_error(qkv_status st, const std::string& msg) {
  g_last_error = msg;
  return st;
}

qkv_status status_of(qkv::ErrorKind kind, qkv_status fallback) {
  switch (kind) {
    case qkv::ErrorKind::kIO: return QKV_ERR_IO;
    case qkv::ErrorKind::kFormat: return QKV_ERR_FORMAT;
    case qkv::ErrorKind::kContextOverflow: return QKV_ERR_CONTEXT_OVERFLOW;
    case qkv::ErrorKind::kOutOfMemory: return QKV_ERR_OUT_OF_MEMORY;
    case qkv::ErrorKind::kInvalid: return fallback;
  }
  return fallback;
}

// Runs f, turning every exception into a status; `invalid_as` is the status a
// plain bad-input error means here (a malformed file when loading).
template <typename F>
qkv_status guarded(F&& f, qkv_status invalid_as = QKV_ERR_INVALID_ARGUMENT) {
  try {
    f();
    g_last_error.clear();
    return QKV_OK;
  } catch (const qkv::Error& e) {
    return set_error(status_of(e.kind(), invalid_as), e.what());
  } catch (const std::bad_alloc&) {
    return set_error(QKV_ERR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return set_error(QKV_ERR_INTERNAL, e.what());
  } catch (...) {
    return set_error(QKV_ERR_INTERNAL, "unknown error");
  }
}

#define QKV_REQUIRE(ptr) \
  if (!(ptr)) return set_error(QKV_ERR_INVALID_ARGUMENT, std::string(__func__) + ": " #ptr " is NULL")

qkv::DType to_dtype(qkv_type t) {
  switch (t) {
    case QKV_TYPE_F32: return qkv::DType::F32;
    case QKV_TYPE_F16: return qkv::DType::F16;
    case QKV_TYPE_BF16: return qkv::DType::BF16;
    case QKV_TYPE_Q8_0: return qkv::DType::Q8_0;
  }
  qkv::fail("unknown element type ", static_cast<int>(t));
}

// OpenMP's thread count is per calling thread, so each call sets its own.
void use_threads(int threads) { omp_set_num_threads(threads > 0 ? threads : omp_get_num_procs()); }

const qkv::Tokenizer& tokenizer_of(const qkv_model* m) {
  if (!m->tokenizer) {
    qkv::fail("this model has no vocabulary: a llama2.c checkpoint needs a tokenizer file "
              "(qkv_model_options.tokenizer_path, or -z on the command line)");
  }
  return *m->tokenizer;
}

void copy_logits(const float* src, int64_t count, float* dst, int64_t capacity) {
  if (!dst) return;
  if (capacity < count) {
    qkv::fail("logits buffer holds ", capacity, " floats but ", count, " are needed");
  }
  std::copy(src, src + count, dst);
}

}  // namespace

extern "C" {

const char* qkv_last_error(void) { return g_last_error.c_str(); }
const char* qkv_version(void) { return qkv::version_string(); }
const char* qkv_simd_target(void) { return qkv::simd_target_name(); }

const char* qkv_status_name(qkv_status status) {
  switch (status) {
    case QKV_OK: return "ok";
    case QKV_ERR_INVALID_ARGUMENT: return "invalid argument";
    case QKV_ERR_IO: return "i/o error";
    case QKV_ERR_FORMAT: return "bad file format";
    case QKV_ERR_CONTEXT_OVERFLOW: return "context overflow";
    case QKV_ERR_OUT_OF_MEMORY: return "out of memory";
    case QKV_ERR_BUFFER_TOO_SMALL: return "buffer too small";
    case QKV_ERR_INTERNAL: return "internal error";
  }
  return "unknown status";
}

void qkv_model_options_init(qkv_model_options* options) {
  if (options) *options = qkv_model_options{};
}

qkv_status qkv_model_load(const char* path, const qkv_model_options* options, qkv_model** model) {
  QKV_REQUIRE(path);
  QKV_REQUIRE(model);
  *model = nullptr;
  struct stat st;
  if (::stat(path, &st) != 0) return set_error(QKV_ERR_IO, std::string(path) + ": cannot open the model file");
  if (options && options->tokenizer_path && ::stat(options->tokenizer_path, &st) != 0) {
    return set_error(QKV_ERR_IO, std::string(options->tokenizer_path) + ": cannot open the tokenizer file");
  }
  return guarded(
      [&] {
        auto m = std::make_unique<qkv_model>();
        m->model = qkv::load_model(path);
        const int64_t vocab = m->model.config.vocab_size;
        if (options && options->tokenizer_path) {
          m->tokenizer = qkv::Tokenizer::load(options->tokenizer_path, vocab);
        } else if (qkv::detect_model_format(path) == qkv::ModelFormat::GGUF) {
          const qkv::GGUFFile file = qkv::GGUFFile::open(path);
          if (file.find("tokenizer.ggml.tokens")) m->tokenizer = qkv::Tokenizer::from_gguf(file);
        }
        if (m->tokenizer && m->tokenizer->vocab_size() != vocab) {
          qkv::fail_as(qkv::ErrorKind::kFormat, "the tokenizer has ", m->tokenizer->vocab_size(),
                       " tokens but the model's vocabulary is ", vocab);
        }
        *model = m.release();
      },
      QKV_ERR_FORMAT);
}

void qkv_model_free(qkv_model* model) { delete model; }

qkv_status qkv_model_get_info(const qkv_model* model, qkv_model_info* info) {
  QKV_REQUIRE(model);
  QKV_REQUIRE(info);
  return guarded([&] {
    const qkv::ModelConfig& c = model->model.config;
    *info = qkv_model_info{};
    std::strncpy(info->architecture, c.architecture.c_str(), sizeof(info->architecture) - 1);
    info->dim = c.dim;
    info->hidden_dim = c.hidden_dim;
    info->n_layers = c.n_layers;
    info->n_heads = c.n_heads;
    info->n_kv_heads = c.n_kv_heads;
    info->head_dim = c.head_dim;
    info->vocab_size = c.vocab_size;
    info->context_length = c.context_length;
    info->parameters = model->model.parameter_count();
    info->weight_bytes = model->model.weight_bytes();
    info->has_tokenizer = model->tokenizer.has_value();
    info->bos_id = model->tokenizer ? model->tokenizer->bos_id() : -1;
    info->eos_id = model->tokenizer ? model->tokenizer->eos_id() : -1;
  });
}

qkv_status qkv_tokenize(const qkv_model* model, const char* text, int add_bos, int32_t* tokens, int64_t capacity,
                        int64_t* n_tokens) {
  QKV_REQUIRE(model);
  QKV_REQUIRE(text);
  QKV_REQUIRE(n_tokens);
  qkv_status result = QKV_OK;
  const qkv_status st = guarded([&] {
    const std::vector<int32_t> ids = tokenizer_of(model).encode(text, add_bos != 0, false);
    *n_tokens = static_cast<int64_t>(ids.size());
    if (!tokens || capacity < *n_tokens) {
      result = QKV_ERR_BUFFER_TOO_SMALL;
      return;
    }
    std::copy(ids.begin(), ids.end(), tokens);
  });
  if (st != QKV_OK) return st;
  if (result != QKV_OK) {
    return set_error(result, "token buffer holds " + std::to_string(capacity) + " ids but " +
                                 std::to_string(*n_tokens) + " are needed");
  }
  return QKV_OK;
}

qkv_status qkv_detokenize(const qkv_model* model, const int32_t* tokens, int64_t n_tokens, char* text,
                          int64_t capacity, int64_t* length) {
  QKV_REQUIRE(model);
  QKV_REQUIRE(length);
  if (n_tokens > 0) QKV_REQUIRE(tokens);
  if (n_tokens < 0) return set_error(QKV_ERR_INVALID_ARGUMENT, "negative token count");
  qkv_status result = QKV_OK;
  const qkv_status st = guarded([&] {
    const std::string s = tokenizer_of(model).decode(std::vector<int32_t>(tokens, tokens + n_tokens));
    *length = static_cast<int64_t>(s.size());
    if (!text || capacity < *length + 1) {
      result = QKV_ERR_BUFFER_TOO_SMALL;
      return;
    }
    std::memcpy(text, s.data(), s.size());
    text[s.size()] = '\0';
  });
  if (st != QKV_OK) return st;
  if (result != QKV_OK) {
    return set_error(result, "text buffer holds " + std::to_string(capacity) + " bytes but " +
                                 std::to_string(*length + 1) + " are needed");
  }
  return QKV_OK;
}

void qkv_context_options_init(qkv_context_options* options) {
  if (!options) return;
  *options = qkv_context_options{};
  options->kv_type = QKV_TYPE_F16;
}

qkv_status qkv_context_create(qkv_model* model, int64_t n_seqs, const qkv_context_options* options,
                              qkv_context** context) {
  QKV_REQUIRE(model);
  QKV_REQUIRE(context);
  *context = nullptr;
  qkv_context_options o;
  qkv_context_options_init(&o);
  if (options) o = *options;
  return guarded([&] {
    QKV_CHECK(n_seqs >= 1, "a context needs at least one sequence (got ", n_seqs, ")");
    QKV_CHECK(o.threads >= 0, "thread count must not be negative");
    qkv::DecoderOptions d;
    d.context = o.context;
    d.kv_type = to_dtype(o.kv_type);
    d.memory_limit = o.memory_limit;
    d.n_seqs = n_seqs;
    if (o.prefill_batch > 0) d.prefill_batch = o.prefill_batch;
    auto ctx = std::make_unique<qkv_context>();
    ctx->model = model;
    ctx->threads = o.threads;
    ctx->decoder = std::make_unique<qkv::Decoder>(model->model, d);
    for (int64_t i = 0; i < n_seqs; ++i) {
      auto s = std::make_unique<qkv_session>();
      s->context = ctx.get();
      s->seq = i;
      ctx->slots.push_back(std::move(s));
    }
    *context = ctx.release();
  });
}

void qkv_context_free(qkv_context* context) { delete context; }

uint64_t qkv_context_kv_bytes(const qkv_context* context) {
  return context ? context->decoder->cache().bytes() : 0;
}

uint64_t qkv_session_kv_bytes(const qkv_session* session) {
  return session ? qkv_context_kv_bytes(session->context) : 0;
}

qkv_status qkv_context_session(qkv_context* context, int64_t i, qkv_session** session) {
  QKV_REQUIRE(context);
  QKV_REQUIRE(session);
  if (i < 0 || i >= static_cast<int64_t>(context->slots.size())) {
    return set_error(QKV_ERR_INVALID_ARGUMENT, "context has " + std::to_string(context->slots.size()) +
                                                   " sequences; there is no sequence " + std::to_string(i));
  }
  *session = context->slots[static_cast<size_t>(i)].get();
  return QKV_OK;
}

qkv_status qkv_session_create(qkv_model* model, const qkv_context_options* options, qkv_session** session) {
  QKV_REQUIRE(session);
  *session = nullptr;
  qkv_context* ctx = nullptr;
  const qkv_status st = qkv_context_create(model, 1, options, &ctx);
  if (st != QKV_OK) return st;
  ctx->slots[0]->owns_context = true;
  *session = ctx->slots[0].get();
  return QKV_OK;
}

void qkv_session_free(qkv_session* session) {
  if (session && session->owns_context) delete session->context;
}

qkv_status qkv_session_prefill(qkv_session* session, const int32_t* tokens, int64_t n_tokens, float* logits,
                               int64_t logits_capacity) {
  QKV_REQUIRE(session);
  QKV_REQUIRE(tokens);
  return guarded([&] {
    use_threads(session->context->threads);
    qkv::Decoder& dec = *session->context->decoder;
    const float* out = dec.prefill(session->seq, tokens, n_tokens);
    session->last_logits.assign(out, out + dec.vocab_size());
    copy_logits(out, dec.vocab_size(), logits, logits_capacity);
  });
}

qkv_status qkv_session_step(qkv_session* session, int32_t token, float* logits, int64_t logits_capacity) {
  qkv_session* const one[1] = {session};
  return qkv_step_batch(one, &token, 1, logits, logits_capacity);
}

qkv_status qkv_step_batch(qkv_session* const* sessions, const int32_t* tokens, int64_t n, float* logits,
                          int64_t logits_capacity) {
  QKV_REQUIRE(sessions);
  QKV_REQUIRE(tokens);
  if (n < 1) return set_error(QKV_ERR_INVALID_ARGUMENT, "a batched step needs at least one session");
  for (int64_t i = 0; i < n; ++i) QKV_REQUIRE(sessions[i]);
  qkv_context* ctx = sessions[0]->context;
  for (int64_t i = 1; i < n; ++i) {
    if (sessions[i]->context != ctx) {
      return set_error(QKV_ERR_INVALID_ARGUMENT,
                       "sessions in one batched step must be slots of one context (qkv_context_session)");
    }
  }
  return guarded([&] {
    use_threads(ctx->threads);
    qkv::Decoder& dec = *ctx->decoder;
    const int64_t vocab = dec.vocab_size();
    if (logits && logits_capacity < n * vocab) {
      qkv::fail("logits buffer holds ", logits_capacity, " floats but ", n * vocab, " are needed");
    }
    std::vector<int64_t> seqs(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) seqs[i] = sessions[i]->seq;
    const float* out = dec.step_batch(seqs.data(), tokens, n);
    for (int64_t i = 0; i < n; ++i) sessions[i]->last_logits.assign(out + i * vocab, out + (i + 1) * vocab);
    if (logits) std::copy(out, out + n * vocab, logits);
  });
}

qkv_status qkv_session_position(const qkv_session* session, int64_t* position) {
  QKV_REQUIRE(session);
  QKV_REQUIRE(position);
  *position = session->context->decoder->position(session->seq);
  return QKV_OK;
}

qkv_status qkv_session_truncate(qkv_session* session, int64_t position) {
  QKV_REQUIRE(session);
  return guarded([&] {
    session->context->decoder->cache().truncate(session->seq, position);
    session->last_logits.clear();
  });
}

void qkv_sampler_options_init(qkv_sampler_options* options) {
  if (!options) return;
  const qkv::SamplerOptions d;
  options->temperature = d.temperature;
  options->top_k = d.top_k;
  options->top_p = d.top_p;
  options->min_p = d.min_p;
  options->seed = d.seed;
}

namespace {
qkv::SamplerOptions to_sampler(const qkv_sampler_options& o) {
  qkv::SamplerOptions s;
  s.temperature = o.temperature;
  s.top_k = o.top_k;
  s.top_p = o.top_p;
  s.min_p = o.min_p;
  s.seed = o.seed;
  return s;
}
}  // namespace

qkv_status qkv_session_set_sampler(qkv_session* session, const qkv_sampler_options* options) {
  QKV_REQUIRE(session);
  QKV_REQUIRE(options);
  return guarded([&] { session->sampler.emplace(to_sampler(*options)); });
}

qkv_status qkv_session_sample(qkv_session* session, int32_t* token) {
  QKV_REQUIRE(session);
  QKV_REQUIRE(token);
  return guarded([&] {
    QKV_CHECK(!session->last_logits.empty(), "no logits to sample from: prefill or step first");
    if (!session->sampler) session->sampler.emplace(qkv::SamplerOptions{});
    std::vector<float> scratch = session->last_logits;
    *token = session->sampler->sample(scratch.data(), static_cast<int64_t>(scratch.size()));
  });
}

void qkv_generate_options_init(qkv_generate_options* options) {
  if (!options) return;
  *options = qkv_generate_options{};
  options->n_predict = -1;
  options->add_bos = 1;
  qkv_sampler_options_init(&options->sampler);
}

qkv_status qkv_generate(qkv_session* session, const char* prompt, const qkv_generate_options* options,
                        qkv_piece_callback callback, void* user, qkv_generate_stats* stats) {
  QKV_REQUIRE(session);
  QKV_REQUIRE(prompt);
  qkv_generate_options o;
  qkv_generate_options_init(&o);
  if (options) o = *options;
  return guarded([&] {
    use_threads(session->context->threads);
    qkv::GenerateOptions g;
    g.steps = o.steps;
    g.n_predict = o.n_predict;
    g.add_bos = o.add_bos != 0;
    g.seq = session->seq;
    g.sampler = to_sampler(o.sampler);
    const qkv::Tokenizer& tok = tokenizer_of(session->context->model);
    const qkv::GenerateStats s = qkv::generate(*session->context->decoder, tok, prompt, g,
                                               [&](const std::string& piece) {
                                                 return callback ? callback(piece.data(), piece.size(), user) == 0
                                                                 : true;
                                               });
    if (stats) {
      *stats = qkv_generate_stats{};
      stats->prompt_tokens = s.prompt_tokens;
      stats->generated_tokens = s.generated_tokens;
      stats->forward_passes = s.forward_passes;
      stats->prompt_ms = s.prompt_ms;
      stats->generate_ms = s.generate_ms;
      std::strncpy(stats->stop_reason, s.stop_reason.c_str(), sizeof(stats->stop_reason) - 1);
    }
  });
}

void qkv_attention_params_init(qkv_attention_params* params) {
  if (!params) return;
  *params = qkv_attention_params{};
  params->batch = params->q_heads = params->kv_heads = params->q_len = params->kv_len = params->head_dim = 1;
}

qkv_status qkv_attention(const qkv_attention_params* p, const float* q, const void* k, const void* v,
                         qkv_type kv_type, float* out) {
  QKV_REQUIRE(p);
  QKV_REQUIRE(q);
  QKV_REQUIRE(k);
  QKV_REQUIRE(v);
  QKV_REQUIRE(out);
  return guarded([&] {
    const qkv::DType t = to_dtype(kv_type);
    QKV_CHECK(p->head_dim >= 1 && p->batch >= 1 && p->q_heads >= 1 && p->kv_heads >= 1 && p->q_len >= 0 &&
                  p->kv_len >= 0,
              "attention shape must be positive (batch ", p->batch, ", heads ", p->q_heads, "/", p->kv_heads,
              ", lengths ", p->q_len, "/", p->kv_len, ", head_dim ", p->head_dim, ")");
    QKV_CHECK(qkv::dtype_row_ok(t, static_cast<size_t>(p->head_dim)), "head_dim ", p->head_dim,
              " cannot be stored as ", qkv::dtype_name(t));
    qkv::AttentionShape shape{p->batch, p->q_heads, p->kv_heads, p->q_len, p->kv_len, p->head_dim};
    const int64_t d = p->head_dim;
    const int64_t row = static_cast<int64_t>(qkv::dtype_row_bytes(t, static_cast<size_t>(d)));
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
    opts.threads = p->threads;
    qkv::attention(shape, qv, kv, vv, mask, ov, opts);
  });
}

}  // extern "C"

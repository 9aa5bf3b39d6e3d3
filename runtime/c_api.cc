// The C API (include/qkv.h) over the C++ runtime. Every entry point checks its
// pointers and sizes itself and catches everything below it: a qkv::Error
// becomes its status and message, nothing unwinds into the caller's C code.
// Checks that depend on the caller's buffers run before any work, so a failed
// call leaves the session as it was.
#include "qkv.h"

#include <fcntl.h>
#include <omp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "kernels/machine/isa_cap.h"
#include "kernels/simd_target.h"
#include "runtime/chat_template.h"
#include "runtime/decoder.h"
#include "runtime/generate.h"
#include "runtime/gguf.h"
#include "runtime/model_loader.h"
#include "runtime/sampler.h"
#include "runtime/speculative_drafters.h"
#include "runtime/tokenizer.h"
#include "runtime/c_api_internal.h"
#include "runtime/version.h"
#include "runtime/weight_placement.h"

using namespace qkv::capi;

namespace {
// QKV_ERR_IO unless path names a regular file this process can open for reading.
qkv_status check_readable(const char* path, const char* what) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return set_error(QKV_ERR_IO, std::string("cannot open the ") + what + " file '" + path +
                                     "': " + std::strerror(errno));
  }
  struct stat st;
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  ::close(fd);
  if (!regular) return set_error(QKV_ERR_IO, std::string("the ") + what + " path '" + path + "' is not a regular file");
  return QKV_OK;
}

qkv::SamplerOptions to_sampler(const qkv_sampler_options& o) {
  qkv::SamplerOptions s;
  s.temperature = o.temperature;
  s.top_k = o.top_k;
  s.top_p = o.top_p;
  s.min_p = o.min_p;
  s.seed = o.seed;
  s.repeat_penalty = o.repeat_penalty;
  s.repeat_last_n = o.repeat_last_n;
  s.presence_penalty = o.presence_penalty;
  s.frequency_penalty = o.frequency_penalty;
  return s;
}

}  // namespace

extern "C" {

const char* qkv_last_error(void) { return g_last_error.c_str(); }
const char* qkv_version(void) { return qkv::version_string(); }
const char* qkv_simd_target(void) { return qkv::simd_target_name(); }

const char* qkv_status_name(qkv_status status) {
  switch (raw_enum(status)) {
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
  QKV_REQUIRE(model);
  *model = nullptr;
  QKV_REQUIRE(path);
  // The loaders report every problem as a malformed file; a path that cannot be
  // opened at all is told apart here.
  if (const qkv_status st = check_readable(path, "model"); st != QKV_OK) return st;
  const char* tokenizer_path = options ? options->tokenizer_path : nullptr;
  if (tokenizer_path) {
    if (const qkv_status st = check_readable(tokenizer_path, "tokenizer"); st != QKV_OK) return st;
  }
  return guarded(
      [&] {
        QKV_CHECK(qkv::isa_cap_env_error().empty(), qkv::isa_cap_env_error());
        auto m = std::make_unique<qkv_model>();
        m->model = qkv::load_model(path);
        qkv::lay_out_weights(m->model);
        qkv::place_weights(m->model);  // --numa (kernels/threads/placement.h)
        const int64_t vocab = m->model.config.vocab_size;
        if (tokenizer_path) {
          m->tokenizer = qkv::Tokenizer::load(tokenizer_path, vocab);
        } else if (qkv::detect_model_format(path) == qkv::ModelFormat::GGUF) {
          const qkv::GGUFFile file = qkv::GGUFFile::open(path);
          if (file.find("tokenizer.ggml.tokens")) m->tokenizer = qkv::Tokenizer::from_gguf(file);
        }
        if (qkv::detect_model_format(path) == qkv::ModelFormat::GGUF)
          m->chat = qkv::chat_template_of(qkv::GGUFFile::open(path));
        if (m->tokenizer && m->tokenizer->vocab_size() != vocab) {
          qkv::fail_as(qkv::ErrorKind::kFormat, "the tokenizer has ", m->tokenizer->vocab_size(),
                       " tokens but the model's vocabulary is ", vocab);
        }
        *model = m.release();
        return QKV_OK;
      },
      QKV_ERR_FORMAT);
}

void qkv_model_free(qkv_model* model) { delete model; }

qkv_status qkv_model_get_info(const qkv_model* model, qkv_model_info* info) {
  QKV_REQUIRE(model);
  QKV_REQUIRE(info);
  return guarded([&] {
    const qkv::ModelConfig& c = model->model.config;
    qkv_model_info out{};
    std::strncpy(out.architecture, c.architecture.c_str(), sizeof(out.architecture) - 1);
    out.dim = c.dim;
    out.hidden_dim = c.hidden_dim;
    out.n_layers = c.n_layers;
    out.n_heads = c.n_heads;
    out.n_kv_heads = c.n_kv_heads;
    out.head_dim = c.head_dim;
    out.vocab_size = c.vocab_size;
    out.context_length = c.context_length;
    out.parameters = model->model.parameter_count();
    out.weight_bytes = model->model.weight_bytes();
    out.has_tokenizer = model->tokenizer.has_value();
    out.bos_id = model->tokenizer ? model->tokenizer->bos_id() : -1;
    out.eos_id = model->tokenizer ? model->tokenizer->eos_id() : -1;
    *info = out;
    return QKV_OK;
  });
}

qkv_status qkv_tokenize(const qkv_model* model, const char* text, int add_bos, int32_t* tokens, int64_t capacity,
                        int64_t* n_tokens) {
  QKV_REQUIRE(model);
  QKV_REQUIRE(text);
  QKV_REQUIRE(n_tokens);
  if (capacity < 0) return set_error(QKV_ERR_INVALID_ARGUMENT, "qkv_tokenize: negative capacity");
  if (capacity > 0) QKV_REQUIRE(tokens);
  return guarded([&] {
    return copy_ids(__func__, tokenizer_of(model).encode(text, add_bos != 0, false), tokens, capacity, n_tokens);
  });
}

int qkv_has_chat_template(const qkv_model* model) { return model && !model->chat.source.empty() ? 1 : 0; }

const char* qkv_model_chat_template(const qkv_model* model) {
  return model && !model->chat.source.empty() ? model->chat.source.c_str() : nullptr;
}

qkv_status qkv_chat_render(const qkv_model* model, const char* template_source, const char* conversation_json,
                           int add_generation_prompt, char* text, int64_t capacity, int64_t* length) {
  QKV_REQUIRE(model);
  QKV_REQUIRE(conversation_json);
  QKV_REQUIRE(length);
  if (capacity < 0) return set_error(QKV_ERR_INVALID_ARGUMENT, "qkv_chat_render: negative capacity");
  if (capacity > 0) QKV_REQUIRE(text);
  return guarded([&] {
    qkv::ChatTemplate t = model->chat;
    if (template_source) t.source = template_source;
    const std::string s = qkv::render_chat(t, conversation_json, add_generation_prompt != 0);
    const auto n = static_cast<int64_t>(s.size());
    *length = n;
    if (capacity < n + 1) return buffer_too_small(__func__, "text", capacity, n + 1, "bytes (with the NUL)");
    std::memcpy(text, s.data(), s.size());
    text[s.size()] = '\0';
    return QKV_OK;
  });
}

qkv_status qkv_tokenize_text(const qkv_model* model, const char* text, int64_t length, int flags, int32_t* tokens,
                             int64_t capacity, int64_t* n_tokens) {
  QKV_REQUIRE(model);
  QKV_REQUIRE(n_tokens);
  if (length < 0) return set_error(QKV_ERR_INVALID_ARGUMENT, "qkv_tokenize_text: negative length");
  if (length > 0) QKV_REQUIRE(text);
  if (capacity < 0) return set_error(QKV_ERR_INVALID_ARGUMENT, "qkv_tokenize_text: negative capacity");
  if (capacity > 0) QKV_REQUIRE(tokens);
  if (flags & ~(QKV_TOKENIZE_ADD_SPECIAL | QKV_TOKENIZE_PARSE_SPECIAL)) {
    return set_error(QKV_ERR_INVALID_ARGUMENT, "qkv_tokenize_text: unknown flags " + std::to_string(flags));
  }
  return guarded([&] {
    const qkv::Tokenizer& tok = tokenizer_of(model);
    const bool add = (flags & QKV_TOKENIZE_ADD_SPECIAL) != 0;
    const std::vector<int32_t> ids = tok.encode(std::string(text ? text : "", static_cast<size_t>(length)),
                                                add && tok.add_bos(), add && tok.add_eos(),
                                                (flags & QKV_TOKENIZE_PARSE_SPECIAL) != 0);
    return copy_ids(__func__, ids, tokens, capacity, n_tokens);
  });
}

qkv_status qkv_detokenize_text(const qkv_model* model, const int32_t* tokens, int64_t n_tokens, int flags, char* text,
                               int64_t capacity, int64_t* length) {
  QKV_REQUIRE(model);
  QKV_REQUIRE(length);
  if (n_tokens < 0) return set_error(QKV_ERR_INVALID_ARGUMENT, "qkv_detokenize_text: negative token count");
  if (n_tokens > 0) QKV_REQUIRE(tokens);
  if (capacity < 0) return set_error(QKV_ERR_INVALID_ARGUMENT, "qkv_detokenize_text: negative capacity");
  if (capacity > 0) QKV_REQUIRE(text);
  return guarded([&] {
    const std::string s = tokenizer_of(model).decode(std::vector<int32_t>(tokens, tokens + n_tokens),
                                                     (flags & QKV_TOKENIZE_PARSE_SPECIAL) != 0);
    return copy_text(__func__, s, text, capacity, length);
  });
}

qkv_status qkv_token_piece(const qkv_model* model, int32_t prev_token, int32_t token, int flags, char* text,
                           int64_t capacity, int64_t* length) {
  QKV_REQUIRE(model);
  QKV_REQUIRE(length);
  if (capacity < 0) return set_error(QKV_ERR_INVALID_ARGUMENT, "qkv_token_piece: negative capacity");
  if (capacity > 0) QKV_REQUIRE(text);
  return guarded([&] {
    const std::string s = tokenizer_of(model).decode(prev_token, token, (flags & QKV_TOKENIZE_PARSE_SPECIAL) != 0);
    return copy_text(__func__, s, text, capacity, length);
  });
}

qkv_status qkv_eog_tokens(const qkv_model* model, int32_t* tokens, int64_t capacity, int64_t* n_tokens) {
  QKV_REQUIRE(model);
  QKV_REQUIRE(n_tokens);
  if (capacity < 0) return set_error(QKV_ERR_INVALID_ARGUMENT, "qkv_eog_tokens: negative capacity");
  if (capacity > 0) QKV_REQUIRE(tokens);
  return guarded([&] { return copy_ids(__func__, tokenizer_of(model).eog_ids(), tokens, capacity, n_tokens); });
}

int qkv_is_eog(const qkv_model* model, int32_t token) {
  return model && model->tokenizer && model->tokenizer->is_eog(token) ? 1 : 0;
}

qkv_status qkv_detokenize(const qkv_model* model, const int32_t* tokens, int64_t n_tokens, char* text,
                          int64_t capacity, int64_t* length) {
  QKV_REQUIRE(model);
  QKV_REQUIRE(length);
  if (n_tokens < 0) return set_error(QKV_ERR_INVALID_ARGUMENT, "qkv_detokenize: negative token count");
  if (n_tokens > 0) QKV_REQUIRE(tokens);
  if (capacity < 0) return set_error(QKV_ERR_INVALID_ARGUMENT, "qkv_detokenize: negative capacity");
  if (capacity > 0) QKV_REQUIRE(text);
  return guarded([&] {
    return copy_text(__func__, tokenizer_of(model).decode(std::vector<int32_t>(tokens, tokens + n_tokens)), text,
                     capacity, length);
  });
}

void qkv_context_options_init(qkv_context_options* options) {
  if (!options) return;
  *options = qkv_context_options{};
  options->kv_type = QKV_TYPE_F16;
}

qkv_status qkv_context_create(qkv_model* model, int64_t n_seqs, const qkv_context_options* options,
                              qkv_context** context) {
  QKV_REQUIRE(context);
  *context = nullptr;
  QKV_REQUIRE(model);
  if (!model->model.config.causal) {
    return set_error(QKV_ERR_INVALID_ARGUMENT, "an encoder model embeds; it does not generate");
  }
  qkv_context_options o;
  qkv_context_options_init(&o);
  if (options) o = *options;
  return guarded([&] {
    QKV_CHECK(n_seqs >= 1, "a context needs at least one sequence (got ", n_seqs, ")");
    QKV_CHECK(o.context >= 0, "context size must not be negative (got ", o.context, "; 0 means the model's)");
    QKV_CHECK(o.threads >= 0, "thread count must not be negative (got ", o.threads, "; 0 means all cores)");
    QKV_CHECK(o.prefill_batch >= 0, "prefill batch must not be negative (got ", o.prefill_batch, ")");
    QKV_CHECK(o.threads_batch >= 0, "batch thread count must not be negative (got ", o.threads_batch,
              "; 0 means as threads)");
    const qkv::ModelConfig& c = model->model.config;
    qkv::DecoderOptions d;
    d.context = o.context;
    d.kv_type = to_dtype(o.kv_type);
    d.memory_limit = o.memory_limit;
    d.n_seqs = n_seqs;
    if (o.prefill_batch > 0) d.prefill_batch = o.prefill_batch;
    d.threads_batch = o.threads_batch;

    // Sized before anything is allocated: over the limit is an out-of-memory
    // status, not a bad argument.
    QKV_CHECK(o.context > 0 || c.context_length > 0,
              "the model states no context length: set qkv_context_options.context");
    const std::string over = qkv::Decoder::over_memory_limit(model->model, d, o.memory_limit);
    if (!over.empty()) return set_error(QKV_ERR_OUT_OF_MEMORY, "the context " + over);

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
    return QKV_OK;
  });
}

void qkv_context_free(qkv_context* context) { delete context; }

uint64_t qkv_context_kv_bytes(const qkv_context* context) {
  return context ? context->decoder->cache().bytes() : 0;
}

qkv_status qkv_context_prepare(qkv_context* context, int64_t* built) {
  QKV_REQUIRE(context);
  if (built) *built = 0;
  return guarded([&] {
    ThreadScope threads(context->threads);
    const int64_t n = context->decoder->prepare_prefill();
    if (built) *built = n;
    return QKV_OK;
  });
}

uint64_t qkv_session_kv_bytes(const qkv_session* session) {
  return session ? qkv_context_kv_bytes(session->context) : 0;
}

qkv_status qkv_context_session(qkv_context* context, int64_t i, qkv_session** session) {
  QKV_REQUIRE(session);
  *session = nullptr;
  QKV_REQUIRE(context);
  if (i < 0 || i >= static_cast<int64_t>(context->slots.size())) {
    return set_error(QKV_ERR_INVALID_ARGUMENT, "the context has " + std::to_string(context->slots.size()) +
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
  if (n_tokens < 1) {
    return set_error(QKV_ERR_INVALID_ARGUMENT,
                     "qkv_session_prefill: needs at least one token (got " + std::to_string(n_tokens) + ")");
  }
  qkv::Decoder& dec = *session->context->decoder;
  const int64_t vocab = dec.vocab_size();
  if (logits && logits_capacity < vocab) return buffer_too_small(__func__, "logits", logits_capacity, vocab, "floats");
  return guarded([&] {
    ThreadScope threads(session->context->threads);
    const float* out = dec.prefill(session->seq, tokens, n_tokens);
    drop_decided(*session);
    session->last_logits.assign(out, out + vocab);
    session->fed.insert(session->fed.end(), tokens, tokens + n_tokens);
    if (logits) std::copy(out, out + vocab, logits);
    return QKV_OK;
  });
}

qkv_status qkv_session_step(qkv_session* session, int32_t token, float* logits, int64_t logits_capacity) {
  QKV_REQUIRE(session);
  qkv_session* const one[1] = {session};
  return qkv_step_batch(one, &token, 1, logits, logits_capacity);
}

namespace {

// The context of n (>= 1) sessions given to a batched call, all slots of one
// context and none twice (n <= its slots); nullptr with the error set otherwise.
qkv_context* batch_context(const char* func, qkv_session* const* sessions, int64_t n) {
  const std::string name = func;
  if (n < 1) {
    set_error(QKV_ERR_INVALID_ARGUMENT, name + ": needs at least one session");
    return nullptr;
  }
  for (int64_t i = 0; i < n; ++i) {
    if (!sessions[i]) {
      set_error(QKV_ERR_INVALID_ARGUMENT, name + ": sessions[" + std::to_string(i) + "] is NULL");
      return nullptr;
    }
  }
  qkv_context* ctx = sessions[0]->context;
  for (int64_t i = 1; i < n; ++i) {
    if (sessions[i]->context != ctx) {
      set_error(QKV_ERR_INVALID_ARGUMENT, name + ": sessions[0] and sessions[" + std::to_string(i) +
                                              "] belong to different contexts; a batched call runs slots of one "
                                              "context (qkv_context_session)");
      return nullptr;
    }
  }
  if (n > static_cast<int64_t>(ctx->slots.size())) {
    set_error(QKV_ERR_INVALID_ARGUMENT, name + ": " + std::to_string(n) + " sessions but the context has only " +
                                            std::to_string(ctx->slots.size()) + " (one appears twice)");
    return nullptr;
  }
  return ctx;
}

}  // namespace

extern "C++" {
namespace {

// The body the batch calls share: the logits buffer checked, forward(seqs) run
// on the context's threads, each session's logits kept and its tokens recorded
// (feed(i) appends sessions[i]'s), the logits copied out.
template <class Forward, class Feed>
qkv_status run_batch(const char* fn, qkv_context* ctx, qkv_session* const* sessions, int64_t n, float* logits,
                     int64_t logits_capacity, const Forward& forward, const Feed& feed) {
  const int64_t vocab = ctx->decoder->vocab_size();
  const int64_t needed = n * vocab;  // n <= slots, so no overflow
  if (logits && logits_capacity < needed) return buffer_too_small(fn, "logits", logits_capacity, needed, "floats");
  return guarded([&] {
    ThreadScope threads(ctx->threads);
    std::vector<int64_t> seqs(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) seqs[i] = sessions[i]->seq;
    const float* out = forward(seqs.data());
    for (int64_t i = 0; i < n; ++i) {
      drop_decided(*sessions[i]);
      sessions[i]->last_logits.assign(out + i * vocab, out + (i + 1) * vocab);
      feed(i);
    }
    if (logits) std::copy(out, out + needed, logits);
    return QKV_OK;
  });
}

}  // namespace
}  // extern "C++"

qkv_status qkv_step_batch(qkv_session* const* sessions, const int32_t* tokens, int64_t n, float* logits,
                          int64_t logits_capacity) {
  QKV_REQUIRE(sessions);
  QKV_REQUIRE(tokens);
  qkv_context* ctx = batch_context(__func__, sessions, n);
  if (!ctx) return QKV_ERR_INVALID_ARGUMENT;
  return run_batch(
      __func__, ctx, sessions, n, logits, logits_capacity,
      [&](const int64_t* seqs) { return ctx->decoder->step_batch(seqs, tokens, n); },
      [&](int64_t i) { sessions[i]->fed.push_back(tokens[i]); });
}

qkv_status qkv_prefill_batch(qkv_session* const* sessions, const int32_t* const* tokens, const int64_t* n_tokens,
                             int64_t n, float* logits, int64_t logits_capacity) {
  QKV_REQUIRE(sessions);
  QKV_REQUIRE(tokens);
  QKV_REQUIRE(n_tokens);
  qkv_context* ctx = batch_context(__func__, sessions, n);
  if (!ctx) return QKV_ERR_INVALID_ARGUMENT;
  for (int64_t i = 0; i < n; ++i) {
    if (!tokens[i] || n_tokens[i] < 1) {
      return set_error(QKV_ERR_INVALID_ARGUMENT, "qkv_prefill_batch: sessions[" + std::to_string(i) + "] needs at least one token (got " +
                                                     std::to_string(n_tokens[i]) + (tokens[i] ? ")" : ", NULL tokens)"));
    }
  }
  return run_batch(
      __func__, ctx, sessions, n, logits, logits_capacity,
      [&](const int64_t* seqs) { return ctx->decoder->prefill_multi(seqs, tokens, n_tokens, n); },
      [&](int64_t i) { sessions[i]->fed.insert(sessions[i]->fed.end(), tokens[i], tokens[i] + n_tokens[i]); });
}

qkv_status qkv_session_position(const qkv_session* session, int64_t* position) {
  QKV_REQUIRE(session);
  QKV_REQUIRE(position);
  return guarded([&] {
    *position = session->context->decoder->position(session->seq);
    return QKV_OK;
  });
}

qkv_status qkv_session_truncate(qkv_session* session, int64_t position) {
  QKV_REQUIRE(session);
  return guarded([&] {
    const int64_t before = session->context->decoder->position(session->seq);
    session->context->decoder->cache().truncate(session->seq, position);
    session->last_logits.clear();
    drop_decided(*session);
    // fed ends at the old position; keep the part before the new one
    const auto drop = static_cast<size_t>(std::max<int64_t>(before - position, 0));
    session->fed.resize(session->fed.size() > drop ? session->fed.size() - drop : 0);
    return QKV_OK;
  });
}

qkv_status qkv_session_set_sampler(qkv_session* session, const qkv_sampler_options* options) {
  QKV_REQUIRE(session);
  QKV_REQUIRE(options);
  return guarded([&] {
    qkv::SamplerOptions so = to_sampler(*options);
    so.logit_bias = session->logit_bias;
    qkv::Sampler sampler(so);  // validates before replacing the old one
    session->sampler.emplace(std::move(sampler));
    session->spec_random.reset();
    drop_decided(*session);
    return QKV_OK;
  });
}

qkv_status qkv_session_sample(qkv_session* session, int32_t* token) {
  QKV_REQUIRE(session);
  QKV_REQUIRE(token);
  return guarded([&] {
    if (session->decided_at < session->decided.size()) {  // decided by qkv_speculate_batch
      QKV_CHECK(!session->matcher && !session->lazy_grammar,
                "qkv_session_sample: a grammar was set while tokens decided by qkv_speculate_batch were pending "
                "(truncate the session first)");
      const size_t at = session->decided_at++;
      const size_t vocab = session->decided_logits.size() / session->decided.size();
      const float* row = session->decided_logits.data() + at * vocab;
      session->last_logits.assign(row, row + vocab);
      *token = session->decided[at];
      session->last_sampled = *token;
      if (session->decided_at == session->decided.size()) drop_decided(*session);
      return QKV_OK;
    }
    QKV_CHECK(!session->last_logits.empty(),
              "qkv_session_sample: no logits to sample from (prefill or step first; truncate and generate "
              "leave none)");
    if (!session->sampler) {
      qkv::SamplerOptions so;
      so.logit_bias = session->logit_bias;
      session->sampler.emplace(so);
    }
    std::vector<float> scratch = session->last_logits;  // the sampler scales in place
    const auto n = static_cast<int64_t>(scratch.size());
    if (session->matcher) session->matcher->constrain(scratch.data(), n, session->mask);
    *token = session->sampler->sample(scratch.data(), n, session->fed.data(),
                                      static_cast<int64_t>(session->fed.size()));
    if (session->matcher) {
      QKV_CHECK(session->matcher->accept_token(*token), "qkv_session_sample: the logit bias bans every token the grammar allows here");
    } else if (session->lazy_grammar) {
      watch_triggers(*session, *token);
    }
    session->last_sampled = *token;
    return QKV_OK;
  });
}

qkv_status qkv_session_set_logit_bias(qkv_session* session, const int32_t* tokens, const float* biases, int64_t n) {
  QKV_REQUIRE(session);
  if (n < 0) return set_error(QKV_ERR_INVALID_ARGUMENT, "qkv_session_set_logit_bias: negative count");
  if (n > 0) {
    QKV_REQUIRE(tokens);
    QKV_REQUIRE(biases);
  }
  return guarded([&] {
    const int64_t vocab = session->context->decoder->vocab_size();
    std::vector<std::pair<int32_t, float>> bias;
    for (int64_t i = 0; i < n; ++i) {
      QKV_CHECK(tokens[i] >= 0 && tokens[i] < vocab, "qkv_session_set_logit_bias: token ", tokens[i],
                " is outside the vocabulary of ", vocab);
      QKV_CHECK(!std::isnan(biases[i]) && biases[i] != INFINITY, "qkv_session_set_logit_bias: the bias of token ",
                tokens[i], " must be a number or -inf");
      bias.push_back({tokens[i], biases[i]});
    }
    qkv::SamplerOptions so = session->sampler ? session->sampler->options() : qkv::SamplerOptions{};
    so.logit_bias = bias;
    qkv::Sampler sampler(so);  // the generator restarts from the seed, as after set_sampler
    session->sampler.emplace(std::move(sampler));
    session->spec_random.reset();
    drop_decided(*session);
    session->logit_bias = std::move(bias);
    return QKV_OK;
  });
}

qkv_status qkv_session_logprobs(const qkv_session* session, int32_t token, float* logprob, int64_t n_top,
                                int32_t* top_tokens, float* top_logprobs, int64_t* n_written) {
  QKV_REQUIRE(session);
  QKV_REQUIRE(logprob);
  if (n_top < 0) return set_error(QKV_ERR_INVALID_ARGUMENT, "qkv_session_logprobs: negative n_top");
  if (n_top > 0) {
    QKV_REQUIRE(top_tokens);
    QKV_REQUIRE(top_logprobs);
  }
  return guarded([&] {
    QKV_CHECK(!session->last_logits.empty(), "qkv_session_logprobs: no logits (prefill or step first)");
    const auto vocab = static_cast<int64_t>(session->last_logits.size());
    QKV_CHECK(token >= 0 && token < vocab, "qkv_session_logprobs: token ", token, " is outside the vocabulary of ",
              vocab);
    const qkv::TokenLogprobs lp = qkv::token_logprobs(session->last_logits.data(), vocab, token, n_top);
    *logprob = lp.logprob;
    for (size_t i = 0; i < lp.top.size(); ++i) {
      top_tokens[i] = lp.top[i].first;
      top_logprobs[i] = lp.top[i].second;
    }
    if (n_written) *n_written = static_cast<int64_t>(lp.top.size());
    return QKV_OK;
  });
}

void qkv_generate_options_init(qkv_generate_options* options) {
  if (!options) return;
  *options = qkv_generate_options{};
  options->n_predict = -1;
  options->add_bos = 1;
  qkv_sampler_options_init(&options->sampler);
  const qkv::SpeculativeOptions spec;
  options->spec_ngram_size = 3;
  options->draft_max = spec.draft_max;
  options->draft_min = spec.draft_min;
  options->draft_p_min = 0.75f;
}

qkv_status qkv_generate(qkv_session* session, const char* prompt, const qkv_generate_options* options,
                        qkv_piece_callback callback, void* user, qkv_generate_stats* stats) {
  QKV_REQUIRE(session);
  QKV_REQUIRE(prompt);
  qkv_generate_options o;
  qkv_generate_options_init(&o);
  if (options) o = *options;
  if (o.steps < 0 || o.n_predict < -1) {
    return set_error(QKV_ERR_INVALID_ARGUMENT, "qkv_generate: steps must be >= 0 and n_predict >= -1 (got " +
                                                   std::to_string(o.steps) + ", " + std::to_string(o.n_predict) +
                                                   ")");
  }
  return guarded([&] {
    ThreadScope threads(session->context->threads);
    qkv::GenerateOptions g;
    g.steps = o.steps;
    g.n_predict = o.n_predict;
    g.add_bos = o.add_bos != 0;
    g.parse_special = o.parse_special != 0;
    g.seq = session->seq;
    g.sampler = to_sampler(o.sampler);
    g.sampler.logit_bias = session->logit_bias;
    if (o.grammar) g.grammar = o.grammar->compiled;
    QKV_CHECK(o.n_stop >= 0 && (o.n_stop == 0 || o.stop), "qkv_generate: n_stop ", o.n_stop,
              " needs a stop array of that many strings");
    for (int64_t i = 0; i < o.n_stop; ++i) {
      QKV_CHECK(o.stop[i], "qkv_generate: stop[", i, "] is NULL");
      g.stop.emplace_back(o.stop[i]);
    }
    const qkv::Tokenizer& tok = tokenizer_of(session->context->model);
    std::unique_ptr<qkv::Drafter> drafter;  // speculative decoding, for this call
    if (o.draft_model || o.spec_ngram) {
      QKV_CHECK(!(o.draft_model && o.spec_ngram), "qkv_generate: a draft model or n-gram drafting, not both");
      g.speculative.draft_max = o.draft_max;
      g.speculative.draft_min = o.draft_min;
      qkv::check_speculative_options(g.speculative);
      if (o.draft_model) {
        QKV_CHECK(o.draft_model->model.config.causal, "qkv_generate: the draft model is an encoder; it does not generate");
        qkv::check_same_vocabulary(session->context->model->model, tok, o.draft_model->model,
                                   tokenizer_of(o.draft_model));
        drafter = std::make_unique<qkv::DraftModelDrafter>(o.draft_model->model, o.draft_p_min,
                                                           session->context->decoder->context());
      } else {
        drafter = std::make_unique<qkv::NgramDrafter>(o.spec_ngram_size);
      }
      g.speculative.drafter = drafter.get();
    }
    // The last sampled token is not fed back, so no logits describe the
    // session's state afterwards.
    session->last_logits.clear();
    session->fed.clear();
    drop_decided(*session);
    const qkv::GenerateStats s = qkv::generate(*session->context->decoder, tok, prompt, g,
                                               [&](const std::string& piece) {
                                                 return callback ? callback(piece.data(), piece.size(), user) == 0
                                                                 : true;
                                               });
    if (stats) {
      qkv_generate_stats out{};
      out.prompt_tokens = s.prompt_tokens;
      out.generated_tokens = s.generated_tokens;
      out.forward_passes = s.forward_passes;
      out.prompt_ms = s.prompt_ms;
      out.generate_ms = s.generate_ms;
      out.drafted_tokens = s.drafted_tokens;
      out.accepted_tokens = s.accepted_tokens;
      out.verify_passes = s.verify_passes;
      std::strncpy(out.stop_reason, s.stop_reason.c_str(), sizeof(out.stop_reason) - 1);
      *stats = out;
    }
    return QKV_OK;
  });
}

}  // extern "C"

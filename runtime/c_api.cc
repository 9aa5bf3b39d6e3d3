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

#include "kernels/attention.h"
#include "kernels/error.h"
#include "kernels/simd_target.h"
#include "runtime/attention_map.h"
#include "runtime/chat_template.h"
#include "runtime/decoder.h"
#include "runtime/generate.h"
#include "runtime/gguf.h"
#include "runtime/model_loader.h"
#include "runtime/perplexity.h"
#include "runtime/sampler.h"
#include "runtime/tokenizer.h"
#include "runtime/version.h"

struct qkv_model {
  qkv::Model model;
  std::optional<qkv::Tokenizer> tokenizer;
  qkv::ChatTemplate chat;  // tokenizer.chat_template and the BOS/EOS texts (GGUF only)
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
  std::vector<float> last_logits;  // of the last prefill/step; empty when there are none
  std::optional<qkv::Sampler> sampler;
  std::vector<std::pair<int32_t, float>> logit_bias;  // qkv_session_set_logit_bias
  std::vector<int32_t> fed;  // tokens fed by prefill/step since the last reset, for the penalties
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
// plain bad-input error means here (a malformed file when loading). f may
// itself return a non-OK status (an error it reported with set_error).
template <typename F>
qkv_status guarded(F&& f, qkv_status invalid_as = QKV_ERR_INVALID_ARGUMENT) {
  try {
    return f();
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

qkv_status buffer_too_small(const char* func, const char* what, int64_t capacity, int64_t needed,
                            const char* unit) {
  return set_error(QKV_ERR_BUFFER_TOO_SMALL, std::string(func) + ": the " + what + " buffer holds " +
                                                 std::to_string(capacity) + " " + unit + " but " +
                                                 std::to_string(needed) + " are needed");
}

// A C caller may put any int in an enum; reading such a value as the C++ enum
// type is undefined behaviour, so enums from the caller are read as their bytes.
template <typename E>
int raw_enum(const E& e) {
  static_assert(sizeof(E) == sizeof(int), "C enums are int-sized here");
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

qkv::DType to_dtype(const qkv_type& type) {
  const int t = raw_enum(type);
  switch (t) {
    case QKV_TYPE_F32: return qkv::DType::F32;
    case QKV_TYPE_F16: return qkv::DType::F16;
    case QKV_TYPE_BF16: return qkv::DType::BF16;
    case QKV_TYPE_Q8_0: return qkv::DType::Q8_0;
  }
  qkv::fail("unknown element type ", t, " (QKV_TYPE_F32, _F16, _BF16 or _Q8_0)");
}

// OpenMP's thread count is a setting of the calling thread: a call sets the
// context's count and puts the caller's back on the way out, so the host
// program's own OpenMP code is not affected.
class ThreadScope {
 public:
  explicit ThreadScope(int threads) : saved_(omp_get_max_threads()) {
    omp_set_num_threads(threads > 0 ? threads : omp_get_num_procs());
  }
  ~ThreadScope() { omp_set_num_threads(saved_); }
  ThreadScope(const ThreadScope&) = delete;
  ThreadScope& operator=(const ThreadScope&) = delete;

 private:
  int saved_;
};

// Writes ids to tokens when they fit; *n is always the count needed.
qkv_status copy_ids(const char* func, const std::vector<int32_t>& ids, int32_t* tokens, int64_t capacity,
                    int64_t* n) {
  const auto count = static_cast<int64_t>(ids.size());
  *n = count;
  if (capacity < count) return buffer_too_small(func, "token", capacity, count, "ids");
  std::copy(ids.begin(), ids.end(), tokens);
  return QKV_OK;
}

// Writes s and a NUL to text when they fit; *length is always s's size.
qkv_status copy_text(const char* func, const std::string& s, char* text, int64_t capacity, int64_t* length) {
  const auto n = static_cast<int64_t>(s.size());
  *length = n;
  if (capacity < n + 1) return buffer_too_small(func, "text", capacity, n + 1, "bytes (with the NUL)");
  std::memcpy(text, s.data(), s.size());
  text[s.size()] = '\0';
  return QKV_OK;
}

const qkv::Tokenizer& tokenizer_of(const qkv_model* m) {
  if (!m->tokenizer) {
    qkv::fail("this model has no vocabulary: a llama2.c checkpoint needs a tokenizer file "
              "(qkv_model_options.tokenizer_path, or -z on the command line)");
  }
  return *m->tokenizer;
}

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

// a * b for non-negative sizes, or nullopt when it would not fit in int64.
std::optional<int64_t> checked_product(std::initializer_list<int64_t> factors) {
  int64_t r = 1;
  for (int64_t f : factors) {
    if (f < 0 || __builtin_mul_overflow(r, f, &r)) return std::nullopt;
  }
  return r;
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
        auto m = std::make_unique<qkv_model>();
        m->model = qkv::load_model(path);
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
  qkv_context_options o;
  qkv_context_options_init(&o);
  if (options) o = *options;
  return guarded([&] {
    QKV_CHECK(n_seqs >= 1, "a context needs at least one sequence (got ", n_seqs, ")");
    QKV_CHECK(o.context >= 0, "context size must not be negative (got ", o.context, "; 0 means the model's)");
    QKV_CHECK(o.threads >= 0, "thread count must not be negative (got ", o.threads, "; 0 means all cores)");
    QKV_CHECK(o.prefill_batch >= 0, "prefill batch must not be negative (got ", o.prefill_batch, ")");
    const qkv::ModelConfig& c = model->model.config;
    qkv::DecoderOptions d;
    d.context = o.context;
    d.kv_type = to_dtype(o.kv_type);
    d.memory_limit = o.memory_limit;
    d.n_seqs = n_seqs;
    if (o.prefill_batch > 0) d.prefill_batch = o.prefill_batch;

    // The same cache the decoder will make, sized first: over the limit is an
    // out-of-memory status, not a bad argument.
    qkv::KVCacheConfig kv;
    kv.n_layers = c.n_layers;
    kv.n_kv_heads = c.n_kv_heads;
    kv.head_dim = c.head_dim;
    kv.capacity = o.context > 0 ? o.context : c.context_length;
    kv.n_seqs = n_seqs;
    kv.type = d.kv_type;
    QKV_CHECK(kv.capacity > 0, "the model states no context length: set qkv_context_options.context");
    const uint64_t bytes = qkv::KVCache::bytes_for(kv);
    if (o.memory_limit > 0 && bytes > o.memory_limit) {
      return set_error(QKV_ERR_OUT_OF_MEMORY,
                       "the KV cache needs " + std::to_string(bytes) + " bytes (" + std::to_string(n_seqs) +
                           " sequences x " + std::to_string(kv.capacity) + " positions, " +
                           qkv::dtype_name(kv.type) + "), over the memory limit of " +
                           std::to_string(o.memory_limit) + " bytes");
    }

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

qkv_status qkv_step_batch(qkv_session* const* sessions, const int32_t* tokens, int64_t n, float* logits,
                          int64_t logits_capacity) {
  QKV_REQUIRE(sessions);
  QKV_REQUIRE(tokens);
  if (n < 1) return set_error(QKV_ERR_INVALID_ARGUMENT, "qkv_step_batch: needs at least one session");
  for (int64_t i = 0; i < n; ++i) {
    if (!sessions[i]) {
      return set_error(QKV_ERR_INVALID_ARGUMENT, "qkv_step_batch: sessions[" + std::to_string(i) + "] is NULL");
    }
  }
  qkv_context* ctx = sessions[0]->context;
  for (int64_t i = 1; i < n; ++i) {
    if (sessions[i]->context != ctx) {
      return set_error(QKV_ERR_INVALID_ARGUMENT,
                       "qkv_step_batch: sessions[0] and sessions[" + std::to_string(i) +
                           "] belong to different contexts; a batched step runs slots of one "
                           "context (qkv_context_session)");
    }
  }
  if (n > static_cast<int64_t>(ctx->slots.size())) {
    return set_error(QKV_ERR_INVALID_ARGUMENT, "qkv_step_batch: " + std::to_string(n) +
                                                   " sessions but the context has only " +
                                                   std::to_string(ctx->slots.size()) + " (one appears twice)");
  }
  qkv::Decoder& dec = *ctx->decoder;
  const int64_t vocab = dec.vocab_size();
  const int64_t needed = n * vocab;  // n <= slots, so no overflow
  if (logits && logits_capacity < needed) return buffer_too_small(__func__, "logits", logits_capacity, needed, "floats");
  return guarded([&] {
    ThreadScope threads(ctx->threads);
    std::vector<int64_t> seqs(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) seqs[i] = sessions[i]->seq;
    const float* out = dec.step_batch(seqs.data(), tokens, n);
    for (int64_t i = 0; i < n; ++i) {
      sessions[i]->last_logits.assign(out + i * vocab, out + (i + 1) * vocab);
      sessions[i]->fed.push_back(tokens[i]);
    }
    if (logits) std::copy(out, out + needed, logits);
    return QKV_OK;
  });
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
    // fed ends at the old position; keep the part before the new one
    const auto drop = static_cast<size_t>(std::max<int64_t>(before - position, 0));
    session->fed.resize(session->fed.size() > drop ? session->fed.size() - drop : 0);
    return QKV_OK;
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
  options->repeat_penalty = d.repeat_penalty;
  options->repeat_last_n = d.repeat_last_n;
  options->presence_penalty = d.presence_penalty;
  options->frequency_penalty = d.frequency_penalty;
}

qkv_status qkv_session_set_sampler(qkv_session* session, const qkv_sampler_options* options) {
  QKV_REQUIRE(session);
  QKV_REQUIRE(options);
  return guarded([&] {
    qkv::SamplerOptions so = to_sampler(*options);
    so.logit_bias = session->logit_bias;
    qkv::Sampler sampler(so);  // validates before replacing the old one
    session->sampler.emplace(std::move(sampler));
    return QKV_OK;
  });
}

qkv_status qkv_session_sample(qkv_session* session, int32_t* token) {
  QKV_REQUIRE(session);
  QKV_REQUIRE(token);
  return guarded([&] {
    QKV_CHECK(!session->last_logits.empty(),
              "qkv_session_sample: no logits to sample from (prefill or step first; truncate and generate "
              "leave none)");
    if (!session->sampler) {
      qkv::SamplerOptions so;
      so.logit_bias = session->logit_bias;
      session->sampler.emplace(so);
    }
    std::vector<float> scratch = session->last_logits;  // the sampler scales in place
    *token = session->sampler->sample(scratch.data(), static_cast<int64_t>(scratch.size()), session->fed.data(),
                                      static_cast<int64_t>(session->fed.size()));
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
    QKV_CHECK(o.n_stop >= 0 && (o.n_stop == 0 || o.stop), "qkv_generate: n_stop ", o.n_stop,
              " needs a stop array of that many strings");
    for (int64_t i = 0; i < o.n_stop; ++i) {
      QKV_CHECK(o.stop[i], "qkv_generate: stop[", i, "] is NULL");
      g.stop.emplace_back(o.stop[i]);
    }
    const qkv::Tokenizer& tok = tokenizer_of(session->context->model);
    // The last sampled token is not fed back, so no logits describe the
    // session's state afterwards.
    session->last_logits.clear();
    session->fed.clear();
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
      std::strncpy(out.stop_reason, s.stop_reason.c_str(), sizeof(out.stop_reason) - 1);
      *stats = out;
    }
    return QKV_OK;
  });
}

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
    opts.threads = p->threads > 0 ? p->threads : omp_get_num_procs();
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

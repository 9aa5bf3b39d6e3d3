// What the C API's files share: the handles behind include/qkv.h's opaque
// types and the helpers every entry point uses (the thread's last error,
// exceptions turned into statuses, caller buffers filled or sized).
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/error.h"
#include "kernels/threads/cores.h"
#include "qkv.h"
#include "runtime/chat_template.h"
#include "runtime/decoder.h"
#include "runtime/embed.h"
#include "runtime/grammar/matcher.h"
#include "runtime/model.h"
#include "runtime/sampler.h"
#include "runtime/speculative.h"
#include "runtime/tokenizer.h"

struct qkv_model {
  qkv::Model model;
  std::optional<qkv::Tokenizer> tokenizer;
  qkv::ChatTemplate chat;  // tokenizer.chat_template and the BOS/EOS texts (GGUF only)
  // The vocabulary as a token trie, built by the first grammar.
  std::mutex trie_mu;
  std::shared_ptr<const qkv::grammar::TokenTrie> trie;
  // The forward-pass runners qkv_embed reuses between calls (thread-safe).
  qkv::EmbedPool embed_pool;
};

struct qkv_grammar {
  std::shared_ptr<const qkv::grammar::CompiledGrammar> compiled;
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
  std::optional<qkv::grammar::Matcher> matcher;  // qkv_session_set_grammar
  std::vector<uint64_t> mask;  // the grammar's allowed tokens, per sample
  // qkv_session_set_grammar_lazy: the grammar waiting for a trigger, and the
  // tail of the sampled text it is looked for in.
  std::shared_ptr<const qkv::grammar::CompiledGrammar> lazy_grammar;
  std::vector<std::string> triggers;
  std::string trigger_window;
  int32_t last_sampled = -1;
  // qkv_speculate_batch: the tokens its verify pass decided, handed out by
  // qkv_session_sample from decided_at on, each with the logits row of its
  // position (decided_logits [decided.size()][vocab]); its own random stream.
  std::vector<int32_t> decided;
  std::vector<float> decided_logits;
  size_t decided_at = 0;
  std::optional<qkv::SpeculativeRandom> spec_random;
};

namespace qkv::capi {

inline thread_local std::string g_last_error;

inline qkv_status set_error(qkv_status st, const std::string& msg) {
  g_last_error = msg;
  return st;
}

inline qkv_status status_of(qkv::ErrorKind kind, qkv_status fallback) {
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
inline qkv_status guarded(F&& f, qkv_status invalid_as = QKV_ERR_INVALID_ARGUMENT) {
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

inline qkv_status buffer_too_small(const char* func, const char* what, int64_t capacity, int64_t needed,
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

inline qkv::DType to_dtype(const qkv_type& type) {
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
    omp_set_num_threads(threads_or_default(threads));
  }
  ~ThreadScope() { omp_set_num_threads(saved_); }
  ThreadScope(const ThreadScope&) = delete;
  ThreadScope& operator=(const ThreadScope&) = delete;

 private:
  int saved_;
};

// Writes ids to tokens when they fit; *n is always the count needed.
inline qkv_status copy_ids(const char* func, const std::vector<int32_t>& ids, int32_t* tokens, int64_t capacity,
                    int64_t* n) {
  const auto count = static_cast<int64_t>(ids.size());
  *n = count;
  if (capacity < count) return buffer_too_small(func, "token", capacity, count, "ids");
  std::copy(ids.begin(), ids.end(), tokens);
  return QKV_OK;
}

// Writes s and a NUL to text when they fit; *length is always s's size.
inline qkv_status copy_text(const char* func, const std::string& s, char* text, int64_t capacity, int64_t* length) {
  const auto n = static_cast<int64_t>(s.size());
  *length = n;
  if (capacity < n + 1) return buffer_too_small(func, "text", capacity, n + 1, "bytes (with the NUL)");
  std::memcpy(text, s.data(), s.size());
  text[s.size()] = '\0';
  return QKV_OK;
}

inline const qkv::Tokenizer& tokenizer_of(const qkv_model* m) {
  if (!m->tokenizer) {
    qkv::fail("this model has no vocabulary: a llama2.c checkpoint needs a tokenizer file "
              "(qkv_model_options.tokenizer_path, or -z on the command line)");
  }
  return *m->tokenizer;
}

// a * b for non-negative sizes, or nullopt when it would not fit in int64.
inline std::optional<int64_t> checked_product(std::initializer_list<int64_t> factors) {
  int64_t r = 1;
  for (int64_t f : factors) {
    if (f < 0 || __builtin_mul_overflow(r, f, &r)) return std::nullopt;
  }
  return r;
}

// Forgets the tokens a verify pass decided and the session has not handed out
// (a prefill, step, truncate or new sampler makes them stale).
inline void drop_decided(qkv_session& session) {
  session.decided.clear();
  session.decided_logits.clear();
  session.decided_at = 0;
}

// After a free sample: looks for the lazy grammar's triggers in the sampled
// text and starts the grammar after the first one found (c_api_grammar.cc).
void watch_triggers(qkv_session& session, int32_t token);

}  // namespace qkv::capi

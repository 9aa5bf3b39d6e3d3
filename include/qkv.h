/* qkv: run llama-style transformer decoders on CPUs.
 *
 * The C interface of libqkv (C99; no C++ types cross it, and no exception does).
 * Every function that can fail returns a qkv_status; on failure
 * qkv_last_error() gives a readable message for the calling thread.
 *
 * Objects:
 *   qkv_model    weights + tokenizer, read-only once loaded; share it freely
 *                between threads and sessions.
 *   qkv_context  a KV cache with one or more sequence slots and the
 *                activation buffers to run them; one thread at a time.
 *   qkv_session  one sequence: a slot of a context. qkv_session_create() makes
 *                a session with a private one-slot context; qkv_context_session()
 *                hands out the slots of a shared context for batched steps.
 */
#ifndef QKV_H
#define QKV_H

#include <stddef.h>
#include <stdint.h>

#if defined(QKV_BUILDING_LIBRARY) && defined(__GNUC__)
#define QKV_API __attribute__((visibility("default")))
#else
#define QKV_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  QKV_OK = 0,
  QKV_ERR_INVALID_ARGUMENT = 1, /* null pointer, bad option, impossible shape */
  QKV_ERR_IO = 2,               /* file missing or unreadable */
  QKV_ERR_FORMAT = 3,           /* malformed or unsupported model/tokenizer file */
  QKV_ERR_CONTEXT_OVERFLOW = 4, /* tokens do not fit in the context */
  QKV_ERR_OUT_OF_MEMORY = 5,    /* over the memory limit, or allocation failed */
  QKV_ERR_BUFFER_TOO_SMALL = 6, /* caller's buffer too small: the needed size is returned */
  QKV_ERR_INTERNAL = 7
} qkv_status;

typedef enum { QKV_TYPE_F32 = 0, QKV_TYPE_F16 = 1, QKV_TYPE_BF16 = 2, QKV_TYPE_Q8_0 = 3 } qkv_type;

typedef struct qkv_model qkv_model;
typedef struct qkv_context qkv_context;
typedef struct qkv_session qkv_session;

/* The message of the last failed call on this thread ("" if none). */
QKV_API const char* qkv_last_error(void);
QKV_API const char* qkv_version(void);
/* The SIMD target the kernels dispatched to on this CPU, e.g. "AVX3_DL". */
QKV_API const char* qkv_simd_target(void);
QKV_API const char* qkv_status_name(qkv_status status);

/* ---- models ---- */

typedef struct {
  const char* tokenizer_path; /* llama2.c tokenizer.bin; NULL: the model file's own vocabulary */
} qkv_model_options;

QKV_API void qkv_model_options_init(qkv_model_options* options);
/* Loads a GGUF file or a llama2.c checkpoint. options may be NULL. */
QKV_API qkv_status qkv_model_load(const char* path, const qkv_model_options* options, qkv_model** model);
QKV_API void qkv_model_free(qkv_model* model);

typedef struct {
  char architecture[32];
  int64_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, head_dim, vocab_size, context_length;
  uint64_t parameters, weight_bytes;
  int32_t bos_id, eos_id; /* -1 when the model has no tokenizer */
  int has_tokenizer;
} qkv_model_info;

QKV_API qkv_status qkv_model_get_info(const qkv_model* model, qkv_model_info* info);

/* Text -> token ids. On QKV_ERR_BUFFER_TOO_SMALL, *n_tokens is the count needed. */
QKV_API qkv_status qkv_tokenize(const qkv_model* model, const char* text, int add_bos, int32_t* tokens,
                                int64_t capacity, int64_t* n_tokens);
/* Token ids -> text (NUL-terminated). On QKV_ERR_BUFFER_TOO_SMALL, *length is the
 * byte count needed without the NUL. */
QKV_API qkv_status qkv_detokenize(const qkv_model* model, const int32_t* tokens, int64_t n_tokens, char* text,
                                  int64_t capacity, int64_t* length);

/* ---- contexts and sessions ---- */

typedef struct {
  int64_t context;        /* positions per sequence; 0: the model's trained context */
  qkv_type kv_type;       /* KV cache element type (default F16) */
  uint64_t memory_limit;  /* KV cache bytes; 0: no limit */
  int threads;            /* OpenMP threads for this context's calls; 0: all cores */
  int64_t prefill_batch;  /* prompt tokens per forward batch; 0: 256 */
} qkv_context_options;

QKV_API void qkv_context_options_init(qkv_context_options* options);
/* A context of n_seqs sequence slots on a model (which must outlive it). */
QKV_API qkv_status qkv_context_create(qkv_model* model, int64_t n_seqs, const qkv_context_options* options,
                                      qkv_context** context);
QKV_API void qkv_context_free(qkv_context* context);
QKV_API uint64_t qkv_context_kv_bytes(const qkv_context* context);
/* Slot i of a context as a session (owned by the context: do not free it). */
QKV_API qkv_status qkv_context_session(qkv_context* context, int64_t i, qkv_session** session);

/* A session with its own one-slot context. */
QKV_API qkv_status qkv_session_create(qkv_model* model, const qkv_context_options* options,
                                      qkv_session** session);
/* Frees a session made by qkv_session_create (a context's slot sessions are freed with it). */
QKV_API void qkv_session_free(qkv_session* session);

/* Bytes of the KV cache behind a session (its whole context's cache). */
QKV_API uint64_t qkv_session_kv_bytes(const qkv_session* session);

/* Runs tokens at the session's next positions. logits (may be NULL) receives the
 * last token's vocab_size logits; logits_capacity is its length in floats. */
QKV_API qkv_status qkv_session_prefill(qkv_session* session, const int32_t* tokens, int64_t n_tokens,
                                       float* logits, int64_t logits_capacity);
QKV_API qkv_status qkv_session_step(qkv_session* session, int32_t token, float* logits, int64_t logits_capacity);
/* One token for each of n sessions of one shared context, in one pass (each
 * weight read once for all). logits (may be NULL): [n][vocab_size]. */
QKV_API qkv_status qkv_step_batch(qkv_session* const* sessions, const int32_t* tokens, int64_t n, float* logits,
                                  int64_t logits_capacity);
QKV_API qkv_status qkv_session_position(const qkv_session* session, int64_t* position);
/* Forgets positions at and after `position` (0: reset). */
QKV_API qkv_status qkv_session_truncate(qkv_session* session, int64_t position);

/* ---- sampling and generation ---- */

typedef struct {
  float temperature; /* <= 0: greedy */
  int32_t top_k;     /* <= 0: off */
  float top_p;       /* >= 1: off */
  float min_p;       /* <= 0: off */
  uint64_t seed;
} qkv_sampler_options;

QKV_API void qkv_sampler_options_init(qkv_sampler_options* options);
/* Picks a token from the logits of the session's last prefill/step, with the
 * session's sampler (seeded from options on the first call after set). */
QKV_API qkv_status qkv_session_set_sampler(qkv_session* session, const qkv_sampler_options* options);
QKV_API qkv_status qkv_session_sample(qkv_session* session, int32_t* token);

typedef struct {
  int64_t steps;     /* llama2.c -n: total positions incl. BOS and prompt; 0: off */
  int64_t n_predict; /* llama.cpp -n: new tokens; -1: until EOS/BOS or full context */
  int add_bos;
  qkv_sampler_options sampler;
} qkv_generate_options;

typedef struct {
  int64_t prompt_tokens, generated_tokens, forward_passes;
  double prompt_ms, generate_ms;
  char stop_reason[16]; /* "eos", "bos", "steps", "n_predict", "context", "stopped" (callback) */
} qkv_generate_stats;

/* Called with each piece of text as it is produced; return nonzero to stop. */
typedef int (*qkv_piece_callback)(const char* piece, size_t length, void* user);

QKV_API void qkv_generate_options_init(qkv_generate_options* options);
/* Encodes prompt, prefills it and generates, streaming pieces to callback
 * (may be NULL). stats may be NULL. */
QKV_API qkv_status qkv_generate(qkv_session* session, const char* prompt, const qkv_generate_options* options,
                                qkv_piece_callback callback, void* user, qkv_generate_stats* stats);

/* ---- bare attention ---- */

typedef struct {
  int64_t batch, q_heads, kv_heads, q_len, kv_len, head_dim;
  float scale;      /* 0: 1/sqrt(head_dim) */
  int causal;       /* query i at position q_pos0 + i sees keys 0 .. q_pos0 + i */
  int64_t q_pos0;
  int64_t window;   /* > 0: sliding window */
  const float* additive_mask; /* [q_len][kv_len] or NULL */
  int threads;      /* 0: all cores */
} qkv_attention_params;

QKV_API void qkv_attention_params_init(qkv_attention_params* params);
/* out = softmax(Q·Kᵀ·scale + mask)·V over caller-owned dense arrays:
 * q and out [batch][q_heads][q_len][head_dim] f32, k and v
 * [batch][kv_heads][kv_len][head_dim] of kv_type. */
QKV_API qkv_status qkv_attention(const qkv_attention_params* params, const float* q, const void* k, const void* v,
                                 qkv_type kv_type, float* out);

#ifdef __cplusplus
}
#endif

#endif /* QKV_H */

/* qkv: run llama-style transformer decoders (and BERT-family encoders for
 * embeddings and reranking) on CPUs.
 *
 * The C interface of libqkv (C99; no C++ types cross it, and no exception does).
 *
 * Errors: every function that can fail returns a qkv_status. On failure
 * qkv_last_error() gives a readable message for the calling thread; nothing
 * aborts the host program, and every pointer and size argument is checked
 * (a NULL where an object is required is QKV_ERR_INVALID_ARGUMENT). Output
 * parameters are left untouched or set to NULL/0 on failure, as stated below.
 *
 * Objects:
 *   qkv_model    weights + tokenizer, read-only once loaded; share it freely
 *                between threads, contexts and sessions. It must outlive them.
 *   qkv_context  a KV cache with one or more sequence slots and the
 *                activation buffers to run them. Use it from one thread at a
 *                time (any thread; not two at once).
 *   qkv_session  one sequence: a slot of a context. qkv_session_create() makes
 *                a session with a private one-slot context (sessions made this
 *                way may run on different threads at the same time, even on
 *                one model); qkv_context_session() hands out the slots of a
 *                shared context for batched steps.
 *
 * Threads: each context has a thread count (qkv_context_options.threads). A
 * call runs on that many OpenMP threads and restores the calling thread's
 * OpenMP setting before it returns.
 */
#ifndef QKV_H
#define QKV_H

#include <stddef.h>
#include <stdint.h>

/* Only the functions marked QKV_API are exported from libqkv.so. */
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
  QKV_ERR_INVALID_ARGUMENT = 1, /* null pointer, bad option, impossible shape, bad token id */
  QKV_ERR_IO = 2,               /* file missing, unreadable or not a regular file */
  QKV_ERR_FORMAT = 3,           /* malformed or unsupported model/tokenizer file */
  QKV_ERR_CONTEXT_OVERFLOW = 4, /* tokens do not fit in the session's context */
  QKV_ERR_OUT_OF_MEMORY = 5,    /* over the memory limit, or allocation failed */
  QKV_ERR_BUFFER_TOO_SMALL = 6, /* caller's buffer too small: see each function for the size needed */
  QKV_ERR_INTERNAL = 7          /* a bug in qkv: please report the message */
} qkv_status;

/* Element types (KV cache, bare attention's K and V). Q8_0 needs rows that are a
 * multiple of 32 values (head_dim % 32 == 0). */
typedef enum { QKV_TYPE_F32 = 0, QKV_TYPE_F16 = 1, QKV_TYPE_BF16 = 2, QKV_TYPE_Q8_0 = 3 } qkv_type;

typedef struct qkv_model qkv_model;
typedef struct qkv_context qkv_context;
typedef struct qkv_session qkv_session;

/* ---- library ---- */

/* The message of the last failed call on this thread ("" if none has failed).
 * A successful call does not change it. The pointer stays valid until the next
 * failing call on this thread. */
QKV_API const char* qkv_last_error(void);
/* The library version, "MAJOR.MINOR.PATCH". */
QKV_API const char* qkv_version(void);
/* The SIMD target the kernels dispatched to on this CPU, e.g. "AVX3_DL", "AVX2". */
QKV_API const char* qkv_simd_target(void);
/* A short name for a status ("ok", "i/o error", ...); "unknown status" otherwise. */
QKV_API const char* qkv_status_name(qkv_status status);

/* ---- models ---- */

typedef struct {
  const char* tokenizer_path; /* llama2.c tokenizer.bin (or a GGUF holding a vocabulary);
                                 NULL: the model file's own vocabulary (GGUF) or none */
} qkv_model_options;

/* Fills options with the defaults (no tokenizer file). */
QKV_API void qkv_model_options_init(qkv_model_options* options);
/* Loads a GGUF file or a llama2.c checkpoint (told apart by the "GGUF" magic);
 * weights stay memory-mapped where the file's layout allows. options may be NULL.
 * On success *model is the new model (free it with qkv_model_free); on failure
 * *model is NULL and the status is QKV_ERR_IO (cannot open the model or
 * tokenizer file), QKV_ERR_FORMAT (malformed, truncated or unsupported file, or
 * a tokenizer whose size differs from the model's vocabulary) or
 * QKV_ERR_OUT_OF_MEMORY. */
QKV_API qkv_status qkv_model_load(const char* path, const qkv_model_options* options, qkv_model** model);
/* Frees a model (NULL is ignored). Every context and session on it must be freed first. */
QKV_API void qkv_model_free(qkv_model* model);

typedef struct {
  char architecture[32]; /* NUL-terminated, e.g. "llama" */
  int64_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, head_dim, vocab_size, context_length;
  uint64_t parameters, weight_bytes; /* tied output weights counted once */
  int32_t bos_id, eos_id;            /* -1 when the model has no tokenizer */
  int has_tokenizer;                 /* nonzero: tokenize, detokenize and generate work */
} qkv_model_info;

/* Describes a model. */
QKV_API qkv_status qkv_model_get_info(const qkv_model* model, qkv_model_info* info);

/* Text (NUL-terminated UTF-8) -> token ids, with BOS first if add_bos.
 * *n_tokens is always set to the number of ids the text needs; the ids are
 * written only if they fit in capacity, otherwise QKV_ERR_BUFFER_TOO_SMALL.
 * tokens may be NULL when capacity is 0 (a size query). A model without a
 * tokenizer gives QKV_ERR_INVALID_ARGUMENT. */
QKV_API qkv_status qkv_tokenize(const qkv_model* model, const char* text, int add_bos, int32_t* tokens,
                                int64_t capacity, int64_t* n_tokens);
/* Token ids -> text (NUL-terminated). BOS/EOS and other control tokens give
 * no text; the space the tokenizer puts before the first word is dropped, so
 * detokenize(tokenize(s)) == s. *length is always set to the byte count of the
 * text without the NUL; if capacity < *length + 1 nothing is written and the
 * status is QKV_ERR_BUFFER_TOO_SMALL. text may be NULL when capacity is 0 (a
 * size query). An id outside the vocabulary gives QKV_ERR_INVALID_ARGUMENT. */
QKV_API qkv_status qkv_detokenize(const qkv_model* model, const int32_t* tokens, int64_t n_tokens, char* text,
                                  int64_t capacity, int64_t* length);

/* Chat templates. Renders the model's Jinja chat template (GGUF
 * tokenizer.chat_template), or template_source when it is not NULL, as Hugging
 * Face's apply_chat_template does: conversation_json is a JSON array of
 * {"role", "content"} messages, or an object with "messages" (and "tools" or
 * any other variable the template reads); bos_token and eos_token are the
 * model's, add_generation_prompt is the flag. The text comes back as in
 * qkv_detokenize (*length set always; QKV_ERR_BUFFER_TOO_SMALL when capacity <
 * *length + 1; text may be NULL with capacity 0 for a size query). Bad JSON, a
 * template error, a model without a template, or the template's own
 * raise_exception() give QKV_ERR_INVALID_ARGUMENT with the message in
 * qkv_last_error() (raise_exception's message verbatim). */
QKV_API qkv_status qkv_chat_render(const qkv_model* model, const char* template_source, const char* conversation_json,
                                   int add_generation_prompt, char* text, int64_t capacity, int64_t* length);
/* 1 when the model file carries a chat template (tokenizer.chat_template), else 0. */
QKV_API int qkv_has_chat_template(const qkv_model* model);
/* The model's chat template (Jinja text), or NULL when it has none; valid while the model is. */
QKV_API const char* qkv_model_chat_template(const qkv_model* model);
/* Flags of qkv_tokenize_text, qkv_detokenize_text and qkv_token_piece. */
enum {
  /* tokenize: BOS / EOS as the vocabulary asks (tokenizer.ggml.add_bos_token /
   * add_eos_token; Llama 3 and Gemma add BOS, Qwen adds none) */
  QKV_TOKENIZE_ADD_SPECIAL = 1,
  /* tokenize: control tokens written in the text ("<|im_start|>", "<|eot_id|>")
   * become their ids; without it they are plain text. User-defined tokens
   * ("<think>") are always whole tokens. Special tokens are never split.
   * detokenize / piece: control tokens give their text instead of nothing. */
  QKV_TOKENIZE_PARSE_SPECIAL = 2
};
/* Text of `length` bytes (any bytes, NUL included; text may be NULL when
 * length is 0) -> token ids. Sizes and errors as qkv_tokenize. */
QKV_API qkv_status qkv_tokenize_text(const qkv_model* model, const char* text, int64_t length, int flags,
                                     int32_t* tokens, int64_t capacity, int64_t* n_tokens);
/* Token ids -> text, as qkv_detokenize; with QKV_TOKENIZE_PARSE_SPECIAL control
 * tokens give their text, so tokenize_text(detokenize_text(ids)) with both
 * flags gives ids back. The text may hold NUL bytes: use *length. */
QKV_API qkv_status qkv_detokenize_text(const qkv_model* model, const int32_t* tokens, int64_t n_tokens, int flags,
                                       char* text, int64_t capacity, int64_t* length);
/* One token's text for streaming output, given the token before it (-1 at
 * the start): raw bytes (a UTF-8 character may span tokens), NUL-terminated,
 * sizes as qkv_detokenize. */
QKV_API qkv_status qkv_token_piece(const qkv_model* model, int32_t prev_token, int32_t token, int flags, char* text,
                                   int64_t capacity, int64_t* length);
/* The end-of-generation tokens (EOS, EOT, <|im_end|>, <end_of_turn>,
 * <|eot_id|>, ... as llama.cpp derives them from the file), ascending; sizes as
 * qkv_tokenize. Generation stops at any of them. */
QKV_API qkv_status qkv_eog_tokens(const qkv_model* model, int32_t* tokens, int64_t capacity, int64_t* n_tokens);
/* Nonzero when token is an end-of-generation token of the model's vocabulary
 * (0 for NULL, a model without a tokenizer, or an id outside the vocabulary). */
QKV_API int qkv_is_eog(const qkv_model* model, int32_t token);

/* ---- contexts and sessions ---- */

typedef struct {
  int64_t context;        /* positions per sequence; 0: the model's trained context */
  qkv_type kv_type;       /* KV cache element type (default F16) */
  uint64_t memory_limit;  /* bytes allowed for the model's weights, the KV cache and
                             the activation buffers together; over it creation fails
                             with QKV_ERR_OUT_OF_MEMORY before allocating; 0: no limit */
  int threads;            /* OpenMP threads for this context's calls; 0: one per physical core */
  int64_t prefill_batch;  /* prompt tokens per forward batch; 0: 256 */
  int threads_batch;      /* OpenMP threads for prompt passes (prefill); 0: as threads */
} qkv_context_options;

/* Fills options with the defaults (model's context, F16 cache, no limit, one thread per physical core). */
QKV_API void qkv_context_options_init(qkv_context_options* options);
/* A context of n_seqs (>= 1) sequence slots on a model (which must outlive
 * it). options may be NULL (defaults). Its KV cache memory is reserved here and
 * committed as tokens are stored. On failure *context is NULL. */
QKV_API qkv_status qkv_context_create(qkv_model* model, int64_t n_seqs, const qkv_context_options* options,
                                      qkv_context** context);
/* Frees a context and its slot sessions (NULL is ignored). */
QKV_API void qkv_context_free(qkv_context* context);
/* Builds ahead what the context's prompt passes need: the activation buffers
 * for prefill_batch rows and the GEMM kernels for every batch of up to that
 * many rows (a fixed set of row buckets), so that no prompt pays for them. A
 * server calls it once before it takes requests; without it each is built on
 * first use. *built (may be NULL): the GEMM kernels it made. */
QKV_API qkv_status qkv_context_prepare(qkv_context* context, int64_t* built);
/* Bytes of the context's KV cache (all slots); 0 for NULL. */
QKV_API uint64_t qkv_context_kv_bytes(const qkv_context* context);
/* Slot i (0 <= i < n_seqs) of a context as a session. The session belongs to
 * the context: do not free it; it is valid until the context is freed. */
QKV_API qkv_status qkv_context_session(qkv_context* context, int64_t i, qkv_session** session);

/* A session with its own one-slot context (options may be NULL). Free it with
 * qkv_session_free. On failure *session is NULL. */
QKV_API qkv_status qkv_session_create(qkv_model* model, const qkv_context_options* options,
                                      qkv_session** session);
/* Frees a session made by qkv_session_create (NULL is ignored). A context's
 * slot sessions are freed with their context; passing one here does nothing. */
QKV_API void qkv_session_free(qkv_session* session);

/* Bytes of the KV cache behind a session (its whole context's cache); 0 for NULL. */
QKV_API uint64_t qkv_session_kv_bytes(const qkv_session* session);

/* Runs n_tokens (>= 1) tokens at the session's next positions. logits may be
 * NULL; otherwise it receives the last token's vocab_size logits, and
 * logits_capacity (its length in floats) must be at least vocab_size. Every
 * check happens before anything runs: on any error the session is unchanged.
 * QKV_ERR_CONTEXT_OVERFLOW: the tokens do not fit in the context.
 * QKV_ERR_BUFFER_TOO_SMALL: logits_capacity < vocab_size (the message says so). */
QKV_API qkv_status qkv_session_prefill(qkv_session* session, const int32_t* tokens, int64_t n_tokens,
                                       float* logits, int64_t logits_capacity);
/* One token at the session's next position; logits as for prefill. */
QKV_API qkv_status qkv_session_step(qkv_session* session, int32_t token, float* logits, int64_t logits_capacity);
/* One token each for n distinct sessions that are slots of one context, in one
 * pass (each weight read once for all of them); sessions may be at different
 * positions. logits may be NULL; otherwise [n][vocab_size] in the order of
 * sessions, and logits_capacity must be at least n * vocab_size
 * (QKV_ERR_BUFFER_TOO_SMALL). Sessions of different contexts, or a session
 * twice: QKV_ERR_INVALID_ARGUMENT. Any session at the end of its context:
 * QKV_ERR_CONTEXT_OVERFLOW. On any error no session changes. */
QKV_API qkv_status qkv_step_batch(qkv_session* const* sessions, const int32_t* tokens, int64_t n, float* logits,
                                  int64_t logits_capacity);
/* The prompt runs of n distinct sessions that are slots of one context, in one
 * pass: n_tokens[i] (>= 1) tokens tokens[i] at sessions[i]'s next positions.
 * Each weight is read once for all sessions' tokens (per pass of up to the
 * context's prefill_batch tokens); attention is per session. The same logits,
 * to rounding, as a qkv_session_prefill of each. logits may be NULL; otherwise
 * [n][vocab_size], each session's last token's, in the order of sessions, and
 * logits_capacity must be at least n * vocab_size (QKV_ERR_BUFFER_TOO_SMALL).
 * Errors as for qkv_step_batch; any session whose tokens do not fit:
 * QKV_ERR_CONTEXT_OVERFLOW. On any error no session changes. */
QKV_API qkv_status qkv_prefill_batch(qkv_session* const* sessions, const int32_t* const* tokens,
                                     const int64_t* n_tokens, int64_t n, float* logits, int64_t logits_capacity);
/* The number of positions the session holds (its next token's position). */
QKV_API qkv_status qkv_session_position(const qkv_session* session, int64_t* position);
/* Forgets positions at and after `position` (0 <= position <= the session's
 * position; 0 resets it). The session has no logits to sample until the next
 * prefill or step. */
QKV_API qkv_status qkv_session_truncate(qkv_session* session, int64_t position);

/* ---- sampling and generation ---- */

typedef struct {
  float temperature; /* <= 0: greedy (argmax) */
  int32_t top_k;     /* <= 0: off */
  float top_p;       /* >= 1: off; must be > 0 */
  float min_p;       /* <= 0: off; must be < 1 */
  uint64_t seed;     /* the same seed gives the same tokens */
  /* Penalties over the last repeat_last_n tokens the session was fed (prefill
   * and step; qkv_generate: the prompt and the tokens generated so far), as
   * llama.cpp applies them: a positive logit is divided by repeat_penalty and a
   * negative one multiplied; then count x frequency_penalty + presence_penalty
   * (once per token present) is subtracted. */
  float repeat_penalty;    /* 1 (or <= 0): off */
  int64_t repeat_last_n;   /* 0: off; -1: every token the session holds */
  float presence_penalty;  /* 0: off */
  float frequency_penalty; /* 0: off */
} qkv_sampler_options;

/* Fills options with the defaults (temperature 0.8, top-k 40, top-p 0.95, min-p
 * 0.05, seed 0, no penalties with repeat_last_n 64). */
QKV_API void qkv_sampler_options_init(qkv_sampler_options* options);
/* Sets the session's sampler; its generator starts from options->seed.
 * Invalid options (non-finite temperature, top_p <= 0, min_p >= 1) give
 * QKV_ERR_INVALID_ARGUMENT and keep the previous sampler. */
QKV_API qkv_status qkv_session_set_sampler(qkv_session* session, const qkv_sampler_options* options);
/* Picks a token from the logits of the session's last prefill/step with its
 * sampler (the defaults if none was set). Without such logits (none yet, or
 * after truncate or generate): QKV_ERR_INVALID_ARGUMENT. */
QKV_API qkv_status qkv_session_sample(qkv_session* session, int32_t* token);
/* Adds biases[i] to the logit of tokens[i] before every later sample (after
 * the next qkv_session_set_sampler too); -INFINITY bans a token. n == 0 clears
 * the biases. A token outside the vocabulary or a NaN/+inf bias:
 * QKV_ERR_INVALID_ARGUMENT, and the previous biases stay. */
QKV_API qkv_status qkv_session_set_logit_bias(qkv_session* session, const int32_t* tokens, const float* biases,
                                              int64_t n);
/* Natural-log probabilities under the logits of the session's last
 * prefill/step (the model's distribution: no bias, penalty or temperature).
 * *logprob gets token's; the n_top most likely tokens and theirs go to
 * top_tokens / top_logprobs (most likely first; NULL when n_top is 0; n_top
 * above the vocabulary is clamped; *n_written, if not NULL, is how many were). */
QKV_API qkv_status qkv_session_logprobs(const qkv_session* session, int32_t token, float* logprob, int64_t n_top,
                                        int32_t* top_tokens, float* top_logprobs, int64_t* n_written);

/* ---- grammars: constrained sampling ---- */

typedef struct qkv_grammar qkv_grammar;
typedef enum {
  QKV_GRAMMAR_GBNF = 0,        /* llama.cpp's GBNF grammar text; the start rule is `root` */
  QKV_GRAMMAR_JSON_SCHEMA = 1, /* a JSON Schema, as JSON text */
  QKV_GRAMMAR_JSON_OBJECT = 2  /* any JSON object (source is ignored and may be NULL) */
} qkv_grammar_kind;

/* Compiles a grammar for the model's vocabulary (the first grammar of a model
 * also indexes its vocabulary, once). A grammar or schema the engine cannot
 * enforce is QKV_ERR_INVALID_ARGUMENT with a message naming the problem: the
 * line and column of bad GBNF, the keyword and JSON pointer of a schema
 * ("unsupported JSON Schema keyword 'not' at #/properties/x"). The handle can
 * be shared by any number of sessions and threads. */
QKV_API qkv_status qkv_grammar_create(const qkv_model* model, qkv_grammar_kind kind, const char* source,
                                      qkv_grammar** grammar);
/* Sessions keep their own reference: freeing the handle while they use it is safe. */
QKV_API void qkv_grammar_free(qkv_grammar* grammar);
/* Constrains the session's later qkv_session_sample calls: the logits of tokens
 * whose text cannot continue the grammar are masked before the logit bias,
 * penalties and filters; end-of-generation tokens are allowed only where the
 * grammar can end (and alone where nothing else can follow). The grammar
 * starts at its beginning and advances by each sampled token. NULL removes it. */
QKV_API qkv_status qkv_session_set_grammar(qkv_session* session, const qkv_grammar* grammar);
/* A grammar that waits: sampling stays free until the text the session's
 * samples produce (control tokens as their text) contains one of the
 * triggers; from then on the grammar constrains what follows the trigger
 * (starting with the rest of the token that completed it). A tool-call
 * grammar waits for its opener ("<tool_call>"), an answer format for the end
 * of the thinking ("</think>"). Replaces any grammar the session has. */
QKV_API qkv_status qkv_session_set_grammar_lazy(qkv_session* session, const qkv_grammar* grammar,
                                                const char* const* triggers, int64_t n_triggers);
/* Advances the session's grammar by a token chosen without qkv_session_sample;
 * a token the grammar does not allow is QKV_ERR_INVALID_ARGUMENT (state kept). */
QKV_API qkv_status qkv_session_grammar_accept(qkv_session* session, int32_t token);

typedef struct {
  int64_t steps;     /* llama2.c -n: total positions incl. BOS and prompt; 0: off */
  int64_t n_predict; /* llama.cpp -n: new tokens; -1: until an end-of-generation token, BOS or full context */
  int add_bos;       /* nonzero: BOS (and EOS) as the vocabulary asks (add_bos_token / add_eos_token; default 1) */
  qkv_sampler_options sampler;
  /* Generation ends before the first of these NUL-terminated strings, and no
   * byte of it is streamed, even when it spans tokens (stop_reason "stop").
   * NULL / 0: none. */
  const char* const* stop;
  int64_t n_stop;
  int parse_special; /* nonzero: control tokens written in the prompt become their ids (default 0) */
  const qkv_grammar* grammar; /* NULL: unconstrained; else the generated text follows it */
  /* Speculative decoding: a drafter guesses tokens that the model verifies in
   * one pass, with the same output distribution (greedy: the same tokens).
   * Either a draft model of the same vocabulary (checked: size and every
   * token's text) or, with spec_ngram nonzero, prompt lookup (the last
   * spec_ngram_size .. 1 tokens matched earlier in the prompt and output).
   * Not with a grammar (QKV_ERR_INVALID_ARGUMENT). */
  const qkv_model* draft_model; /* NULL: no draft model (default) */
  int spec_ngram;               /* nonzero: prompt-lookup drafting (default 0) */
  int64_t spec_ngram_size;      /* 1 .. 64 (default 3) */
  int64_t draft_max;            /* tokens drafted per pass, 1 .. 256 (default 16, as llama.cpp) */
  int64_t draft_min;            /* fewer drafted tokens run a plain step, 0 .. draft_max (default 0) */
  float draft_p_min;            /* the draft model stops before a token below this probability (default 0.75) */
} qkv_generate_options;

typedef struct {
  int64_t prompt_tokens, generated_tokens, forward_passes;
  double prompt_ms, generate_ms;
  char stop_reason[16]; /* "eos" (any end-of-generation token), "bos", "steps", "n_predict", "context", "stop", "stopped" (callback) */
  /* Speculative decoding: tokens drafted and verified, of those accepted, and
   * the verify passes (forward_passes counts positions either way). */
  int64_t drafted_tokens, accepted_tokens, verify_passes;
} qkv_generate_stats;

/* Called with each piece of text (not NUL-terminated) as it is produced;
 * return nonzero to stop. */
typedef int (*qkv_piece_callback)(const char* piece, size_t length, void* user);

/* Fills options with the defaults (no step limit, n_predict -1, BOS, default sampler). */
QKV_API void qkv_generate_options_init(qkv_generate_options* options);
/* Encodes prompt, prefills it at the session's next position and generates,
 * streaming pieces (the prompt's after BOS, then each new token's, as
 * llama2.c's run prints them) to callback (may be NULL). options and stats may
 * be NULL. A prompt longer than the room left in the context gives
 * QKV_ERR_CONTEXT_OVERFLOW before anything runs. Afterwards the session holds
 * the prompt and every generated token that was fed back. */
QKV_API qkv_status qkv_generate(qkv_session* session, const char* prompt, const qkv_generate_options* options,
                                qkv_piece_callback callback, void* user, qkv_generate_stats* stats);

/* ---- bare attention ---- */

typedef struct {
  int64_t batch, q_heads, kv_heads, q_len, kv_len, head_dim; /* q_heads % kv_heads == 0 (GQA) */
  float scale;      /* 0: 1/sqrt(head_dim) */
  int causal;       /* query i at position q_pos0 + i sees keys 0 .. q_pos0 + i */
  int64_t q_pos0;   /* >= 0 */
  int64_t window;   /* > 0: sliding window, the query at position p sees keys
                       p - window + 1 .. p (and, without causal, up to p + window - 1) */
  const float* additive_mask; /* [q_len][kv_len] added to the scaled scores (0, -1e9, -INFINITY), or NULL */
  int threads;      /* 0: one per physical core */
} qkv_attention_params;

/* Fills params with a 1x1x1x1x1x1 shape, default scale, no mask, all cores. */
QKV_API void qkv_attention_params_init(qkv_attention_params* params);
/* out = softmax(Q·Kᵀ·scale + mask)·V over caller-owned dense arrays:
 * q and out [batch][q_heads][q_len][head_dim] f32; k and v
 * [batch][kv_heads][kv_len][head_dim] of kv_type (each head_dim row encoded as
 * that type: Q8_0 rows are head_dim/32 blocks of 34 bytes). Query head h uses
 * KV head h / (q_heads / kv_heads). A query that sees no key gets zeros.
 * Shapes must be positive (lengths may be 0) and the arrays' byte sizes must
 * fit in memory; otherwise QKV_ERR_INVALID_ARGUMENT. */
QKV_API qkv_status qkv_attention(const qkv_attention_params* params, const float* q, const void* k, const void* v,
                                 qkv_type kv_type, float* out);

typedef enum {
  QKV_ATTENTION_KERNEL = 0,   /* the production kernel (f32, SIMD) */
  QKV_ATTENTION_REFERENCE = 1 /* the scalar reference (fp64 accumulation, materialized scores) */
} qkv_attention_impl;

/* qkv_attention through either implementation, also writing the softmax
 * weights [batch][q_heads][q_len][kv_len] when weights is non-NULL (the
 * kernel then takes its materialized path: O(q_len * kv_len) memory). */
QKV_API qkv_status qkv_attention_weights(const qkv_attention_params* params, const float* q, const void* k,
                                         const void* v, qkv_type kv_type, float* out, float* weights,
                                         qkv_attention_impl impl);

/* ---- looking inside: attention maps ---- */

/* Attention weights of a prompt in one layer (0 <= layer < n_layers): tokens run
 * from an empty F32 cache in one batch (threads: 0 for one per physical core), and the
 * causal softmax weights come from the kernel's materialized path. head -1 gives
 * every query head, [n_heads][n_tokens][n_tokens]; head h >= 0 one head,
 * [n_tokens][n_tokens]; row = query token, column = key token (0 above the
 * diagonal). *needed is always set to the float count; a capacity below it is
 * QKV_ERR_BUFFER_TOO_SMALL (weights may be NULL with capacity 0: a size query).
 * At most 4096 tokens. */
QKV_API qkv_status qkv_attention_map(qkv_model* model, const int32_t* tokens, int64_t n_tokens, int64_t layer,
                                     int64_t head, int threads, float* weights, int64_t capacity, int64_t* needed);
/* A token's vocabulary piece as stored (SentencePiece form: "▁" for a space,
 * "<s>", "<0x0A>"), NUL-terminated; *length and capacity as for qkv_detokenize. */
QKV_API qkv_status qkv_vocab_piece(const qkv_model* model, int32_t token, char* text, int64_t capacity,
                                   int64_t* length);

/* ---- embeddings and reranking ----
 * Encoder models (GGUF `bert`, `nomic-bert`; a `bert` with the classifier head
 * `cls`/`cls.output` for reranking) and decoders pooled over their final
 * normed hidden states (qwen2/qwen3/llama: LAST or MEAN). Calls are
 * thread-safe on a shared model: each call uses its own buffers (reused
 * between calls through a pool the model keeps). Decoders run each input as
 * its own causal sequence from position 0 with an F32 KV cache sized to the
 * call's longest input, as llama.cpp's references (-ctk f32). Encoder
 * models load with qkv_model_load; contexts and sessions refuse them
 * (QKV_ERR_INVALID_ARGUMENT: "an encoder model embeds; it does not generate"). */

/* Pooling, numbered as llama.cpp's llama_pooling_type. */
typedef enum {
  QKV_POOLING_DEFAULT = -1, /* the model's: GGUF <arch>.pooling_type; without it LAST for
                               decoders, MEAN for encoders */
  QKV_POOLING_NONE = 0,     /* one vector per token */
  QKV_POOLING_MEAN = 1,     /* the average over every token of the input, specials included */
  QKV_POOLING_CLS = 2,      /* the first token's ([CLS]) */
  QKV_POOLING_LAST = 3,     /* the last token's */
  QKV_POOLING_RANK = 4      /* one score: the classifier head on the [CLS] state (rank models) */
} qkv_pooling;

typedef struct {
  qkv_pooling pooling;
  int normalize;      /* llama-embedding's --embd-normalize: -1 none, 0 max-abs scaled to
                         int16 range, 1 taxicab, 2 Euclidean (L2, the default), > 2 p-norm;
                         the sum in double, a zero vector stays zero; ignored for RANK */
  int64_t dimensions; /* > 0: keep the first `dimensions` values, then normalize (Matryoshka);
                         0: all. More than the model's width is QKV_ERR_INVALID_ARGUMENT */
  int truncate;       /* nonzero: an input longer than the context keeps its first
                         context tokens (the last one kept is the input's last, so
                         [SEP] stays); 0: such an input is QKV_ERR_CONTEXT_OVERFLOW */
  int64_t batch_tokens; /* tokens per forward pass (inputs are packed up to it); 0: 2048 */
  int threads;        /* 0: one per physical core */
} qkv_embed_options;

/* Fills options with the defaults (model's pooling, L2, all dimensions, no truncation). */
QKV_API void qkv_embed_options_init(qkv_embed_options* options);
/* The model's own pooling (what QKV_POOLING_DEFAULT means for it). */
QKV_API qkv_pooling qkv_model_pooling(const qkv_model* model);
/* Floats per output vector with these options: 1 for RANK, else the model's
 * width or options->dimensions. */
QKV_API qkv_status qkv_embed_dimension(const qkv_model* model, const qkv_embed_options* options, int64_t* n);
/* Embeds n_inputs token sequences (tokens[i][0..counts[i]), specials already
 * in place: see qkv_embed_tokenize). Writes one vector per input (per token
 * with QKV_POOLING_NONE: counts[i] vectors for input i, inputs in order) to
 * out, each qkv_embed_dimension floats. *n_vectors is always set to the number
 * of vectors the inputs give; when they do not fit in capacity (floats) the
 * status is QKV_ERR_BUFFER_TOO_SMALL and nothing is computed. An empty input,
 * a bad token id or RANK on a model without the head is
 * QKV_ERR_INVALID_ARGUMENT. n_tokens_used (may be NULL) receives the tokens
 * run after truncation. */
QKV_API qkv_status qkv_embed(qkv_model* model, const int32_t* const* tokens, const int64_t* counts,
                             int64_t n_inputs, const qkv_embed_options* options, float* out, int64_t capacity,
                             int64_t* n_vectors, int64_t* n_tokens_used);
/* A text's ids as an embedding input: for WordPiece vocabularies [CLS] text
 * [SEP]; otherwise BOS when the vocabulary adds it (and EOS when it adds EOS).
 * Special-token text ("[SEP]") is parsed, as llama-embedding does. *n_tokens
 * and capacity as for qkv_tokenize. */
QKV_API qkv_status qkv_embed_tokenize(const qkv_model* model, const char* text, int32_t* tokens,
                                      int64_t capacity, int64_t* n_tokens);
/* A (query, document) pair as one rerank input, as llama-server builds it:
 * [CLS] query [SEP] document [SEP] for WordPiece vocabularies (BOS query EOS
 * SEP document EOS with the vocabulary's own ids otherwise). */
QKV_API qkv_status qkv_rerank_tokenize(const qkv_model* model, const char* query, const char* document,
                                       int32_t* tokens, int64_t capacity, int64_t* n_tokens);

/* ---- evaluation: perplexity and KL divergence (llama-perplexity's method) ---- */

/* Quantiles reported for KL divergence and delta-p, in this order:
 * maximum, 99.9%, 99%, 95%, 90%, 75%, median, 25%, 10%, 5%, 1%, 0.1%, minimum
 * (linear interpolation between sorted values). */
#define QKV_EVAL_QUANTILES 13

typedef struct {
  int64_t n_ctx;   /* tokens per chunk; 0: 512 (with kl_divergence_read: the file's) */
  int64_t batch;   /* tokens per forward batch; 0 or > n_ctx: n_ctx */
  int64_t chunks;  /* chunks to evaluate; <= 0: all the text holds */
  qkv_type kv_type;
  int threads;     /* 0: one per physical core */
  const char* kl_divergence_write; /* non-NULL: write llama.cpp's base file there */
  const char* kl_divergence_read;  /* non-NULL: compare with this base file; the
                                      tokens come from it (text may be NULL) */
} qkv_perplexity_options;

typedef struct {
  int64_t chunk, n_chunks, n_ctx, text_tokens, scored_tokens;
  double seconds; /* evaluation time so far */
  double ppl, ppl_err;
  int has_kld;    /* the fields below are set when a base file was read */
  double base_ppl, base_ppl_err, ppl_correlation;
  double ln_ppl_ratio, ln_ppl_ratio_err, ppl_ratio, ppl_ratio_err, ppl_diff, ppl_diff_err;
  double kld, kld_err;
  double dp_mean, dp_mean_err, dp_rms, dp_rms_err; /* probability differences, fractions of 1 */
  double same_top, same_top_err;                   /* fraction of positions with the base's argmax */
  int has_quantiles;                               /* set in the final statistics only */
  double kld_quantiles[QKV_EVAL_QUANTILES], dp_quantiles[QKV_EVAL_QUANTILES];
} qkv_perplexity_stats;

/* Called after each chunk with the running statistics; return nonzero to stop. */
typedef int (*qkv_perplexity_callback)(const qkv_perplexity_stats* running, void* user);

/* Fills options with the defaults (n_ctx 512, batch = n_ctx, all chunks, F16 cache, one thread per physical core). */
QKV_API void qkv_perplexity_options_init(qkv_perplexity_options* options);
/* Perplexity of text as llama-perplexity computes it: the text is tokenized
 * (BOS first when the vocabulary adds it) and cut into chunks of n_ctx tokens;
 * each chunk runs from an empty cache with its first token set to BOS, and
 * positions n_ctx/2 .. n_ctx-2 are scored against the next token. A text of
 * fewer than 2 * n_ctx tokens is QKV_ERR_INVALID_ARGUMENT. A malformed base
 * file is QKV_ERR_FORMAT. stats receives the final statistics. */
QKV_API qkv_status qkv_perplexity(qkv_model* model, const char* text, const qkv_perplexity_options* options,
                                  qkv_perplexity_callback callback, void* user, qkv_perplexity_stats* stats);

/* ---- speculative decoding over the slots of a context ---- */

/* A verify pass of speculative decoding for n distinct sessions that are
 * slots of one context, in one pass (each weight read once for all of them):
 * session i runs tokens[i] (the token it would step next) and then its
 * n_drafts[i] (1 .. 256) guessed continuations drafts[i], and judges them as
 * qkv_generate's speculative decoding does, with its own sampler: draft d is
 * kept with probability p(d) under the distribution qkv_session_sample draws
 * from (logit bias, penalties over the fed tokens and the drafts kept before
 * it, temperature, filters; greedy: d is kept when it is the argmax), and at
 * the first rejection the target's token comes from p without d. So the
 * tokens have the distribution plain sampling gives them (greedy: the same
 * tokens, as far as the pass's logits equal a step's). n_accepted[i]
 * receives how many drafts session i kept; its KV cache (and the tokens the
 * penalties see) keeps tokens[i] and those drafts. Its next n_accepted[i] + 1
 * qkv_session_sample calls hand out the kept drafts and then the target's own
 * token, in order, without drawing (qkv_session_logprobs after each describes
 * that token's position); the last of them is not in the cache yet (step it
 * as a sampled token). A prefill, step, truncate, new sampler or logit bias
 * drops the decided tokens not yet handed out. A session with a grammar, or
 * with decided tokens not yet handed out: QKV_ERR_INVALID_ARGUMENT. Other
 * errors as qkv_prefill_batch; on any error no session's cache changes. */
QKV_API qkv_status qkv_speculate_batch(qkv_session* const* sessions, const int32_t* tokens,
                                       const int32_t* const* drafts, const int64_t* n_drafts, int64_t n,
                                       int64_t* n_accepted);
/* QKV_OK when draft can draft for target (a decoder with the same vocabulary:
 * its size and every token's text); else QKV_ERR_INVALID_ARGUMENT naming the
 * first difference. */
QKV_API qkv_status qkv_model_check_draft(const qkv_model* target, const qkv_model* draft);

#ifdef __cplusplus
}
#endif

#endif /* QKV_H */

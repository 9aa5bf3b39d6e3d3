// The C API's embeddings and reranking (include/qkv.h) over runtime/embed.h.
// Every check on the caller's arguments and buffers runs before any forward
// pass; each call takes its own runners from the model's pool, so calls on a
// shared model may run on many threads at once.
#include <cstring>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "qkv.h"
#include "runtime/c_api_internal.h"
#include "runtime/embed.h"
#include "runtime/tokenizer.h"

using namespace qkv::capi;

namespace {

// Tokens per forward pass when the caller leaves batch_tokens 0.
constexpr int64_t kDefaultBatchTokens = 2048;

// The C options (NULL: the defaults) as the runtime's, every field checked.
qkv::EmbedOptions to_embed_options(const qkv_model* model, const qkv_embed_options* options) {
  qkv_embed_options o;
  qkv_embed_options_init(&o);
  if (options) o = *options;
  qkv::EmbedOptions e;
  const int pooling = raw_enum(o.pooling);
  if (pooling == QKV_POOLING_DEFAULT) {
    e.pooling = qkv::model_pooling(model->model.config);
  } else if (pooling >= QKV_POOLING_NONE && pooling <= QKV_POOLING_RANK) {
    e.pooling = static_cast<qkv::Pooling>(pooling);
  } else {
    qkv::fail("unknown pooling ", pooling, " (QKV_POOLING_DEFAULT, _NONE, _MEAN, _CLS, _LAST or _RANK)");
  }
  QKV_CHECK(o.normalize >= -1, "normalize ", o.normalize,
            " is not one of -1 (none), 0 (max-abs), 1 (taxicab), 2 (L2), > 2 (p-norm)");
  QKV_CHECK(o.batch_tokens >= 0, "batch_tokens must not be negative (got ", o.batch_tokens, "; 0 means ",
            kDefaultBatchTokens, ")");
  QKV_CHECK(o.threads >= 0, "thread count must not be negative (got ", o.threads, "; 0 means all cores)");
  e.normalize = o.normalize;
  e.dimensions = o.dimensions;
  e.truncate = o.truncate != 0;
  e.batch_tokens = o.batch_tokens > 0 ? o.batch_tokens : kDefaultBatchTokens;
  qkv::embed_width(model->model.config, e);  // checks dimensions
  return e;
}

int threads_of(const qkv_embed_options* options) { return options ? options->threads : 0; }

// Appends id when the vocabulary has it (>= 0).
void push_present(std::vector<int32_t>* ids, int32_t id) {
  if (id >= 0) ids->push_back(id);
}

}  // namespace

extern "C" {

void qkv_embed_options_init(qkv_embed_options* options) {
  if (!options) return;
  *options = qkv_embed_options{};
  options->pooling = QKV_POOLING_DEFAULT;
  options->normalize = 2;
}

qkv_pooling qkv_model_pooling(const qkv_model* model) {
  if (!model) return QKV_POOLING_DEFAULT;
  return static_cast<qkv_pooling>(static_cast<int>(qkv::model_pooling(model->model.config)));
}

qkv_status qkv_embed_dimension(const qkv_model* model, const qkv_embed_options* options, int64_t* n) {
  QKV_REQUIRE(n);
  *n = 0;
  QKV_REQUIRE(model);
  return guarded([&] {
    *n = qkv::embed_width(model->model.config, to_embed_options(model, options));
    return QKV_OK;
  });
}

qkv_status qkv_embed(qkv_model* model, const int32_t* const* tokens, const int64_t* counts, int64_t n_inputs,
                     const qkv_embed_options* options, float* out, int64_t capacity, int64_t* n_vectors,
                     int64_t* n_tokens_used) {
  QKV_REQUIRE(n_vectors);
  *n_vectors = 0;
  if (n_tokens_used) *n_tokens_used = 0;
  QKV_REQUIRE(model);
  QKV_REQUIRE(tokens);
  QKV_REQUIRE(counts);
  if (n_inputs < 1) {
    return set_error(QKV_ERR_INVALID_ARGUMENT,
                     "qkv_embed: needs at least one input (got " + std::to_string(n_inputs) + ")");
  }
  if (capacity < 0) return set_error(QKV_ERR_INVALID_ARGUMENT, "qkv_embed: negative capacity");
  if (capacity > 0) QKV_REQUIRE(out);
  return guarded([&] {
    const qkv::EmbedOptions o = to_embed_options(model, options);
    const int64_t width = qkv::embed_width(model->model.config, o);
    std::vector<qkv::EmbedInput> given(static_cast<size_t>(n_inputs));
    for (int64_t i = 0; i < n_inputs; ++i) given[i] = qkv::EmbedInput{tokens[i], counts[i]};
    std::vector<std::vector<int32_t>> truncated;
    const std::vector<qkv::EmbedInput> inputs = qkv::prepare_inputs(model->model.config, given, o, &truncated);
    const int64_t vectors = qkv::embed_vector_count(inputs, o.pooling);
    *n_vectors = vectors;
    const std::optional<int64_t> floats = checked_product({vectors, width});
    QKV_CHECK(floats.has_value(), "qkv_embed: ", vectors, " vectors of ", width, " floats overflow a size");
    if (capacity < *floats) return buffer_too_small(__func__, "output", capacity, *floats, "floats");
    if (n_tokens_used) {
      int64_t used = 0;
      for (const qkv::EmbedInput& in : inputs) used += in.count;
      *n_tokens_used = used;
    }
    ThreadScope threads(threads_of(options));
    qkv::embed(model->model, &model->embed_pool, inputs, o, out);
    return QKV_OK;
  });
}

qkv_status qkv_embed_tokenize(const qkv_model* model, const char* text, int32_t* tokens, int64_t capacity,
                              int64_t* n_tokens) {
  QKV_REQUIRE(n_tokens);
  *n_tokens = 0;
  QKV_REQUIRE(model);
  QKV_REQUIRE(text);
  if (capacity < 0) return set_error(QKV_ERR_INVALID_ARGUMENT, "qkv_embed_tokenize: negative capacity");
  if (capacity > 0) QKV_REQUIRE(tokens);
  return guarded([&] {
    const qkv::Tokenizer& tok = tokenizer_of(model);
    // WordPiece: [CLS] text [SEP] whatever the vocabulary's add_* keys say (llama.cpp adds both for "bert").
    const bool wordpiece = tok.is_wordpiece();
    const std::vector<int32_t> ids =
        tok.encode(text, wordpiece || tok.add_bos(), wordpiece || tok.add_eos(), /*parse_special=*/true);
    return copy_ids(__func__, ids, tokens, capacity, n_tokens);
  });
}

qkv_status qkv_rerank_tokenize(const qkv_model* model, const char* query, const char* document, int32_t* tokens,
                               int64_t capacity, int64_t* n_tokens) {
  QKV_REQUIRE(n_tokens);
  *n_tokens = 0;
  QKV_REQUIRE(model);
  QKV_REQUIRE(query);
  QKV_REQUIRE(document);
  if (capacity < 0) return set_error(QKV_ERR_INVALID_ARGUMENT, "qkv_rerank_tokenize: negative capacity");
  if (capacity > 0) QKV_REQUIRE(tokens);
  return guarded([&] {
    const qkv::Tokenizer& tok = tokenizer_of(model);
    std::vector<int32_t> ids;
    if (tok.is_wordpiece()) {
      // [CLS] query [SEP] document [SEP]: the query as an embedding input, then the document and a [SEP].
      ids = tok.encode(query, true, true, true);
      const std::vector<int32_t> doc = tok.encode(document, false, false, true);
      ids.insert(ids.end(), doc.begin(), doc.end());
      push_present(&ids, tok.sep_id());
    } else {
      // llama-server's format_rerank: BOS query EOS SEP document EOS.
      const std::vector<int32_t> q = tok.encode(query, false, false, true);
      const std::vector<int32_t> doc = tok.encode(document, false, false, true);
      push_present(&ids, tok.bos_id());
      ids.insert(ids.end(), q.begin(), q.end());
      push_present(&ids, tok.eos_id());
      push_present(&ids, tok.sep_id());
      ids.insert(ids.end(), doc.begin(), doc.end());
      push_present(&ids, tok.eos_id());
    }
    return copy_ids(__func__, ids, tokens, capacity, n_tokens);
  });
}

}  // extern "C"

// Request bodies of the embedding and rerank endpoints, parsed and checked:
// OpenAI's /v1/embeddings, Ollama's /api/embed and legacy /api/embeddings,
// and the Jina-style /v1/rerank that llama-server serves. Only JSON is read
// here (texts stay texts; tokenizing needs the model), so the fuzzer links
// this file alone. A wrong field is an ApiError naming it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qkv.h"

namespace qkv::serve {

// One input: a text, or token ids given by the client (used as they are:
// the client's ids carry their own [CLS]/[SEP] or BOS).
struct EmbedInput {
  bool is_tokens = false;
  std::string text;
  std::vector<int32_t> tokens;
};

struct EmbedRequest {
  std::string model;  // empty: not given
  std::vector<EmbedInput> inputs;
  bool base64 = false;      // encoding_format "base64": little-endian float32 bytes
  int64_t dimensions = 0;   // > 0: the first `dimensions` values, normalized again
  qkv_pooling pooling = QKV_POOLING_DEFAULT;  // the server's unless the request names one
  bool normalize = true;    // false: raw vectors
  bool truncate = false;    // an input over the context keeps its first tokens instead of a 400
};

struct RerankRequest {
  std::string model;  // empty: not given
  std::string query;
  std::vector<std::string> documents;
  int64_t top_n = 0;  // 0: every document
  bool return_documents = false;
  bool truncate = false;
};

struct EmbedLimits {
  int64_t vocab_size = 0;
  int64_t width = 0;  // floats of the model's vector: the largest `dimensions`
  size_t max_inputs = 2048;  // inputs (or documents) of one request, as OpenAI allows
};

// OpenAI's body: input (a string, strings, token ids, or lists of ids),
// model, encoding_format, dimensions, user; qkv's pooling, normalize, truncate.
EmbedRequest parse_embeddings(const nlohmann::json& body, const EmbedLimits& limits);
// Ollama's /api/embed: input (a string or strings; a missing or empty string
// is no input: the model-load request), truncate (default true), dimensions,
// options, keep_alive. normalize is always on, as Ollama's.
EmbedRequest parse_ollama_embed(const nlohmann::json& body, const EmbedLimits& limits);
// Ollama's legacy /api/embeddings: prompt (empty: no input), options,
// keep_alive; the vector is raw (not normalized), as Ollama returns it.
EmbedRequest parse_ollama_embeddings(const nlohmann::json& body, const EmbedLimits& limits);
// query, documents (strings, or objects with "text"), top_n,
// return_documents, model, truncate.
RerankRequest parse_rerank(const nlohmann::json& body, const EmbedLimits& limits);

// "none", "mean", "cls", "last", "rank" (false for another name).
bool pooling_from_name(const std::string& name, qkv_pooling* pooling);
const char* pooling_name(qkv_pooling pooling);

}  // namespace qkv::serve

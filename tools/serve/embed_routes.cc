// POST /v1/embeddings (and /embeddings): OpenAI's embeddings API. The answer
// is {"object": "list", "data": [{"object": "embedding", "index", "embedding"}],
// "model", "usage"}; an embedding is a list of floats, base64 of their
// little-endian float32 bytes with encoding_format "base64", or with pooling
// none a list of per-token vectors (as llama-server gives them).
// POST /v1/rerank (and /rerank, /v1/reranking, /reranking): llama-server's
// Jina-style reranking on a rank model: each (query, document) pair scored by
// the classifier head; results {index, relevance_score[, document {text}]}
// sorted by score, best first, cut at top_n.
#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <numeric>

#include "tools/serve/embeddings.h"
#include "tools/serve/responses.h"
#include "tools/serve/server.h"

namespace qkv::serve {

using nlohmann::json;

namespace {

void check_model(const ServedModel& st, const std::string& model) {
  if (!model.empty() && !names_model(model, st.options.model_id)) {
    throw ApiError(404, "The model '" + model + "' does not exist (this server has '" + st.options.model_id + "')",
                   "invalid_request_error", "model", "model_not_found");
  }
}

json body_of(const ServedModel& st, const httplib::Request& req) {
  json j = parse_body(req.body, st.options.max_json_depth);
  if (!j.is_object()) throw ApiError(400, "the request body must be a JSON object");
  return j;
}

// A float as the double its shortest decimal form reads as (0.1f: 0.1, not
// 0.10000000149011612), so that JSON shows the float's digits.
double shortest(float x) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf - 1, x);
  *r.ptr = '\0';
  return std::strtod(buf, nullptr);
}

std::string usage_text(int64_t tokens) {
  return "{\"prompt_tokens\":" + std::to_string(tokens) + ",\"total_tokens\":" + std::to_string(tokens) + "}";
}

void embeddings_route(ServedModel& st, const httplib::Request& req, httplib::Response& res) {
  const json body = body_of(st, req);
  const EmbedRequest r = parse_embeddings(body, embed_limits(st));
  check_model(st, r.model);
  const qkv_embed_options o = embed_options(st, r.pooling, r.normalize, r.dimensions);
  if (o.pooling == QKV_POOLING_NONE && r.base64) {
    throw bad_field("encoding_format", "encoding_format \"base64\" needs one vector per input; pooling none gives "
                                       "one per token: ask for \"float\"");
  }
  const EmbedOutcome out = run_embedding(st, embed_inputs(st, r), o, r.truncate, "input", res);
  std::string text = "{\"object\":\"list\",\"data\":[";
  const float* v = out.values.data();
  for (size_t i = 0; i < out.vectors.size(); ++i) {
    if (i) text += ',';
    text += "{\"object\":\"embedding\",\"index\":" + std::to_string(i) + ",\"embedding\":";
    if (r.base64) {
      text += '"' + base64_floats(v, out.dimension) + '"';
      v += out.dimension;
    } else if (o.pooling == QKV_POOLING_NONE) {
      text += '[';
      for (int64_t t = 0; t < out.vectors[i]; ++t, v += out.dimension) {
        if (t) text += ',';
        append_json_floats(text, v, out.dimension);
      }
      text += ']';
    } else {
      append_json_floats(text, v, out.dimension);
      v += out.dimension;
    }
    text += '}';
  }
  text += "],\"model\":" + json(r.model.empty() ? st.options.model_id : r.model).dump() +
          ",\"usage\":" + usage_text(out.tokens) + "}";
  res.set_content(text, "application/json");
}

void rerank_route(ServedModel& st, const httplib::Request& req, httplib::Response& res) {
  const json body = body_of(st, req);
  const RerankRequest r = parse_rerank(body, embed_limits(st));
  check_model(st, r.model);
  if (st.pooling != QKV_POOLING_RANK) {
    throw ApiError(400,
                   "model " + st.options.model_id + " is not a reranking model (its pooling is " +
                       pooling_name(st.pooling) +
                       "): /v1/rerank needs a model with a classifier head, served with pooling rank",
                   "invalid_request_error", "model", "model_not_supported");
  }
  std::vector<std::vector<int32_t>> pairs;
  pairs.reserve(r.documents.size());
  for (const std::string& doc : r.documents) {
    int64_t n = 0;
    qkv_rerank_tokenize(st.model, r.query.c_str(), doc.c_str(), nullptr, 0, &n);
    std::vector<int32_t> ids(static_cast<size_t>(std::max<int64_t>(n, 0)));
    if (qkv_rerank_tokenize(st.model, r.query.c_str(), doc.c_str(), ids.data(), n, &n) != QKV_OK) {
      throw ApiError(400, std::string("cannot tokenize: ") + qkv_last_error());
    }
    pairs.push_back(std::move(ids));
  }
  const qkv_embed_options o = embed_options(st, QKV_POOLING_RANK, false, 0);
  const EmbedOutcome out = run_embedding(st, std::move(pairs), o, r.truncate, "documents", res);
  std::vector<size_t> order(r.documents.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&out](size_t a, size_t b) { return out.values[a] > out.values[b]; });
  const size_t keep = r.top_n > 0 ? static_cast<size_t>(r.top_n) : order.size();
  json results = json::array();
  for (size_t k = 0; k < keep; ++k) {
    const size_t i = order[k];
    json item = {{"index", i}, {"relevance_score", shortest(out.values[i])}};
    if (r.return_documents) item["document"] = {{"text", r.documents[i]}};
    results.push_back(std::move(item));
  }
  res.set_content(dump({{"model", r.model.empty() ? st.options.model_id : r.model},
                        {"object", "list"},
                        {"usage", {{"prompt_tokens", out.tokens}, {"total_tokens", out.tokens}}},
                        {"results", results}}),
                  "application/json");
}

}  // namespace

void install_embedding_routes(httplib::Server& svr, ServerState& st) {
  for (const char* path : {"/v1/embeddings", "/embeddings"}) {
    svr.Post(path, guarded(st, "/v1/embeddings", embeddings_route));
  }
  for (const char* path : {"/v1/rerank", "/rerank", "/v1/reranking", "/reranking"}) {
    svr.Post(path, guarded(st, "/v1/rerank", rerank_route));
  }
}

}  // namespace qkv::serve

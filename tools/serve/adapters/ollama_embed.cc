// The Ollama API's embedding endpoints:
//   POST /api/embed       {model, input (a string or strings), truncate
//                         (default true), dimensions, options, keep_alive}
//                         -> {model, embeddings: [[...]] (L2-normalized),
//                         total_duration, load_duration, prompt_eval_count}.
//                         No input (a missing or empty string) loads the
//                         model: embeddings [].
//   POST /api/embeddings  the legacy form: {model, prompt} -> {embedding:
//                         [...]}, the raw pooled vector, as Ollama returns it
//                         ([] for an empty prompt).
// Errors are Ollama's {"error": "message"}.
#include <chrono>

#include "tools/serve/adapters/ollama.h"
#include "tools/serve/embeddings.h"

namespace qkv::serve::ollama {

using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

json body_of(const ServedModel& st, const httplib::Request& req) {
  json j = parse_body(req.body, st.options.max_json_depth);
  if (!j.is_object()) throw ApiError(400, "the request body must be a JSON object");
  return j;
}

int64_t nanoseconds_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t).count();
}

void embed_route(ServedModel& st, const httplib::Request& req, httplib::Response& res) {
  const auto start = Clock::now();
  const json body = body_of(st, req);
  const std::string model = checked_model(st, body);
  const EmbedRequest r = parse_ollama_embed(body, embed_limits(st));
  std::string text = "{\"model\":" + json(model).dump() + ",\"embeddings\":[";
  int64_t tokens = 0;
  if (!r.inputs.empty()) {
    const qkv_embed_options o = embed_options(st, QKV_POOLING_DEFAULT, true, r.dimensions);
    if (o.pooling == QKV_POOLING_NONE) {
      throw ApiError(400, "model " + st.options.model_id + " is served with pooling none (a vector per token): "
                     "/api/embed gives one vector per input");
    }
    const EmbedOutcome out = run_embedding(st, embed_inputs(st, r), o, r.truncate, "input", res);
    for (size_t i = 0; i < out.vectors.size(); ++i) {
      if (i) text += ',';
      append_json_floats(text, out.values.data() + i * static_cast<size_t>(out.dimension), out.dimension);
    }
    tokens = out.tokens;
  }
  text += "],\"total_duration\":" + std::to_string(nanoseconds_since(start)) +
          ",\"load_duration\":0,\"prompt_eval_count\":" + std::to_string(tokens) + "}";
  res.set_content(text, "application/json; charset=utf-8");
}

void embeddings_route(ServedModel& st, const httplib::Request& req, httplib::Response& res) {
  const json body = body_of(st, req);
  checked_model(st, body);
  const EmbedRequest r = parse_ollama_embeddings(body, embed_limits(st));
  std::string text = "{\"embedding\":";
  if (r.inputs.empty()) {
    text += "[]";
  } else {
    const qkv_embed_options o = embed_options(st, QKV_POOLING_DEFAULT, false, 0);
    if (o.pooling == QKV_POOLING_NONE) {
      throw ApiError(400, "model " + st.options.model_id + " is served with pooling none (a vector per token): "
                     "/api/embeddings gives one vector");
    }
    const EmbedOutcome out = run_embedding(st, embed_inputs(st, r), o, r.truncate, "prompt", res);
    append_json_floats(text, out.values.data(), out.dimension);
  }
  text += "}";
  res.set_content(text, "application/json; charset=utf-8");
}

}  // namespace

void install_embed_routes(httplib::Server& svr, ServerState& st) {
  svr.Post("/api/embed", guarded(st, "/api/embed", embed_route));
  svr.Post("/api/embeddings", guarded(st, "/api/embeddings", embeddings_route));
}

}  // namespace qkv::serve::ollama

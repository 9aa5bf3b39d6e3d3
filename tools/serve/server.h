// qkv serve's HTTP side: the options, and the state the endpoints share.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "qkv.h"
#include "tools/serve/api_error.h"
#include "tools/serve/embeddings.h"
#include "tools/serve/grammar_cache.h"
#include "tools/serve/metrics.h"
#include "tools/serve/request.h"
#include "tools/serve/scheduler.h"

namespace qkv::serve {

struct ServeOptions {
  std::string model_path, tokenizer_path, model_id;
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (printed)
  int slots = 4;
  int64_t context = 0;  // per slot; 0: min(model's, 4096)
  qkv_type kv_type = QKV_TYPE_F16;
  int threads = 0;
  uint64_t memory_limit = 0;  // qkv_context_options.memory_limit; 0: none
  std::string api_key;
  std::string chat_template;  // --chat-template-file's text; "": the model's
  size_t max_queue = 64;
  double timeout_s = 600;
  double grace_s = 10;
  double io_timeout_s = 30;  // socket read/write stall limit
  int64_t prefill_chunk = 256;
  int64_t prefill_batch = 512;
  size_t max_body = 1 << 20;
  int max_json_depth = 32;
  qkv_pooling pooling = QKV_POOLING_DEFAULT;  // --pooling; DEFAULT: the model's
  bool embedding_only = false;  // --embeddings / --rerank: no generation, also for a decoder
};

struct ServerState {
  ServeOptions options;
  qkv_model* model = nullptr;
  qkv_model_info info{};
  int64_t slot_context = 0;
  RequestLimits limits;
  Metrics metrics;
  GrammarCache grammars;
  ComputeTurns turns;                    // the scheduler's and the embedding worker's passes alternate
  std::unique_ptr<Scheduler> scheduler;  // null when the server only embeds
  // Embeddings: the pooling a request gets by default, the tokens one input
  // may have, and the worker (an embedding model's from the start, a
  // decoder's from its first embedding request).
  bool embedding_only = false;
  qkv_pooling pooling = QKV_POOLING_LAST;
  int64_t embed_context = 0;
  std::mutex embed_mu;
  std::unique_ptr<EmbedWorker> embedder;
  std::atomic<bool> stopping{false};
  // Streaming responses whose last bytes are not yet written: a shutdown
  // waits for them (bounded) so that no stream is cut before its end event.
  std::atomic<int> open_streams{0};
};

// Every route, the auth check and the error handlers.
void install_routes(httplib::Server& svr, ServerState& state);
// POST /v1/completions and /v1/chat/completions.
void handle_generate(ServerState& state, bool chat, const httplib::Request& req, httplib::Response& res);
// Writes an OpenAI error object with its status.
void send_error(httplib::Response& res, int status, const std::string& message,
                const std::string& type = "invalid_request_error", const std::string& param = "",
                const std::string& code = "");
// Writes the error in the shape of the API the request's path belongs to.
void send_error_for(const httplib::Request& req, httplib::Response& res, const ApiError& e);
// A route's handler with its outcome counted under endpoint and its errors
// (ApiError, a JSON value of an unexpected type) answered in the shape of the
// API the request's path belongs to. f takes (state, request, response) or
// (request, response).
template <typename F>
httplib::Server::Handler guarded(ServerState& st, const char* endpoint, F f) {
  return [&st, endpoint, f](const httplib::Request& req, httplib::Response& res) {
    try {
      if constexpr (std::is_invocable_v<F, ServerState&, const httplib::Request&, httplib::Response&>) {
        f(st, req, res);
      } else {
        f(req, res);
      }
      st.metrics.request_done(endpoint, 200);
    } catch (const ApiError& e) {
      send_error_for(req, res, e);
      st.metrics.request_done(endpoint, e.status);
    } catch (const nlohmann::json::exception& e) {
      send_error_for(req, res, ApiError(400, std::string("unexpected JSON: ") + e.what()));
      st.metrics.request_done(endpoint, 400);
    }
  };
}
// POST /v1/embeddings, /embeddings, /v1/rerank, /rerank, /v1/reranking, /reranking.
void install_embedding_routes(httplib::Server& svr, ServerState& state);
// API adapters (tools/serve/adapters/): each installs its routes.
void install_anthropic_routes(httplib::Server& svr, ServerState& state);
void install_responses_routes(httplib::Server& svr, ServerState& state);
void install_ollama_routes(httplib::Server& svr, ServerState& state);
// The web chat page served at /.
const char* web_page();

}  // namespace qkv::serve

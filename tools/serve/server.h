// qkv serve's HTTP side: the state the endpoints share and the handler wrappers.
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
#include "tools/serve/metrics.h"
#include "tools/serve/model_registry.h"
#include "tools/serve/served_model.h"

namespace qkv::serve {

// The server: its options, its own metrics (the routes without a model;
// with one model, that model's too) and the models.
struct ServerState {
  ServeOptions options;
  Metrics metrics;
  std::atomic<bool> stopping{false};
  std::unique_ptr<ModelRegistry> models;
};

// The model a request's JSON body names in `model` (Ollama's older `name`
// too); "" when it names none or the server holds one model.
std::string requested_model(const ServerState& st, const httplib::Request& req);
// The request's model, loaded and leased (ApiError: 404 unknown, 500 a failed
// load, 503 busy or stopping; 400 when a generation path asks a model that
// only embeds).
ModelLease lease_model(ServerState& st, const httplib::Request& req);

// Every route, the auth check and the error handlers.
void install_routes(httplib::Server& svr, ServerState& state);
// POST /v1/completions and /v1/chat/completions.
void handle_generate(ServedModel& model, bool chat, const httplib::Request& req, httplib::Response& res);
// Writes an OpenAI error object with its status.
void send_error(httplib::Response& res, int status, const std::string& message,
                const std::string& type = "invalid_request_error", const std::string& param = "",
                const std::string& code = "");
// Writes the error in the shape of the API the request's path belongs to.
void send_error_for(const httplib::Request& req, httplib::Response& res, const ApiError& e);
// A route's handler with its outcome counted under endpoint and its errors
// (ApiError, a JSON value of an unexpected type) answered in the shape of the
// API the request's path belongs to. f takes (model, request, response) (the
// request's model leased for it), (state, request, response) or (request,
// response).
template <typename F>
httplib::Server::Handler guarded(ServerState& st, const char* endpoint, F f) {
  return [&st, endpoint, f](const httplib::Request& req, httplib::Response& res) {
    Metrics* metrics = &st.metrics;
    try {
      if constexpr (std::is_invocable_v<F, ServedModel&, const httplib::Request&, httplib::Response&>) {
        ModelLease lease = lease_model(st, req);
        metrics = &lease.model().metrics;
        f(lease.model(), req, res);
      } else if constexpr (std::is_invocable_v<F, ServerState&, const httplib::Request&, httplib::Response&>) {
        f(st, req, res);
      } else {
        f(req, res);
      }
      metrics->request_done(endpoint, 200);
    } catch (const ApiError& e) {
      send_error_for(req, res, e);
      metrics->request_done(endpoint, e.status);
    } catch (const nlohmann::json::exception& e) {
      send_error_for(req, res, ApiError(400, std::string("unexpected JSON: ") + e.what()));
      metrics->request_done(endpoint, 400);
    }
  };
}
// A handler f(model, request, response) that answers its own errors, run
// with the request's model leased (until its stream, if any, has started).
template <typename F>
httplib::Server::Handler with_model(ServerState& st, F f) {
  return [&st, f](const httplib::Request& req, httplib::Response& res) {
    std::unique_ptr<ModelLease> lease;
    try {
      lease = std::make_unique<ModelLease>(lease_model(st, req));
    } catch (const ApiError& e) {
      send_error_for(req, res, e);
      st.metrics.request_done(req.path, e.status);
      return;
    }
    f(lease->model(), req, res);
  };
}
// GET /v1/models, POST /models/load and /models/unload.
void install_model_list_routes(httplib::Server& svr, ServerState& state);
// POST /v1/embeddings, /embeddings, /v1/rerank, /rerank, /v1/reranking, /reranking.
void install_embedding_routes(httplib::Server& svr, ServerState& state);
// API adapters (tools/serve/adapters/): each installs its routes.
void install_anthropic_routes(httplib::Server& svr, ServerState& state);
void install_responses_routes(httplib::Server& svr, ServerState& state);
void install_ollama_routes(httplib::Server& svr, ServerState& state);
// The web chat page served at /.
const char* web_page();

}  // namespace qkv::serve

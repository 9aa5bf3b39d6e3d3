// Which model a request asks for, and the model routes:
//   GET  /v1/models      every model: id, object, owned_by, created, status
//                        ("loaded", "unloaded", "loading"), context (positions
//                        per slot when loaded, else the trained context from
//                        the GGUF header), architecture, memory_bytes (what
//                        the --memory-limit budget counts for it: measured
//                        once loaded, else its files and the KV cache the
//                        header implies, and an embedding worker's
//                        buffers while it runs), embedding_buffer_bytes
//                        (those buffers: what the worker adds when it
//                        starts), error (the last failed load's
//                        reason), and while loaded a meta object (slots,
//                        vocabulary, width, pooling).
//   POST /models/load    {"model": NAME}: loads it (making room as a request
//                        would); {"success": true}.
//   POST /models/unload  {"model": NAME}: unloads it; 409 while it has
//                        requests in flight (they are not waited for).
#include "tools/serve/responses.h"
#include "tools/serve/server.h"

namespace qkv::serve {

using nlohmann::json;

namespace {

// The endpoints that generate text (each in its API's shape): a model that
// only embeds has no slots for them.
bool is_generation_path(const std::string& path) {
  for (const char* p : {"/v1/completions", "/v1/chat/completions", "/v1/messages", "/v1/messages/count_tokens",
                        "/v1/responses", "/api/generate", "/api/chat"}) {
    if (path == p) return true;
  }
  return false;
}

std::string body_model(const ServerState& st, const httplib::Request& req, bool required) {
  const json j = parse_body(req.body, st.options.max_json_depth);
  if (!j.is_object()) throw ApiError(400, "the request body must be a JSON object");
  for (const char* key : {"model", "name"}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_string()) throw bad_field(key, std::string("'") + key + "' must be a string", "invalid_type");
    if (!it->get<std::string>().empty()) return it->get<std::string>();
  }
  if (required) throw bad_field("model", "'model' is required: the name of a served model", "missing_required_parameter");
  return "";
}

}  // namespace

std::string requested_model(const ServerState& st, const httplib::Request& req) {
  if (st.models->single()) return "";
  return body_model(st, req, false);
}

ModelLease lease_model(ServerState& st, const httplib::Request& req) {
  ModelLease lease = st.models->acquire(requested_model(st, req));
  if (lease.model().embedding_only && req.method == "POST" && is_generation_path(req.path)) {
    throw embedding_only_error(lease.model());
  }
  return lease;
}

void install_model_list_routes(httplib::Server& svr, ServerState& st) {
  svr.Get("/v1/models", guarded(st, "/v1/models", [](ServerState& s, const httplib::Request&, httplib::Response& res) {
            json data = json::array();
            s.models->for_each([&](const ModelStatus& m) {
              const ResponseMeta meta = new_meta(false, m.name);
              json entry = {{"id", m.name},
                            {"object", "model"},
                            {"created", meta.created},
                            {"owned_by", "qkv"},
                            {"status", load_state_name(m.state)},
                            {"context", m.context},
                            {"architecture", m.architecture},
                            {"memory_bytes", m.memory_bytes},
                            {"embedding_buffer_bytes", m.embed_worker_bytes}};
              if (!m.last_error.empty()) entry["error"] = m.last_error;
              if (m.state == LoadState::kLoaded) {
                const ServedModel& sm = *m.model;
                entry["meta"] = {{"n_ctx_slot", sm.slot_context},
                                 {"slots", sm.scheduler ? sm.options.slots : 0},
                                 {"n_vocab", sm.info.vocab_size},
                                 {"n_embd", sm.info.dim},
                                 {"pooling", pooling_name(sm.pooling)},
                                 {"embedding_only", sm.embedding_only}};
              }
              data.push_back(std::move(entry));
            });
            res.set_content(dump(json{{"object", "list"}, {"data", data}}), "application/json");
          }));
  svr.Post("/models/load", guarded(st, "/models/load", [](ServerState& s, const httplib::Request& req,
                                                          httplib::Response& res) {
             s.models->load(body_model(s, req, true));
             res.set_content(dump(json{{"success", true}}), "application/json");
           }));
  svr.Post("/models/unload", guarded(st, "/models/unload", [](ServerState& s, const httplib::Request& req,
                                                              httplib::Response& res) {
             s.models->unload(body_model(s, req, true));
             res.set_content(dump(json{{"success", true}}), "application/json");
           }));
}

}  // namespace qkv::serve

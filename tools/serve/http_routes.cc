// The routes, Bearer auth, request limits and error objects of qkv serve.
#include <cstring>

#include "tools/serve/api_error.h"
#include "tools/serve/responses.h"
#include "tools/serve/server.h"

namespace qkv::serve {

using nlohmann::json;

namespace {

// Equal strings, in time that depends on the lengths only.
bool constant_time_equal(const std::string& a, const std::string& b) {
  const size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

// The key as OpenAI clients send it (Authorization: Bearer KEY) or as
// Anthropic's do (x-api-key: KEY).
bool authorized(const ServerState& st, const httplib::Request& req) {
  if (st.options.api_key.empty()) return true;
  if (req.path == "/health" || req.path == "/") return true;  // probes and the page itself
  if (req.has_header("x-api-key") && constant_time_equal(req.get_header_value("x-api-key"), st.options.api_key)) {
    return true;
  }
  const std::string h = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  if (h.compare(0, prefix.size(), prefix) != 0) return false;
  return constant_time_equal(h.substr(prefix.size()), st.options.api_key);
}

void send_json(httplib::Response& res, const json& j) { res.set_content(dump(j), "application/json"); }

json json_body(const ServedModel& st, const httplib::Request& req) {
  json j = parse_body(req.body, st.options.max_json_depth);
  if (!j.is_object()) throw ApiError(400, "the request body must be a JSON object");
  return j;
}

void tokenize_route(ServedModel& st, const httplib::Request& req, httplib::Response& res) {
  const json j = json_body(st, req);
  auto c = j.find("content");
  if (c == j.end() || !c->is_string()) throw bad_field("content", "'content' must be a string", "invalid_type");
  bool add_special = false;
  if (auto a = j.find("add_special"); a != j.end()) {
    if (!a->is_boolean()) throw bad_field("add_special", "'add_special' must be true or false", "invalid_type");
    add_special = a->get<bool>();
  }
  const std::string text = c->get<std::string>();
  int64_t n = 0;
  qkv_tokenize(st.model, text.c_str(), add_special, nullptr, 0, &n);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  if (qkv_tokenize(st.model, text.c_str(), add_special, ids.data(), n, &n) != QKV_OK) {
    throw ApiError(400, std::string("cannot tokenize: ") + qkv_last_error());
  }
  send_json(res, {{"tokens", ids}});
}

void detokenize_route(ServedModel& st, const httplib::Request& req, httplib::Response& res) {
  const json j = json_body(st, req);
  auto t = j.find("tokens");
  if (t == j.end() || !t->is_array()) throw bad_field("tokens", "'tokens' must be a list of token ids", "invalid_type");
  std::vector<int32_t> ids;
  for (const json& x : *t) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= st.info.vocab_size) {
      throw bad_field("tokens", "'tokens' holds " + x.dump() + ", not a token id below " +
                                    std::to_string(st.info.vocab_size));
    }
    ids.push_back(static_cast<int32_t>(x.get<int64_t>()));
  }
  int64_t len = 0;
  qkv_detokenize(st.model, ids.data(), static_cast<int64_t>(ids.size()), nullptr, 0, &len);
  std::string text(static_cast<size_t>(len) + 1, '\0');
  if (qkv_detokenize(st.model, ids.data(), static_cast<int64_t>(ids.size()), text.data(), len + 1, &len) != QKV_OK) {
    throw ApiError(400, std::string("cannot detokenize: ") + qkv_last_error());
  }
  text.resize(static_cast<size_t>(len));
  send_json(res, {{"content", text}});
}

}  // namespace

void send_error(httplib::Response& res, int status, const std::string& message, const std::string& type,
                const std::string& param, const std::string& code) {
  res.status = status;
  res.set_content(dump(error_body(message, type, param, code)), "application/json");
}

void send_error_for(const httplib::Request& req, httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(dump(error_body(error_style(req.path), e)), "application/json");
}

void install_routes(httplib::Server& svr, ServerState& st) {
  svr.set_pre_routing_handler([&st](const httplib::Request& req, httplib::Response& res) {
    if (authorized(st, req)) return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("WWW-Authenticate", "Bearer");
    send_error_for(req, res,
                   ApiError(401, "Incorrect or missing API key: send 'Authorization: Bearer KEY' or 'x-api-key: KEY'",
                            "invalid_request_error", "", "invalid_api_key"));
    st.metrics.request_done("auth", 401);
    return httplib::Server::HandlerResponse::Handled;
  });
  // Statuses httplib sets itself (404, 413, 400 for a malformed request line)
  // get an error object too.
  svr.set_error_handler([&st](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string msg;
    switch (res.status) {
      case 404: msg = "no such endpoint: " + req.method + " " + req.path; break;
      case 413: msg = "the request body is larger than " + std::to_string(st.options.max_body) + " bytes"; break;
      default: msg = "the request could not be read (HTTP " + std::to_string(res.status) + ")"; break;
    }
    send_error_for(req, res, ApiError(res.status, msg, "invalid_request_error", "", res.status == 404 ? "not_found" : ""));
    st.metrics.request_done(res.status == 404 ? "unknown" : "http", res.status);
  });
  svr.set_exception_handler([&st](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error_for(req, res, ApiError(500, "internal error: " + what, "server_error"));
    st.metrics.request_done("internal", 500);
  });

  svr.Post("/v1/completions", with_model(st, [](ServedModel& m, const httplib::Request& req, httplib::Response& res) {
             handle_generate(m, false, req, res);
           }));
  svr.Post("/v1/chat/completions",
           with_model(st, [](ServedModel& m, const httplib::Request& req, httplib::Response& res) {
             handle_generate(m, true, req, res);
           }));
  install_model_list_routes(svr, st);
  svr.Get("/health", [&st](const httplib::Request&, httplib::Response& res) {
    if (st.stopping) {
      res.status = 503;
      send_json(res, {{"status", "shutting down"}});
    } else {
      send_json(res, {{"status", "ok"}});
    }
  });
  svr.Get("/metrics", [&st](const httplib::Request&, httplib::Response& res) {
    // The server's part (with one model, the model's too), then each model's.
    std::vector<Metrics::Part> parts(1);
    parts[0].metrics = &st.metrics;
    st.models->for_each([&](const ModelStatus& s) {
      ServedModel& m = *s.model;
      Metrics::Part p;
      p.metrics = &m.metrics;
      if (s.state == LoadState::kLoaded) {
        {
          std::lock_guard<std::mutex> lock(m.embed_mu);
          if (m.embedder) p.embed_queue_depth = m.embedder->queue_depth();
        }
        if (m.scheduler) {
          p.queue_depth = m.scheduler->queue_depth();
          p.busy_slots = m.scheduler->busy_slots();
          p.slots = m.scheduler->slots();
        }
      }
      if (p.metrics == &st.metrics) {
        parts[0] = p;
      } else {
        parts.push_back(p);
      }
    });
    res.set_content(Metrics::render(parts), "text/plain; version=0.0.4");
  });
  svr.Post("/tokenize", guarded(st, "/tokenize", tokenize_route));
  svr.Post("/detokenize", guarded(st, "/detokenize", detokenize_route));
  svr.Get("/", [](const httplib::Request&, httplib::Response& res) { res.set_content(web_page(), "text/html; charset=utf-8"); });
  install_embedding_routes(svr, st);
  install_anthropic_routes(svr, st);
  install_responses_routes(svr, st);
  install_ollama_routes(svr, st);
}

}  // namespace qkv::serve

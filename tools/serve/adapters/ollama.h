// Shared by the files of the Ollama adapter (tools/serve/adapters/ollama*.cc):
// what the model endpoints know about a loaded model, the model-name check,
// and the generation runner that writes Ollama's response objects.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "tools/serve/request.h"
#include "tools/serve/server.h"

namespace qkv::serve::ollama {

// A loaded model as Ollama's listing describes it.
struct ModelCard {
  std::string file_time;  // the file's modification time, RFC 3339
  uint64_t file_size = 0;
  std::string digest;     // 64 hex digits, stable for the file's path and size
  nlohmann::ordered_json details;     // format, family, parameter_size, quantization_level...
  nlohmann::ordered_json model_info;  // GGUF metadata scalars (arrays empty unless verbose)
  nlohmann::ordered_json model_info_verbose;
  std::string template_text;  // the chat template's Jinja source ("" without one)
  bool tools = false;         // the template renders tools and the reply's calls are parsed
  bool thinking = false;      // the template has a thinking block
};

ModelCard make_model_card(const ServedModel& st);
// The loaded model's card, made on its first use after each load.
std::shared_ptr<const ModelCard> card_of(ServedModel& st);

// RFC 3339 in UTC with microseconds, as Ollama writes created_at.
std::string rfc3339(std::chrono::system_clock::time_point t);

// The request's `model`: the server's model id, also with the ":latest" tag
// that Ollama clients add. Missing: 400; another name: 404.
std::string checked_model(const ServedModel& st, const nlohmann::json& body);

// POST /api/embed and /api/embeddings (tools/serve/adapters/ollama_embed.cc).
void install_embed_routes(httplib::Server& svr, ServerState& st);

// GET /api/tags, /api/ps, /api/version and POST /api/show.
void install_model_routes(httplib::Server& svr, ServerState& st);

// How a generation is answered: /api/chat's message objects or
// /api/generate's response strings, one object or an NDJSON stream.
struct RunSpec {
  bool chat_shape = true;  // message {role, content, thinking, tool_calls}; else response + thinking
  bool stream = true;
  std::string model;     // echoed as the client named it
  std::string endpoint;  // for the metrics
  std::chrono::steady_clock::time_point start;  // the request's arrival (total_duration)
};

// Runs r (a chat or a plain completion) and writes the answer. Throws
// ApiError for a request the server cannot take, before anything is sent.
void run(ServedModel& st, GenRequest& r, const RunSpec& spec, httplib::Response& res);

// The answer to a request without a prompt (Ollama loads the model then):
// done at once with done_reason "load".
void send_load_reply(const RunSpec& spec, httplib::Response& res);

}  // namespace qkv::serve::ollama

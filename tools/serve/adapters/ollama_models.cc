// The Ollama API's model endpoints over the served models:
//   GET  /api/tags     every model: name and model (its id),
//                      modified_at (the file's time), size (the file's),
//                      digest (a stable hash of the path and size, not
//                      Ollama's sha256 of a blob: there is no blob store),
//                      details {format, family, families, parameter_size,
//                      quantization_level}; a model not loaded shows what
//                      its file and GGUF header tell, read without loading
//                      the weights (parameter_size from the tensors'
//                      element counts, quantization_level from
//                      general.file_type or the tensors' types).
//   POST /api/show     {model, verbose?}: details, model_info (the GGUF
//                      metadata; arrays only with verbose, as Ollama does),
//                      template (the chat template's Jinja text, not a Go
//                      template), parameters, capabilities ("completion",
//                      "tools" when the template renders tools, "thinking"
//                      when it has a thinking block; "embedding" alone when
//                      the server only embeds). A model that is not
//                      loaded is loaded first, as a request for it would
//                      be (making room under --memory-limit).
//   GET  /api/ps       the loaded models: size (weights and KV cache),
//                      expires_at (--idle-unload from now, or far away
//                      without it; keep_alive is not read), context_length.
//   GET  /api/version  {version}: qkv's version.
// Pulling, creating, copying, deleting and pushing models are not served
// (404): the models are the ones the server was started with.
#include <sys/stat.h>

#include <cstdio>
#include <ctime>

#include "kernels/error.h"
#include "runtime/gguf.h"
#include "runtime/tool_calls/tool_calls.h"
#include "tools/serve/adapters/ollama.h"
#include "tools/serve/api_error.h"

namespace qkv::serve::ollama {

using nlohmann::json;
using nlohmann::ordered_json;

std::string rfc3339(std::chrono::system_clock::time_point t) {
  const int64_t us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  const time_t s = static_cast<time_t>(us / 1000000);
  std::tm g{};
  gmtime_r(&s, &g);
  char buf[64];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &g);
  std::snprintf(buf + n, sizeof buf - n, ".%06dZ", static_cast<int>(us % 1000000));
  return buf;
}

std::string checked_model(const ServedModel& st, const json& body) {
  auto it = body.find("model");
  if (it == body.end() || it->is_null()) throw bad_field("model", "model is required", "missing_required_parameter");
  if (!it->is_string()) throw bad_field("model", "'model' must be a string", "invalid_type");
  const std::string name = it->get<std::string>();
  const std::string& id = st.options.model_id;
  // NAME is NAME:latest, whichever of the two the model or the request has.
  const std::string tag = ":latest";
  const auto untagged = [&tag](const std::string& n) {
    return n.size() > tag.size() && n.compare(n.size() - tag.size(), tag.size(), tag) == 0
               ? n.substr(0, n.size() - tag.size())
               : n;
  };
  if (untagged(name) != untagged(id)) {
    throw ApiError(404, "model '" + name + "' not found (this server has '" + id + "')", "not_found_error", "model",
                   "model_not_found");
  }
  return name;
}

namespace {

// FNV-1a over the text, from a given basis.
uint64_t fnv1a(const std::string& s, uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::string digest_of(const std::string& path, uint64_t size) {
  const std::string key = path + '\0' + std::to_string(size);
  std::string hex;
  char buf[17];
  for (uint64_t round = 0; round < 4; ++round) {
    std::snprintf(buf, sizeof buf, "%016llx",
                  static_cast<unsigned long long>(fnv1a(key, 0xcbf29ce484222325ULL ^ (round * 0x9e3779b97f4a7c15ULL))));
    hex += buf;
  }
  return hex;
}

// Ollama's style: "260K", "494.03M", "8.0B" ("" when unknown).
std::string parameter_size(uint64_t n) {
  if (n == 0) return "";
  char buf[32];
  if (n >= 1000000000ULL) {
    std::snprintf(buf, sizeof buf, "%.1fB", static_cast<double>(n) / 1e9);
  } else if (n >= 1000000ULL) {
    std::snprintf(buf, sizeof buf, "%.2fM", static_cast<double>(n) / 1e6);
  } else if (n >= 1000ULL) {
    std::snprintf(buf, sizeof buf, "%.0fK", static_cast<double>(n) / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(n));
  }
  return buf;
}

ordered_json value_json(const GGUFValue& v) {
  switch (v.type) {
    case GGUFType::STRING: return v.as_string();
    case GGUFType::BOOL: return v.as_bool();
    case GGUFType::FLOAT32:
    case GGUFType::FLOAT64: return v.as_double();
    case GGUFType::ARRAY: {
      ordered_json a = ordered_json::array();
      if (v.elem_type == GGUFType::STRING) {
        for (const std::string& s : v.strings) a.push_back(s);
      } else if (v.elem_type == GGUFType::ARRAY) {
        for (const GGUFValue& x : v.items) a.push_back(value_json(x));
      } else {
        for (uint64_t i = 0; i < v.count; ++i) a.push_back(value_json(v.element(i)));
      }
      return a;
    }
    default: return v.as_int();
  }
}

bool mentions_thinking(const std::string& source) {
  for (const char* marker : {"reasoning_content", "enable_thinking", "<think>", "reasoning_effort", "thinking"}) {
    if (source.find(marker) != std::string::npos) return true;
  }
  return false;
}

// Ollama's details object.
ordered_json details_json(bool gguf, const std::string& family, uint64_t parameters, const std::string& quant) {
  return {{"parent_model", ""},
          {"format", gguf ? "gguf" : "llama2.c"},
          {"family", family},
          {"families", ordered_json::array({family})},
          {"parameter_size", parameter_size(parameters)},
          {"quantization_level", quant}};
}

void send(httplib::Response& res, const ordered_json& j) {
  res.set_content(j.dump(-1, ' ', false, nlohmann::detail::error_handler_t::replace),
                  "application/json; charset=utf-8");
}


}  // namespace

ModelCard make_model_card(const ServedModel& st) {
  ModelCard c;
  const std::string& path = st.options.model_path;
  struct stat sb {};
  if (::stat(path.c_str(), &sb) == 0) {
    c.file_size = static_cast<uint64_t>(sb.st_size);
    c.file_time = rfc3339(std::chrono::system_clock::from_time_t(sb.st_mtime));
  } else {
    c.file_time = rfc3339(std::chrono::system_clock::now());
  }
  c.digest = digest_of(path, c.file_size);
  const std::string arch = st.info.architecture;
  std::string quant = "F32";  // a llama2.c checkpoint holds float32 weights
  bool gguf = false;
  ordered_json meta = ordered_json::object(), meta_verbose = ordered_json::object();
  if (GGUFFile::has_magic(path)) {
    try {
      const GGUFFile f = GGUFFile::open(path);
      gguf = true;
      if (!st.header.quantization.empty()) quant = st.header.quantization;
      for (const auto& [key, value] : f.metadata()) {
        if (key == "tokenizer.chat_template") continue;  // served as `template`
        meta_verbose[key] = value_json(value);
        meta[key] = value.type == GGUFType::ARRAY ? ordered_json::array() : meta_verbose[key];
      }
    } catch (const qkv::Error&) {  // it loaded, so this does not happen; the listing then has no metadata
    }
  }
  if (!gguf) {  // what the checkpoint's header tells
    meta = {{"general.architecture", arch},
            {arch + ".context_length", st.info.context_length},
            {arch + ".embedding_length", st.info.dim},
            {arch + ".feed_forward_length", st.info.hidden_dim},
            {arch + ".block_count", st.info.n_layers},
            {arch + ".attention.head_count", st.info.n_heads},
            {arch + ".attention.head_count_kv", st.info.n_kv_heads},
            {arch + ".vocab_size", st.info.vocab_size}};
    meta_verbose = meta;
  }
  // Ollama counts every tensor's elements; a llama2.c checkpoint has no tensor list.
  const uint64_t parameters = st.header.parameters > 0 ? st.header.parameters : st.info.parameters;
  if (!meta.contains("general.parameter_count")) {
    meta["general.parameter_count"] = parameters;
    meta_verbose["general.parameter_count"] = parameters;
  }
  c.model_info = std::move(meta);
  c.model_info_verbose = std::move(meta_verbose);
  c.details = details_json(gguf, arch, parameters, quant);
  const char* model_template = qkv_model_chat_template(st.model);
  c.template_text = !st.options.chat_template.empty() ? st.options.chat_template : model_template ? model_template : "";
  const toolcall::Family family =
      c.template_text.empty() ? toolcall::Family::kGeneric : toolcall::detect_family(c.template_text);
  c.tools = family != toolcall::Family::kGeneric;
  c.thinking = toolcall::has_reasoning(family) && mentions_thinking(c.template_text);
  return c;
}

std::shared_ptr<const ModelCard> card_of(ServedModel& st) {
  std::lock_guard<std::mutex> lock(st.card_mu);
  if (!st.ollama_card) st.ollama_card = std::make_shared<const ModelCard>(make_model_card(st));
  return st.ollama_card;
}

namespace {

// An unloaded model as the listing shows it: what its file and GGUF header
// tell (read when the server started; the weights are not loaded).
ordered_json unloaded_entry(const ModelStatus& m) {
  struct stat sb {};
  const bool found = ::stat(m.path.c_str(), &sb) == 0;
  const uint64_t size = found ? static_cast<uint64_t>(sb.st_size) : 0;
  const std::string time = rfc3339(found ? std::chrono::system_clock::from_time_t(sb.st_mtime)
                                         : std::chrono::system_clock::now());
  const ModelHeader& h = m.model->header;
  return {{"name", m.name},
          {"model", m.name},
          {"modified_at", time},
          {"size", size},
          {"digest", digest_of(m.path, size)},
          {"details", details_json(h.gguf, h.architecture, h.parameters, h.quantization)}};
}

}  // namespace

void install_model_routes(httplib::Server& svr, ServerState& server) {
  svr.Get("/api/tags", guarded(server, "/api/tags", [](ServerState& s, const httplib::Request&, httplib::Response& res) {
            ordered_json list = ordered_json::array();
            s.models->for_each([&](const ModelStatus& m) {
              if (m.state != LoadState::kLoaded) {
                list.push_back(unloaded_entry(m));
                return;
              }
              const std::shared_ptr<const ModelCard> card = card_of(*m.model);
              list.push_back({{"name", m.name},
                              {"model", m.name},
                              {"modified_at", card->file_time},
                              {"size", card->file_size},
                              {"digest", card->digest},
                              {"details", card->details}});
            });
            send(res, {{"models", list}});
          }));
  svr.Post("/api/show", guarded(server, "/api/show", [](ServedModel& st, const httplib::Request& req,
                                                        httplib::Response& res) {
             json body = parse_body(req.body, st.options.max_json_depth);
             if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
             // Older clients send the model as `name`.
             if ((!body.contains("model") || body["model"].is_null()) && body.contains("name")) {
               body["model"] = body["name"];
             }
             checked_model(st, body);
             const std::shared_ptr<const ModelCard> card = card_of(st);
             bool verbose = false;
             if (auto v = body.find("verbose"); v != body.end() && !v->is_null()) {
               if (!v->is_boolean()) throw bad_field("verbose", "'verbose' must be true or false", "invalid_type");
               verbose = v->get<bool>();
             }
             ordered_json caps = ordered_json::array();
             if (st.embedding_only) {
               caps.push_back("embedding");
             } else {
               caps.push_back("completion");
               if (card->tools) caps.push_back("tools");
               if (card->thinking) caps.push_back("thinking");
             }
             send(res, {{"license", ""},
                        {"modelfile", "# served by qkv serve\nFROM " + st.options.model_path + "\n"},
                        {"parameters", "num_ctx " + std::to_string(st.slot_context)},
                        {"template", card->template_text},
                        {"system", ""},
                        {"details", card->details},
                        {"model_info", verbose ? card->model_info_verbose : card->model_info},
                        {"capabilities", caps},
                        {"modified_at", card->file_time}});
           }));
  svr.Get("/api/ps", guarded(server, "/api/ps", [](ServerState& s, const httplib::Request&, httplib::Response& res) {
            const auto expires = std::chrono::system_clock::now() +
                                 (s.options.idle_unload_s > 0
                                      ? std::chrono::milliseconds(static_cast<int64_t>(s.options.idle_unload_s * 1000))
                                      : std::chrono::hours(24 * 365 * 100));
            ordered_json list = ordered_json::array();
            s.models->for_each([&](const ModelStatus& m) {
              if (m.state != LoadState::kLoaded) return;
              const std::shared_ptr<const ModelCard> card = card_of(*m.model);
              list.push_back({{"name", m.name},
                              {"model", m.name},
                              {"size", m.memory_bytes},
                              {"digest", card->digest},
                              {"details", card->details},
                              {"expires_at", rfc3339(expires)},
                              {"size_vram", 0},
                              {"context_length", m.model->slot_context}});
            });
            send(res, {{"models", list}});
          }));
  svr.Get("/api/version", guarded(server, "/api/version", [](const httplib::Request&, httplib::Response& res) {
            send(res, {{"version", qkv_version()}});
          }));
}

}  // namespace qkv::serve::ollama

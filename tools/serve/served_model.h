// One model of qkv serve: its file and name, and while it is loaded its
// qkv_model, the context of its slots with their scheduler (and prompt
// cache), its embedding worker and its metrics. The routes reach it through a
// ModelLease (tools/serve/model_registry.h), which keeps it loaded while they
// use it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "qkv.h"
#include "tools/serve/compute_turns.h"
#include "tools/serve/embeddings.h"
#include "tools/serve/grammar_cache.h"
#include "tools/serve/metrics.h"
#include "tools/serve/request.h"
#include "tools/serve/scheduler.h"

namespace qkv::serve {

namespace ollama {
struct ModelCard;
}

struct ServeOptions {
  std::string model_path, tokenizer_path, model_id;
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (printed)
  int slots = 4;
  int64_t context = 0;  // per slot; 0: min(model's, 4096)
  qkv_type kv_type = QKV_TYPE_F16;
  int threads = 0;
  uint64_t memory_limit = 0;  // one model: its context's limit; several: the loaded models' budget; 0: none
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
  int models_max = 0;           // --models-max: models loaded at once; 0: no limit
  double idle_unload_s = 0;     // --idle-unload: unload a model idle this long; 0: never
};

// What a GGUF header tells without loading the weights ("" / 0 when the file
// is not a readable GGUF, e.g. a llama2.c checkpoint).
struct ModelHeader {
  std::string architecture;
  int64_t context_length = 0;
  int64_t layers = 0, kv_heads = 0, head_dim = 0;
  uint64_t file_bytes = 0;  // every split part
};
ModelHeader read_model_header(const std::string& path);
// Bytes per KV cache element of a --kv-type.
double kv_element_bytes(qkv_type t);

enum class LoadState { kUnloaded, kLoading, kLoaded };
const char* load_state_name(LoadState s);

struct ServedModel {
  ServedModel(ServeOptions o, Metrics& m, std::atomic<bool>& stop) : options(std::move(o)), metrics(m), stopping(stop) {}
  ServedModel(const ServedModel&) = delete;
  ServedModel& operator=(const ServedModel&) = delete;
  ~ServedModel() { unload(); }

  // Fixed for the server's life.
  ServeOptions options;  // model_path and model_id are this model's
  Metrics& metrics;      // its own, or the server's when it is the only model
  std::atomic<bool>& stopping;
  ModelHeader header;

  // Set by load(), valid while the registry says kLoaded.
  qkv_model* model = nullptr;
  qkv_context* context = nullptr;
  qkv_model_info info{};
  int64_t slot_context = 0;
  RequestLimits limits;
  GrammarCache grammars;
  ComputeTurns turns;                    // the scheduler's and the embedding worker's passes alternate
  std::unique_ptr<Scheduler> scheduler;  // null when the model only embeds
  // Embeddings: the pooling a request gets by default, the tokens one input
  // may have, and the worker (an embedding model's from its load, a
  // decoder's from its first embedding request).
  bool embedding_only = false;
  qkv_pooling pooling = QKV_POOLING_LAST;
  int64_t embed_context = 0;
  std::mutex embed_mu;
  std::unique_ptr<EmbedWorker> embedder;
  std::mutex card_mu;
  std::shared_ptr<const ollama::ModelCard> ollama_card;  // the Ollama adapter's, made on first use
  // Streaming responses whose last bytes are not yet written: an unload and
  // a shutdown wait for them.
  std::atomic<int> open_streams{0};

  // Loads the weights, creates and prepares the slots' context (or checks
  // that an embedding model embeds) and starts the workers. False with msg
  // when it fails, leaving nothing loaded.
  bool load(std::string& msg);
  // Stops the workers (cancelling what runs) and frees the model.
  void unload();
  // Requests queued, running or streaming (not the routes' leases).
  bool busy();
  // Bytes the model holds while loaded: measured after a load, else the
  // file's size and its KV cache as the header gives it.
  uint64_t memory_bytes() const;
  uint64_t measured_bytes = 0;
};

}  // namespace qkv::serve

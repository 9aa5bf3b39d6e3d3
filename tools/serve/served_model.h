// One model of qkv serve: its file and name, and while it is loaded its
// qkv_model, the context of its slots with their scheduler (and prompt
// cache), its embedding worker and its metrics. The routes reach it through a
// ModelLease (tools/serve/model_registry.h), which keeps it loaded while they
// use it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
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
  SpeculativeServe speculative;  // -md / --spec-type ngram and the --draft flags (tools/serve/spec_options.h)
};

// What a GGUF header tells without loading the weights ("" / 0 when the file
// is not a readable GGUF, e.g. a llama2.c checkpoint).
struct ModelHeader {
  bool gguf = false;  // the file starts with the GGUF magic
  std::string architecture;
  int64_t context_length = 0;
  int64_t layers = 0, heads = 0, kv_heads = 0, head_dim = 0, dim = 0, hidden_dim = 0, vocab_size = 0;
  uint64_t parameters = 0;   // elements of every tensor, as Ollama counts them
  std::string quantization;  // llama.cpp's file type name (general.file_type), else the type most weight bytes have
  uint64_t file_bytes = 0;   // every split part
};
ModelHeader read_model_header(const std::string& path);
// The shape a model's embedding buffers scale with (from the header before a
// load, from qkv_model_info after it).
struct ModelShape {
  int64_t dim = 0, hidden_dim = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab_size = 0;
  bool encoder = false;  // bert / nomic-bert: no KV cache, no logits
};
ModelShape shape_of(const ModelHeader& h);
ModelShape shape_of(const qkv_model_info& info);
// Bytes of the buffers an embedding worker's passes of `budget` tokens hold.
uint64_t embed_worker_bytes_for(const ModelShape& shape, int64_t budget);
// Encoders embed; qkv_context_create refuses them.
bool is_encoder_architecture(const std::string& architecture);
// Bytes per KV cache element of a --kv-type.
double kv_element_bytes(qkv_type t);

enum class LoadState { kUnloaded, kLoading, kLoaded };
const char* load_state_name(LoadState s);

// Whether a request's "model" names the model of this id: the id itself, or
// under Ollama's naming NAME for NAME:latest and NAME:latest for NAME.
bool names_model(const std::string& requested, const std::string& id);

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
  // Bytes the model holds while loaded: its weights and KV cache (measured
  // after a load, else the file's size and the KV cache the header implies)
  // and, while it has an embedding worker or when it only embeds (its worker
  // starts with its load), the worker's buffers (embed_worker_bytes). Read
  // under the registry's lock while a load may run: what a load measures is
  // kept in atomics.
  uint64_t memory_bytes() const;
  // The weights and KV cache part of memory_bytes().
  uint64_t model_bytes() const;
  // The embedding worker's part of memory_bytes() (0 while it has none).
  uint64_t embed_bytes() const;
  // The worker's buffers for this model's token budget, counted or not.
  uint64_t embed_worker_bytes() const;
  std::atomic<uint64_t> measured_bytes{0};        // weights and KV cache, set by a load
  std::atomic<uint64_t> measured_embed_bytes{0};  // embed_worker_bytes from the loaded shape
  std::atomic<int> measured_embeds_only{-1};      // the load's embedding_only (-1: never loaded)
  std::atomic<bool> embedder_counted{false};      // its worker's buffers are counted (before it starts; unload() clears)
  // Runs before a decoder's embedding worker starts, so that the registry
  // makes room for its buffers (throws ApiError when they do not fit).
  std::function<void(ServedModel&)> before_embedder;
};

}  // namespace qkv::serve

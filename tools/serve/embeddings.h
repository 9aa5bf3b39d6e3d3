// The server's embedding service: one worker thread that drains a bounded
// queue of embedding jobs. Each qkv_embed call packs the inputs of every
// waiting job that asks for the same pooling, normalization and dimensions
// (up to a token budget), so concurrent clients share forward passes; each
// job then gets its own slice of the vectors. Its passes take turns with the
// decode scheduler's (compute_turns.h). A job past its deadline or whose
// client has gone is dropped before it runs. The worker starts with the server
// for an embedding model, and on the first embedding request for a decoder.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

#include "qkv.h"
#include "tools/serve/api_error.h"
#include "tools/serve/compute_turns.h"
#include "tools/serve/embed_request.h"
#include "tools/serve/metrics.h"

namespace qkv::serve {

struct ServedModel;

struct EmbedJob {
  // Input, set before submit: token sequences, each within the context.
  std::vector<std::vector<int32_t>> inputs;
  qkv_embed_options options{};  // pooling (never DEFAULT), normalize, dimensions; truncate 0
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  std::atomic<bool> cancelled{false};  // the client went away

  // Output, under mu.
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  int status = 0;  // nonzero: the HTTP status of a failure, with error
  std::string error, error_code;
  std::vector<float> values;     // every vector, input after input
  std::vector<int64_t> vectors;  // per input: how many (1, or its tokens with pooling none)
  int64_t dimension = 0;         // floats per vector
  int64_t tokens = 0;            // tokens run
};

class EmbedWorker {
 public:
  struct Options {
    int64_t batch_tokens = 512;  // tokens per qkv_embed call (and per forward pass)
    size_t max_queue = 64;       // jobs waiting besides those running
    int threads = 0;
    ComputeTurns* turns = nullptr;  // shared with the decode scheduler; null: passes run when they come
  };
  EmbedWorker(qkv_model* model, Options options, Metrics& metrics);
  ~EmbedWorker();

  enum class Submit { kOk, kQueueFull, kStopping };
  Submit submit(const std::shared_ptr<EmbedJob>& job);
  // Stops admitting; queued jobs may run until `deadline`, the rest fail
  // with 503. Returns when the queue is empty and nothing runs.
  void drain(std::chrono::steady_clock::time_point deadline);
  size_t queue_depth();

 private:
  void loop();
  void run(std::vector<std::shared_ptr<EmbedJob>>& batch);
  // On success every job of the batch is finished; on failure none is (qkv_last_error says why).
  qkv_status embed(std::vector<std::shared_ptr<EmbedJob>>& batch);

  qkv_model* model_;
  Options options_;
  Metrics& metrics_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<EmbedJob>> queue_;
  bool accepting_ = true, quit_ = false, running_ = false;
  std::chrono::steady_clock::time_point cancel_at_ = std::chrono::steady_clock::time_point::max();
  std::thread thread_;
};

// What the embedding endpoints share.
struct EmbedOutcome {
  std::vector<float> values;
  std::vector<int64_t> vectors;  // per input
  int64_t dimension = 0;
  int64_t tokens = 0;
};

// The 400 the generation endpoints answer when the server only embeds (an
// encoder model, or --embeddings/--rerank).
ApiError embedding_only_error(const ServedModel& st);
// The limits a request parser checks against this model.
EmbedLimits embed_limits(const ServedModel& st);
// A text's ids as an embedding input (qkv_embed_tokenize).
std::vector<int32_t> embed_tokens(const ServedModel& st, const std::string& text);
// The request's inputs as token sequences (texts tokenized).
std::vector<std::vector<int32_t>> embed_inputs(const ServedModel& st, const EmbedRequest& r);
// Checks each input against the embedding context: over it, a 400 naming the
// input (param names it `param`), or with truncate its first context - 1
// tokens and its last. Then runs them on the worker (started on first use)
// and waits. ApiError: 503 when the queue is full or the server stops, 504
// past the timeout, 400/500 when qkv_embed refuses.
EmbedOutcome run_embedding(ServedModel& st, std::vector<std::vector<int32_t>> inputs, const qkv_embed_options& options,
                           bool truncate, const std::string& param, httplib::Response& res);
// The options of a request: the server's pooling unless it names one; L2 or
// none; a RANK score is never normalized.
qkv_embed_options embed_options(const ServedModel& st, qkv_pooling pooling, bool normalize, int64_t dimensions);
// The server's worker, created on first use (503 once the server stops).
EmbedWorker& embed_worker(ServedModel& st);

// Response text: floats as JSON numbers (shortest round-trip form; a
// non-finite value is null), and as base64 of their little-endian bytes.
void append_json_floats(std::string& out, const float* x, int64_t n);
std::string base64_floats(const float* x, int64_t n);

}  // namespace qkv::serve

// The models of qkv serve by name: loaded on first use, unloaded least
// recently used first when loading another (or starting a model's embedding
// worker, whose buffers count) would exceed --memory-limit or --models-max,
// and after --idle-unload seconds without requests. A route
// holds a ModelLease while it uses a model: a leased model, or one with
// requests queued, running or streaming, is never unloaded.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tools/serve/metrics.h"
#include "tools/serve/served_model.h"

namespace qkv::serve {

class ModelRegistry;

class ModelLease {
 public:
  ModelLease(ModelRegistry* registry, ServedModel* model) : registry_(registry), model_(model) {}
  ModelLease(ModelLease&& o) noexcept : registry_(o.registry_), model_(o.model_) { o.model_ = nullptr; }
  ModelLease(const ModelLease&) = delete;
  ModelLease& operator=(const ModelLease&) = delete;
  ModelLease& operator=(ModelLease&&) = delete;
  ~ModelLease();
  ServedModel& model() const { return *model_; }

 private:
  ModelRegistry* registry_;
  ServedModel* model_;
};

// One model as GET /v1/models lists it.
struct ModelStatus {
  std::string name, path, architecture;
  LoadState state = LoadState::kUnloaded;
  int64_t context = 0;  // positions per slot when loaded, else the trained context (0: unknown)
  uint64_t memory_bytes = 0;
  uint64_t embed_worker_bytes = 0;  // an embedding worker's buffers (in memory_bytes while it runs)
  std::string last_error;  // the last load's failure ("" when it loaded)
  ServedModel* model = nullptr;  // valid while the registry's lock is held (for_each)
};

class ModelRegistry {
 public:
  // models: (name, path) in the order listed; the first is the default.
  // With one model, that model's metrics are the server's own and any
  // requested name picks it.
  ModelRegistry(const ServeOptions& base, const std::vector<std::pair<std::string, std::string>>& models,
                Metrics& server_metrics, std::atomic<bool>& stopping);
  ~ModelRegistry();

  bool single() const { return entries_.size() == 1; }
  // The model a request names ("": the first listed); 404 when unknown.
  // Loads it (making room first) or waits for its load, up to --timeout and
  // with at most --max-queue requests waiting; a failed load is a 500 with
  // the reason.
  ModelLease acquire(const std::string& name);
  // POST /models/load: acquire and release.
  void load(const std::string& name);
  // POST /models/unload: 404 unknown, 409 with requests in flight.
  void unload(const std::string& name);
  // Every model, in the order listed; fn runs under the registry's lock.
  void for_each(const std::function<void(const ModelStatus&)>& fn);
  // Shutdown: stops every loaded model's workers once their requests finish
  // (at most until deadline) and waits for their streams (up to flush_by).
  void drain(std::chrono::steady_clock::time_point deadline, std::chrono::steady_clock::time_point flush_by);

 private:
  friend class ModelLease;
  struct Entry {
    std::unique_ptr<ServedModel> model;
    std::unique_ptr<Metrics> own_metrics;
    LoadState state = LoadState::kUnloaded;
    int leases = 0;   // routes using it or waiting for it
    int waiting = 0;  // waiting for its load
    uint64_t load_attempts = 0;
    std::chrono::steady_clock::time_point last_used;
    std::string last_error;
  };
  Entry* find_locked(const std::string& name);
  // Unloads least recently used idle models until e fits; false at the deadline.
  bool make_room_locked(Entry& e, std::unique_lock<std::mutex>& lock, std::chrono::steady_clock::time_point deadline);
  void unload_locked(Entry& e, const char* why);
  // Before a model's embedding worker starts: counts its buffers, unloading
  // least recently used idle models until they fit --memory-limit; throws
  // ApiError naming the bytes when they cannot fit.
  void reserve_embedder(ServedModel& m);
  void release(ServedModel* m);
  void idle_loop();

  ServeOptions base_;
  std::atomic<bool>& stopping_;
  std::vector<std::unique_ptr<Entry>> entries_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool quit_ = false;
  std::thread idle_thread_;
};

}  // namespace qkv::serve

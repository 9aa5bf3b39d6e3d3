// The served models by name (tools/serve/model_registry.h).
#include "tools/serve/model_registry.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "tools/serve/api_error.h"

namespace qkv::serve {

using Clock = std::chrono::steady_clock;

ModelLease::~ModelLease() {
  if (model_ != nullptr) registry_->release(model_);
}

ModelRegistry::ModelRegistry(const ServeOptions& base, const std::vector<std::pair<std::string, std::string>>& models,
                             Metrics& server_metrics, std::atomic<bool>& stopping)
    : base_(base), stopping_(stopping) {
  for (const auto& [name, path] : models) {
    auto e = std::make_unique<Entry>();
    ServeOptions o = base;
    o.model_id = name;
    o.model_path = path;
    Metrics* metrics = &server_metrics;
    if (models.size() > 1) {
      // The registry keeps the loaded models within the limit; a context's
      // own check (weights, KV cache and activations) applies to a lone model.
      o.memory_limit = 0;
      e->own_metrics = std::make_unique<Metrics>("model=\"" + name + "\"");
      metrics = e->own_metrics.get();
    }
    e->model = std::make_unique<ServedModel>(o, *metrics, stopping);
    e->model->header = read_model_header(path);
    e->model->before_embedder = [this](ServedModel& m) { reserve_embedder(m); };
    e->last_used = Clock::now();
    entries_.push_back(std::move(e));
  }
  if (base_.idle_unload_s > 0) idle_thread_ = std::thread([this] { idle_loop(); });
}

ModelRegistry::~ModelRegistry() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
  }
  cv_.notify_all();
  if (idle_thread_.joinable()) idle_thread_.join();
  for (auto& e : entries_) e->model->unload();
}

ModelRegistry::Entry* ModelRegistry::find_locked(const std::string& name) {
  if (name.empty() || single()) return entries_.front().get();
  for (auto& e : entries_) {
    if (e->model->options.model_id == name) return e.get();
  }
  for (auto& e : entries_) {
    if (names_model(name, e->model->options.model_id)) return e.get();
  }
  return nullptr;
}

namespace {

ApiError not_found(const std::string& name) {
  return ApiError(404, "The model '" + name + "' does not exist (GET /v1/models lists the served models)",
                  "invalid_request_error", "model", "model_not_found");
}

// What a model needs under --memory-limit, part by part.
std::string needs_text(const ServedModel& m, bool with_embedder) {
  const uint64_t model = m.model_bytes(), embed = with_embedder ? m.embed_worker_bytes() : 0;
  std::string s = "it needs " + std::to_string(model + embed) + " bytes (weights and KV cache " +
                  std::to_string(model);
  if (embed > 0) s += ", embedding worker buffers " + std::to_string(embed);
  return s + ")";
}

ApiError shutting_down() {
  return ApiError(503, "the server is shutting down and takes no new requests", "server_error", "", "shutting_down");
}

}  // namespace

ModelLease ModelRegistry::acquire(const std::string& name) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(base_.timeout_s * 1000));
  std::unique_lock<std::mutex> lock(mu_);
  Entry* e = find_locked(name);
  if (e == nullptr) throw not_found(name);
  ++e->leases;  // pinned: not unloaded while this request waits or runs
  auto fail = [&](const ApiError& err) {
    --e->leases;
    e->last_used = Clock::now();
    cv_.notify_all();
    return err;
  };
  ServedModel& m = *e->model;
  for (;;) {
    if (stopping_) throw fail(shutting_down());
    if (e->state == LoadState::kLoaded) {
      e->last_used = Clock::now();
      return ModelLease(this, &m);
    }
    if (e->state == LoadState::kLoading) {
      if (static_cast<size_t>(e->waiting) >= base_.max_queue) {
        throw fail(ApiError(503, "the server is busy: the queue for model '" + m.options.model_id +
                                     "', which is loading, is full; retry later",
                            "server_error", "", "queue_full"));
      }
      const uint64_t attempt = e->load_attempts;
      ++e->waiting;
      const bool woke = cv_.wait_until(lock, deadline, [&] { return e->state != LoadState::kLoading; });
      --e->waiting;
      if (!woke) {
        throw fail(ApiError(503, "model '" + m.options.model_id + "' is still loading after the server's timeout",
                            "server_error", "", "model_loading"));
      }
      if (e->state == LoadState::kUnloaded && e->load_attempts == attempt + 1 && !e->last_error.empty()) {
        throw fail(ApiError(500, "model '" + m.options.model_id + "' could not be loaded: " + e->last_error,
                            "server_error", "model", "model_load_failed"));
      }
      continue;
    }
    // One decoder: --memory-limit is its context's own (checked by its load, with the reason).
    if ((!single() || m.embed_bytes() > 0) && base_.memory_limit > 0 && m.memory_bytes() > base_.memory_limit) {
      throw fail(ApiError(500, "model '" + m.options.model_id + "' could not be loaded: " +
                                   needs_text(m, m.embed_bytes() > 0) + ", over --memory-limit " +
                                   std::to_string(base_.memory_limit),
                          "server_error", "model", "model_load_failed"));
    }
    if (!make_room_locked(*e, lock, deadline)) {
      throw fail(ApiError(503, "model '" + m.options.model_id + "' does not fit beside the loaded models, whose "
                               "requests are still running; retry later", "server_error", "", "models_busy"));
    }
    if (stopping_) throw fail(shutting_down());
    e->state = LoadState::kLoading;
    lock.unlock();
    const auto start = Clock::now();
    std::string msg;
    const bool ok = m.load(msg);
    lock.lock();
    ++e->load_attempts;
    e->state = ok ? LoadState::kLoaded : LoadState::kUnloaded;
    e->last_error = ok ? "" : msg;
    cv_.notify_all();
    if (!ok) {
      std::fprintf(stderr, "qkv serve: model %s: %s\n", m.options.model_id.c_str(), msg.c_str());
      throw fail(ApiError(500, "model '" + m.options.model_id + "' could not be loaded: " + msg, "server_error",
                          "model", "model_load_failed"));
    }
    std::fprintf(stderr, "qkv serve: model %s loaded in %.0f ms (%.1f MiB)\n", m.options.model_id.c_str(),
                 std::chrono::duration<double, std::milli>(Clock::now() - start).count(),
                 static_cast<double>(m.memory_bytes()) / (1024.0 * 1024.0));
  }
}

bool ModelRegistry::make_room_locked(Entry& e, std::unique_lock<std::mutex>& lock, Clock::time_point deadline) {
  const uint64_t need = e.model->memory_bytes();
  for (;;) {
    int count = 0;
    uint64_t bytes = 0;
    for (auto& other : entries_) {
      if (other.get() == &e || other->state == LoadState::kUnloaded) continue;
      ++count;
      bytes += other->model->memory_bytes();
    }
    const bool count_fits = base_.models_max == 0 || count + 1 <= base_.models_max;
    // One model: --memory-limit is its context's own limit (checked by its load, with the reason).
    const bool bytes_fit = single() || base_.memory_limit == 0 || bytes + need <= base_.memory_limit;
    if (count_fits && bytes_fit) return true;
    Entry* victim = nullptr;
    for (auto& other : entries_) {
      if (other.get() == &e || other->state != LoadState::kLoaded || other->leases > 0 || other->model->busy()) {
        continue;
      }
      if (victim == nullptr || other->last_used < victim->last_used) victim = other.get();
    }
    if (victim != nullptr) {
      unload_locked(*victim, count_fits ? "to fit --memory-limit" : "to fit --models-max");
      continue;
    }
    // Every other model is in use: wait for one to finish (streams end without notifying: poll).
    const auto until = std::min(deadline, Clock::now() + std::chrono::milliseconds(50));
    cv_.wait_until(lock, until);
    if (Clock::now() >= deadline || stopping_) return false;
  }
}

void ModelRegistry::unload_locked(Entry& e, const char* why) {
  e.model->unload();
  e.state = LoadState::kUnloaded;
  std::fprintf(stderr, "qkv serve: model %s unloaded (%s)\n", e.model->options.model_id.c_str(), why);
  cv_.notify_all();
}

void ModelRegistry::release(ServedModel* m) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& e : entries_) {
    if (e->model.get() == m) {
      --e->leases;
      e->last_used = Clock::now();
    }
  }
  cv_.notify_all();
}

void ModelRegistry::reserve_embedder(ServedModel& m) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(base_.timeout_s * 1000));
  std::unique_lock<std::mutex> lock(mu_);
  if (m.embedder_counted) return;  // another request started it
  Entry* e = nullptr;
  for (auto& x : entries_) {
    if (x->model.get() == &m) e = x.get();
  }
  if (e == nullptr || base_.memory_limit == 0) {
    m.embedder_counted = true;
    return;
  }
  if (m.model_bytes() + m.embed_worker_bytes() > base_.memory_limit) {
    throw ApiError(500, "model '" + m.options.model_id + "' cannot start its embedding worker: " + needs_text(m, true) +
                            ", over --memory-limit " + std::to_string(base_.memory_limit),
                   "server_error", "model", "memory_limit");
  }
  m.embedder_counted = true;  // counted from here: make_room_locked fits the model with its buffers
  if (!single() && !make_room_locked(*e, lock, deadline)) {
    m.embedder_counted = false;
    throw ApiError(503, "model '" + m.options.model_id + "' cannot start its embedding worker (" + needs_text(m, true) +
                            ") beside the loaded models, whose requests are still running; retry later",
                   "server_error", "", "models_busy");
  }
  std::fprintf(stderr, "qkv serve: model %s: embedding worker buffers of %" PRIu64 " bytes counted (%" PRIu64 " in all)\n",
               m.options.model_id.c_str(), m.embed_worker_bytes(), m.memory_bytes());
}

void ModelRegistry::load(const std::string& name) { ModelLease lease = acquire(name); }

void ModelRegistry::unload(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry* e = find_locked(name);
  if (e == nullptr) throw not_found(name);
  if (stopping_) throw shutting_down();
  if (e->state == LoadState::kUnloaded) return;
  if (e->state == LoadState::kLoading || e->leases > 0 || e->model->busy()) {
    throw ApiError(409, "model '" + e->model->options.model_id +
                            "' has requests in flight (queued, running or streaming) or is loading: it stays "
                            "loaded; unload it once they end",
                   "invalid_request_error", "model", "model_busy");
  }
  unload_locked(*e, "POST /models/unload");
}

void ModelRegistry::for_each(const std::function<void(const ModelStatus&)>& fn) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& e : entries_) {
    ModelStatus s;
    const ServedModel& m = *e->model;
    s.name = m.options.model_id;
    s.path = m.options.model_path;
    s.state = e->state;
    const bool loaded = e->state == LoadState::kLoaded;
    s.architecture = loaded ? m.info.architecture : m.header.architecture;
    s.context = loaded ? m.slot_context : m.header.context_length;
    s.memory_bytes = m.memory_bytes();
    s.embed_worker_bytes = m.embed_worker_bytes();
    s.last_error = e->last_error;
    s.model = e->model.get();
    fn(s);
  }
}

void ModelRegistry::drain(Clock::time_point deadline, Clock::time_point flush_by) {
  std::vector<ServedModel*> loaded;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& e : entries_) {
      if (e->state == LoadState::kLoaded) loaded.push_back(e->model.get());
    }
  }
  // stopping is set: nothing loads or unloads from here on.
  for (ServedModel* m : loaded) {
    if (m->scheduler) {
      m->scheduler->drain(std::chrono::duration_cast<std::chrono::milliseconds>(
          std::max(deadline - Clock::now(), Clock::duration::zero())));
    }
    EmbedWorker* embedder = nullptr;
    {
      std::lock_guard<std::mutex> lock(m->embed_mu);
      embedder = m->embedder.get();
    }
    if (embedder) embedder->drain(deadline);
  }
  // Every job has ended; the streams write their last events (a cancelled
  // stream's error event and [DONE]) before the server closes.
  for (ServedModel* m : loaded) {
    while (m->open_streams.load() > 0 && Clock::now() < flush_by) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

void ModelRegistry::idle_loop() {
  const auto idle = std::chrono::milliseconds(static_cast<int64_t>(base_.idle_unload_s * 1000));
  const auto tick = std::min<std::chrono::milliseconds>(std::chrono::milliseconds(250), idle);
  std::unique_lock<std::mutex> lock(mu_);
  while (!quit_) {
    cv_.wait_for(lock, tick);
    if (quit_ || stopping_) continue;
    const auto now = Clock::now();
    for (auto& e : entries_) {
      if (e->state != LoadState::kLoaded || e->leases > 0) continue;
      if (e->model->busy()) {
        e->last_used = now;  // a stream still writing counts as use
      } else if (now - e->last_used >= idle) {
        unload_locked(*e, "idle for --idle-unload");
      }
    }
  }
}

}  // namespace qkv::serve

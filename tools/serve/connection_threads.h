// cpp-httplib's task queue for qkv serve: a thread per connection, up to a
// limit at once (further connections wait in order), each thread ending when
// its connection closes and no other waits.
//
// Why not httplib::ThreadPool's long-lived threads: glibc gives every thread a
// cache of freed blocks (tcache, up to 7 per size class) that no other thread
// reuses and malloc_trim does not empty. A pool of ~84 threads, each picking
// up requests of every size in turn, filled those caches for the whole of a
// 30-minute soak (scripts/soak_serve.sh: RssAnon +9% after the second minute,
// still rising at the end); with the caches off it stayed within 3%. A thread
// that ends returns its cache, so memory follows the connections open now.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include <httplib.h>

namespace qkv::serve {

class ConnectionThreads : public httplib::TaskQueue {
 public:
  explicit ConnectionThreads(size_t max_threads) : state_(std::make_shared<State>()) { state_->max = max_threads; }
  ~ConnectionThreads() override { shutdown(); }

  void enqueue(std::function<void()> fn) override {
    std::unique_lock<std::mutex> lock(state_->mu);
    state_->jobs.push_back(std::move(fn));
    if (state_->running >= state_->max) return;  // a running thread takes it when its connection ends
    ++state_->running;
    lock.unlock();
    // The thread holds the state, so it may finish after this object is gone.
    std::thread([s = state_] { run(*s); }).detach();
  }

  // Returns once every queued connection has been served and its thread ended.
  void shutdown() override {
    std::unique_lock<std::mutex> lock(state_->mu);
    state_->idle.wait(lock, [&] { return state_->running == 0 && state_->jobs.empty(); });
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable idle;
    std::deque<std::function<void()>> jobs;
    size_t running = 0, max = 1;
  };

  static void run(State& s) {
    std::unique_lock<std::mutex> lock(s.mu);
    while (!s.jobs.empty()) {
      std::function<void()> fn = std::move(s.jobs.front());
      s.jobs.pop_front();
      lock.unlock();
      fn();
      fn = nullptr;  // the connection's captures go before the thread takes the next
      lock.lock();
    }
    --s.running;
    if (s.running == 0) s.idle.notify_all();
  }

  std::shared_ptr<State> state_;
};

}  // namespace qkv::serve

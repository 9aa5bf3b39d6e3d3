// The server's forward passes take turns on the cores. The decode scheduler
// and the embedding worker each run an OpenMP team over every thread; run at
// once, two teams share the cores (2 x threads busy threads, each pass slower
// than the two one after the other, and spinning waiters steal the other
// team's time). Turns go in arrival order (a ticket lock), so neither side
// starves: a decode step waits at most one embedding pass of the worker's
// token budget, and an embedding pass at most one decode step or prompt chunk.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace qkv::serve {

class ComputeTurns {
 public:
  // Held for the duration of one pass; released by its destructor.
  class Turn {
   public:
    explicit Turn(ComputeTurns* turns) : turns_(turns) {
      if (turns_) turns_->acquire();
    }
    ~Turn() {
      if (turns_) turns_->release();
    }
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;

   private:
    ComputeTurns* turns_;
  };

 private:
  void acquire() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t ticket = next_++;
    cv_.wait(lock, [&] { return serving_ == ticket; });
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++serving_;
    }
    cv_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_ = 0, serving_ = 0;
};

}  // namespace qkv::serve

// The server's counters, gauges and latency histograms, written out in the
// Prometheus text format for GET /metrics.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace qkv::serve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double x);
  // The samples (label: "" or 'key="value"' put before le).
  void write_samples(std::string& out, const std::string& name, const std::string& label) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); last: +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  // label: "" for the server's own, 'model="NAME"' for a model's when the
  // server holds several.
  explicit Metrics(std::string label = "");
  void request_done(const std::string& endpoint, int status);
  void tokens(int64_t prompt, int64_t cached, int64_t generated);
  void first_token(double seconds);
  void inter_token(double seconds);
  void step_tokens(int64_t n);  // tokens generated in one scheduler step (tokens/s over the last 10 s)
  // Speculative decoding: one batched verify pass's drafted and accepted tokens (over its slots).
  void verified(int64_t drafted, int64_t accepted);
  // One qkv_embed call of the embedding worker: the requests whose inputs it packed.
  void embedded(int64_t requests, int64_t inputs, int64_t tokens);
  // One Metrics object in a /metrics page, with its gauges.
  struct Part {
    Metrics* metrics = nullptr;
    size_t queue_depth = 0;
    int busy_slots = 0, slots = 0;
    size_t embed_queue_depth = 0;
  };
  // The Prometheus text of every part, each family's samples together.
  static std::string render(const std::vector<Part>& parts);

 private:
  std::string label_;
  std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  uint64_t prompt_ = 0, cached_ = 0, generated_ = 0;
  uint64_t drafted_ = 0, accepted_ = 0, verify_passes_ = 0;
  uint64_t embed_calls_ = 0, embed_requests_ = 0, embed_inputs_ = 0, embed_tokens_ = 0;
  Histogram ttft_, itl_;
  std::deque<std::pair<std::chrono::steady_clock::time_point, int64_t>> recent_;
};

}  // namespace qkv::serve

#include "tools/serve/metrics.h"

#include <cstdio>

namespace qkv::serve {

namespace {
constexpr double kRateWindowS = 10.0;

std::string num(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}
}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double x) {
  size_t i = 0;
  while (i < bounds_.size() && x > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += x;
  ++count_;
}

void Histogram::write_samples(std::string& out, const std::string& name, const std::string& label) const {
  const std::string pre = label.empty() ? "" : label + ",";
  const std::string braces = label.empty() ? "" : "{" + label + "}";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket{" + pre + "le=\"" + num(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_bucket{" + pre + "le=\"+Inf\"} " + std::to_string(count_) + "\n";
  out += name + "_sum" + braces + " " + num(sum_) + "\n" + name + "_count" + braces + " " + std::to_string(count_) + "\n";
}

Metrics::Metrics(std::string label)
    : label_(std::move(label)),
      ttft_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      itl_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}) {}

void Metrics::request_done(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{endpoint, status}];
}

void Metrics::tokens(int64_t prompt, int64_t cached, int64_t generated) {
  std::lock_guard<std::mutex> lock(mu_);
  prompt_ += static_cast<uint64_t>(prompt);
  cached_ += static_cast<uint64_t>(cached);
  generated_ += static_cast<uint64_t>(generated);
}

void Metrics::first_token(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  ttft_.observe(seconds);
}

void Metrics::inter_token(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  itl_.observe(seconds);
}

void Metrics::step_tokens(int64_t n) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  recent_.push_back({now, n});
  while (!recent_.empty() && std::chrono::duration<double>(now - recent_.front().first).count() > kRateWindowS) {
    recent_.pop_front();
  }
}

void Metrics::verified(int64_t drafted, int64_t accepted) {
  std::lock_guard<std::mutex> lock(mu_);
  drafted_ += static_cast<uint64_t>(drafted);
  accepted_ += static_cast<uint64_t>(accepted);
  ++verify_passes_;
}

void Metrics::embedded(int64_t requests, int64_t inputs, int64_t tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  ++embed_calls_;
  embed_requests_ += static_cast<uint64_t>(requests);
  embed_inputs_ += static_cast<uint64_t>(inputs);
  embed_tokens_ += static_cast<uint64_t>(tokens);
}

std::string Metrics::render(const std::vector<Part>& parts) {
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::unique_lock<std::mutex>> locks;
  for (const Part& p : parts) locks.emplace_back(p.metrics->mu_);
  std::string out;
  auto braces = [](const std::string& label) { return label.empty() ? std::string() : "{" + label + "}"; };
  auto header = [&](const char* name, const char* help, const char* type) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  };
  header("qkv_requests_total", "HTTP requests answered, by endpoint and status", "counter");
  for (const Part& p : parts) {
    const std::string pre = p.metrics->label_.empty() ? "" : p.metrics->label_ + ",";
    for (const auto& [key, n] : p.metrics->requests_) {
      out += "qkv_requests_total{" + pre + "endpoint=\"" + key.first + "\",status=\"" + std::to_string(key.second) +
             "\"} " + std::to_string(n) + "\n";
    }
  }
  // A family of one value per part.
  auto family = [&](const char* name, const char* help, const char* type, auto value) {
    header(name, help, type);
    for (const Part& p : parts) out += name + braces(p.metrics->label_) + " " + num(value(p)) + "\n";
  };
  auto counter = [&](const char* name, const char* help, uint64_t Metrics::*field) {
    header(name, help, "counter");
    for (const Part& p : parts) {
      out += name + braces(p.metrics->label_) + " " + std::to_string(p.metrics->*field) + "\n";
    }
  };
  counter("qkv_prompt_tokens_total", "prompt tokens of finished requests", &Metrics::prompt_);
  counter("qkv_prompt_tokens_cached_total", "prompt tokens reused from a slot's cache", &Metrics::cached_);
  counter("qkv_generated_tokens_total", "tokens generated", &Metrics::generated_);
  counter("qkv_draft_tokens_total", "tokens drafted for speculative decoding and verified", &Metrics::drafted_);
  counter("qkv_draft_accepted_total", "drafted tokens the model accepted", &Metrics::accepted_);
  counter("qkv_verify_passes_total", "speculative decoding's verify passes (each over every speculating slot)",
          &Metrics::verify_passes_);
  counter("qkv_embedding_requests_total", "embedding and rerank requests computed", &Metrics::embed_requests_);
  counter("qkv_embedding_inputs_total", "inputs embedded (texts, token lists, rerank pairs)", &Metrics::embed_inputs_);
  counter("qkv_embedding_tokens_total", "tokens of the embedded inputs", &Metrics::embed_tokens_);
  counter("qkv_embedding_calls_total", "embedding passes (each packs the inputs of the requests waiting)",
          &Metrics::embed_calls_);
  family("qkv_tokens_per_second", "tokens generated per second over the last 10 seconds", "gauge",
         [&](const Part& p) {
           int64_t window_tokens = 0;
           for (const auto& [t, n] : p.metrics->recent_) {
             if (std::chrono::duration<double>(now - t).count() <= kRateWindowS) window_tokens += n;
           }
           return static_cast<double>(window_tokens) / kRateWindowS;
         });
  family("qkv_queue_depth", "requests waiting for a slot", "gauge",
         [](const Part& p) { return static_cast<double>(p.queue_depth); });
  family("qkv_embedding_queue_depth", "embedding requests waiting for the worker", "gauge",
         [](const Part& p) { return static_cast<double>(p.embed_queue_depth); });
  family("qkv_slots_busy", "slots running a request", "gauge", [](const Part& p) { return double(p.busy_slots); });
  family("qkv_slots_total", "slots (sequences of the KV cache)", "gauge", [](const Part& p) { return double(p.slots); });
  header("qkv_time_to_first_token_seconds", "time from arrival to the first generated token", "histogram");
  for (const Part& p : parts) p.metrics->ttft_.write_samples(out, "qkv_time_to_first_token_seconds", p.metrics->label_);
  header("qkv_inter_token_latency_seconds", "time between a request's consecutive tokens", "histogram");
  for (const Part& p : parts) p.metrics->itl_.write_samples(out, "qkv_inter_token_latency_seconds", p.metrics->label_);
  return out;
}

}  // namespace qkv::serve

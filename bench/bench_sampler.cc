// Sampling from a 32000-entry vocabulary: greedy, the llama.cpp default chain
// (top-k 40, top-p 0.95, min-p 0.05) and the plain temperature draw, against a
// naive baseline that sorts every logit before drawing. Counter: logits read
// per second.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "runtime/sampler.h"

namespace {

constexpr int64_t kVocab = 32000;

std::vector<float> make_logits() {
  std::mt19937 rng(3);
  std::normal_distribution<float> n(0.0f, 3.0f);
  std::vector<float> l(kVocab);
  for (float& v : l) v = n(rng);
  return l;
}

void report(benchmark::State& state) {
  state.counters["logits_per_second"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kVocab, benchmark::Counter::kIsRate);
}

void BM_Sample(benchmark::State& state) {
  qkv::SamplerOptions o;
  switch (state.range(0)) {
    case 0:  // greedy
      o.temperature = 0;
      break;
    case 1:  // llama.cpp's defaults
      break;
    case 2:  // temperature only
      o.top_k = 0;
      o.top_p = 1.0f;
      o.min_p = 0.0f;
      break;
  }
  qkv::Sampler s(o);
  const std::vector<float> base = make_logits();
  std::vector<float> l(base.size());
  for (auto _ : state) {
    std::copy(base.begin(), base.end(), l.begin());
    benchmark::DoNotOptimize(s.sample(l.data(), kVocab));
  }
  report(state);
}
BENCHMARK(BM_Sample)->ArgName("mode(0=greedy,1=default,2=temp)")->DenseRange(0, 2);

// Naive: softmax over everything, full sort, cumulative draw.
void BM_SampleNaive(benchmark::State& state) {
  const std::vector<float> base = make_logits();
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<std::pair<double, int>> p(kVocab);
  for (auto _ : state) {
    const float top = *std::max_element(base.begin(), base.end());
    double z = 0;
    for (int64_t i = 0; i < kVocab; ++i) z += p[i].first = std::exp((base[i] - top) / 0.8);
    for (int64_t i = 0; i < kVocab; ++i) p[i].second = static_cast<int>(i);
    std::sort(p.begin(), p.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    double r = u(rng) * z;
    int pick = p.back().second;
    for (const auto& e : p) {
      r -= e.first;
      if (r < 0) {
        pick = e.second;
        break;
      }
    }
    benchmark::DoNotOptimize(pick);
  }
  report(state);
}
BENCHMARK(BM_SampleNaive);

}  // namespace

BENCHMARK_MAIN();

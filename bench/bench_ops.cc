// Throughput of the small decoder ops at real sizes (143M: dim 576, FFN 1536;
// 1.1B: dim 2048, FFN 5632; vocab 32000), each next to a naive scalar loop.
// bytes/s counts the bytes each op reads and writes.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <chrono>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/ops.h"
#include "kernels/threads/team.h"

using namespace qkv;

namespace {

std::vector<float> random_vec(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

void set_bytes(benchmark::State& state, double bytes_per_iter) {
  state.counters["bytes/s"] = benchmark::Counter(bytes_per_iter * state.iterations(), benchmark::Counter::kIsRate,
                                                 benchmark::Counter::kIs1024);
}

void naive_rmsnorm(const float* x, const float* w, float* o, size_t n, float eps) {
  float ss = 0;
  for (size_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float s = 1.0f / std::sqrt(ss / n + eps);
  for (size_t i = 0; i < n; ++i) o[i] = w[i] * (s * x[i]);
}

void naive_softmax(float* x, size_t n) {
  float mx = x[0];
  for (size_t i = 1; i < n; ++i) mx = std::max(mx, x[i]);
  float sum = 0;
  for (size_t i = 0; i < n; ++i) sum += (x[i] = std::exp(x[i] - mx));
  for (size_t i = 0; i < n; ++i) x[i] /= sum;
}

void naive_silu_mul(float* g, const float* up, size_t n) {
  for (size_t i = 0; i < n; ++i) g[i] = g[i] / (1.0f + std::exp(-g[i])) * up[i];
}

void BM_rmsnorm(benchmark::State& state, bool naive) {
  const size_t n = size_t(state.range(0));
  const auto x = random_vec(n, 1), w = random_vec(n, 2);
  std::vector<float> o(n);
  for (auto _ : state) {
    if (naive) naive_rmsnorm(x.data(), w.data(), o.data(), n, 1e-5f);
    else rmsnorm(x.data(), w.data(), o.data(), n, 1e-5f);
    benchmark::DoNotOptimize(o.data());
  }
  set_bytes(state, 3.0 * n * 4);
}

void BM_softmax(benchmark::State& state, bool naive) {
  const size_t n = size_t(state.range(0));
  const auto x0 = random_vec(n, 1);
  std::vector<float> x(n);
  for (auto _ : state) {
    x = x0;  // softmax is in place; the copy is part of both variants
    if (naive) naive_softmax(x.data(), n);
    else softmax(x.data(), n);
    benchmark::DoNotOptimize(x.data());
  }
  set_bytes(state, 2.0 * n * 4);
}

void BM_silu_mul(benchmark::State& state, bool naive) {
  const size_t n = size_t(state.range(0));
  const auto g0 = random_vec(n, 1), up = random_vec(n, 2);
  std::vector<float> g(n);
  for (auto _ : state) {
    g = g0;  // in place; the copy is part of both variants
    if (naive) naive_silu_mul(g.data(), up.data(), n);
    else silu_mul(g.data(), up.data(), n);
    benchmark::DoNotOptimize(g.data());
  }
  set_bytes(state, 3.0 * n * 4);
}

void BM_add_inplace(benchmark::State& state) {
  const size_t n = size_t(state.range(0));
  auto y = random_vec(n, 1);
  const auto x = random_vec(n, 2);
  for (auto _ : state) {
    add_inplace(y.data(), x.data(), n);
    benchmark::DoNotOptimize(y.data());
  }
  set_bytes(state, 3.0 * n * 4);
}

// RoPE of one token's Q (n_heads x head_dim), 1.1B shape, at a late position.
void BM_rope(benchmark::State& state) {
  const size_t n_heads = size_t(state.range(0)), head_dim = 64;
  auto q = random_vec(n_heads * head_dim, 1);
  int64_t pos = 1000;
  for (auto _ : state) {
    rope(q.data(), n_heads, head_dim, head_dim, pos, 10000.0f);
    benchmark::DoNotOptimize(q.data());
  }
  set_bytes(state, 2.0 * n_heads * head_dim * 4);
}

}  // namespace

// What a parallel pass costs before any work, with `threads` threads: an
// empty OpenMP parallel region (fork and join; the time per iteration), and
// one barrier inside a region (the time per iteration is per barrier: each
// iteration times 1000 of them). A 143M decode token runs about 150 regions,
// so this sets what fusing passes (or one team per forward pass) could save.
void BM_omp_parallel_region(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  for (auto _ : state) {
#pragma omp parallel num_threads(threads)
    {
      int t = omp_get_thread_num();
      benchmark::DoNotOptimize(t);
    }
  }
}

void BM_omp_barrier(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  constexpr int kBarriers = 1000;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads)
    {
      for (int i = 0; i < kBarriers; ++i) {
#pragma omp barrier
      }
    }
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / kBarriers);
  }
}

BENCHMARK_CAPTURE(BM_rmsnorm, simd, false)->Arg(576)->Arg(2048);
BENCHMARK_CAPTURE(BM_rmsnorm, naive, true)->Arg(576)->Arg(2048);
BENCHMARK_CAPTURE(BM_softmax, simd, false)->Arg(32000);
BENCHMARK_CAPTURE(BM_softmax, naive, true)->Arg(32000);
BENCHMARK_CAPTURE(BM_silu_mul, simd, false)->Arg(1536)->Arg(5632);
BENCHMARK_CAPTURE(BM_silu_mul, naive, true)->Arg(1536)->Arg(5632);
// The spinning sync of a team (kernels/threads/team.h), which a decode step uses
// between kernel calls instead of a parallel region per call.
void BM_team_sync(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  constexpr int kSyncs = 1000;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    qkv::run_team(threads, [&] {
      for (int i = 0; i < kSyncs; ++i) qkv::current_team()->sync();
    });
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / kSyncs);
  }
}

BENCHMARK(BM_add_inplace)->Arg(576)->Arg(2048);
BENCHMARK(BM_rope)->Arg(9)->Arg(32);
BENCHMARK(BM_omp_parallel_region)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_omp_barrier)->Arg(2)->UseManualTime()->Iterations(300);  // 300 x 1000 barriers
BENCHMARK(BM_team_sync)->Arg(2)->UseManualTime()->Iterations(300);    // 300 x 1000 syncs (and a region each)

BENCHMARK_MAIN();

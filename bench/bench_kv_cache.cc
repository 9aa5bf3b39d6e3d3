// Decode attention over the KV cache: how fast one new token attends to a long
// context, per element type, and what the per-token store costs.
//
// Counters: bytes/s is the K and V bytes of the attended positions (what a decode
// step must stream) per second; tok/s is decode steps per second for one layer
// (each step: every query head of one new token attends to the whole context);
// peak_RSS_MiB is the process's high-water mark so far (getrusage), cache_MiB the
// cache's own size. DRAM_read gives the machine's read bandwidth to compare with
// (one stream per thread). The decode rows also carry read_bytes/s: a plain read
// of the same attended K and V by as many threads right after the timed loop,
// flushed from the caches first (qkv::probe_read_regions, cold: several streams
// per thread, best of 3), and pct_read, bytes/s as a percentage of it. That
// pairs each row with the DRAM bandwidth of the minutes it ran in (this host
// drifts by tens of percent); the decode itself may find small contexts in the
// caches, so pct_read means something only for contexts well beyond them.
#include <benchmark/benchmark.h>
#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/machine/probe.h"
#include "runtime/kv_cache.h"

namespace {

using qkv::DType;

constexpr int64_t kHq = 32, kHkv = 4, kD = 128;
constexpr DType kTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0};

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

// Deterministic values in (-1, 1) without the cost of a real RNG for 10^8 values.
void fill(std::vector<float>* x, uint32_t seed) {
  uint32_t s = seed * 2654435761u + 1;
  for (float& v : *x) {
    s = s * 1664525u + 1013904223u;
    v = static_cast<float>(static_cast<int32_t>(s)) * (1.0f / 2147483648.0f);
  }
}

// A one-layer cache with n_seqs sequences of `depth` positions each.
std::unique_ptr<qkv::KVCache> make_filled_cache(DType t, int64_t depth, int64_t n_seqs) {
  qkv::KVCacheConfig c;
  c.n_layers = 1;
  c.n_kv_heads = kHkv;
  c.head_dim = kD;
  c.capacity = depth;
  c.n_seqs = n_seqs;
  c.type = t;
  auto cache = std::make_unique<qkv::KVCache>(c);
  const int64_t chunk = 1024;
  std::vector<float> k(static_cast<size_t>(chunk * kHkv * kD)), v(k.size());
  for (int64_t s = 0; s < n_seqs; ++s) {
    for (int64_t p = 0; p < depth; p += chunk) {
      const int64_t n = std::min(chunk, depth - p);
      fill(&k, static_cast<uint32_t>(s * 7919 + p));
      fill(&v, static_cast<uint32_t>(s * 7919 + p + 1));
      cache->append(s, n, k.data(), v.data());
    }
  }
  return cache;
}

// Args: element type, depth, threads, sequences stepping together.
void BM_decode(benchmark::State& state) {
  const DType t = static_cast<DType>(state.range(0));
  const int64_t depth = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  const int64_t n_seqs = state.range(3);
  omp_set_num_threads(threads);
  auto cache = make_filled_cache(t, depth, n_seqs);
  std::vector<int64_t> seqs(static_cast<size_t>(n_seqs)), lens(seqs.size(), depth);
  for (int64_t s = 0; s < n_seqs; ++s) seqs[static_cast<size_t>(s)] = s;
  std::vector<float> q(static_cast<size_t>(n_seqs * kHq * kD)), out(q.size());
  fill(&q, 99);
  const bool cold = state.range(4) != 0;
  const double bytes_per_step = 2.0 * kHkv * static_cast<double>(depth) * cache->row_bytes() * n_seqs;
  // Capacity == depth, so each of K and V is one contiguous run over all sequences.
  const uint64_t half = static_cast<uint64_t>(bytes_per_step / 2.0);
  const qkv::ProbeRegion kv[2] = {{cache->keys(0).data, half}, {cache->values(0).data, half}};
  double seconds = 0.0;
  for (auto _ : state) {
    if (cold) {
      // Every step reads K/V from DRAM, even where the last-level cache
      // could hold the whole cache (the flush is not timed).
      state.PauseTiming();
      qkv::flush_regions(kv, 2, threads);
      state.ResumeTiming();
    }
    const auto t0 = std::chrono::steady_clock::now();
    cache->attend_decode(0, seqs.data(), lens.data(), n_seqs, kHq, q.data(), out.data());
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["bytes/s"] = benchmark::Counter(bytes_per_step * iters, benchmark::Counter::kIsRate,
                                                 benchmark::Counter::kIs1000);
  const double read = qkv::probe_read_regions(kv, 2, threads, 3, /*cold=*/true);
  state.counters["read_bytes/s"] = read;
  state.counters["pct_read"] = bytes_per_step * iters / seconds / read * 100.0;
  state.counters["tok/s"] = benchmark::Counter(static_cast<double>(n_seqs) * iters, benchmark::Counter::kIsRate);
  state.counters["cache_MiB"] = static_cast<double>(cache->bytes()) / (1 << 20);
  state.counters["peak_RSS_MiB"] = peak_rss_mib();
  state.SetLabel(qkv::dtype_name(t));
}

void DecodeArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"type", "depth", "threads", "seqs", "cold"});
  for (DType t : kTypes)
    for (int64_t depth : {512, 4096, 32768})
      for (int64_t threads : {1, 2}) b->Args({static_cast<int64_t>(t), depth, threads, 1, 0});
  // Batched decode: 8 sequences of depth 4096 stepping together.
  for (DType t : kTypes)
    for (int64_t threads : {1, 2}) b->Args({static_cast<int64_t>(t), 4096, threads, 8, 0});
  // Cold: K/V flushed from the caches before each step (a 480 MiB L3, as on
  // some Xeons, holds a 64 MiB cache between steps).
  for (DType t : kTypes) b->Args({static_cast<int64_t>(t), 32768, 2, 1, 1});
  b->Args({static_cast<int64_t>(DType::F16), 32768, 1, 1, 1});  // per-core scaling of the cold case
}
// Besides the median, "best" aggregates keep the fastest repetition's time and
// the highest rates: on a shared machine they estimate the uncontended figure
// (with many short repetitions some run without being descheduled).
double fastest_time(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
double highest_rate(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

BENCHMARK(BM_decode)
    ->Apply(DecodeArgs)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond)
    ->ComputeStatistics("min_time", fastest_time)
    ->ComputeStatistics("max_rate", highest_rate);

// The per-token store: K and V of one position, all KV heads, converted from f32.
void BM_store_token(benchmark::State& state) {
  const DType t = static_cast<DType>(state.range(0));
  qkv::KVCacheConfig c;
  c.n_layers = 1;
  c.n_kv_heads = kHkv;
  c.head_dim = kD;
  c.capacity = 16;
  c.type = t;
  qkv::KVCache cache(c);
  std::vector<float> k(static_cast<size_t>(kHkv * kD)), v(k.size());
  fill(&k, 1);
  fill(&v, 2);
  for (auto _ : state) {
    cache.store(0, 0, 0, 1, k.data(), v.data());
    benchmark::ClobberMemory();
  }
  state.counters["values/s"] =
      benchmark::Counter(2.0 * kHkv * kD * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(qkv::dtype_name(t));
}
BENCHMARK(BM_store_token)->DenseRange(0, 3)->ArgName("type");

// Reference: plain streaming read of a buffer far larger than the caches, the
// DRAM bandwidth the decode figures are measured against.
void BM_DRAM_read(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const size_t n = size_t(256) << 20 >> 3;  // 256 MiB
  std::vector<uint64_t> buf(n);
  for (size_t i = 0; i < n; ++i) buf[i] = i * 0x9E3779B97F4A7C15ull;
  for (auto _ : state) {
    // XOR keeps the loop vectorizable (a float sum would be latency bound).
    uint64_t total = 0;
#pragma omp parallel for num_threads(threads) reduction(^ : total) schedule(static)
    for (size_t i = 0; i < n; ++i) total ^= buf[i];
    benchmark::DoNotOptimize(total);
  }
  state.counters["bytes/s"] = benchmark::Counter(8.0 * n * static_cast<double>(state.iterations()),
                                                 benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_DRAM_read)
    ->Arg(1)
    ->Arg(2)
    ->ArgName("threads")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->ComputeStatistics("min_time", fastest_time)
    ->ComputeStatistics("max_rate", highest_rate);

}  // namespace

BENCHMARK_MAIN();

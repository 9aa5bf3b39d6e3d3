// Attention benchmarks: the streaming kernel against two materialized baselines
// in the same binary (a naive scores-softmax-·V loop and a oneDNN composition of
// matmul + softmax + matmul).
//
//   Decode:  Lq = 1, Hq = 32, Hkv in {4, 32}, d = 128, Lk in {512, 4096, 32768},
//            f16 K/V. Counter kv_bytes_per_second: bytes of the f16 K and V that
//            attention must read, per second. read_bytes_per_second: a plain read
//            of those same K/V buffers by as many threads right after the timed
//            loop, flushed from the caches first (qkv::probe_read_regions, cold:
//            several streams per thread, best of 3), so a DRAM figure; pct_read
//            is the first as a percentage of the second. Pairing each case with
//            its own read keeps the ratio meaningful on a shared host whose
//            bandwidth drifts within minutes. Small Lk fit the caches, so their
//            pct_read is not a fraction of anything the kernel was limited by.
//   Prefill: causal, Lq = Lk in {512, 2048, 4096}, Hq = 32, Hkv = 4, d in {64, 128}.
//            Counter flops_per_second: 4·d FLOPs per unmasked query-key pair;
//            pct_fma_peak: of the FP32 FMA peak of as many threads, measured once
//            per thread count in this run (qkv::probe_fma_peak).
//   DecodeBatch: a decode step's call for B sequences (runtime/kv_cache.cc
//            attend_decode): one query each, Hq query heads on Hkv KV heads,
//            Lk keys of d = 64, f16 K/V, 2 threads; from cache, or cycling
//            through 30 layers' K/V (from DRAM, as in a model's step). Counters
//            as above (kv_bytes_per_second, flops_per_second, pct_fma_peak).
// impl 3 is the streaming kernel with a score soft-cap of 50 (gemma2's): its
// cost against impl 0 in the same run.
// The baselines get their K/V already converted to f32 (untimed), which favours
// them: they read twice the bytes but skip the conversion. Their scores matrix
// is what the streaming kernel avoids; scratch_mb shows the working memory of
// each (peak_rss_mb is the process high-water mark, so run one case alone to
// read it for that case).
//
// Run: build-attn/bench/bench_attention --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <omp.h>
#include <sys/resource.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <unordered_map>
#include <vector>

#include "kernels/attention.h"
#include "kernels/dtype.h"
#include "kernels/machine/probe.h"

namespace {

using namespace qkv;

// FP32 FMA peak of `threads` threads, measured on first use in this run.
double fma_peak_flops(int threads) {
  static std::map<int, double> measured;
  auto it = measured.find(threads);
  if (it == measured.end()) it = measured.emplace(threads, probe_fma_peak(threads, 0.1)).first;
  return it->second;
}

double peak_rss_mb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_maxrss) / 1024.0;
}

// One problem: Q/out head-major [Hq][Lq][d]; K/V [Hkv][Lk][d] in f16 (the kernel's
// input) and the same values in f32 (the baselines' input). B = 1.
struct Data {
  AttentionShape s;
  bool causal = false;
  std::vector<float> q, out, kf, vf;
  std::vector<uint16_t> kh, vh;

  // B batch rows a call (the baselines take B = 1); kv_copies sets of their
  // K/V, one of which a call reads (run_streaming's `copy`).
  Data(int64_t hq, int64_t hkv, int64_t lq, int64_t lk, int64_t d, bool causal_, int64_t B = 1, int64_t kv_copies = 1)
      : s{B, hq, hkv, lq, lk, d}, causal(causal_) {
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    q.resize(static_cast<size_t>(B * hq * lq * d));
    out.assign(q.size(), 0.0f);
    for (auto& x : q) x = u(rng);
    const size_t n = static_cast<size_t>(kv_copies * B * hkv * lk * d);
    kh.resize(n);
    vh.resize(n);
    for (size_t i = 0; i < n; ++i) {
      kh[i] = f32_to_f16(u(rng));
      vh[i] = f32_to_f16(u(rng));
    }
  }

  // The baselines' f32 copy of K/V (made only for them, so the streaming runs'
  // peak RSS does not include it).
  void make_f32() {
    kf.resize(kh.size());
    vf.resize(vh.size());
    for (size_t i = 0; i < kh.size(); ++i) {
      kf[i] = f16_to_f32(kh[i]);
      vf[i] = f16_to_f32(vh[i]);
    }
  }

  float scale() const { return 1.0f / std::sqrt(float(s.d)); }
  // Query-key pairs that are not masked, over all query heads.
  double pairs() const {
    if (!causal) return double(s.B * s.Hq) * double(s.Lq) * double(s.Lk);
    const double off = double(s.Lk - s.Lq);  // query i sits at position off + i
    double sum = 0.0;
    for (int64_t i = 0; i < s.Lq; ++i) sum += std::min(double(s.Lk), off + double(i) + 1.0);
    return double(s.B * s.Hq) * sum;
  }
  // The f16 K and V that a call reads.
  double kv_bytes_f16() const { return 2.0 * double(s.B * s.Hkv * s.Lk * s.d) * 2.0; }

  void run_streaming(int threads, float softcap = 0.0f, int64_t copy = 0) {
    const int64_t d = s.d;
    const size_t at = static_cast<size_t>(copy * s.B * s.Hkv * s.Lk * d);
    QueryView qv{q.data(), s.Hq * s.Lq * d, s.Lq * d, d};
    OutputView ov{out.data(), s.Hq * s.Lq * d, s.Lq * d, d};
    KVView kv{kh.data() + at, DType::F16, s.Hkv * s.Lk * d * 2, s.Lk * d * 2, d * 2};
    KVView vv{vh.data() + at, DType::F16, s.Hkv * s.Lk * d * 2, s.Lk * d * 2, d * 2};
    AttentionMask m;
    m.causal = causal;
    m.q_pos0 = s.Lk - s.Lq;
    AttentionOptions o;
    o.threads = threads;
    o.softcap = softcap;
    attention(s, qv, kv, vv, m, ov, o);
  }
};

// Naive materialized SDPA: per query head, the full scores matrix S = Q·Kᵀ (one
// dot product per pair, vectorized by the compiler through `omp simd`), a row
// softmax, then O = S·V. Masked pairs are skipped, not computed.
void naive_sdpa(Data& D, int threads) {
  const AttentionShape& s = D.s;
  const int64_t g = s.Hq / s.Hkv, d = s.d, lq = s.Lq, lk = s.Lk;
  const float scale = D.scale();
#pragma omp parallel num_threads(threads)
  {
    std::vector<float> S(static_cast<size_t>(lq * lk));
#pragma omp for schedule(dynamic, 1)
    for (int64_t h = 0; h < s.Hq; ++h) {
      const float* K = D.kf.data() + (h / g) * lk * d;
      const float* V = D.vf.data() + (h / g) * lk * d;
      for (int64_t i = 0; i < lq; ++i) {
        const float* qi = D.q.data() + (h * lq + i) * d;
        float* si = S.data() + i * lk;
        const int64_t n = D.causal ? std::min(lk, lk - lq + i + 1) : lk;
        for (int64_t j = 0; j < n; ++j) {
          const float* kj = K + j * d;
          float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
          for (int64_t c = 0; c < d; ++c) dot += qi[c] * kj[c];
          si[j] = dot * scale;
        }
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < n; ++j) mx = std::max(mx, si[j]);
        float sum = 0.0f;
        for (int64_t j = 0; j < n; ++j) {
          si[j] = std::exp(si[j] - mx);
          sum += si[j];
        }
        float* o = D.out.data() + (h * lq + i) * d;
        std::fill(o, o + d, 0.0f);
        for (int64_t j = 0; j < n; ++j) {
          const float p = si[j] / sum;
          const float* vj = V + j * d;
#pragma omp simd
          for (int64_t c = 0; c < d; ++c) o[c] += p * vj[c];
        }
      }
    }
  }
}

// oneDNN composition: per KV head (decode: the group's query heads are the M
// rows) or per query head (causal prefill: the mask is an additive binary
// post-op of [Lq][Lk]), matmul with scale -> softmax -> matmul.
class OneDnnSdpa {
 public:
  explicit OneDnnSdpa(Data& D) : D_(D), eng_(dnnl::engine::kind::cpu, 0), strm_(eng_) {
    using dt = dnnl::memory::data_type;
    using md = dnnl::memory::desc;
    const AttentionShape& s = D.s;
    const int64_t g = s.Hq / s.Hkv;
    per_kv_head_ = !D.causal;
    M_ = per_kv_head_ ? g * s.Lq : s.Lq;
    const int64_t d = s.d, lk = s.Lk;
    q_md_ = md({M_, d}, dt::f32, {d, 1});
    kt_md_ = md({d, lk}, dt::f32, {1, d});  // K [Lk][d] read as Kᵀ, no copy
    s_md_ = md({M_, lk}, dt::f32, {lk, 1});
    v_md_ = md({lk, d}, dt::f32, {d, 1});
    o_md_ = md({M_, d}, dt::f32, {d, 1});
    dnnl::primitive_attr a1;
    a1.set_output_scales(0, {D.scale()});
    if (D.causal) {
      mask_.assign(static_cast<size_t>(s.Lq * lk), 0.0f);
      for (int64_t i = 0; i < s.Lq; ++i)
        for (int64_t j = lk - s.Lq + i + 1; j < lk; ++j) mask_[i * lk + j] = -std::numeric_limits<float>::infinity();
      dnnl::post_ops po;
      po.append_binary(dnnl::algorithm::binary_add, s_md_);
      a1.set_post_ops(po);
    }
    mm1_ = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(q_md_, kt_md_, s_md_), a1, eng_));
    sm_ = dnnl::softmax_forward(dnnl::softmax_forward::primitive_desc(
        dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, s_md_, 1), eng_));
    mm2_ = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(s_md_, v_md_, o_md_), eng_));
    scores_.resize(static_cast<size_t>(M_ * lk));
  }

  void run() {
    const AttentionShape& s = D_.s;
    const int64_t g = s.Hq / s.Hkv, d = s.d, lk = s.Lk;
    const int64_t units = per_kv_head_ ? s.Hkv : s.Hq;
    dnnl::memory S(s_md_, eng_, scores_.data());
    for (int64_t u = 0; u < units; ++u) {
      const int64_t kvh = per_kv_head_ ? u : u / g;
      const int64_t qrow0 = per_kv_head_ ? u * g * s.Lq : u * s.Lq;
      dnnl::memory Q(q_md_, eng_, D_.q.data() + qrow0 * d);
      dnnl::memory K(kt_md_, eng_, D_.kf.data() + kvh * lk * d);
      dnnl::memory V(v_md_, eng_, D_.vf.data() + kvh * lk * d);
      dnnl::memory O(o_md_, eng_, D_.out.data() + qrow0 * d);
      std::unordered_map<int, dnnl::memory> a1{{DNNL_ARG_SRC, Q}, {DNNL_ARG_WEIGHTS, K}, {DNNL_ARG_DST, S}};
      if (D_.causal) {
        a1.insert({DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, dnnl::memory(s_md_, eng_, mask_.data())});
      }
      mm1_.execute(strm_, a1);
      sm_.execute(strm_, {{DNNL_ARG_SRC, S}, {DNNL_ARG_DST, S}});
      mm2_.execute(strm_, {{DNNL_ARG_SRC, S}, {DNNL_ARG_WEIGHTS, V}, {DNNL_ARG_DST, O}});
    }
    strm_.wait();
  }

 private:
  Data& D_;
  dnnl::engine eng_;
  dnnl::stream strm_;
  bool per_kv_head_ = true;
  int64_t M_ = 1;
  dnnl::memory::desc q_md_, kt_md_, s_md_, v_md_, o_md_;
  dnnl::matmul mm1_, mm2_;
  dnnl::softmax_forward sm_;
  std::vector<float> mask_, scores_;
};

// kSoftcap: the streaming kernel with gemma2's score soft-cap (50).
enum Impl { kStreaming = 0, kNaive = 1, kOneDnn = 2, kSoftcap = 3 };

// Runs the timed loop; returns the wall seconds spent in it (for the % counters).
double run_case(benchmark::State& state, Data& D, Impl impl, int threads) {
  omp_set_num_threads(threads);  // oneDNN's OpenMP runtime follows it
  if (impl == kNaive || impl == kOneDnn) D.make_f32();
  std::unique_ptr<OneDnnSdpa> dnn;
  if (impl == kOneDnn) dnn = std::make_unique<OneDnnSdpa>(D);
  double seconds = 0.0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    switch (impl) {
      case kStreaming: D.run_streaming(threads); break;
      case kSoftcap: D.run_streaming(threads, 50.0f); break;
      case kNaive: naive_sdpa(D, threads); break;
      case kOneDnn: dnn->run(); break;
    }
    benchmark::DoNotOptimize(D.out.data());
    benchmark::ClobberMemory();
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  // Working memory beyond inputs and outputs: the streaming kernel's O(block)
  // scratch, or the baselines' materialized scores (and K transpose / mask).
  const AttentionShape& sh = D.s;
  double scratch = 0.0;
  switch (impl) {
    case kStreaming:
    case kSoftcap: scratch = double(attention_scratch_bytes_per_thread(sh, DType::F16)) * threads; break;
    case kNaive: scratch = double(threads) * double(sh.Lq * sh.Lk) * 4.0; break;
    case kOneDnn:
      scratch = double(sh.Lq * sh.Lk) * 4.0 * (D.causal ? 2.0 : double(sh.Hq / sh.Hkv));
      break;
  }
  state.counters["scratch_mb"] = scratch / (1 << 20);
  // Process-wide high-water mark so far (includes earlier cases of this run).
  state.counters["peak_rss_mb"] = peak_rss_mb();
  state.counters["threads"] = threads;
  return seconds;
}

// Args: Hkv, Lk, impl, threads.
void BM_Decode(benchmark::State& state) {
  const int64_t hkv = state.range(0), lk = state.range(1);
  const Impl impl = static_cast<Impl>(state.range(2));
  const int threads = static_cast<int>(state.range(3));
  Data D(32, hkv, 1, lk, 128, false);
  const double seconds = run_case(state, D, impl, threads);
  const double bytes = D.kv_bytes_f16() * double(state.iterations());
  state.counters["kv_bytes_per_second"] = benchmark::Counter(bytes, benchmark::Counter::kIsRate);
  const uint64_t half = static_cast<uint64_t>(D.kv_bytes_f16() / 2);
  const ProbeRegion kv[2] = {{D.kh.data(), half}, {D.vh.data(), half}};
  const double read = probe_read_regions(kv, 2, threads, 3, /*cold=*/true);
  state.counters["read_bytes_per_second"] = read;
  state.counters["pct_read"] = bytes / seconds / read * 100.0;
}

// Args: L, d, impl, threads.
void BM_PrefillCausal(benchmark::State& state) {
  const int64_t L = state.range(0), d = state.range(1);
  const Impl impl = static_cast<Impl>(state.range(2));
  const int threads = static_cast<int>(state.range(3));
  Data D(32, 4, L, L, d, true);
  const double seconds = run_case(state, D, impl, threads);
  const double flops = 4.0 * double(d) * D.pairs() * double(state.iterations());
  state.counters["flops_per_second"] = benchmark::Counter(flops, benchmark::Counter::kIsRate);
  state.counters["pct_fma_peak"] = flops / seconds / fma_peak_flops(threads) * 100.0;
}

void decode_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"hkv", "lk", "impl", "threads"});
  for (int64_t hkv : {4, 32})
    for (int64_t lk : {512, 4096, 32768})
      for (int64_t impl : {kStreaming, kNaive, kOneDnn}) b->Args({hkv, lk, impl, 2});
  b->Args({4, 32768, kStreaming, 1});
  b->Args({32, 32768, kStreaming, 1});
  for (int64_t hkv : {4, 32})
    for (int64_t lk : {4096, 32768}) b->Args({hkv, lk, kSoftcap, 2});
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}

void prefill_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"L", "d", "impl", "threads"});
  for (int64_t L : {512, 2048, 4096})
    for (int64_t d : {64, 128}) {
      b->Args({L, d, kStreaming, 2});
      // Baselines at d = 128 only, and the naive one up to L = 2048: at 4096 it
      // takes tens of seconds per call.
      if (d == 128) {
        if (L <= 2048) b->Args({L, d, kNaive, 2});
        b->Args({L, d, kOneDnn, 2});
      }
    }
  b->Args({4096, 128, kStreaming, 1});
  for (int64_t d : {64, 128}) b->Args({2048, d, kSoftcap, 2});
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

// Batched decode as the decoder calls it (runtime/kv_cache.cc attend_decode):
// B sequences of one query each, Hq query heads on Hkv KV heads (GQA
// Hq / Hkv), Lk keys of d = 64; `copies` sets of K/V cycled through (one per
// layer: K/V from DRAM, as in a step of the model; 1: warm in cache).
// Args: B, Hq, Hkv, Lk, copies.
void BM_DecodeBatch(benchmark::State& state) {
  const int64_t copies = state.range(4);
  Data D(state.range(1), state.range(2), 1, state.range(3), 64, false, state.range(0), copies);
  int64_t c = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    D.run_streaming(2, 0.0f, c);
    benchmark::DoNotOptimize(D.out.data());
    c = (c + 1) % copies;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double n = double(state.iterations());
  state.counters["kv_bytes_per_second"] = benchmark::Counter(D.kv_bytes_f16() * n, benchmark::Counter::kIsRate);
  const double flops = 4.0 * double(D.s.d) * D.pairs() * n;
  state.counters["flops_per_second"] = benchmark::Counter(flops, benchmark::Counter::kIsRate);
  state.counters["pct_fma_peak"] = flops / seconds / fma_peak_flops(2) * 100.0;
}
BENCHMARK(BM_DecodeBatch)
    ->ArgNames({"B", "hq", "hkv", "lk", "copies"})
    ->Args({16, 9, 3, 128, 1})
    ->Args({4, 9, 3, 128, 1})
    ->Args({2, 9, 3, 128, 1})
    ->Args({16, 9, 3, 128, 30})
    ->Args({16, 8, 4, 128, 1})
    ->Args({16, 8, 4, 128, 30})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_Decode)->Apply(decode_args);
BENCHMARK(BM_PrefillCausal)->Apply(prefill_args);

}  // namespace

BENCHMARK_MAIN();

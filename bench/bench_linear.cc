// Decode matvec and batched matmul throughput per weight dtype, with a naive
// scalar baseline in the same binary for ratios.
//
// Decode reads every weight once per token from DRAM, so the matvec benchmarks
// cycle through enough copies of the matrix (>= 192 MB in all) that each call
// streams from memory rather than from the 32 MB L3; bytes/s counts weight bytes.
// The matvec arguments are the thread count (OpenMP) and the software prefetch
// distance in bytes (0 = off, to compare with the kernel without it), e.g.
//   bench_linear --benchmark_filter='matvec/f16/5632x2048' --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <omp.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <cstdlib>
#include <new>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/linear.h"
#include "kernels/linear_internal.h"
#include "kernels/machine/isa_cap.h"
#include "kernels/quant/activation.h"
#include "kernels/quant/gemm_amx.h"
#include "kernels/quant/row_groups.h"
#include "kernels/quant/gemm_avx2_lanes.h"
#include "kernels/quant/vec_dot.h"
#include "hwy/targets.h"

using namespace qkv;

namespace {

constexpr size_t kStreamBytes = size_t(192) << 20;

// Weight memory on 2 MB-aligned, transparent-huge-page-advised allocations, as a
// loader should map a model: with 4 KB pages, streaming tens of MB takes a TLB
// miss every 4 KB, which costs bandwidth (more so under virtualization).
struct HugeBuffer {
  uint8_t* p = nullptr;
  size_t n = 0;
  explicit HugeBuffer(size_t bytes) : n(bytes) {
    const size_t align = size_t(2) << 20;
    const size_t rounded = (bytes + align - 1) / align * align;
    if (posix_memalign(reinterpret_cast<void**>(&p), align, rounded) != 0) throw std::bad_alloc();
    madvise(p, rounded, MADV_HUGEPAGE);
  }
  HugeBuffer(const HugeBuffer& o) : HugeBuffer(o.n) { std::memcpy(p, o.p, n); }
  HugeBuffer& operator=(const HugeBuffer&) = delete;
  ~HugeBuffer() { std::free(p); }
  uint8_t* data() const { return p; }
};

struct Weights {
  std::vector<HugeBuffer> copies;
  int64_t rows = 0, cols = 0;
  DType type = DType::F32;
  size_t bytes() const { return dtype_row_bytes(type, size_t(cols)) * size_t(rows); }
  Matrix matrix(size_t i) const { return Matrix{copies[i % copies.size()].data(), type, rows, cols}; }
};

Weights make_weights(DType t, int64_t rows, int64_t cols, size_t min_total) {
  Weights w;
  w.rows = rows;
  w.cols = cols;
  w.type = t;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(cols));
  const size_t rb = dtype_row_bytes(t, size_t(cols));
  const size_t n = std::max<size_t>(1, (min_total + w.bytes() - 1) / w.bytes());
  w.copies.reserve(std::max<size_t>(1, (min_total + w.bytes() - 1) / w.bytes()));
  w.copies.emplace_back(w.bytes());
  if (dtype_is_quantized(t) && t != DType::Q8_0) {
    // ggml block types (no encoder here): random bits with every f16 scale
    // field set to 0.01; the speed does not depend on the values.
    struct { DType t; size_t at[2]; } kScales[] = {
        {DType::Q4_0, {0, 0}}, {DType::Q4_1, {0, 2}},  {DType::Q5_0, {0, 0}},   {DType::Q5_1, {0, 2}},
        {DType::Q2_K, {80, 82}}, {DType::Q3_K, {108, 108}}, {DType::Q4_K, {0, 2}}, {DType::Q5_K, {0, 2}},
        {DType::Q6_K, {208, 208}}, {DType::IQ4_NL, {0, 0}}, {DType::IQ4_XS, {0, 0}}};
    uint8_t* p = w.copies[0].data();
    for (size_t i = 0; i < w.bytes(); ++i) p[i] = static_cast<uint8_t>(rng());
    const uint16_t d = f32_to_f16(0.01f);
    for (const auto& s : kScales) {
      if (s.t != t) continue;
      for (size_t off = 0; off < w.bytes(); off += dtype_block_bytes(t)) {
        std::memcpy(p + off + s.at[0], &d, 2);
        std::memcpy(p + off + s.at[1], &d, 2);
      }
    }
  }
  for (int64_t r = 0; r < rows && !(dtype_is_quantized(t) && t != DType::Q8_0); ++r) {
    for (auto& v : row) v = u(rng);
    encode_row(t, row.data(), size_t(cols), w.copies[0].data() + r * rb);
  }
  while (w.copies.size() < n) w.copies.push_back(w.copies[0]);  // distinct memory, same values
  return w;
}

std::vector<float> random_vec(size_t n) {
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

double peak_rss_mb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;
}

// The plain loop a first version would write: decode each weight, multiply, add.
void naive_matvec(const Matrix& W, const float* x, float* y) {
  const size_t cols = size_t(W.cols), rb = dtype_row_bytes(W.type, cols);
  const auto* base = static_cast<const uint8_t*>(W.data);
  for (int64_t r = 0; r < W.rows; ++r) {
    const uint8_t* row = base + r * rb;
    float s = 0;
    for (size_t i = 0; i < cols; ++i) {
      float w;
      switch (W.type) {
        case DType::F32: std::memcpy(&w, row + 4 * i, 4); break;
        case DType::F16: { uint16_t h; std::memcpy(&h, row + 2 * i, 2); w = f16_to_f32(h); break; }
        case DType::BF16: { uint16_t h; std::memcpy(&h, row + 2 * i, 2); w = bf16_to_f32(h); break; }
        default: {
          const uint8_t* blk = row + (i / 32) * sizeof(BlockQ8_0);
          uint16_t d;
          std::memcpy(&d, blk, 2);
          w = f16_to_f32(d) * float(int8_t(blk[2 + i % 32]));
        }
      }
      s += w * x[i];
    }
    y[r] = s;
  }
}

// hot: one copy of the matrix, so that it stays in cache (L2 at 1536x576).
void BM_matvec_copies(benchmark::State& state, DType t, int64_t rows, int64_t cols, bool naive,
                      detail::Q8Dot q8, bool hot) {
  const int threads = int(state.range(0));
  omp_set_num_threads(threads);
  const detail::Q8Dot saved = detail::q8_matvec_mode();
  detail::set_q8_matvec_mode(q8);
  const size_t saved_prefetch = detail::matvec_prefetch_bytes(t);
  detail::set_matvec_prefetch_bytes(t, size_t(state.range(1)));
  const Weights w = make_weights(t, rows, cols, naive || hot ? 0 : kStreamBytes);
  const auto x = random_vec(size_t(cols));
  std::vector<float> y(static_cast<size_t>(rows));
  size_t i = 0;
  for (auto _ : state) {
    const Matrix m = w.matrix(i++);
    if (naive) naive_matvec(m, x.data(), y.data());
    else matvec(m, x.data(), y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["bytes/s"] = benchmark::Counter(double(w.bytes()) * state.iterations(),
                                                 benchmark::Counter::kIsRate, benchmark::Counter::kIs1024);
  state.counters["copies"] = double(w.copies.size());
  detail::set_q8_matvec_mode(saved);
  detail::set_matvec_prefetch_bytes(t, saved_prefetch);
}

// The row-group matvec (kernels/quant/row_groups.h) on the same weights,
// interleaved in groups of 16 rows, from as many copies (hot: one): each call
// quantizes the input as matvec() does and shares the groups among the threads.
void BM_matvec_row_groups(benchmark::State& state, DType t, int64_t rows, int64_t cols, bool hot) {
  const int threads = int(state.range(0));
  const Weights w = make_weights(t, rows, cols, hot ? 0 : kStreamBytes);
  std::vector<HugeBuffer> groups;
  groups.reserve(w.copies.size());
  for (const HugeBuffer& c : w.copies) {
    groups.emplace_back(w.bytes());
    pack_row_groups(t, c.data(), size_t(rows), size_t(cols), groups.back().data());
  }
  const auto x = random_vec(size_t(cols));
  std::vector<uint8_t> xa(act_bytes(t, size_t(cols)));
  std::vector<float> y(static_cast<size_t>(rows));
  const int64_t n_groups = rows / int64_t(kRowGroup);
  const size_t group_bytes = kRowGroup * dtype_row_bytes(t, size_t(cols));
  size_t i = 0;
  for (auto _ : state) {
    const uint8_t* g = groups[i++ % groups.size()].data();
    quantize_activation(t, x.data(), size_t(cols), xa.data());
#pragma omp parallel num_threads(threads)
    {
      const int64_t k = omp_get_thread_num(), n = omp_get_num_threads();
      const int64_t g0 = n_groups * k / n, g1 = n_groups * (k + 1) / n;
      row_group_dot(t, g + g0 * group_bytes, size_t(cols), xa.data(), y.data() + g0 * int64_t(kRowGroup), size_t(g1 - g0));
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["bytes/s"] = benchmark::Counter(double(w.bytes()) * state.iterations(),
                                                 benchmark::Counter::kIsRate, benchmark::Counter::kIs1024);
  state.counters["copies"] = double(w.copies.size());
}

void BM_matvec(benchmark::State& state, DType t, int64_t rows, int64_t cols, bool naive, detail::Q8Dot q8) {
  BM_matvec_copies(state, t, rows, cols, naive, q8, false);
}
void BM_matvec_hot(benchmark::State& state, DType t, int64_t rows, int64_t cols) {
  BM_matvec_copies(state, t, rows, cols, false, detail::q8_matvec_mode(), true);
}

// Flop rate of Y = X·Wᵀ for M inputs; `mode` 0 = matmul(), 1/2 = oneDNN in f32/bf16,
// 3 = matmul() with the small-batch kernel kept off AMX tiles, 4 = one matvec
// per input (the decode path: each weight read M times), 5 = matmul() with the
// integer block GEMM off (block types: decoded bf16/f32 tiles, as on CPUs
// without AVX-512 VNNI that have AVX512_BF16), 6 = matmul() with the block
// GEMM's packed-weight kernel off (its 4x4 tile kernel at every batch size),
// 7 = matmul() with the small-batch kernel on its f32 path for every type,
// 8 = matmul() with the block GEMM's inputs-in-lanes kernel off (the packed
// kernel at every batch of 3 or more), 10 = matmul() with the AMX int8 block
// GEMM off (the VNNI kernels at every batch).
// With `stream`, calls cycle through copies of W (>= kStreamBytes in all), so
// the weights come from DRAM as in a model's decode step; otherwise one copy
// (which for these shapes stays in the 32 MB L3 between calls).
void BM_matmul(benchmark::State& state, DType t, int64_t rows, int64_t cols, int mode, bool stream = false) {
  const int64_t M = state.range(0);
  omp_set_num_threads(int(state.range(1)));
  const Weights w = make_weights(t, rows, cols, stream ? kStreamBytes : 0);
  const auto X = random_vec(size_t(M * cols));
  std::vector<float> Y(size_t(M * rows));
  // mode 3: the small-batch kernel without AMX tiles (its AVX512_BF16 kernel).
  detail::set_matmul_small_amx(mode != 3);
  detail::set_block_gemm(mode != 5);
  set_quant_gemm_packed(mode != 6);
  detail::set_matmul_small_bf16(mode != 7);
  set_quant_gemm_lanes(mode != 8);
  set_avx2_lanes(mode != 8);
  set_quant_gemm_few(mode != 9);
  set_quant_gemm_amx(mode != 10);
  size_t i = 0;
  for (auto _ : state) {
    const Matrix m = w.matrix(i++);
    if (mode == 0 || mode == 3 || (mode >= 5 && mode <= 10)) matmul(m, X.data(), M, Y.data());
    else if (mode == 4) for (int64_t k = 0; k < M; ++k) matvec(m, X.data() + k * cols, Y.data() + k * rows);
    else detail::matmul_onednn(m, X.data(), M, Y.data(),
                               mode == 1 ? detail::GemmPrecision::kF32 : detail::GemmPrecision::kBF16);
    benchmark::DoNotOptimize(Y.data());
    benchmark::ClobberMemory();
  }
  detail::set_matmul_small_amx(true);
  detail::set_block_gemm(true);
  set_quant_gemm_packed(true);
  detail::set_matmul_small_bf16(true);
  set_quant_gemm_lanes(true);
  set_quant_gemm_few(true);
  set_quant_gemm_amx(true);
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * M * rows * cols * state.iterations(),
                                                benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
  state.counters["peak_rss_MB"] = peak_rss_mb();
}

// The packed GEMM on row groups: matmul() on a Matrix with row_groups, as
// the runtime calls it (block_gemm: the inputs quantized and laid out once,
// a thread's consecutive 32-row blocks in one call, each packed during the
// previous block's tiles); against matmul_nolanes (the packed kernel on the
// rows) and matmul (there the inputs-in-lanes kernel). `stream`: calls cycle
// through >= kStreamBytes of copies (the weights from DRAM).
void BM_matmul_row_groups(benchmark::State& state, DType t, int64_t rows, int64_t cols, bool stream) {
  const int64_t M = state.range(0);
  omp_set_num_threads(int(state.range(1)));
  Weights w = make_weights(t, rows, cols, stream ? kStreamBytes : 0);
  // Each copy packed, then freed (the rows are not read again).
  std::vector<HugeBuffer> groups;
  groups.reserve(w.copies.size());
  while (!w.copies.empty()) {
    groups.emplace_back(w.bytes());
    pack_row_groups(t, w.copies.back().data(), size_t(rows), size_t(cols), groups.back().data());
    w.copies.pop_back();
  }
  Matrix m;
  m.type = t;
  m.rows = rows;
  m.cols = cols;
  m.row_groups = true;
  const auto X = random_vec(size_t(M * cols));
  std::vector<float> Y(size_t(M * rows));
  size_t i = 0;
  for (auto _ : state) {
    m.data = groups[i++ % groups.size()].data();
    matmul(m, X.data(), M, Y.data());
    benchmark::DoNotOptimize(Y.data());
    benchmark::ClobberMemory();
  }
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * M * rows * cols * state.iterations(),
                                                benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

// The block-type row kernels (kernels/quant/vec_dot) on one thread with the
// dispatch forced to one SIMD target: `simd` false = the scalar kernels
// compiled for it (what that target ran before it had SIMD ones). With
// `stream`, calls cycle through >= kStreamBytes of copies (weights from DRAM),
// else one copy stays in L2. bytes/s of weights per CPU second.
void BM_quant_rows(benchmark::State& state, DType t, int64_t rows, int64_t cols, int64_t target, bool simd,
                   bool stream) {
  const Weights w = make_weights(t, rows, cols, stream ? kStreamBytes : 0);
  const auto x = random_vec(size_t(cols));
  std::vector<uint8_t> xa(act_bytes(t, size_t(cols)));
  quantize_activation(t, x.data(), size_t(cols), xa.data());
  std::vector<float> y(static_cast<size_t>(rows));
  hwy::SetSupportedTargetsForTest(target);
  size_t i = 0;
  for (auto _ : state) {
    const Matrix m = w.matrix(i++);
    if (simd) quant_dot_rows(t, m.data, size_t(cols), xa.data(), y.data(), size_t(rows));
    else quant_dot_rows_scalar(t, m.data, size_t(cols), xa.data(), y.data(), size_t(rows));
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  hwy::SetSupportedTargetsForTest(0);
  state.counters["bytes/s"] = benchmark::Counter(double(w.bytes()) * state.iterations(),
                                                 benchmark::Counter::kIsRate, benchmark::Counter::kIs1024);
}

const struct { int64_t rows, cols; } kMatvecShapes[] = {
    {576, 576}, {1536, 576}, {32000, 576}, {2048, 2048}, {5632, 2048}, {32000, 2048}};
const struct { int64_t rows, cols; } kMatmulSmallShapes[] = {{1536, 576}, {576, 1536}, {2048, 2048}, {5632, 2048}};
constexpr DType kTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0};

// {threads, prefetch bytes}: 1 and 2 threads, prefetch off and at t's default (if on).
void matvec_args(benchmark::internal::Benchmark* b, DType t) {
  const int64_t def = int64_t(t == DType::Q8_0 ? detail::kDefaultMatvecPrefetchBytesQ8 : detail::kDefaultMatvecPrefetchBytes);
  for (int64_t threads : {1, 2}) {
    b->Args({threads, 0});
    if (def != 0) b->Args({threads, def});
  }
}

// One matvec input quantized as the weights of type t take it (Q8_0, Q8_1,
// Q8_K blocks), from L1: values/s.
void BM_quantize_activation(benchmark::State& state, DType t, int64_t cols) {
  std::mt19937 g(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(cols));
  for (float& v : x) v = normal(g);
  std::vector<uint8_t> out(act_bytes(t, static_cast<size_t>(cols)));
  for (auto _ : state) {
    quantize_activation(t, x.data(), static_cast<size_t>(cols), out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["values/s"] = benchmark::Counter(double(cols) * double(state.iterations()), benchmark::Counter::kIsRate);
}

// Prefetch distances to tune kDefaultMatvecPrefetchBytes with.
void prefetch_sweep_args(benchmark::internal::Benchmark* b) {
  for (int64_t threads : {1, 2}) {
    for (int64_t pf : {0, 512, 1024, 2048, 4096, 8192}) b->Args({threads, pf});
  }
}

int register_all() {
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q4_K}) {
    benchmark::RegisterBenchmark(("quantize_activation/" + std::string(dtype_name(t)) + "/2048").c_str(),
                                 BM_quantize_activation, t, 2048);
  }
  // ggml block types (kernels/quant/vec_dot): decode matvec rows, bytes/s of
  // their weights, on the 1.1B model's FFN shapes (gate/up, down) and its output.
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K, DType::Q4_K,
                  DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS}) {
    for (const auto& s : {kMatvecShapes[4], {2048, 5632}, kMatvecShapes[5]}) {
      const std::string shape = std::to_string(s.rows) + "x" + std::to_string(s.cols);
      benchmark::RegisterBenchmark(("matvec/" + std::string(dtype_name(t)) + "/" + shape).c_str(), BM_matvec, t,
                                   s.rows, s.cols, false, detail::q8_matvec_mode())
          ->Args({1, 0})->Args({2, 0})->UseRealTime();
    }
    // The 143M model's FFN gate/up: 576 columns are no multiple of 256, so its
    // K-quant presets store these tensors in the 32-value types.
    if (dtype_info(t).block_values == 32) {
      benchmark::RegisterBenchmark(("matvec/" + std::string(dtype_name(t)) + "/1536x576").c_str(), BM_matvec, t, 1536,
                                   576, false, detail::q8_matvec_mode())
          ->Args({1, 0})->Args({2, 0})->UseRealTime();
    }
    // The same shapes as row groups (rows interleaved 16 at a time), and at
    // 1536x576 both with the matrix in cache (_hot: one copy, in L2; also 256x2048).
    if (row_groups_layout(t)) {
      // In cache: 1536 rows of 576 columns (the K-quants: 512), in L2.
      const int64_t hot_cols = dtype_row_ok(t, 576) ? 576 : 512;
      for (const auto& s : {kMatvecShapes[4], {2048, 5632}, {1536, hot_cols}}) {
        const std::string shape = std::to_string(s.rows) + "x" + std::to_string(s.cols);
        benchmark::RegisterBenchmark(("matvec_row_groups/" + std::string(dtype_name(t)) + "/" + shape).c_str(),
                                     BM_matvec_row_groups, t, s.rows, s.cols, false)
            ->Arg(1)->Arg(2)->UseRealTime();
      }
      const std::string name = std::string(dtype_name(t)) + "/1536x" + std::to_string(hot_cols);
      benchmark::RegisterBenchmark(("matvec_hot/" + name).c_str(), BM_matvec_hot, t, 1536, hot_cols)
          ->Args({1, 0})->Args({2, 0})->UseRealTime();
      // Long rows in L2 (under 600 KB for every type): the kernel's own
      // speed, its per-pass setup spread over 8 super-blocks.
      benchmark::RegisterBenchmark(("matvec_hot/" + std::string(dtype_name(t)) + "/256x2048").c_str(), BM_matvec_hot,
                                   t, 256, 2048)
          ->Args({1, 0})->UseRealTime();
      benchmark::RegisterBenchmark(("matvec_row_groups_hot/" + name).c_str(), BM_matvec_row_groups, t, 1536, hot_cols, true)
          ->Arg(1)->Arg(2)->UseRealTime();
    }
    // Batches: prefill-sized and batched decode (the integer block GEMM where
    // the CPU has AVX-512 VNNI: its packed-weight kernel, and its 4x4 tile
    // kernel as matmul_vnni_tile), against the decoded-tile paths (oneDNN f32,
    // the small-batch kernel's bf16) and one matvec per input.
    const auto& s = kMatvecShapes[4];
    const std::string shape = std::to_string(s.rows) + "x" + std::to_string(s.cols);
    for (int mode : {0, 6, 5, 4}) {
      benchmark::RegisterBenchmark(((mode == 0   ? "matmul/"
                                     : mode == 6 ? "matmul_vnni_tile/"
                                     : mode == 5 ? "matmul_tiles/"
                                                 : "matmul_per_input/") +
                                    std::string(dtype_name(t)) + "/" + shape).c_str(),
                                   BM_matmul, t, s.rows, s.cols, mode, false)
          ->Args({16, 2})->Args({512, 2})->UseRealTime();
    }
    // The inputs-in-lanes kernel's batches on the packed kernel, to compare.
    benchmark::RegisterBenchmark(("matmul_nolanes/" + std::string(dtype_name(t)) + "/" + shape).c_str(), BM_matmul, t,
                                 s.rows, s.cols, 8, false)
        ->Args({16, 2})->Args({512, 2})->UseRealTime();
    if (quant_gemm_amx_usable()) {
      // On AMX-INT8 CPUs matmul/ runs the AMX int8 kernel from 16 inputs:
      // the same calls on the VNNI kernels, to compare.
      benchmark::RegisterBenchmark(("matmul_noamx/" + std::string(dtype_name(t)) + "/" + shape).c_str(), BM_matmul, t,
                                   s.rows, s.cols, 10, false)
          ->Args({16, 2})->Args({512, 2})->UseRealTime();
    }
    // Batched decodes of 8, 12 and 16 sequences on the 143M model's FFN down
    // (576 rows of 1536: its K-quant tensors in Q4_K_M), where the lanes
    // kernel starts to pay (kQuantGemmLanesMinInputs, ...MinInputsK).
    for (int mode : {0, 8}) {
      benchmark::RegisterBenchmark(((mode == 0 ? "matmul/" : "matmul_nolanes/") + std::string(dtype_name(t)) + "/576x1536").c_str(),
                                   BM_matmul, t, 576, 1536, mode, false)
          ->Args({8, 2})->Args({12, 2})->Args({16, 2})->UseRealTime();
    }
    // The same on short rows (2048x768).
    for (int mode : {0, 6, 5, 8}) {
      benchmark::RegisterBenchmark(((mode == 0   ? "matmul/"
                                     : mode == 6 ? "matmul_vnni_tile/"
                                     : mode == 8 ? "matmul_nolanes/"
                                                 : "matmul_tiles/") +
                                    std::string(dtype_name(t)) + "/2048x768").c_str(),
                                   BM_matmul, t, 2048, 768, mode, false)
          ->Args({16, 1})->Args({16, 2})->UseRealTime();
    }
    if (row_groups_layout(t)) {
      benchmark::RegisterBenchmark(("matmul_row_groups/" + std::string(dtype_name(t)) + "/" + shape).c_str(),
                                   BM_matmul_row_groups, t, s.rows, s.cols, false)
          ->Args({16, 2})->Args({512, 2})->UseRealTime();
      benchmark::RegisterBenchmark(("matmul_row_groups/" + std::string(dtype_name(t)) + "/2048x768").c_str(),
                                   BM_matmul_row_groups, t, 2048, 768, false)
          ->Args({16, 1})->Args({16, 2})->UseRealTime();
      // 143M's attention and FFN gate / up shapes (Q5_0 and Q8_0 in Q4_K_M:
      // 576 columns), from cache and from DRAM as in a model's step.
      for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{576, 576}, {1536, 576}}) {
        for (bool stream : {false, true}) {
          if (dtype_block_values(t) != 32) continue;  // 576 columns take no super-blocks
          benchmark::RegisterBenchmark((std::string(stream ? "matmul_row_groups_stream/" : "matmul_row_groups/") + dtype_name(t) + "/" +
                                        std::to_string(rows) + "x" + std::to_string(cols)).c_str(),
                                       BM_matmul_row_groups, t, rows, cols, stream)
              ->Args({16, 2})->UseRealTime();
        }
      }
    }
    if (t == DType::Q4_0 || t == DType::Q4_K) {
      auto* b = benchmark::RegisterBenchmark(("matmul_small_stream/" + std::string(dtype_name(t)) + "/" + shape).c_str(),
                                             BM_matmul, t, s.rows, s.cols, 0, true);
      for (int64_t M : {2, 4, 8, 16}) b->Args({M, 2});
      b->UseRealTime();
    }
    // Speculative decoding's verify pass: 1 + k inputs against the weights
    // from DRAM, the way the batch takes it (matmul), without the few-input
    // pass (verify_stream_nofew: the packed kernel from 3 inputs) and one
    // matvec per input; k = 0 is the decode step.
    if (t == DType::Q4_0 || t == DType::Q4_K || t == DType::Q6_K) {
      for (int mode : {0, 9, 4}) {
        auto* b = benchmark::RegisterBenchmark(((mode == 0   ? "verify_stream/"
                                                 : mode == 9 ? "verify_stream_nofew/"
                                                             : "verify_stream_per_input/") +
                                                std::string(dtype_name(t)) + "/" + shape).c_str(),
                                               BM_matmul, t, s.rows, s.cols, mode, true);
        for (int64_t M = 1; M <= 12; ++M) b->Args({M, 1})->Args({M, 2});
        b->UseRealTime();
      }
    }
  }
  // Row kernels per SIMD target, in L2 (256x2048) and from DRAM (5632x2048);
  // on AVX2 also its scalar kernels, the baseline.
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K, DType::Q4_K,
                  DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS}) {
    for (bool stream : {false, true}) {
      const int64_t rows = stream ? 5632 : 256, cols = 2048;
      const std::string shape = std::to_string(rows) + "x" + std::to_string(cols);
      // The targets under QKV_ISA's cap (hwy::SupportedAndGeneratedTargets
      // would re-choose the dispatch target from all the CPU's, cap ignored,
      // for every benchmark after it: kernels/machine/isa_cap.h).
      for (const int64_t target : {int64_t{HWY_AVX2}, int64_t{HWY_AVX3}, int64_t{HWY_AVX3_DL}}) {
        if ((supported_simd_targets() & HWY_TARGETS & target) == 0) continue;
        for (bool simd : {false, true}) {
          if (!simd && target != HWY_AVX2) continue;
          const std::string name = std::string(stream ? "quant_rows_stream/" : "quant_rows/") + dtype_name(t) + "/" +
                                   shape + "/" + hwy::TargetName(target) + (simd ? "" : "_scalar");
          // One thread: rates per CPU second, steadier than real time on a shared machine.
          benchmark::RegisterBenchmark(name.c_str(), BM_quant_rows, t, rows, cols, target, simd, stream);
        }
      }
    }
  }
  for (DType t : kTypes) {
    for (const auto& s : kMatvecShapes) {
      const std::string shape = std::to_string(s.rows) + "x" + std::to_string(s.cols);
      matvec_args(benchmark::RegisterBenchmark(("matvec/" + std::string(dtype_name(t)) + "/" + shape).c_str(),
                                               BM_matvec, t, s.rows, s.cols, false, detail::q8_matvec_mode())
                      ->UseRealTime(),
                  t);
      if (t == DType::F16 || t == DType::Q8_0) {
        benchmark::RegisterBenchmark(("matvec_pf_sweep/" + std::string(dtype_name(t)) + "/" + shape).c_str(),
                                     BM_matvec, t, s.rows, s.cols, false, detail::q8_matvec_mode())
            ->Apply(prefetch_sweep_args)->UseRealTime();
      }
      if (t == DType::Q8_0) {
        // Both Q8_0 strategies: integer dot products with quantized x, and
        // dequantizing the weights to f32 in registers.
        for (auto mode : {detail::Q8Dot::kInt8, detail::Q8Dot::kDequantF32}) {
          matvec_args(benchmark::RegisterBenchmark(
                          ("matvec_q8_" + std::string(mode == detail::Q8Dot::kInt8 ? "int8" : "deq") + "/" + shape)
                              .c_str(),
                          BM_matvec, t, s.rows, s.cols, false, mode)
                          ->UseRealTime(),
                      t);
        }
      }
      if (s.rows * s.cols <= 2048 * 2048) {
        benchmark::RegisterBenchmark(("naive_matvec/" + std::string(dtype_name(t)) + "/" + shape).c_str(),
                                     BM_matvec, t, s.rows, s.cols, true, detail::q8_matvec_mode())
            ->Args({1, 0})->UseRealTime();
      }
    }
    // Small batches (batched decode, kernels/matmul_small/) on the 143M
    // model's 576-wide shapes (gate/up, down) and the 1.1B's, from L3 and streamed.
    for (const auto& s : kMatmulSmallShapes) {
      const std::string shape = std::to_string(s.rows) + "x" + std::to_string(s.cols);
      for (bool stream : {false, true}) {
        auto* b = benchmark::RegisterBenchmark(
            ((stream ? "matmul_small_stream/" : "matmul_small/") + std::string(dtype_name(t)) + "/" + shape).c_str(),
            BM_matmul, t, s.rows, s.cols, 0, stream);
        for (int64_t M : {2, 4, 8, 16}) b->Args({M, 2});
        b->Args({16, 1});  // how the batched decode's main cost scales with threads
        b->UseRealTime();
        if (t != DType::F32 && detail::matmul_small_precision(t) == detail::GemmPrecision::kBF16) {
          // The f32 path on the same calls: on CPUs whose bf16 dot products
          // run below twice the f32 FMA rate it can be the faster one.
          benchmark::RegisterBenchmark(((stream ? "matmul_small_stream_f32/" : "matmul_small_f32/") +
                                        std::string(dtype_name(t)) + "/" + shape).c_str(),
                                       BM_matmul, t, s.rows, s.cols, 7, stream)
              ->Args({4, 2})->Args({16, 2})->Args({16, 1})->UseRealTime();
        }
        if (t != DType::F32 && detail::matmul_small_uses_amx()) {
          // On AMX CPUs, the same calls on the AVX512_BF16 kernel, to compare.
          benchmark::RegisterBenchmark(((stream ? "matmul_small_stream_noamx/" : "matmul_small_noamx/") +
                                        std::string(dtype_name(t)) + "/" + shape).c_str(),
                                       BM_matmul, t, s.rows, s.cols, 3, stream)
              ->Args({2, 2})->Args({4, 2})->Args({8, 2})->Args({16, 2})->Args({16, 1})->UseRealTime();
        }
      }
    }
    // The 143M model's FFN shapes (short rows: per-tile costs show) and the 1.1B model's.
    for (const auto& s : kMatmulSmallShapes) {
      const std::string shape = std::to_string(s.rows) + "x" + std::to_string(s.cols);
      auto* b = benchmark::RegisterBenchmark(("matmul/" + std::string(dtype_name(t)) + "/" + shape).c_str(),
                                             BM_matmul, t, s.rows, s.cols, 0, false);
      for (int64_t M : {1, 4, 16, 64, 256, 512}) b->Args({M, 2});
      b->UseRealTime();
      {
        // The two oneDNN precisions side by side (F32 weights always run in f32).
        for (int mode : t == DType::F32 ? std::vector<int>{1} : std::vector<int>{1, 2}) {
          auto* o = benchmark::RegisterBenchmark(
              ("onednn_" + std::string(mode == 1 ? "f32" : "bf16") + "/" + dtype_name(t) + "/" + shape).c_str(),
              BM_matmul, t, s.rows, s.cols, mode, false);
          for (int64_t M : {8, 16, 64, 512}) o->Args({M, 2});
          o->UseRealTime();
        }
      }
    }
  }
  return 0;
}

const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();

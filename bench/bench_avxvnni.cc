// The AVX-VNNI block kernels (kernels/quant/vec_dot_avxvnni.h) against the
// Highway AVX2 kernels they replace on client x86, one thread, weights in L2
// (256 rows of 2048), bytes/s of weights per CPU second:
//   avxvnni_rows/TYPE/OP        the matvec with the op (vex: the instruction,
//                               skipped without AVX-VNNI; emulated: its AVX2 emulation)
//   hwy_avx2_rows/TYPE          quant_dot_rows with the dispatch forced to AVX2
//   avxvnni_gemm/TYPE/OP/M      the GEMM on rows, M inputs
//   hwy_avx2_gemm/TYPE/M        quant_gemm (no tables) forced to AVX2
// The emulated op costs more than vpmaddubsw: its figures check the kernel's
// structure only and say nothing of AVX-VNNI's speed. On the 2-core Zen 4
// guest (no AVX-VNNI; load average 8-11 from other work; medians of 3, one
// run), emulated against Highway AVX2 in GB/s of weights: matvec Q4_0 10.9
// / 17.5, Q4_K 14.3 / 21.4, Q6_K 17.1 / 22.2, Q3_K 9.0 / 11.0, IQ4_XS 9.3 /
// 15.6, Q8_0 26.2 / 1.1 (AVX2 has no Q8_0 matvec: scalar); GEMM of 4 inputs
// Q4_0 3.5 / 5.4, Q4_K 3.0 / 5.3, Q6_K 4.4 / 6.3.
//   bench_avxvnni --benchmark_filter='q4_k' --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "kernels/dtype.h"
#include "kernels/quant/vec_dot.h"
#include "kernels/quant/vec_dot_avxvnni.h"

using namespace qkv;

namespace {

constexpr size_t kRows = 256, kCols = 2048;

struct Problem {
  std::vector<uint8_t> w, xa;
  size_t ab = 0;
};

// Random weight bytes with finite f16 scales (0.01 at every block's scale
// field), and M quantized random inputs.
Problem make_problem(DType t, size_t M) {
  std::mt19937 g(7);
  Problem p;
  p.w.resize(kRows * dtype_row_bytes(t, kCols));
  for (auto& b : p.w) b = static_cast<uint8_t>(g());
  const size_t bb = dtype_block_bytes(t);
  const size_t d_at = t == DType::Q2_K ? 80 : t == DType::Q3_K ? 108 : t == DType::Q6_K ? 208 : 0;
  const uint16_t d = f32_to_f16(0.01f);
  for (size_t off = 0; off < p.w.size(); off += bb) {
    std::memcpy(p.w.data() + off + d_at, &d, 2);
    if (t != DType::Q3_K && t != DType::Q6_K && t != DType::Q8_0 && t != DType::Q4_0 && t != DType::Q5_0 &&
        t != DType::IQ4_NL && t != DType::IQ4_XS) {
      std::memcpy(p.w.data() + off + d_at + 2, &d, 2);  // the min / dmin
    }
  }
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(kCols);
  p.ab = act_bytes(t, kCols);
  p.xa.resize(p.ab * M);
  for (size_t m = 0; m < M; ++m) {
    for (auto& v : x) v = nd(g);
    quantize_activation(t, x.data(), kCols, p.xa.data() + m * p.ab);
  }
  return p;
}

void set_bytes(benchmark::State& state, const Problem& p) {
  state.counters["bytes/s"] = benchmark::Counter(double(p.w.size()) * state.iterations(), benchmark::Counter::kIsRate,
                                                 benchmark::Counter::kIs1024);
}

bool skip_without(benchmark::State& state, AvxVnniOp op) {
  if (avxvnni_op_runs(op)) return false;
  state.SkipWithError(op == AvxVnniOp::kVex ? "no AVX-VNNI on this CPU" : "no AVX2 on this CPU");
  return true;
}

void BM_avxvnni_rows(benchmark::State& state, DType t, AvxVnniOp op) {
  if (skip_without(state, op)) return;
  const Problem p = make_problem(t, 1);
  std::vector<float> y(kRows);
  for (auto _ : state) {
    avxvnni_dot_rows(t, p.w.data(), kCols, p.xa.data(), y.data(), kRows, op);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state, p);
}

void BM_avxvnni_gemm(benchmark::State& state, DType t, AvxVnniOp op) {
  if (skip_without(state, op)) return;
  const size_t M = static_cast<size_t>(state.range(0));
  const Problem p = make_problem(t, M);
  std::vector<float> y(kRows * M);
  for (auto _ : state) {
    avxvnni_gemm(t, p.w.data(), kCols, p.xa.data(), M, y.data(), kRows, kRows, op);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state, p);
}

// The Highway AVX2 kernels, where this CPU has the target (and the AVX-VNNI
// path is not taken: on AVX-VNNI CPUs quant_dot_rows would run it instead).
bool skip_without_avx2(benchmark::State& state, DType t) {
  if ((hwy::SupportedTargets() & HWY_AVX2) == 0) {
    state.SkipWithError("no AVX2 target here");
    return true;
  }
  if (avxvnni_takes(t)) {
    state.SkipWithError("quant_dot_rows takes the AVX-VNNI kernel here");
    return true;
  }
  return false;
}

void BM_hwy_avx2_rows(benchmark::State& state, DType t) {
  if (skip_without_avx2(state, t)) return;
  const Problem p = make_problem(t, 1);
  std::vector<float> y(kRows);
  hwy::SetSupportedTargetsForTest(HWY_AVX2);
  for (auto _ : state) {
    quant_dot_rows(t, p.w.data(), kCols, p.xa.data(), y.data(), kRows);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  hwy::SetSupportedTargetsForTest(0);
  set_bytes(state, p);
}

void BM_hwy_avx2_gemm(benchmark::State& state, DType t) {
  if (skip_without_avx2(state, t)) return;
  const size_t M = static_cast<size_t>(state.range(0));
  const Problem p = make_problem(t, M);
  std::vector<float> y(kRows * M);
  hwy::SetSupportedTargetsForTest(HWY_AVX2);
  for (auto _ : state) {
    quant_gemm(t, p.w.data(), kCols, p.xa.data(), M, y.data(), kRows, kRows);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  hwy::SetSupportedTargetsForTest(0);
  set_bytes(state, p);
}

const bool kRegistered = [] {
  const struct {
    AvxVnniOp op;
    const char* name;
  } ops[] = {{AvxVnniOp::kVex, "vex"}, {AvxVnniOp::kEmulated, "emulated"}};
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::IQ4_NL, DType::Q4_K, DType::Q5_K,
                  DType::Q6_K, DType::Q2_K, DType::Q3_K, DType::IQ4_XS}) {
    const std::string type = dtype_name(t);
    for (const auto& op : ops) {
      benchmark::RegisterBenchmark(("avxvnni_rows/" + type + "/" + op.name).c_str(), BM_avxvnni_rows, t, op.op);
      benchmark::RegisterBenchmark(("avxvnni_gemm/" + type + "/" + op.name).c_str(), BM_avxvnni_gemm, t, op.op)
          ->Arg(4)->Arg(16);
    }
    benchmark::RegisterBenchmark(("hwy_avx2_rows/" + type).c_str(), BM_hwy_avx2_rows, t);
    benchmark::RegisterBenchmark(("hwy_avx2_gemm/" + type).c_str(), BM_hwy_avx2_gemm, t)->Arg(4)->Arg(16);
  }
  return true;
}();

}  // namespace

BENCHMARK_MAIN();

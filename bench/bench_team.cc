// What a thread team's synchronisation costs (kernels/threads/team.h) from 1
// thread up to 4x this 2-core machine's cores: one sync (a barrier over a
// shared arrival counter), and the syncs of one decode step (the count a real
// step of each synthetic shape makes, run back to back in one team, as the
// step runs them between its kernels) beside that real step.
// docs/design.md ("Many cores and NUMA") quotes these figures.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <chrono>
#include <map>
#include <string>

#include "kernels/threads/team.h"
#include "runtime/decoder.h"
#include "runtime/synthetic.h"

namespace {

// Time per sync: each iteration times 1000 syncs in one team.
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

// A synthetic model (F16) and a decoder stepping one sequence, made once per shape.
struct Stepper {
  qkv::Model model;
  qkv::Decoder decoder;
  int32_t token = 1;
  explicit Stepper(const std::string& shape, int64_t context)
      : model(qkv::make_synthetic_model(qkv::synthetic_preset(shape), qkv::DType::F16)),
        decoder(model, [&] {
          qkv::DecoderOptions o;
          o.context = context;
          return o;
        }()) {}
  // One decode step (the cache restarts when full).
  void step() {
    if (decoder.position(0) + 1 >= decoder.context()) decoder.cache().clear(0);
    token = static_cast<int32_t>((token * 7 + 3) % model.config.vocab_size);
    benchmark::DoNotOptimize(decoder.step(0, token));
  }
};

Stepper& stepper(const std::string& shape) {
  static std::map<std::string, std::unique_ptr<Stepper>> made;
  auto& s = made[shape];
  if (!s) s = std::make_unique<Stepper>(shape, 256);
  return *s;
}

const char* shape_of(int64_t i) { return i == 0 ? "tiny" : "143M"; }

// A real decode step on `threads` threads; its counter "syncs" is the number
// of team syncs the step made.
void BM_decode_step(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(1));
  Stepper& s = stepper(shape_of(state.range(0)));
  omp_set_num_threads(threads);
  s.step();  // the team's threads exist before timing
  const uint64_t before = qkv::syncs_by_this_thread();
  s.step();
  const double syncs = static_cast<double>(qkv::syncs_by_this_thread() - before);
  for (auto _ : state) s.step();
  state.counters["syncs"] = syncs;
  state.SetLabel(shape_of(state.range(0)));
}

// The syncs alone of one decode step of the shape: one team running as many
// syncs back to back as the real step makes.
void BM_decode_step_syncs(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(1));
  Stepper& s = stepper(shape_of(state.range(0)));
  omp_set_num_threads(threads);
  const uint64_t before = qkv::syncs_by_this_thread();
  s.step();
  const auto syncs = static_cast<int64_t>(qkv::syncs_by_this_thread() - before);
  for (auto _ : state) {
    qkv::run_team(threads, [&] {
      for (int64_t i = 0; i < syncs; ++i) qkv::current_team()->sync();
    });
  }
  state.counters["syncs"] = static_cast<double>(syncs);
  state.SetLabel(shape_of(state.range(0)));
}

}  // namespace

BENCHMARK(BM_team_sync)->Arg(1)->Arg(2)->Arg(4)->Arg(8)->UseManualTime()->Iterations(300);
BENCHMARK(BM_decode_step)->ArgsProduct({{0, 1}, {1, 2, 4, 8}})->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_decode_step_syncs)->ArgsProduct({{0, 1}, {1, 2, 4, 8}})->UseRealTime()->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();

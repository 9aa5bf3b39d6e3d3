// qkv bench --verify-cost: the time of the target pass speculative decoding
// verifies k drafted tokens with (Decoder::prefill_all_logits over k + 1
// positions, every position's logits) against one decode step
// (Decoder::step), k = 1 .. max-k, at a fixed depth of context. Each
// repetition times a step and a verify pass back to back and truncates the
// cache to the depth again, so both see the same context and the same load;
// the ratio is of the two medians per k.
#include "tools/bench/bench_verify.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/error.h"
#include "kernels/threads/cores.h"
#include "runtime/decoder.h"
#include "runtime/model.h"
#include "runtime/model_loader.h"
#include "runtime/synthetic.h"
#include "tools/args.h"

namespace qkv::tools {

namespace {

const char* kVerifyUsage =
    "usage: qkv bench --verify-cost [-m MODEL | --synthetic NAME [--type T]] [options]\n"
    "  -m, --model PATH   GGUF file or llama2.c checkpoint\n"
    "  --synthetic NAME   random weights of a real shape: tiny, 143M, 1.1B (default 1.1B)\n"
    "  --type T           synthetic weights: a type or a llama-quantize preset (default q4_k_m)\n"
    "  --depth N          positions of context before the timed passes (default 128)\n"
    "  --max-k N          drafted tokens verified, 1 .. N (default 16, at most 64)\n"
    "  --reps N           timed repetitions per k (default 5; the median counts)\n"
    "  --kv-type T        KV cache type: f32, f16 (default), bf16, q8_0\n"
    "  -t, --threads N    threads (default: one per physical core)\n";

struct VerifyOptions {
  std::string model_path, synthetic = "1.1B";
  WeightFormat format;
  DType kv_type = DType::F16;
  int64_t depth = 128, max_k = 16;
  int reps = 5, threads = 0;
};

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double load_average_now() {
  double l[1];
  return getloadavg(l, 1) == 1 ? l[0] : -1;
}

}  // namespace

int cmd_bench_verify(int argc, char** argv) {
  VerifyOptions o;
  parse_weight_format("q4_k_m", &o.format);
  bool synthetic_given = false;
  for (int i = 1; i < argc; ++i) {
    const char* flag = argv[i];
    const std::string a = flag;
    if (a == "--verify-cost") {
      continue;
    } else if (a == "-h" || a == "--help") {
      std::printf("%s", kVerifyUsage);
      return 0;
    } else if (a == "-m" || a == "--model") {
      o.model_path = flag_value(argc, argv, i);
    } else if (a == "--synthetic") {
      o.synthetic = flag_value(argc, argv, i);
      synthetic_given = true;
    } else if (a == "--type") {
      o.format = parse_weight_format_flag(flag, flag_value(argc, argv, i));
      synthetic_given = true;
    } else if (a == "--depth") {
      o.depth = parse_int(flag, flag_value(argc, argv, i), 1, 1 << 20);
    } else if (a == "--max-k") {
      o.max_k = parse_int(flag, flag_value(argc, argv, i), 1, 64);
    } else if (a == "--reps") {
      o.reps = static_cast<int>(parse_int(flag, flag_value(argc, argv, i), 1, 1000));
    } else if (a == "--kv-type") {
      const char* v = flag_value(argc, argv, i);
      if (!parse_dtype(v, &o.kv_type)) fail("flag ", flag, " wants f32, f16, bf16 or q8_0, not '", v, "'");
    } else if (a == "-t" || a == "--threads") {
      o.threads = static_cast<int>(parse_int(flag, flag_value(argc, argv, i), 1, 1024));
    } else {
      std::fprintf(stderr, "qkv bench --verify-cost: unknown flag '%s'\n\n%s", flag, kVerifyUsage);
      return 2;
    }
  }
  if (!o.model_path.empty() && synthetic_given) {
    std::fprintf(stderr, "qkv bench --verify-cost: -m MODEL and --synthetic/--type exclude each other\n");
    return 2;
  }
  omp_set_num_threads(threads_or_default(o.threads));

  Model model;
  std::string name;
  if (!o.model_path.empty()) {
    model = load_model(o.model_path);
    name = o.model_path.substr(o.model_path.find_last_of('/') + 1);
  } else {
    model = make_synthetic_model(synthetic_preset(o.synthetic), o.format);
    name = o.synthetic + " (synthetic) " + weight_format_name(o.format);
  }
  lay_out_weights(model);
  const ModelConfig& c = model.config;
  QKV_CHECK(o.depth + o.max_k + 1 <= c.context_length, "--depth ", o.depth, " plus ", o.max_k + 1,
            " verified positions exceed the model's context of ", c.context_length);
  DecoderOptions dopts;
  dopts.kv_type = o.kv_type;
  dopts.context = o.depth + o.max_k + 1;
  Decoder dec(model, dopts);
  dec.prepare_prefill();

  std::vector<int32_t> tokens(static_cast<size_t>(o.depth + o.max_k + 1));
  uint64_t s = 0x243f6a8885a308d3ull;
  for (int32_t& t : tokens) t = static_cast<int32_t>((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 33) %
                                static_cast<int32_t>(c.vocab_size);
  dec.prefill(0, tokens.data(), o.depth);
  const int32_t* drafted = tokens.data() + o.depth;
  std::vector<float> logits(static_cast<size_t>((o.max_k + 1) * c.vocab_size));

  const double load_start = load_average_now();
  std::printf("qkv bench --verify-cost: %s, %d threads, kv %s, depth %lld, median of %d\n", name.c_str(),
              omp_get_max_threads(), dtype_name(o.kv_type), static_cast<long long>(o.depth), o.reps);
  std::printf("%4s %9s %12s %10s %8s\n", "k", "positions", "verify ms", "step ms", "ratio");
  for (int64_t k = 1; k <= o.max_k; ++k) {
    std::vector<double> step_ms, verify_ms;
    for (int r = -1; r < o.reps; ++r) {  // r = -1: warm-up
      auto t0 = std::chrono::steady_clock::now();
      dec.step(0, drafted[0]);
      const double st = ms_since(t0);
      dec.cache().truncate(0, o.depth);
      t0 = std::chrono::steady_clock::now();
      dec.prefill_all_logits(0, drafted, k + 1, logits.data());
      const double vt = ms_since(t0);
      dec.cache().truncate(0, o.depth);
      if (r < 0) continue;
      step_ms.push_back(st);
      verify_ms.push_back(vt);
    }
    const double v = median(verify_ms), st = median(step_ms);
    std::printf("%4lld %9lld %12.2f %10.2f %8.2f\n", static_cast<long long>(k), static_cast<long long>(k + 1), v, st,
                v / st);
    std::fflush(stdout);
  }
  std::printf("load average (1 min): %.2f at the start, %.2f at the end\n", load_start, load_average_now());
  return 0;
}

}  // namespace qkv::tools

// qkv run: load a model, generate from a prompt, stream the text to stdout and
// llama.cpp-style timings to stderr. A client of the public C API only.
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "qkv.h"
#include "tools/args.h"
#include "tools/commands.h"

namespace qkv::tools {

namespace {

const char* kRunUsage =
    "usage: qkv run -m MODEL [-z TOKENIZER] [-p PROMPT] [options]\n"
    "  -m, --model PATH      GGUF file or llama2.c checkpoint\n"
    "  -z, --tokenizer PATH  llama2.c tokenizer.bin (needed for llama2.c checkpoints)\n"
    "  -p, -i, --prompt TEXT prompt (default: empty, BOS only)\n"
    "  -n, --n-predict N     new tokens to generate, like llama.cpp (default: until EOS or full context)\n"
    "  --steps N             total positions incl. BOS and prompt, like llama2.c's -n\n"
    "  -t, --threads N       threads (default: all cores)\n"
    "  --temp T              temperature; 0 is greedy (default 0.8)\n"
    "  --top-k K             (default 40; 0 off)   --top-p P (default 0.95; 1 off)\n"
    "  --min-p P             (default 0.05; 0 off) --seed S  (default: from the clock)\n"
    "  --repeat-penalty R    divide repeated tokens' positive logits by R (default 1, off)\n"
    "  --repeat-last-n N     tokens the penalties look back over (default 64; 0 off, -1 all)\n"
    "  --presence-penalty P  subtract P from tokens already present (default 0)\n"
    "  --frequency-penalty F subtract F per occurrence (default 0)\n"
    "  -r, --reverse-prompt S stop before the text S (repeatable; S is never printed)\n"
    "  -c, --ctx-size N      context positions (default: the model's)\n"
    "  --kv-type T           KV cache type: f32, f16 (default), bf16, q8_0\n"
    "  -b, --batch-size N    prompt tokens per prefill batch (default 256)\n"
    "  --no-bos              do not prepend BOS (by default as the vocabulary's add_bos_token says)\n"
    "  --special             control tokens written in the prompt (<|im_start|>) become their ids\n"
    "  -q, --quiet           no timings on stderr\n";

int write_piece(const char* piece, size_t length, void*) {
  std::fwrite(piece, 1, length, stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace

int cmd_run(int argc, char** argv) {
  std::string model_path, tokenizer_path, prompt;
  qkv_context_options copts;
  qkv_context_options_init(&copts);
  qkv_generate_options gopts;
  qkv_generate_options_init(&gopts);
  bool seed_given = false, quiet = false;
  std::vector<std::string> stops;

  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kRunUsage, stdout);
      return 0;
    } else if (a == "-m" || a == "--model") {
      model_path = flag_value(argc, argv, i);
    } else if (a == "-z" || a == "--tokenizer") {
      tokenizer_path = flag_value(argc, argv, i);
    } else if (a == "-p" || a == "-i" || a == "--prompt") {
      prompt = flag_value(argc, argv, i);
    } else if (a == "-n" || a == "--n-predict") {
      gopts.n_predict = parse_int(a.c_str(), flag_value(argc, argv, i), -1, INT64_C(1) << 40);
    } else if (a == "--steps") {
      gopts.steps = parse_int(a.c_str(), flag_value(argc, argv, i), 1, INT64_C(1) << 40);
    } else if (a == "-t" || a == "--threads") {
      copts.threads = static_cast<int>(parse_int(a.c_str(), flag_value(argc, argv, i), 1, 1024));
    } else if (a == "--temp") {
      gopts.sampler.temperature = parse_float(a.c_str(), flag_value(argc, argv, i), 0.0, 1e6);
    } else if (a == "--top-k") {
      gopts.sampler.top_k = static_cast<int32_t>(parse_int(a.c_str(), flag_value(argc, argv, i), 0, INT32_MAX));
    } else if (a == "--top-p") {
      gopts.sampler.top_p = parse_float(a.c_str(), flag_value(argc, argv, i), 1e-9, 1.0);
    } else if (a == "--min-p") {
      gopts.sampler.min_p = parse_float(a.c_str(), flag_value(argc, argv, i), 0.0, 0.999999);
    } else if (a == "--seed") {
      gopts.sampler.seed = static_cast<uint64_t>(parse_int(a.c_str(), flag_value(argc, argv, i), 0, INT64_MAX));
      seed_given = true;
    } else if (a == "--repeat-penalty") {
      gopts.sampler.repeat_penalty = parse_float(a.c_str(), flag_value(argc, argv, i), 0.0, 1e6);
    } else if (a == "--repeat-last-n") {
      gopts.sampler.repeat_last_n = parse_int(a.c_str(), flag_value(argc, argv, i), -1, INT64_C(1) << 40);
    } else if (a == "--presence-penalty") {
      gopts.sampler.presence_penalty = parse_float(a.c_str(), flag_value(argc, argv, i), -1e6, 1e6);
    } else if (a == "--frequency-penalty") {
      gopts.sampler.frequency_penalty = parse_float(a.c_str(), flag_value(argc, argv, i), -1e6, 1e6);
    } else if (a == "-r" || a == "--reverse-prompt") {
      stops.emplace_back(flag_value(argc, argv, i));
    } else if (a == "-c" || a == "--ctx-size") {
      copts.context = parse_int(a.c_str(), flag_value(argc, argv, i), 1, INT64_C(1) << 24);
    } else if (a == "--kv-type") {
      copts.kv_type = parse_kv_type(flag_value(argc, argv, i));
    } else if (a == "-b" || a == "--batch-size") {
      copts.prefill_batch = parse_int(a.c_str(), flag_value(argc, argv, i), 1, 1 << 16);
    } else if (a == "--no-bos") {
      gopts.add_bos = 0;
    } else if (a == "--special") {
      gopts.parse_special = 1;
    } else if (a == "-q" || a == "--quiet") {
      quiet = true;
    } else {
      std::fprintf(stderr, "qkv run: unknown flag '%s'\n\n%s", argv[i], kRunUsage);
      return 2;
    }
  }
  if (model_path.empty()) {
    std::fprintf(stderr, "qkv run: -m MODEL is required\n\n%s", kRunUsage);
    return 2;
  }
  if (!seed_given) {
    gopts.sampler.seed = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  }

  std::vector<const char*> stop_ptrs;
  for (const std::string& s : stops) stop_ptrs.push_back(s.c_str());
  gopts.stop = stop_ptrs.data();
  gopts.n_stop = static_cast<int64_t>(stop_ptrs.size());

  const auto t0 = std::chrono::steady_clock::now();
  qkv_model_options mopts;
  qkv_model_options_init(&mopts);
  if (!tokenizer_path.empty()) mopts.tokenizer_path = tokenizer_path.c_str();
  qkv_model* model = nullptr;
  check(qkv_model_load(model_path.c_str(), &mopts, &model), "loading the model");
  qkv_session* session = nullptr;
  const qkv_status st = qkv_session_create(model, &copts, &session);
  if (st != QKV_OK) {
    const std::string msg = qkv_last_error();
    qkv_model_free(model);
    fail("creating the session: ", msg);
  }
  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  qkv_generate_stats stats;
  const qkv_status gen = qkv_generate(session, prompt.c_str(), &gopts, write_piece, nullptr, &stats);
  const std::string gen_error = gen == QKV_OK ? "" : qkv_last_error();
  std::printf("\n");
  std::fflush(stdout);

  if (gen == QKV_OK && !quiet) {
    auto per_second = [](int64_t n, double ms) { return ms > 0 ? 1000.0 * static_cast<double>(n) / ms : 0.0; };
    auto per_token = [](int64_t n, double ms) { return n > 0 ? ms / static_cast<double>(n) : 0.0; };
    std::fprintf(stderr, "\nqkv: load time        = %10.2f ms\n", load_ms);
    std::fprintf(stderr,
                 "qkv: prompt eval time = %10.2f ms / %5" PRId64 " tokens (%8.2f ms per token, %9.2f tokens per second)\n",
                 stats.prompt_ms, stats.prompt_tokens, per_token(stats.prompt_tokens, stats.prompt_ms),
                 per_second(stats.prompt_tokens, stats.prompt_ms));
    std::fprintf(stderr,
                 "qkv: eval time        = %10.2f ms / %5" PRId64 " tokens (%8.2f ms per token, %9.2f tokens per second)\n",
                 stats.generate_ms, stats.generated_tokens, per_token(stats.generated_tokens, stats.generate_ms),
                 per_second(stats.generated_tokens, stats.generate_ms));
    std::fprintf(stderr, "qkv: KV cache         = %10.2f MiB (%s)\n",
                 static_cast<double>(qkv_session_kv_bytes(session)) / (1024.0 * 1024.0),
                 kv_type_name(copts.kv_type));
    std::fprintf(stderr, "qkv: stopped by %s after %" PRId64 " forward passes\n", stats.stop_reason,
                 stats.forward_passes);
  }
  qkv_session_free(session);
  qkv_model_free(model);
  if (gen != QKV_OK) fail("generating: ", gen_error);
  return 0;
}

}  // namespace qkv::tools

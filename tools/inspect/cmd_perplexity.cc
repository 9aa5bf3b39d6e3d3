// qkv perplexity: perplexity and KL divergence of a model on a text, as
// llama-perplexity computes and prints them. A client of the public C API.
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <string>

#include "qkv.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "tools/models/model_ref.h"
#include "tools/thread_flags.h"

namespace qkv::tools {

namespace {

const char* kPerplexityUsage =
    "usage: qkv perplexity -m MODEL -f TEXT [options]\n"
    "  -m, --model PATH             GGUF file or llama2.c checkpoint\n"
    "  -z, --tokenizer PATH         llama2.c tokenizer.bin (needed for llama2.c checkpoints)\n"
    "  -f, --file PATH              the text (not needed with --kl-divergence: the file holds the tokens)\n"
    "  -c, --ctx-size N             tokens per chunk (default 512; with --kl-divergence the file's)\n"
    "  -b, --batch-size N           tokens per forward batch (default: n_ctx)\n"
    "  --chunks N                   evaluate at most N chunks (default: all)\n"
    "  -t, --threads N              threads (default: one per physical core)\n"
    "  --kv-type T                  KV cache type: f32, f16 (default), bf16, q8_0\n"
    "  --kl-divergence-base PATH    write the logits as llama.cpp's KL-divergence base file\n"
    "  --kl-divergence PATH         compare with a base file (llama.cpp's or qkv's): KLD, delta-p, top token;\n"
    "                               --kl-divergence-base PATH --kl-divergence (llama-perplexity's) the same\n"
    "  --json                       print the figures as JSON\n";

struct Cli {
  bool json = false;
  bool header_done = false;
  int64_t batch = 0;
  bool tty = false;
};

int on_chunk(const qkv_perplexity_stats* s, void* user) {
  Cli& cli = *static_cast<Cli*>(user);
  if (!cli.header_done) {
    cli.header_done = true;
    std::fprintf(stderr, "qkv perplexity: %" PRId64 " tokens, %" PRId64 " chunks, n_ctx=%" PRId64 ", batch=%" PRId64
                 "\n", s->text_tokens, s->n_chunks, s->n_ctx, cli.batch > 0 && cli.batch < s->n_ctx ? cli.batch : s->n_ctx);
    std::fprintf(stderr, "qkv perplexity: %.2f seconds per pass - ETA %.2f minutes\n", s->seconds,
                 s->seconds * static_cast<double>(s->n_chunks - 1) / 60.0);
    if (!cli.json && s->has_kld) {
      std::printf("\nchunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence"
                  "              Δp RMS            Same top p\n");
    }
  }
  if (cli.tty) {  // a progress line that rewrites itself
    std::fprintf(stderr, "\rqkv perplexity: chunk %" PRId64 "/%" PRId64 " (%.1f s)", s->chunk, s->n_chunks, s->seconds);
    if (s->chunk == s->n_chunks) std::fputc('\n', stderr);
  }
  if (cli.json) return 0;
  if (s->has_kld) {
    std::printf("%4" PRId64 "      %8.4f ± %9.4f    %10.5f ± %10.5f    %10.5f ± %10.5f    %6.3f ± %6.3f %%    %6.3f ± %6.3f %%\n",
                s->chunk, s->ppl, s->ppl_err, s->ln_ppl_ratio, s->ln_ppl_ratio_err, s->kld, s->kld_err,
                100 * s->dp_rms, 100 * s->dp_rms_err, 100 * s->same_top, 100 * s->same_top_err);
  } else {
    std::printf("[%" PRId64 "]%.4f,", s->chunk, s->ppl);
  }
  std::fflush(stdout);
  return 0;
}

const char* const kQuantileNames[QKV_EVAL_QUANTILES] = {"Maximum", "99.9%  ", "99.0%  ", "95.0%  ", "90.0%  ",
                                                        "75.0%  ", "Median ", "25.0%  ", "10.0%  ", " 5.0%  ",
                                                        " 1.0%  ", " 0.1%  ", "Minimum"};
const char* const kQuantileKeys[QKV_EVAL_QUANTILES] = {"max", "p99.9", "p99", "p95", "p90", "p75", "median",
                                                       "p25", "p10", "p5", "p1", "p0.1", "min"};
// llama-perplexity lists no 75% and 25% for KL divergence.
bool kld_lists(int i) { return i != 5 && i != 7; }

void print_text(const qkv_perplexity_stats& s) {
  if (!s.has_kld) {
    std::printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", s.ppl, s.ppl_err);
    return;
  }
  std::printf("\n====== Perplexity statistics ======\n");
  std::printf("Mean PPL(Q)                   : %10.6f ± %10.6f\n", s.ppl, s.ppl_err);
  std::printf("Mean PPL(base)                : %10.6f ± %10.6f\n", s.base_ppl, s.base_ppl_err);
  std::printf("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100 * s.ppl_correlation);
  std::printf("Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", s.ln_ppl_ratio, s.ln_ppl_ratio_err);
  std::printf("Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", s.ppl_ratio, s.ppl_ratio_err);
  std::printf("Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n", s.ppl_diff, s.ppl_diff_err);
  std::printf("\n====== KL divergence statistics ======\n");
  std::printf("Mean    KLD: %10.6f ± %10.6f\n", s.kld, s.kld_err);
  for (int i = 0; i < QKV_EVAL_QUANTILES && s.has_quantiles; ++i) {
    if (kld_lists(i)) std::printf("%s KLD: %10.6f\n", kQuantileNames[i], s.kld_quantiles[i]);
  }
  std::printf("\n====== Token probability statistics ======\n");
  std::printf("Mean    Δp: %6.3f ± %5.3f %%\n", 100 * s.dp_mean, 100 * s.dp_mean_err);
  for (int i = 0; i < QKV_EVAL_QUANTILES && s.has_quantiles; ++i) {
    std::printf("%s Δp: %6.3f%%\n", kQuantileNames[i], 100 * s.dp_quantiles[i]);
  }
  std::printf("RMS Δp    : %6.3f ± %5.3f %%\n", 100 * s.dp_rms, 100 * s.dp_rms_err);
  std::printf("Same top p: %6.3f ± %5.3f %%\n", 100 * s.same_top, 100 * s.same_top_err);
}

void print_json(const qkv_perplexity_stats& s, const std::string& model, qkv_type kv) {
  std::printf("{\"model\": \"%s\", \"kv_type\": \"%s\", \"n_ctx\": %" PRId64 ", \"chunks\": %" PRId64
              ", \"text_tokens\": %" PRId64 ", \"scored_tokens\": %" PRId64 ", \"seconds\": %.3f, \"ppl\": %.6f, "
              "\"ppl_err\": %.6f",
              json_escape(model).c_str(), kv_type_name(kv), s.n_ctx, s.n_chunks, s.text_tokens, s.scored_tokens,
              s.seconds, s.ppl, s.ppl_err);
  if (s.has_kld) {
    std::printf(", \"base_ppl\": %.6f, \"base_ppl_err\": %.6f, \"ppl_correlation\": %.6f, \"ln_ppl_ratio\": %.8f, "
                "\"ln_ppl_ratio_err\": %.8f, \"ppl_ratio\": %.8f, \"ppl_ratio_err\": %.8f, \"ppl_diff\": %.8f, "
                "\"ppl_diff_err\": %.8f, \"kld\": %.9g, \"kld_err\": %.9g, \"dp_mean\": %.9g, \"dp_mean_err\": %.9g, "
                "\"dp_rms\": %.9g, \"dp_rms_err\": %.9g, \"same_top\": %.9g, \"same_top_err\": %.9g",
                s.base_ppl, s.base_ppl_err, s.ppl_correlation, s.ln_ppl_ratio, s.ln_ppl_ratio_err, s.ppl_ratio,
                s.ppl_ratio_err, s.ppl_diff, s.ppl_diff_err, s.kld, s.kld_err, s.dp_mean, s.dp_mean_err, s.dp_rms,
                s.dp_rms_err, s.same_top, s.same_top_err);
    for (int which = 0; which < 2 && s.has_quantiles; ++which) {
      std::printf(", \"%s\": {", which == 0 ? "kld_quantiles" : "dp_quantiles");
      for (int i = 0; i < QKV_EVAL_QUANTILES; ++i) {
        std::printf("%s\"%s\": %.9g", i ? ", " : "", kQuantileKeys[i],
                    which == 0 ? s.kld_quantiles[i] : s.dp_quantiles[i]);
      }
      std::printf("}");
    }
  }
  std::printf("}\n");
}

}  // namespace

int cmd_perplexity(int argc, char** argv) {
  std::string model_path, tokenizer_path, text_path, kld_write, kld_read;
  bool kld_switch = false;  // --kl-divergence given without a file
  qkv_perplexity_options o;
  qkv_perplexity_options_init(&o);
  o.n_ctx = 0;
  Cli cli;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kPerplexityUsage, stdout);
      return 0;
    } else if (a == "-m" || a == "--model") {
      model_path = models::resolve_model_argument(flag_value(argc, argv, i));
    } else if (a == "-z" || a == "--tokenizer") {
      tokenizer_path = flag_value(argc, argv, i);
    } else if (a == "-f" || a == "--file") {
      text_path = flag_value(argc, argv, i);
    } else if (a == "-c" || a == "--ctx-size") {
      o.n_ctx = parse_int(a.c_str(), flag_value(argc, argv, i), 4, INT64_C(1) << 20);
    } else if (a == "-b" || a == "--batch-size") {
      o.batch = parse_int(a.c_str(), flag_value(argc, argv, i), 1, INT64_C(1) << 20);
    } else if (a == "--chunks") {
      o.chunks = parse_int(a.c_str(), flag_value(argc, argv, i), -1, INT64_C(1) << 40);
    } else if (a == "-t" || a == "--threads") {
      o.threads = static_cast<int>(parse_int(a.c_str(), flag_value(argc, argv, i), 1, 1024));
    } else if (a == "--kv-type") {  // llama.cpp's -ctk/-ctv arrive as this (tools/llama_flags.cc)
      o.kv_type = parse_kv_type(flag_value(argc, argv, i));
    } else if (a == "--kl-divergence-base") {
      kld_write = flag_value(argc, argv, i);
    } else if (a == "--kl-divergence" && !has_value(argc, argv, i)) {
      kld_switch = true;  // llama-perplexity's spelling: the base file is --kl-divergence-base's
    } else if (a == "--kl-divergence") {
      kld_read = flag_value(argc, argv, i);
    } else if (a == "--json") {
      cli.json = true;
    } else {
      std::fprintf(stderr, "qkv perplexity: unknown flag '%s'\n\n%s", argv[i], kPerplexityUsage);
      return 2;
    }
  }
  if (kld_switch) {
    if (kld_write.empty() || !kld_read.empty()) {
      std::fprintf(stderr,
                   "qkv perplexity: --kl-divergence without a file compares with the base named by "
                   "--kl-divergence-base FILE (llama-perplexity's spelling); or give --kl-divergence FILE\n");
      return 2;
    }
    kld_read = std::move(kld_write);
    kld_write.clear();
  }
  if (model_path.empty() || (text_path.empty() && kld_read.empty())) {
    std::fprintf(stderr, "qkv perplexity: -m MODEL and -f TEXT (or --kl-divergence FILE) are required\n\n%s",
                 kPerplexityUsage);
    return 2;
  }
  if (!kld_write.empty() && !kld_read.empty()) {
    std::fprintf(stderr, "qkv perplexity: --kl-divergence-base and --kl-divergence exclude each other\n");
    return 2;
  }
  if (!kld_write.empty() && text_path.empty()) {
    std::fprintf(stderr, "qkv perplexity: --kl-divergence-base needs the text (-f)\n");
    return 2;
  }
  const std::string text = text_path.empty() ? std::string() : read_file(text_path);
  if (!kld_write.empty()) o.kl_divergence_write = kld_write.c_str();
  if (!kld_read.empty()) o.kl_divergence_read = kld_read.c_str();
  cli.batch = o.batch;
  o.threads = batch_threads(o.threads);  // perplexity is all prompt passes
  cli.tty = isatty(fileno(stderr)) != 0;

  qkv_model_options mopts;
  qkv_model_options_init(&mopts);
  if (!tokenizer_path.empty()) mopts.tokenizer_path = tokenizer_path.c_str();
  qkv_model* model = nullptr;
  check(qkv_model_load(model_path.c_str(), &mopts, &model), "loading the model");
  qkv_perplexity_stats stats;
  const qkv_status st = qkv_perplexity(model, text_path.empty() ? nullptr : text.c_str(), &o, on_chunk, &cli, &stats);
  const std::string err = st == QKV_OK ? "" : qkv_last_error();
  qkv_model_free(model);
  if (st != QKV_OK) fail(err);
  if (cli.json) {
    print_json(stats, model_path, o.kv_type);
  } else {
    print_text(stats);
  }
  return 0;
}

}  // namespace qkv::tools

// qkv bench --embed. Rows:
//   batch L: `texts` texts of L tokens each ([CLS], L-2 fixed pseudo-random
//     ids, [SEP]) embedded in one qkv::embed call, packed into forward passes
//     of up to --embed-batch tokens as qkv_embed packs them; sentences/s, and
//     the GEMM rate: 2 * (parameters of the layer projection matrices: Q, K, V,
//     output, FFN up/gate/down) * tokens / s, against the probe's FMA peak.
//     Attention (QK^T, PV), norms, activations and the embedding gathers are
//     not counted in it, so at long lengths the rate understates the work.
//   query: one 16-token text, the latency of each call (median of
//     --query-reps), against the time of reading the layer weights once (every
//     layer matrix, norm and bias; not the embedding tables, of which a query
//     reads 16 rows) at the probe's DRAM read bandwidth.
#include "tools/bench/bench_embed.h"

#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/error.h"
#include "kernels/machine/cpu_features.h"
#include "kernels/machine/probe.h"
#include "kernels/simd_target.h"
#include "kernels/threads/cores.h"
#include "runtime/atomic_file.h"
#include "runtime/embed.h"
#include "runtime/gguf.h"
#include "runtime/model.h"
#include "runtime/model_loader.h"
#include "runtime/synthetic.h"
#include "runtime/synthetic_encoder.h"
#include "runtime/tokenizer.h"
#include "runtime/version.h"
#include "tools/args.h"
#include "tools/bench/bench_json.h"
#include "tools/bench/bench_report.h"

namespace qkv::tools {

namespace {

const char* kUsage =
    "usage: qkv bench --embed [-m MODEL | --synthetic NAME [--type T]] [options]\n"
    "  embedding throughput (sentences/s, batched) and one-query latency of an encoder\n"
    "  -m, --model PATH        an encoder GGUF (bert, nomic-bert)\n"
    "  --synthetic NAME        random weights of a real shape: tiny-bert, bge-small (default), bge-base,\n"
    "                          nomic-embed\n"
    "  --type T                synthetic weights: f16 (default), q8_0, ... or a llama-quantize preset\n"
    "  -t, --threads N         threads (default: one per physical core)\n"
    "  --embed-lengths LIST    tokens per text, [CLS] and [SEP] included (default 16,64,256,512; lengths\n"
    "                          over the model's context are skipped with a note)\n"
    "  --embed-texts N         texts per batched row (default 256)\n"
    "  --embed-batch N         tokens per forward pass (default 2048, as qkv_embed, qkv embed and qkv serve)\n"
    "  --query-reps N          single 16-token queries timed (default 20; 0 skips the row)\n"
    "  --reps N                timed repetitions of each batched row (default 3)   --warmup N (default 1)\n"
    "  --no-row-groups         keep 32-value block weights in rows (for comparison)\n"
    "  --json                  print JSON instead of the table\n"
    "  --json-out PATH         also write the JSON to PATH\n"
    "  -q, --quiet             no progress on stderr\n"
    "  --no-probe              skip the machine probe (no %FMA or read-time ratio)\n"
    "  --probe-mib N           probe read buffer in MiB (default 1024)\n";

constexpr int64_t kQueryTokens = 16;

struct Options {
  std::string model_path, synthetic = "bge-small", json_out;
  WeightFormat format;
  bool type_given = false, synthetic_given = false, row_groups = true;
  int threads = 0, reps = 3, warmup = 1, query_reps = 20;
  std::vector<int64_t> lengths{16, 64, 256, 512};
  int64_t texts = 256, batch_tokens = 2048, probe_mib = 1024;
  bool json = false, quiet = false, probe = true;
};

struct Row {
  std::string kind;  // "batch" or "query"
  int64_t length = 0, texts = 0;
  Spread seconds;               // per repetition (batch: all texts; query: one call)
  double sentences_per_s = 0;   // at the median
  double tokens_per_s = 0;
  double gemm_gflops = 0, fma_peak_pct = -1;  // batch rows
  double read_ms = -1, latency_over_read = -1;  // query row: weight read time at the probe's bandwidth
  double peak_rss_mib = 0;
};

std::vector<int64_t> parse_lengths(const char* flag, const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(parse_int(flag, item.c_str(), 3, 1 << 20));
  QKV_CHECK(!out.empty() && s.back() != ',', "flag ", flag, " wants a list of lengths such as 16,64, not '", s, "'");
  QKV_CHECK(out.size() <= 64, "flag ", flag, " lists more than 64 values");
  return out;
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

double load_average() {
  double l[1];
  return getloadavg(l, 1) == 1 ? l[0] : -1;
}

// The host as `qkv info --cpu` describes it.
std::string cpu_line() {
  const CpuFeatures& f = cpu_features();
  auto yn = [](bool b) { return b ? "yes" : "no"; };
  char buf[256];
  std::snprintf(buf, sizeof buf, "cpu: %s; AVX-512 %s, VNNI %s, BF16 %s; AMX-BF16 %s, AMX-INT8 %s",
                f.intel ? "Intel" : f.amd ? "AMD" : "other vendor", yn(f.avx512), yn(f.avx512_vnni),
                yn(f.avx512_bf16), yn(f.amx_bf16), yn(f.amx_int8));
  return buf;
}

uint64_t matrix_bytes(const Matrix& m) { return uint64_t(m.rows) * dtype_row_bytes(m.type, size_t(m.cols)); }

// Parameters of the layer projections (the GEMMs) and bytes of every layer tensor.
uint64_t projection_params(const Model& m) {
  uint64_t n = 0;
  for (const LayerWeights& l : m.layers) {
    for (const Matrix* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_gate, &l.ffn_up, &l.ffn_down}) {
      if (w->data != nullptr) n += uint64_t(w->rows) * uint64_t(w->cols);
    }
  }
  return n;
}

uint64_t layer_bytes(const Model& m) {
  uint64_t b = 0;
  for (const LayerWeights& l : m.layers) {
    for (const Matrix* w : layer_matrices(l)) b += matrix_bytes(*w);
  }
  return b;
}

using Clock = std::chrono::steady_clock;

// [CLS], L-2 ids from a fixed splitmix64 stream over the ordinary tokens
// (past the specials' ids), [SEP].
std::vector<int32_t> make_text(int64_t L, uint64_t stream, int32_t cls, int32_t sep, int64_t vocab) {
  std::vector<int32_t> t(static_cast<size_t>(L));
  uint64_t state = 0x5eed ^ (stream * 0x9e3779b97f4a7c15ull);
  const int64_t first = std::min<int64_t>(104, vocab - 1);
  for (int64_t i = 1; i + 1 < L; ++i) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    t[size_t(i)] = static_cast<int32_t>(first + int64_t((z ^ (z >> 31)) % uint64_t(vocab - first)));
  }
  t.front() = cls;
  t.back() = sep;
  return t;
}


}  // namespace

int cmd_bench_embed(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const char* flag = argv[i];
    const std::string a = flag;
    if (a == "--embed") {
      continue;
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "-m" || a == "--model") {
      o.model_path = flag_value(argc, argv, i);
    } else if (a == "--synthetic") {
      o.synthetic = flag_value(argc, argv, i);
      o.synthetic_given = true;
    } else if (a == "--type") {
      o.format = parse_weight_format_flag(flag, flag_value(argc, argv, i));
      o.type_given = true;
    } else if (a == "-t" || a == "--threads") {
      o.threads = static_cast<int>(parse_int(flag, flag_value(argc, argv, i), 1, 1024));
    } else if (a == "--embed-lengths") {
      o.lengths = parse_lengths(flag, flag_value(argc, argv, i));
    } else if (a == "--embed-texts") {
      o.texts = parse_int(flag, flag_value(argc, argv, i), 1, 1 << 20);
    } else if (a == "--embed-batch") {
      o.batch_tokens = parse_int(flag, flag_value(argc, argv, i), 1, 1 << 20);
    } else if (a == "--query-reps") {
      o.query_reps = static_cast<int>(parse_int(flag, flag_value(argc, argv, i), 0, 100000));
    } else if (a == "--reps") {
      o.reps = static_cast<int>(parse_int(flag, flag_value(argc, argv, i), 1, 1000));
    } else if (a == "--warmup") {
      o.warmup = static_cast<int>(parse_int(flag, flag_value(argc, argv, i), 0, 100));
    } else if (a == "--no-row-groups") {
      o.row_groups = false;
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--json-out") {
      o.json_out = flag_value(argc, argv, i);
    } else if (a == "-q" || a == "--quiet") {
      o.quiet = true;
    } else if (a == "--no-probe") {
      o.probe = false;
    } else if (a == "--probe-mib") {
      o.probe_mib = parse_int(flag, flag_value(argc, argv, i), 1, 1 << 20);
    } else {
      std::fprintf(stderr, "qkv bench --embed: unknown or unsupported flag '%s'\n\n%s", argv[i], kUsage);
      return 2;
    }
  }
  if (!o.model_path.empty() && (o.synthetic_given || o.type_given)) {
    std::fprintf(stderr, "qkv bench --embed: -m MODEL and --synthetic/--type exclude each other\n");
    return 2;
  }
  if (o.model_path.empty() && !is_synthetic_encoder(o.synthetic)) {
    std::string known;
    for (const std::string& n : synthetic_encoder_names()) known += (known.empty() ? "" : ", ") + n;
    std::fprintf(stderr, "qkv bench --embed: '%s' is not an encoder preset (known: %s)\n", o.synthetic.c_str(),
                 known.c_str());
    return 2;
  }
  omp_set_num_threads(threads_or_default(o.threads));
  const int threads = omp_get_max_threads();
  const double load_start = load_average();
  const bool show = !o.quiet && isatty(STDERR_FILENO);
  auto progress = [&](const std::string& what) {
    if (show) std::fprintf(stderr, "\r\033[Kqkv bench --embed: %s", what.c_str());
  };

  Model model;
  std::string name, source, weight_type;
  int32_t cls = 101, sep = 102;
  if (!o.model_path.empty()) {
    model = load_model(o.model_path);
    QKV_CHECK(!model.config.causal, "qkv bench --embed: '", o.model_path, "' is a '", model.config.architecture,
              "' decoder; the embedding benchmark runs encoders (bert, nomic-bert)");
    const GGUFFile file = GGUFFile::open(o.model_path);
    if (file.find("tokenizer.ggml.tokens")) {
      const Tokenizer tok = Tokenizer::from_gguf(file);
      cls = tok.bos_id();
      sep = tok.sep_id() >= 0 ? tok.sep_id() : tok.eos_id();
    }
    QKV_CHECK(cls >= 0 && sep >= 0 && cls < model.config.vocab_size && sep < model.config.vocab_size,
              "qkv bench --embed: '", o.model_path, "' has no [CLS]/[SEP] ids inside its vocabulary");
    name = o.model_path.substr(o.model_path.find_last_of('/') + 1);
    source = o.model_path;
    weight_type = dtype_name(model.layers[0].wq.type);
  } else {
    progress("building " + o.synthetic);
    model = make_synthetic_encoder(synthetic_encoder_preset(o.synthetic), o.format, 1234);
    name = o.synthetic;
    source = "synthetic, " + model.config.architecture;
    weight_type = weight_format_name(o.format);
  }
  lay_out_weights(model, o.row_groups);
  const ModelConfig& c = model.config;
  const uint64_t params = projection_params(model);
  const uint64_t weights_read = layer_bytes(model);

  EmbedOptions eo;
  eo.pooling = model_pooling(c);
  eo.normalize = 2;
  eo.batch_tokens = o.batch_tokens;
  EmbedPool pool;
  std::vector<Row> rows;
  std::vector<std::string> notes;
  std::vector<float> out;
  // Runs `inputs` warmup + reps times; returns the timed seconds.
  auto time_embed = [&](const std::vector<EmbedInput>& inputs, int warmup, int reps, const std::string& what) {
    out.resize(static_cast<size_t>(embed_vector_count(inputs, eo.pooling) * embed_width(c, eo)));
    std::vector<double> seconds;
    for (int r = 0; r < warmup + reps; ++r) {
      progress(what + " [" + std::to_string(r) + "/" + std::to_string(warmup + reps) + "]");
      const auto t0 = Clock::now();
      std::vector<std::vector<int32_t>> truncated;  // none: every length fits the context
      embed(model, &pool, prepare_inputs(c, inputs, eo, &truncated), eo, out.data());
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (r >= warmup) seconds.push_back(s);
    }
    return seconds;
  };
  for (const int64_t L : o.lengths) {
    if (L > c.context_length) {
      notes.push_back("length " + std::to_string(L) + " skipped: over the model's context of " +
                      std::to_string(c.context_length));
      continue;
    }
    std::vector<std::vector<int32_t>> texts;
    std::vector<EmbedInput> inputs;
    for (int64_t t = 0; t < o.texts; ++t) texts.push_back(make_text(L, uint64_t(t), cls, sep, c.vocab_size));
    for (const auto& t : texts) inputs.push_back({t.data(), L});
    const std::vector<double> s = time_embed(inputs, o.warmup, o.reps, "batch of " + std::to_string(o.texts) +
                                                                          " x " + std::to_string(L) + " tokens");
    Row row;
    row.kind = "batch";
    row.length = L;
    row.texts = o.texts;
    row.seconds = spread_of(s);
    row.sentences_per_s = double(o.texts) / row.seconds.median;
    row.tokens_per_s = double(o.texts * L) / row.seconds.median;
    row.gemm_gflops = 2.0 * double(params) * row.tokens_per_s * 1e-9;
    row.peak_rss_mib = peak_rss_mib();
    rows.push_back(row);
  }
  if (o.query_reps > 0) {
    if (kQueryTokens > c.context_length) {
      notes.push_back("query skipped: 16 tokens are over the model's context");
    } else {
      const std::vector<int32_t> q = make_text(kQueryTokens, 0x9a7e, cls, sep, c.vocab_size);
      const std::vector<double> s = time_embed({{q.data(), kQueryTokens}}, std::max(1, o.warmup), o.query_reps,
                                               "one 16-token query");
      Row row;
      row.kind = "query";
      row.length = kQueryTokens;
      row.texts = 1;
      row.seconds = spread_of(s);
      row.sentences_per_s = 1.0 / row.seconds.median;
      row.tokens_per_s = double(kQueryTokens) / row.seconds.median;
      row.gemm_gflops = 2.0 * double(params) * row.tokens_per_s * 1e-9;
      row.peak_rss_mib = peak_rss_mib();
      rows.push_back(row);
    }
  }
  const double load_end = load_average();
  ProbeResult probe;
  if (o.probe) {
    progress("probing the machine...");
    ProbeOptions p;
    p.threads = threads;
    p.buffer_bytes = uint64_t(o.probe_mib) << 20;
    probe = probe_machine(p);
    for (Row& r : rows) {
      if (probe.fma_gflops > 0) r.fma_peak_pct = 100.0 * r.gemm_gflops / probe.fma_gflops;
      if (r.kind == "query" && probe.dram_read_gbs > 0) {
        r.read_ms = double(weights_read) / (probe.dram_read_gbs * 1e9) * 1e3;
        r.latency_over_read = r.seconds.median * 1e3 / r.read_ms;
      }
    }
  }
  if (show) std::fprintf(stderr, "\r\033[K");

  Json j = Json::object();
  j.set("tool", Json::string("qkv bench --embed"));
  j.set("version", Json::string(version_string()));
  j.set("simd_target", Json::string(simd_target_name()));
  j.set("cpu", Json::string(cpu_line()));
  Json m = Json::object();
  m.set("name", Json::string(name));
  m.set("source", Json::string(source));
  m.set("architecture", Json::string(c.architecture));
  m.set("weight_type", Json::string(weight_type));
  m.set("dim", Json::number(double(c.dim)));
  m.set("n_layers", Json::number(double(c.n_layers)));
  m.set("n_heads", Json::number(double(c.n_heads)));
  m.set("hidden_dim", Json::number(double(c.hidden_dim)));
  m.set("vocab_size", Json::number(double(c.vocab_size)));
  m.set("context_length", Json::number(double(c.context_length)));
  m.set("pooling", Json::string(pooling_name(eo.pooling)));
  m.set("parameters", Json::number(double(model.parameter_count())));
  m.set("projection_parameters", Json::number(double(params)));
  m.set("weight_bytes", Json::number(double(model.weight_bytes())));
  m.set("layer_weight_bytes", Json::number(double(weights_read)));
  j.set("model", std::move(m));
  j.set("threads", Json::number(threads));
  j.set("reps", Json::number(o.reps));
  j.set("warmup", Json::number(o.warmup));
  j.set("batch_tokens", Json::number(double(o.batch_tokens)));
  Json load = Json::object();
  load.set("start", maybe(load_start));
  load.set("end", maybe(load_end));
  j.set("load_average", std::move(load));
  j.set("probe", o.probe ? probe_to_json(probe) : Json::null());
  Json jrows = Json::array();
  for (const Row& r : rows) {
    Json x = Json::object();
    x.set("kind", Json::string(r.kind));
    x.set("tokens_per_text", Json::number(double(r.length)));
    x.set("texts", Json::number(double(r.texts)));
    x.set("seconds", spread_json(r.seconds));
    x.set("sentences_per_s", Json::number(r.sentences_per_s));
    x.set("tokens_per_s", Json::number(r.tokens_per_s));
    x.set("gemm_gflops", Json::number(r.gemm_gflops));
    x.set("fma_peak_pct", maybe(r.fma_peak_pct));
    x.set("weight_read_ms", maybe(r.read_ms));
    x.set("latency_over_read", maybe(r.latency_over_read));
    x.set("peak_rss_mib", Json::number(r.peak_rss_mib));
    jrows.push(std::move(x));
  }
  j.set("rows", std::move(jrows));
  Json jnotes = Json::array();
  for (const std::string& n : notes) jnotes.push(Json::string(n));
  j.set("notes", std::move(jnotes));
  const std::string json = j.dump();
  if (!o.json_out.empty()) write_file_atomically(o.json_out, json + "\n");
  if (o.json) {
    std::printf("%s\n", json.c_str());
    return 0;
  }
  std::printf("qkv bench --embed %s: %s (%s), %s weights, %.1fM parameters (%.1fM in the layer projections), "
              "%d threads, %s\n",
              version_string(), name.c_str(), source.c_str(), weight_type.c_str(),
              double(model.parameter_count()) * 1e-6, double(params) * 1e-6, threads, simd_target_name());
  std::printf("  %s\n", cpu_line().c_str());
  std::printf("  pooling %s, L2-normalized; forward passes of up to %lld tokens; %d timed reps after %d warm-up\n",
              pooling_name(eo.pooling), static_cast<long long>(o.batch_tokens), o.reps, o.warmup);
  if (o.probe) print_probe(stdout, probe);
  if (load_start >= 0 && load_end >= 0) {
    std::printf("  load average (1 min) %.2f before, %.2f after%s\n", load_start, load_end,
                std::max(load_start, load_end) > 1.2 * threads ? ": other work shared the cores" : "");
  }
  std::printf("  GEMM GFLOP/s: 2 x %.1fM projection parameters x tokens/s (attention not counted); "
              "query: latency / time to read %.1f MB of layer weights at the probe's bandwidth\n\n",
              double(params) * 1e-6, double(weights_read) * 1e-6);
  std::printf("%-6s %6s %6s %12s %22s %10s %9s %6s %9s %8s %8s\n", "test", "tokens", "texts", "sentences/s",
              "[min..max] s", "tok/s", "GFLOP/s", "%FMA", "ms", "read ms", "RSS MiB");
  for (const Row& r : rows) {
    char range[64], pct[16] = "-", read[16] = "-", ms[32];
    std::snprintf(range, sizeof range, "[%.4f..%.4f]", r.seconds.min, r.seconds.max);
    if (r.fma_peak_pct >= 0) std::snprintf(pct, sizeof pct, "%.0f%%", r.fma_peak_pct);
    if (r.read_ms >= 0) std::snprintf(read, sizeof read, "%.2f", r.read_ms);
    std::snprintf(ms, sizeof ms, "%.2f", r.seconds.median * 1e3);
    std::printf("%-6s %6lld %6lld %12.1f %22s %10.0f %9.1f %6s %9s %8s %8.0f\n", r.kind.c_str(),
                static_cast<long long>(r.length), static_cast<long long>(r.texts), r.sentences_per_s, range,
                r.tokens_per_s, r.gemm_gflops, pct, ms, read, r.peak_rss_mib);
    if (r.latency_over_read >= 0) {
      std::printf("       one query takes %.2fx the time of reading the layer weights once\n", r.latency_over_read);
    }
  }
  for (const std::string& n : notes) std::printf("  note: %s\n", n.c_str());
  return 0;
}

}  // namespace qkv::tools

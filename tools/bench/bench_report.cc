#include "tools/bench/bench_report.h"

#include <algorithm>

#include "kernels/error.h"

namespace qkv::tools {

Spread spread_of(std::vector<double> samples) {
  QKV_CHECK(!samples.empty(), "spread of no samples");
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  Spread s;
  s.min = samples.front();
  s.max = samples.back();
  s.median = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  return s;
}

std::string BenchReport::label() const {
  return model.name + " " + model.weight_type + " kv=" + model.kv_type + " t=" + std::to_string(threads);
}

Json maybe(double v) { return v < 0 ? Json::null() : Json::number(v); }

Json spread_json(const Spread& s) {
  Json j = Json::object();
  j.set("median", Json::number(s.median));
  j.set("min", Json::number(s.min));
  j.set("max", Json::number(s.max));
  return j;
}

namespace {

// Fixed-width cell for a value that may not apply.
std::string cell(double v, const char* fmt) {
  if (v < 0) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

}  // namespace

void apply_probe(BenchReport& r) {
  if (!r.has_probe) return;
  for (BenchRow& row : r.rows) {
    if (row.gflops >= 0 && r.probe.fma_gflops > 0) row.fma_peak_pct = 100.0 * row.gflops / r.probe.fma_gflops;
    if (row.gbs >= 0 && r.probe.dram_read_gbs > 0) row.dram_bw_pct = 100.0 * row.gbs / r.probe.dram_read_gbs;
  }
}

Json probe_to_json(const ProbeResult& p) {
  Json j = Json::object();
  j.set("threads", Json::number(p.threads));
  j.set("buffer_bytes", Json::number(static_cast<double>(p.buffer_bytes)));
  j.set("read_streams_per_thread", Json::number(p.read_streams_per_thread));
  j.set("dram_read_gbs_1t", Json::number(p.dram_read_gbs_1t));
  j.set("dram_read_gbs", Json::number(p.dram_read_gbs));
  j.set("fma_gflops_1t", Json::number(p.fma_gflops_1t));
  j.set("fma_gflops", Json::number(p.fma_gflops));
  j.set("simd_target", Json::string(p.simd_target));
  return j;
}

Json report_to_json(const BenchReport& r) {
  Json j = Json::object();
  j.set("tool", Json::string("qkv bench"));
  j.set("version", Json::string(r.version));
  j.set("simd_target", Json::string(r.simd_target));
  j.set("label", Json::string(r.label()));
  Json m = Json::object();
  m.set("name", Json::string(r.model.name));
  m.set("source", Json::string(r.model.source));
  m.set("weight_type", Json::string(r.model.weight_type));
  m.set("kv_type", Json::string(r.model.kv_type));
  m.set("dim", Json::number(r.model.dim));
  m.set("n_layers", Json::number(r.model.n_layers));
  m.set("n_heads", Json::number(r.model.n_heads));
  m.set("n_kv_heads", Json::number(r.model.n_kv_heads));
  m.set("hidden_dim", Json::number(r.model.hidden_dim));
  m.set("vocab_size", Json::number(r.model.vocab_size));
  m.set("parameters", Json::number(static_cast<double>(r.model.parameters)));
  m.set("weight_bytes", Json::number(static_cast<double>(r.model.weight_bytes)));
  m.set("weight_bytes_read_per_token", Json::number(static_cast<double>(r.model.weight_bytes_read_per_token)));
  m.set("kv_bytes_per_token", Json::number(static_cast<double>(r.model.kv_bytes_per_token)));
  j.set("model", std::move(m));
  j.set("threads", Json::number(r.threads));
  j.set("reps", Json::number(r.reps));
  j.set("warmup", Json::number(r.warmup));
  j.set("decode_steps", Json::number(static_cast<double>(r.decode_steps)));
  j.set("batch_depth", Json::number(static_cast<double>(r.batch_depth)));
  j.set("decode_threading", Json::string(r.decode_team ? "team" : "region-per-call"));
  Json load = Json::object();
  load.set("start", maybe(r.load_average_start));
  load.set("end", maybe(r.load_average_end));
  j.set("load_average", std::move(load));
  j.set("probe", r.has_probe ? probe_to_json(r.probe) : Json::null());
  if (r.cold.measured) {
    Json cold = Json::object();
    cold.set("load_ms", Json::number(r.cold.load_ms));
    cold.set("first_token_ms", Json::number(r.cold.first_token_ms));
    cold.set("warm_first_token_ms", Json::number(r.cold.warm_first_token_ms));
    cold.set("load_to_first_token_ms", Json::number(r.cold.load_ms + r.cold.first_token_ms));
    cold.set("prompt_tokens", Json::number(static_cast<double>(r.cold.prompt_tokens)));
    cold.set("context", Json::number(static_cast<double>(r.cold.context)));
    cold.set("file_read_ms", Json::number(r.cold.file_read_ms));
    j.set("cold_start", std::move(cold));
  } else {
    j.set("cold_start", Json::null());
  }
  Json rows = Json::array();
  for (const BenchRow& row : r.rows) {
    Json o = Json::object();
    o.set("kind", Json::string(row.kind));
    o.set("tokens", Json::number(static_cast<double>(row.tokens)));
    o.set("depth", Json::number(static_cast<double>(row.depth)));
    o.set("batch", Json::number(static_cast<double>(row.batch)));
    o.set("tokens_per_s", spread_json(row.tokens_per_s));
    o.set("ms_per_token", spread_json(row.ms_per_token));
    o.set("gflops", maybe(row.gflops));
    o.set("fma_peak_pct", maybe(row.fma_peak_pct));
    o.set("gbs", maybe(row.gbs));
    o.set("dram_bw_pct", maybe(row.dram_bw_pct));
    o.set("paired_probe_gbs", row.has_paired_probe ? spread_json(row.paired_probe_gbs) : Json::null());
    o.set("dram_bw_pct_paired", maybe(row.dram_bw_pct_paired));
    o.set("speedup_vs_batch1", maybe(row.speedup_vs_batch1));
    o.set("peak_rss_mib", Json::number(row.peak_rss_mib));
    rows.push(std::move(o));
  }
  j.set("rows", std::move(rows));
  return j;
}

void print_probe(FILE* out, const ProbeResult& p) {
  std::fprintf(out, "probe (%s): DRAM read %.1f GB/s on 1 thread, %.1f GB/s on %d threads (%d streams each, %.0f MiB buffer)\n",
               p.simd_target.c_str(), p.dram_read_gbs_1t, p.dram_read_gbs, p.threads, p.read_streams_per_thread,
               static_cast<double>(p.buffer_bytes) / (1024.0 * 1024.0));
  std::fprintf(out, "probe (%s): FP32 FMA peak %.1f GFLOP/s on 1 thread, %.1f GFLOP/s on %d threads\n",
               p.simd_target.c_str(), p.fma_gflops_1t, p.fma_gflops, p.threads);
}

void print_report_table(FILE* out, const BenchReport& r) {
  const BenchModelInfo& m = r.model;
  std::fprintf(out, "qkv bench %s: %s (%s), %s weights %.1f MB, KV %s, %d threads, %s\n", r.version.c_str(),
               m.name.c_str(), m.source.c_str(), m.weight_type.c_str(), static_cast<double>(m.weight_bytes) * 1e-6,
               m.kv_type.c_str(), r.threads, r.simd_target.c_str());
  std::fprintf(out,
               "  %.1fM parameters; per decoded token: %.1f MB of weights + %.1f KB of KV per position attended\n",
               static_cast<double>(m.parameters) * 1e-6, static_cast<double>(m.weight_bytes_read_per_token) * 1e-6,
               static_cast<double>(m.kv_bytes_per_token) * 1e-3);
  if (r.has_probe) print_probe(out, r.probe);
  if (r.load_average_start >= 0 && r.load_average_end >= 0) {
    std::fprintf(out, "  load average (1 min) %.2f before, %.2f after%s\n", r.load_average_start, r.load_average_end,
                 std::max(r.load_average_start, r.load_average_end) > 1.2 * r.threads
                     ? ": other work shared the cores, figures are low and noisy"
                     : "");
  }
  if (r.cold.measured) {
    std::fprintf(out,
                 "  cold start: load %.1f ms, then the first token of a %lld-token prompt (context %lld) %.1f ms "
                 "(%.1f ms warm): %.1f ms; reading the model file takes %.1f ms\n",
                 r.cold.load_ms, static_cast<long long>(r.cold.prompt_tokens), static_cast<long long>(r.cold.context),
                 r.cold.first_token_ms, r.cold.warm_first_token_ms, r.cold.load_ms + r.cold.first_token_ms,
                 r.cold.file_read_ms);
  }
  std::fprintf(out,
               "  %d timed reps after %d warm-up; median [min..max]; decode/batch rows time %lld steps; batch rows "
               "start at depth %lld%s\n\n",
               r.reps, r.warmup, static_cast<long long>(r.decode_steps), static_cast<long long>(r.batch_depth),
               r.decode_team ? "" : "; decode steps open a parallel region per kernel call");
  const bool paired = std::any_of(r.rows.begin(), r.rows.end(), [](const BenchRow& row) { return row.has_paired_probe; });
  if (paired) {
    std::fprintf(out,
                 "  %%BW: against the probe after all rows; %%BWrep: median over the reps of each rep against a read "
                 "of the weights right after it\n\n");
  }
  std::fprintf(out, "%-8s %6s %6s %5s %10s %21s %9s %7s %6s %6s %8s %6s %7s %8s\n", "test", "tokens", "depth", "batch",
               "tok/s", "[min..max]", "ms/tok", "GB/s", "%BW", "%BWrep", "GFLOP/s", "%FMA", "speedup", "RSS MiB");
  for (const BenchRow& row : r.rows) {
    char range[64];
    std::snprintf(range, sizeof range, "[%.1f..%.1f]", row.tokens_per_s.min, row.tokens_per_s.max);
    std::fprintf(out, "%-8s %6lld %6lld %5lld %10.1f %21s %9.3f %7s %6s %6s %8s %6s %7s %8.0f\n", row.kind.c_str(),
                 static_cast<long long>(row.tokens), static_cast<long long>(row.depth),
                 static_cast<long long>(row.batch), row.tokens_per_s.median, range, row.ms_per_token.median,
                 cell(row.gbs, "%.1f").c_str(), cell(row.dram_bw_pct, "%.0f%%").c_str(),
                 cell(row.dram_bw_pct_paired, "%.0f%%").c_str(),
                 cell(row.gflops, "%.1f").c_str(), cell(row.fma_peak_pct, "%.0f%%").c_str(),
                 cell(row.speedup_vs_batch1, "%.2fx").c_str(), row.peak_rss_mib);
  }
}

}  // namespace qkv::tools

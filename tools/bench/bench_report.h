// What `qkv bench` measured, and its two renderings: a table for people and
// JSON (the same fields) for `qkv plot` and other programs.
//
// JSON layout (numbers that do not apply are null):
//   { "tool": "qkv bench", "version", "simd_target", "label",
//     "model": { "name", "source" ("synthetic" | file path), "weight_type",
//                "kv_type", "dim", "n_layers", "n_heads", "n_kv_heads",
//                "hidden_dim", "vocab_size", "parameters", "weight_bytes",
//                "weight_bytes_read_per_token", "kv_bytes_per_token" },
//     "threads", "reps", "warmup", "decode_steps", "batch_depth",
//     "decode_threading": "team" | "region-per-call" (--region-per-call),
//     "load_average": { "start", "end" } (1-minute load before and after: on a
//                     shared machine, a load above the core count means the
//                     figures were measured while others ran),
//     "probe": null | { "threads", "buffer_bytes", "read_streams_per_thread",
//                       "dram_read_gbs_1t", "dram_read_gbs",
//                       "fma_gflops_1t", "fma_gflops", "simd_target" },
//     "rows": [ { "kind": "prefill" | "decode" | "batch",
//                 "tokens", "depth", "batch",
//                 "tokens_per_s": { "median", "min", "max" },
//                 "ms_per_token": { "median", "min", "max" },
//                 "gflops", "fma_peak_pct", "gbs", "dram_bw_pct",
//                 "paired_probe_gbs": null | { "median", "min", "max" },
//                 "dram_bw_pct_paired",
//                 "speedup_vs_batch1", "peak_rss_mib" } ] }
// dram_bw_pct is against the probe that runs once after all rows;
// paired_probe_gbs is a read of the model's streamed weights right after each
// timed repetition (with the same threads), and dram_bw_pct_paired the median
// over the repetitions of each one's effective GB/s against its own read.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/machine/probe.h"
#include "tools/bench/bench_json.h"

namespace qkv::tools {

// Median and range of one quantity over the timed repetitions.
struct Spread {
  double median = 0, min = 0, max = 0;
};
// Spread of `samples` (at least one).
Spread spread_of(std::vector<double> samples);

struct BenchRow {
  std::string kind;   // "prefill", "decode" or "batch"
  int64_t tokens = 0; // prefill: prompt length; decode/batch: steps timed per repetition
  int64_t depth = 0;  // positions already in each sequence's cache when timing starts
  int64_t batch = 1;  // sequences stepping together
  Spread tokens_per_s;  // aggregate over the batch
  Spread ms_per_token;  // prefill: per prompt token; decode/batch: per step (each sequence's latency)
  double gflops = -1, fma_peak_pct = -1;  // prefill (at the median); -1: not applicable
  double gbs = -1, dram_bw_pct = -1;      // decode/batch: effective bytes moved per second
  double speedup_vs_batch1 = -1;          // batch rows, when batch 1 was measured
  // Decode/batch rows with the probe on: a read of the streamed weights right
  // after each timed repetition (GB/s), and the median over the repetitions
  // of that repetition's effective GB/s against its own read, in percent.
  bool has_paired_probe = false;
  Spread paired_probe_gbs;
  double dram_bw_pct_paired = -1;
  double peak_rss_mib = 0;                // process peak RSS after this row
};

struct BenchModelInfo {
  std::string name, source, weight_type, kv_type;
  int64_t dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, hidden_dim = 0, vocab_size = 0;
  uint64_t parameters = 0, weight_bytes = 0, weight_bytes_read_per_token = 0, kv_bytes_per_token = 0;
};

// A fresh process's start: the model file loaded, then a decoder of the
// model's own context and a prefill of a short prompt, the first token's
// logits ready (what `qkv run` waits for before its first token).
struct ColdStart {
  bool measured = false;
  double load_ms = 0;         // reading the file's header and mapping or copying its weights
  double first_token_ms = 0;  // after the load: the decoder made, the prompt prefilled
  double warm_first_token_ms = 0;  // the same right after: its compute without first-use costs
  int64_t prompt_tokens = 0, context = 0;
  double file_read_ms = 0;  // one read of the model file, start to end
};

struct BenchReport {
  std::string version, simd_target;
  BenchModelInfo model;
  int threads = 0, reps = 0, warmup = 0;
  int64_t decode_steps = 0, batch_depth = 0;
  bool decode_team = true;  // decode steps in one team (false: a region per kernel call)
  double load_average_start = -1, load_average_end = -1;  // 1-minute; -1: unknown
  bool has_probe = false;
  ProbeResult probe;
  ColdStart cold;
  std::vector<BenchRow> rows;

  // "143M f16 kv=f16 t=2": one line in a plot legend.
  std::string label() const;
};

// Fills every row's fma_peak_pct and dram_bw_pct from report.probe (N-thread figures).
void apply_probe(BenchReport& report);

// A value that does not apply (negative by convention) as null, else a number.
Json maybe(double v);
// {"median", "min", "max"}.
Json spread_json(const Spread& s);
Json probe_to_json(const ProbeResult& probe);
Json report_to_json(const BenchReport& report);
void print_probe(FILE* out, const ProbeResult& probe);
void print_report_table(FILE* out, const BenchReport& report);

}  // namespace qkv::tools

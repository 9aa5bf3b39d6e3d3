// qkv bench: prefill, decode and batched-decode throughput of one model on this
// machine, judged against the machine's own measured ceilings (kernels/machine/probe.h).
//
// Every measurement runs warm-up repetitions that are not counted, then `reps`
// timed ones, and reports the median and range. Setup work (filling a cache to
// the depth under test) is never timed. Token ids are fixed pseudo-random ids:
// the speed of a llama forward pass does not depend on which tokens it sees.
#include <omp.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/error.h"
#include "kernels/linear_internal.h"
#include "kernels/machine/isa_cap.h"
#include "kernels/machine/probe.h"
#include "kernels/threads/cores.h"
#include "kernels/simd_target.h"
#include "runtime/atomic_file.h"
#include "runtime/decoder.h"
#include "runtime/model.h"
#include "runtime/model_loader.h"
#include "runtime/arch.h"
#include "runtime/synthetic.h"
#include "runtime/tokenizer.h"
#include "runtime/version.h"
#include "runtime/weight_placement.h"
#include "tools/args.h"
#include "tools/bench/bench_embed.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/bench_verify.h"
#include "tools/commands.h"
#include "tools/models/model_ref.h"
#include "tools/thread_flags.h"

namespace qkv::tools {

namespace {

const char* kBenchUsage =
    "usage: qkv bench [-m MODEL [-z TOKENIZER] | --synthetic NAME] [options]\n"
    "  -m, --model PATH        GGUF file or llama2.c checkpoint\n"
    "  -z, --tokenizer PATH    its tokenizer (optional: checked against the model; BOS starts each prompt)\n"
    "  --synthetic NAME        random weights of a real shape: tiny, 143M, 1.1B (default 143M)\n"
    "  --type T                synthetic weights: a type (f32, f16 (default), bf16, q8_0, q4_k, ...) or a\n"
    "                          llama-quantize preset (q4_k_m, q8_0, iq4_xs, ...: see qkv quantize --help)\n"
    "  --untied                synthetic: a separate output matrix (default: tied to the embedding)\n"
    "  --arch A                synthetic: the model family (llama (default), qwen2, qwen3, phi3, gemma, gemma2, gemma3)\n"
    "  --no-row-groups         keep 32-value block weights (Q4_0 ... Q8_0, IQ4_NL) in rows (default: 16-row groups\n"
    "                          where the CPU has AVX-512 VNNI, Q4_0 ... Q5_1 where it has AVX2; for comparison)\n"
    "  --huge-pages            copy the weights into memory advised for transparent huge pages first\n"
    "                          (diagnostic: peak RSS then counts the weights twice)\n"
    "  --kv-type T             KV cache type: f32, f16 (default), bf16, q8_0\n"
    "  -t, --threads N         threads (default: one per physical core)\n"
    "  --prompt-lengths LIST   prefill prompt lengths (default 128,512,2048; 'none' skips)\n"
    "  --depths LIST           decode depths (default 0,1024,4096; 'none' skips)\n"
    "  --batches LIST          sequences stepping together (default 1,4,16; 'none' skips)\n"
    "  --steps N               decode steps timed per repetition (default 32)\n"
    "  --batch-depth N         positions prefilled in each batched sequence (default 128)\n"
    "  --reps N                timed repetitions (default 5)   --warmup N (default 1)\n"
    "  -b, --batch-size N      prompt tokens per prefill batch (default 256)\n"
    "  --memory-limit BYTES    fail before a row allocates when weights + KV cache + activations exceed\n"
    "                          BYTES (K, M, G suffixes; default: no limit; the probe's buffer is apart)\n"
    "  --region-per-call       decode steps open an OpenMP region per kernel call instead of running\n"
    "                          in one team of threads (the earlier threading, for comparison)\n"
    "  --json                  print JSON instead of the table\n"
    "  --json-out PATH         also write the JSON to PATH (the table still goes to stdout)\n"
    "  -q, --quiet             no progress on stderr (it is off anyway when stderr is not a terminal)\n"
    "  --probe                 only probe the machine (DRAM read bandwidth, FMA peak) and print that\n"
    "  --no-probe              skip the probe and the reads paired with each decode/batch rep\n"
    "                          (no % of bandwidth or peak)\n"
    "  --probe-mib N           probe read buffer in MiB (default 1024)\n"
    "  --isa LEVEL             cap the kernels (and oneDNN) at an ISA level, as QKV_ISA does: scalar, sse4,\n"
    "                          avx2, avx2-vnni, avx512, avx512-vnni, amx, neon, sve, sve2 (qkv info --cpu)\n"
    "  --no-block-gemm         batches of the block types without the integer block GEMM (oneDNN, or one\n"
    "                          matvec per input; for comparison)\n"
    "  --embed                 embedding throughput of an encoder instead (qkv bench --embed --help)\n"
    "  --verify-cost           speculative decoding's verify pass against a decode step (--verify-cost --help)\n";

struct BenchOptions {
  std::string model_path, tokenizer_path, synthetic = "143M", json_out;
  WeightFormat weight_format;  // F16 unless --type
  bool type_given = false, untied = false, huge_pages = false, row_groups = true;
  std::string arch = "llama";
  DType kv_type = DType::F16;
  int threads = 0;
  std::vector<int64_t> prompt_lengths{128, 512, 2048};
  std::vector<int64_t> depths{0, 1024, 4096};
  std::vector<int64_t> batches{1, 4, 16};
  int64_t steps = 32, batch_depth = 128, prefill_batch = 256;
  int reps = 5, warmup = 1;
  bool json = false, quiet = false, probe_only = false, probe = true, decode_team = true;
  int64_t probe_mib = 1024;
  uint64_t memory_limit = 0;  // 0: none
};

// "128,512,2048" -> {128, 512, 2048}; "none" or "" -> {}.
std::vector<int64_t> parse_list(const char* flag, const std::string& s, int64_t lo, int64_t hi) {
  std::vector<int64_t> out;
  if (s.empty() || s == "none") return out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    out.push_back(parse_int(flag, item.c_str(), lo, hi));
  }
  if (!s.empty() && s.back() == ',') fail("flag ", flag, " has an empty item in '", s, "'");
  QKV_CHECK(out.size() <= 64, "flag ", flag, " lists more than 64 values");
  return out;
}

DType parse_type_flag(const char* flag, const char* v) {
  DType t;
  if (!parse_dtype(v, &t)) fail("flag ", flag, " wants f32, f16, bf16 or q8_0, not '", v, "'");
  return t;
}

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double load_average() {
  double l[1];
  return getloadavg(l, 1) == 1 ? l[0] : -1;
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // Linux: KiB
}

// One line on stderr, rewritten in place, while stderr is a terminal.
class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled) {}
  void show(const std::string& what, int done, int total) {
    if (!enabled_) return;
    std::fprintf(stderr, "\r\033[Kqkv bench: %s  [%d/%d]", what.c_str(), done, total);
    std::fflush(stderr);
  }
  void note(const std::string& what) {
    if (!enabled_) return;
    std::fprintf(stderr, "\r\033[Kqkv bench: %s", what.c_str());
    std::fflush(stderr);
  }
  ~Progress() {
    if (enabled_) std::fprintf(stderr, "\r\033[K");
  }

 private:
  bool enabled_;
};

uint64_t matrix_bytes(const Matrix& m) { return uint64_t(m.rows) * dtype_row_bytes(m.type, size_t(m.cols)); }

// The weights one decode step streams whole: every layer matrix and norm, the
// final norm and the output matrix (also read by the paired probe reads).
std::vector<ProbeRegion> streamed_weights(const Model& m) {
  std::vector<ProbeRegion> r;
  const auto add = [&](const Matrix& w) { r.push_back({w.data, matrix_bytes(w)}); };
  for (const LayerWeights& l : m.layers) {
    for (const Matrix* w : layer_matrices(l)) add(*w);
  }
  add(m.output_norm);
  add(m.output);
  return r;
}

// Weight bytes one decode step reads: the streamed weights and one embedding
// row (already among them when the embedding is the tied output; otherwise
// the embedding is not streamed).
uint64_t weight_bytes_read_per_token(const Model& m) {
  uint64_t b = 0;
  for (const ProbeRegion& w : streamed_weights(m)) b += w.bytes;
  if (m.output.data != m.token_embd.data) b += dtype_row_bytes(m.token_embd.type, size_t(m.token_embd.cols));
  return b;
}

// Moves every weight of `m` into one anonymous mapping advised for transparent
// huge pages (a copy; m.storage then owns the mapping). Streaming weights on
// 4 KiB pages costs a TLB miss every 4 KiB; this shows how much that matters
// for a model whose memory was not allocated that way.
void move_weights_to_huge_pages(Model& m) {
  std::vector<Matrix*> all{&m.token_embd, &m.output_norm};
  const bool tied = m.output.data == m.token_embd.data;
  if (!tied) all.push_back(&m.output);
  for (LayerWeights& l : m.layers) {
    for (Matrix* w : layer_matrices(l)) all.push_back(w);
  }
  uint64_t total = 0;
  for (const Matrix* w : all) total += (matrix_bytes(*w) + 63) / 64 * 64;
  const size_t align = size_t(2) << 20;
  const size_t map_bytes = (total + 2 * align - 1) / align * align;
  void* map = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) fail("cannot map ", map_bytes, " bytes for the weights");
  uint8_t* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(map) + align - 1) / align * align);
  madvise(base, map_bytes - size_t(base - static_cast<uint8_t*>(map)), MADV_HUGEPAGE);
  uint64_t offset = 0;
  for (Matrix* w : all) {
    const uint64_t bytes = matrix_bytes(*w);
    std::memcpy(base + offset, w->data, bytes);
    w->data = base + offset;
    offset += (bytes + 63) / 64 * 64;
  }
  if (tied) m.output = m.token_embd;
  m.storage = std::shared_ptr<const void>(map, [map_bytes](const void* p) { munmap(const_cast<void*>(p), map_bytes); });
}

// FLOPs of a prefill of L tokens into an empty cache: 2 per weight per token for
// the layer projections, the classifier for the last token only (the decoder
// computes logits of the last prompt token), and attention: QK^T and PV are
// 2*head_dim FLOPs each per (query, key) pair, L(L+1)/2 causal pairs per head.
double prefill_flops(const ModelConfig& c, int64_t L) {
  const double d = double(c.dim), kv = double(c.kv_dim()), h = double(c.hidden_dim);
  const double layer_params = double(c.q_dim()) * d * 2 + 2 * kv * d + 3 * d * h;
  const double pairs = double(L) * double(L + 1) / 2;
  return double(c.n_layers) * (2 * layer_params * double(L) + 4 * double(c.head_dim) * pairs * double(c.n_heads)) +
         2 * double(c.vocab_size) * d;
}

// Passes over the weights after each timed repetition (see Bench::repeat).
constexpr int kPairedPasses = 2;
// The cold start's prompt (more than 16 tokens: the prefill GEMM, not the
// small-batch kernel) and its context: the model's own, as `qkv run` takes
// it, up to what `qkv serve` gives a slot by default.
constexpr int64_t kColdPromptTokens = 32;
constexpr int64_t kColdContextCap = 4096;

class Bench {
 public:
  Bench(const BenchOptions& o, const Model& model, int32_t first_token, BenchReport& report)
      : o_(o), model_(model), report_(report), progress_(!o.quiet && isatty(STDERR_FILENO)),
        weights_(streamed_weights(model)) {
    // Fixed pseudo-random token ids (splitmix64), the first one BOS-like.
    const int64_t longest =
        std::max<int64_t>({1, max_of(o.prompt_lengths), max_of(o.depths) + o.steps, o.batch_depth + o.steps});
    tokens_.resize(size_t(longest));
    uint64_t state = 0x5eed;
    for (auto& t : tokens_) {
      uint64_t z = (state += 0x9e3779b97f4a7c15ull);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      t = static_cast<int32_t>((z ^ (z >> 31)) % uint64_t(model.config.vocab_size));
    }
    tokens_[0] = first_token;
  }

  void run() {
    if (report_.cold.measured) cold_start();
    if (!o_.prompt_lengths.empty() || !o_.depths.empty()) {
      DecoderOptions d;
      d.context = std::max<int64_t>(max_of(o_.prompt_lengths), max_of(o_.depths) + o_.steps);
      d.kv_type = o_.kv_type;
      d.prefill_batch = o_.prefill_batch;
      d.decode_team = o_.decode_team;
    d.threads_batch = threads_batch_flag();
      check_memory(d);
      Decoder dec(model_, d);
      for (const int64_t L : o_.prompt_lengths) prefill_row(dec, L);
      for (const int64_t D : o_.depths) decode_row(dec, D);
    }
    if (!o_.batches.empty()) batch_rows();
  }

 private:
  // The first token of a fresh process after its load (report_.cold.load_ms):
  // a decoder of the model's own context, as `qkv run` makes by default, and
  // a prefill of kColdPromptTokens, before anything else has run; the same
  // again, warm; then one read of the model file, for scale. Left out when that decoder is over
  // --memory-limit.
  void cold_start() {
    DecoderOptions d;
    const int64_t trained = model_.config.context_length;
    d.context = trained > 0 ? std::min(trained, kColdContextCap) : kColdContextCap;
    d.kv_type = o_.kv_type;
    d.prefill_batch = o_.prefill_batch;
    d.threads_batch = threads_batch_flag();
    // A --memory-limit bounds the rows asked for; the cold start is not one of them.
    if (!Decoder::over_memory_limit(model_, d, o_.memory_limit).empty()) {
      report_.cold.measured = false;
      return;
    }
    const int64_t n = std::min<int64_t>(kColdPromptTokens, static_cast<int64_t>(tokens_.size()));
    auto first_token_ms = [&] {
      const auto t0 = std::chrono::steady_clock::now();
      Decoder dec(model_, d);
      dec.prefill(0, tokens_.data(), n);
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    };
    report_.cold.first_token_ms = first_token_ms();
    report_.cold.warm_first_token_ms = first_token_ms();  // the same again: what is not first use
    report_.cold.prompt_tokens = n;
    report_.cold.context = d.context;
    report_.cold.file_read_ms = file_read_ms(o_.model_path);
  }

  // Milliseconds to read a file once, start to end, 8 MiB at a time (from
  // the page cache when it holds the file, as it does after the load): what
  // reading the weights costs a program that reads them; 0 if it cannot.
  static double file_read_ms(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    std::vector<char> buf(size_t{8} << 20);
    const auto t0 = std::chrono::steady_clock::now();
    ssize_t got = 0;
    while ((got = ::read(fd, buf.data(), buf.size())) > 0) {
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ::close(fd);
    return got == 0 ? ms : 0;
  }

  // --memory-limit, checked before a decoder allocates its cache and buffers.
  void check_memory(const DecoderOptions& d) const {
    const std::string over = Decoder::over_memory_limit(model_, d, o_.memory_limit);
    if (!over.empty()) fail("--memory-limit: the benchmark's decoder ", over);
  }

  static int64_t max_of(const std::vector<int64_t>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }

  // Runs warm-up + timed repetitions of `body` (which returns its own timed
  // seconds, so untimed setup can sit inside it); returns the timed seconds.
  // With the probe on and `paired` given, each timed repetition is followed
  // by a read of the streamed weights (GB/s into *paired; the best of
  // kPairedPasses passes, as the machine probe keeps its best): on a shared host
  // the memory bandwidth drifts within minutes, and this figure sees the same
  // machine as its repetition, where the probe after all rows may not.
  template <typename Body>
  std::vector<double> repeat(const std::string& what, Body&& body, std::vector<double>* paired = nullptr) {
    std::vector<double> seconds;
    const int total = o_.warmup + o_.reps;
    for (int r = 0; r < total; ++r) {
      progress_.show(what, r, total);
      const double s = body();
      if (r >= o_.warmup) {
        seconds.push_back(s);
        if (paired != nullptr && o_.probe) {
          paired->push_back(probe_read_regions(weights_.data(), weights_.size(), omp_get_max_threads(), kPairedPasses) * 1e-9);
        }
      }
    }
    return seconds;
  }

  // The paired-probe fields of a decode or batch row that moves `bytes_per_rep`
  // bytes per repetition.
  static void set_paired(BenchRow& row, const std::vector<double>& seconds, const std::vector<double>& paired,
                         double bytes_per_rep) {
    if (paired.empty() || paired.size() != seconds.size()) return;
    std::vector<double> pct;
    for (size_t i = 0; i < seconds.size(); ++i) {
      if (paired[i] > 0) pct.push_back(100.0 * bytes_per_rep / seconds[i] * 1e-9 / paired[i]);
    }
    if (pct.empty()) return;
    row.paired_probe_gbs = spread_of(paired);
    row.has_paired_probe = true;
    row.dram_bw_pct_paired = spread_of(pct).median;
  }

  // Fills rows' tokens/s and ms/token from per-repetition seconds for
  // `tokens_per_rep` tokens in `steps_per_rep` sequential steps.
  static void set_rates(BenchRow& row, const std::vector<double>& seconds, double tokens_per_rep,
                        double steps_per_rep) {
    std::vector<double> tps, ms;
    for (const double s : seconds) {
      tps.push_back(tokens_per_rep / s);
      ms.push_back(1000.0 * s / steps_per_rep);
    }
    row.tokens_per_s = spread_of(tps);
    row.ms_per_token = spread_of(ms);
  }

  void prefill_row(Decoder& dec, int64_t L) {
    const std::vector<double> seconds = repeat("prefill " + std::to_string(L) + " tokens", [&] {
      dec.cache().clear(0);
      const auto t0 = Clock::now();
      dec.prefill(0, tokens_.data(), L);
      return seconds_since(t0);
    });
    dec.cache().clear(0);
    BenchRow row;
    row.kind = "prefill";
    row.tokens = L;
    set_rates(row, seconds, double(L), double(L));
    const double flops = prefill_flops(model_.config, L);
    row.gflops = flops * 1e-9 / (row.ms_per_token.median * double(L) * 1e-3);
    finish(row);
  }

  // Average positions attended per step when `steps` steps start at depth D:
  // step i (0-based) attends to D + i + 1 positions (its own included).
  double mean_attended(int64_t D) const { return double(D) + double(o_.steps + 1) / 2.0; }

  void decode_row(Decoder& dec, int64_t D) {
    dec.cache().clear(0);
    if (D > 0) {
      progress_.note("filling the cache to depth " + std::to_string(D));
      dec.prefill(0, tokens_.data(), D);
    }
    std::vector<double> paired;
    const std::vector<double> seconds = repeat("decode at depth " + std::to_string(D), [&] {
      const auto t0 = Clock::now();
      for (int64_t i = 0; i < o_.steps; ++i) dec.step(0, tokens_[size_t(D + i)]);
      const double s = seconds_since(t0);
      dec.cache().truncate(0, D);
      return s;
    }, &paired);
    dec.cache().clear(0);
    BenchRow row;
    row.kind = "decode";
    row.tokens = o_.steps;
    row.depth = D;
    set_rates(row, seconds, double(o_.steps), double(o_.steps));
    const double bytes = double(report_.model.weight_bytes_read_per_token) +
                         mean_attended(D) * double(report_.model.kv_bytes_per_token);
    row.gbs = bytes * row.tokens_per_s.median * 1e-9;
    set_paired(row, seconds, paired, bytes * double(o_.steps));
    finish(row);
  }

  void batch_rows() {
    const int64_t n = max_of(o_.batches);
    DecoderOptions d;
    d.context = o_.batch_depth + o_.steps;
    d.kv_type = o_.kv_type;
    d.n_seqs = n;
    d.prefill_batch = o_.prefill_batch;
    d.decode_team = o_.decode_team;
    d.threads_batch = threads_batch_flag();
    check_memory(d);
    Decoder dec(model_, d);
    // Every sequence starts from the same batch_depth-token prompt: prefilled
    // once, copied to the others (the copy is what a shared system prompt costs).
    if (o_.batch_depth > 0) {
      progress_.note("filling " + std::to_string(n) + " sequences to depth " + std::to_string(o_.batch_depth));
      dec.prefill(0, tokens_.data(), o_.batch_depth);
      for (int64_t s = 1; s < n; ++s) dec.cache().copy_prefix(0, s, o_.batch_depth);
    }
    double batch1_tps = -1;
    for (const int64_t B : o_.batches) {
      std::vector<int64_t> seqs(static_cast<size_t>(B));
      for (int64_t s = 0; s < B; ++s) seqs[size_t(s)] = s;
      std::vector<int32_t> step_tokens(static_cast<size_t>(B));
      std::vector<double> paired;
      const std::vector<double> seconds = repeat("batch of " + std::to_string(B), [&] {
        const auto t0 = Clock::now();
        for (int64_t i = 0; i < o_.steps; ++i) {
          for (int64_t s = 0; s < B; ++s) step_tokens[size_t(s)] = tokens_[size_t(o_.batch_depth + i)];
          dec.step_batch(seqs.data(), step_tokens.data(), B);
        }
        const double sec = seconds_since(t0);
        for (int64_t s = 0; s < B; ++s) dec.cache().truncate(s, o_.batch_depth);
        return sec;
      }, &paired);
      BenchRow row;
      row.kind = "batch";
      row.tokens = o_.steps;
      row.depth = o_.batch_depth;
      row.batch = B;
      set_rates(row, seconds, double(o_.steps * B), double(o_.steps));
      // Per step: the weights once, and each sequence's own KV.
      const double bytes_per_step = double(report_.model.weight_bytes_read_per_token) +
                                    double(B) * mean_attended(o_.batch_depth) * double(report_.model.kv_bytes_per_token);
      row.gbs = bytes_per_step * (row.tokens_per_s.median / double(B)) * 1e-9;
      set_paired(row, seconds, paired, bytes_per_step * double(o_.steps));
      if (B == 1) batch1_tps = row.tokens_per_s.median;
      if (batch1_tps > 0) row.speedup_vs_batch1 = row.tokens_per_s.median / batch1_tps;
      finish(row);
    }
  }

  void finish(BenchRow& row) {
    row.peak_rss_mib = peak_rss_mib();
    report_.rows.push_back(row);
  }

  const BenchOptions& o_;
  const Model& model_;
  BenchReport& report_;
  Progress progress_;
  std::vector<ProbeRegion> weights_;  // read by the paired probe
  std::vector<int32_t> tokens_;
};

}  // namespace

int cmd_bench(int argc, char** argv) {
  // Encoders' embedding throughput: its own flags and report (bench_embed.cc).
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--embed") == 0) return cmd_bench_embed(argc, argv);
    if (std::strcmp(argv[i], "--verify-cost") == 0) return cmd_bench_verify(argc, argv);
  }
  BenchOptions o;
  bool synthetic_given = false;
  for (int i = 1; i < argc; ++i) {
    // The flag's name, kept before flag_value() advances i to its value.
    const char* flag = argv[i];
    const std::string a = flag;
    if (a == "-h" || a == "--help") {
      std::fputs(kBenchUsage, stdout);
      return 0;
    } else if (a == "-m" || a == "--model") {
      o.model_path = models::resolve_model_argument(flag_value(argc, argv, i));
    } else if (a == "-z" || a == "--tokenizer") {
      o.tokenizer_path = flag_value(argc, argv, i);
    } else if (a == "--synthetic") {
      o.synthetic = flag_value(argc, argv, i);
      synthetic_given = true;
    } else if (a == "--type") {
      o.weight_format = parse_weight_format_flag(flag, flag_value(argc, argv, i));
      o.type_given = true;
    } else if (a == "--untied") {
      o.untied = true;
    } else if (a == "--arch") {
      o.arch = flag_value(argc, argv, i);
      arch_spec(o.arch);  // an unknown family fails here, naming the known ones
      synthetic_given = true;
    } else if (a == "--no-row-groups") {
      o.row_groups = false;
    } else if (a == "--huge-pages") {
      o.huge_pages = true;
    } else if (a == "--kv-type") {
      o.kv_type = parse_type_flag(flag, flag_value(argc, argv, i));
    } else if (a == "-t" || a == "--threads") {
      o.threads = static_cast<int>(parse_int(flag, flag_value(argc, argv, i), 1, 1024));
    } else if (a == "--prompt-lengths") {
      o.prompt_lengths = parse_list(flag, flag_value(argc, argv, i), 1, 1 << 20);
    } else if (a == "--depths") {
      o.depths = parse_list(flag, flag_value(argc, argv, i), 0, 1 << 20);
    } else if (a == "--batches") {
      o.batches = parse_list(flag, flag_value(argc, argv, i), 1, 1024);
    } else if (a == "--steps") {
      o.steps = parse_int(flag, flag_value(argc, argv, i), 1, 1 << 16);
    } else if (a == "--batch-depth") {
      o.batch_depth = parse_int(flag, flag_value(argc, argv, i), 0, 1 << 20);
    } else if (a == "--reps") {
      o.reps = static_cast<int>(parse_int(flag, flag_value(argc, argv, i), 1, 1000));
    } else if (a == "--warmup") {
      o.warmup = static_cast<int>(parse_int(flag, flag_value(argc, argv, i), 0, 100));
    } else if (a == "-b" || a == "--batch-size") {
      o.prefill_batch = parse_int(flag, flag_value(argc, argv, i), 1, 1 << 16);
    } else if (a == "--memory-limit") {
      o.memory_limit = parse_bytes(flag, flag_value(argc, argv, i));
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--json-out") {
      o.json_out = flag_value(argc, argv, i);
    } else if (a == "-q" || a == "--quiet") {
      o.quiet = true;
    } else if (a == "--probe") {
      o.probe_only = true;
    } else if (a == "--region-per-call") {
      o.decode_team = false;
    } else if (a == "--no-probe") {
      o.probe = false;
    } else if (a == "--probe-mib") {
      o.probe_mib = parse_int(flag, flag_value(argc, argv, i), 1, 1 << 20);
    } else if (a == "--isa") {
      set_isa_cap(parse_isa_level(flag_value(argc, argv, i)), "--isa");
    } else if (a == "--no-block-gemm") {
      detail::set_block_gemm(false);
    } else {
      std::fprintf(stderr, "qkv bench: unknown flag '%s'\n\n%s", argv[i], kBenchUsage);
      return 2;
    }
  }
  if (!o.model_path.empty() && (synthetic_given || o.type_given || o.untied)) {
    std::fprintf(stderr, "qkv bench: -m MODEL and --synthetic/--type/--untied exclude each other\n\n%s", kBenchUsage);
    return 2;
  }
  if (o.probe_only && !o.probe) {
    std::fprintf(stderr, "qkv bench: --probe and --no-probe exclude each other\n");
    return 2;
  }
  if (!o.tokenizer_path.empty() && o.model_path.empty()) {
    std::fprintf(stderr, "qkv bench: -z TOKENIZER needs -m MODEL\n");
    return 2;
  }

  omp_set_num_threads(threads_or_default(o.threads));
  BenchReport report;
  report.version = version_string();
  report.simd_target = simd_target_name();
  report.threads = omp_get_max_threads();
  report.reps = o.reps;
  report.warmup = o.warmup;
  report.decode_steps = o.steps;
  report.batch_depth = o.batch_depth;
  report.decode_team = o.decode_team;
  report.load_average_start = load_average();

  // The probe runs after the rows (or alone with --probe) so that its read
  // buffer does not count in the rows' peak RSS.
  auto run_probe = [&] {
    const bool show = !o.quiet && isatty(STDERR_FILENO);
    if (show) std::fprintf(stderr, "\r\033[Kqkv bench: probing the machine...");
    ProbeOptions p;
    p.threads = report.threads;
    p.buffer_bytes = uint64_t(o.probe_mib) << 20;
    report.probe = probe_machine(p);
    report.has_probe = true;
    if (show) std::fprintf(stderr, "\r\033[K");
  };
  if (o.probe_only) {
    run_probe();
    if (o.json) {
      std::printf("%s\n", probe_to_json(report.probe).dump().c_str());
    } else {
      print_probe(stdout, report.probe);
    }
    return 0;
  }

  Model model;
  const auto load_start = std::chrono::steady_clock::now();
  if (!o.model_path.empty()) {
    model = load_model(o.model_path);
    report.model.name = o.model_path.substr(o.model_path.find_last_of('/') + 1);
    report.model.source = o.model_path;
    report.model.weight_type = dtype_name(model.layers.empty() ? model.token_embd.type : model.layers[0].wq.type);
  } else {
    const bool tied = arch_output_tied(o.arch, !o.untied);
    model = make_synthetic_model(with_arch(synthetic_preset(o.synthetic), o.arch), o.weight_format, 1234, tied);
    report.model.name = o.arch == "llama" ? o.synthetic : o.synthetic + " " + o.arch;
    report.model.source = std::string(tied ? "synthetic" : "synthetic, untied output") + ", " + o.arch;
    report.model.weight_type = weight_format_name(o.weight_format);
  }
  lay_out_weights(model, o.row_groups);
  place_weights(model);  // --numa (kernels/threads/placement.h)
  // A file's load is what a user waits for; a synthetic model's making is not.
  if (!o.model_path.empty()) {
    report.cold.measured = true;
    report.cold.load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start).count();
  }
  if (o.huge_pages) {
    move_weights_to_huge_pages(model);
    report.model.source += ", weights on huge pages";
  }
  int32_t first_token = 1;  // llama's BOS id
  if (!o.tokenizer_path.empty()) {
    const Tokenizer tok = Tokenizer::load(o.tokenizer_path, model.config.vocab_size);
    QKV_CHECK(tok.vocab_size() == model.config.vocab_size, "the tokenizer has ", tok.vocab_size(),
              " tokens but the model's vocabulary is ", model.config.vocab_size);
    first_token = tok.bos_id();
  }
  first_token = std::min<int32_t>(first_token, static_cast<int32_t>(model.config.vocab_size - 1));

  const ModelConfig& c = model.config;
  report.model.kv_type = dtype_name(o.kv_type);
  report.model.dim = c.dim;
  report.model.n_layers = c.n_layers;
  report.model.n_heads = c.n_heads;
  report.model.n_kv_heads = c.n_kv_heads;
  report.model.hidden_dim = c.hidden_dim;
  report.model.vocab_size = c.vocab_size;
  report.model.parameters = model.parameter_count();
  report.model.weight_bytes = model.weight_bytes();
  report.model.weight_bytes_read_per_token = weight_bytes_read_per_token(model);
  QKV_CHECK(dtype_row_ok(o.kv_type, size_t(c.head_dim)), "a ", dtype_name(o.kv_type),
            " KV cache needs head_dim to be a multiple of ", dtype_block_values(o.kv_type), "; this model's is ",
            c.head_dim);
  report.model.kv_bytes_per_token = uint64_t(c.n_layers) * 2 * uint64_t(c.n_kv_heads) *
                                    dtype_row_bytes(o.kv_type, size_t(c.head_dim));

  Bench(o, model, first_token, report).run();
  report.load_average_end = load_average();
  if (o.probe) {
    run_probe();
    apply_probe(report);
  }

  const std::string json = report_to_json(report).dump();
  if (!o.json_out.empty()) {
    write_file_atomically(o.json_out, json + "\n");
  }
  if (o.json) {
    std::printf("%s\n", json.c_str());
  } else {
    print_report_table(stdout, report);
  }
  return 0;
}

}  // namespace qkv::tools

// A machine probe: the two ceilings a decoder's speed is judged against.
//
//   DRAM read bandwidth: every thread reads its share of a buffer much larger
//   than the last-level cache through several concurrent streams (one stream per
//   thread leaves the prefetchers and the memory controller idle between
//   misses). Reported as the best of several passes, in GB/s (1e9 bytes/s).
//   FP32 FMA peak: every thread runs many independent FMA chains on registers
//   only (enough chains to cover the FMA latency times the FMA ports), with the
//   SIMD target the kernels use. Best of several runs, in GFLOP/s (an FMA is 2).
//
// Both are measured at one thread and at N threads (N = the threads qkv runs
// with), so a single-threaded or a parallel result can be compared with its own
// ceiling.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace qkv {

// Concurrent read streams per thread in the bandwidth probe.
constexpr uint64_t kProbeReadStreams = 4;

struct ProbeOptions {
  uint64_t buffer_bytes = uint64_t(1) << 30;  // read buffer; must be >> the LLC
  int threads = 0;                            // N; 0: omp_get_max_threads()
  int read_passes = 5;                        // passes per thread count (best kept)
  double fma_seconds = 0.1;                   // per FMA run (best of 3 kept)
};

struct ProbeResult {
  int threads = 0;  // N
  uint64_t buffer_bytes = 0;
  int read_streams_per_thread = 0;
  double dram_read_gbs_1t = 0;  // GB/s, one thread
  double dram_read_gbs = 0;     // GB/s, N threads
  double fma_gflops_1t = 0;     // GFLOP/s, one thread
  double fma_gflops = 0;        // GFLOP/s, N threads
  std::string simd_target;      // the Highway target that ran
};

// Bytes/s of reading `bytes` (a multiple of 64) at `data` with `threads`
// threads, best of `passes`. `data` must be 64-byte aligned.
double probe_read_bandwidth(const void* data, uint64_t bytes, int threads, int passes);

// A read-only span of resident memory for probe_read_regions.
struct ProbeRegion {
  const void* data;
  uint64_t bytes;
};

// Bytes/s of reading every region once with `threads` threads (each reads its
// share of every region through kProbeReadStreams streams), best of `passes`.
// Only each region's whole 64-byte lines are read and counted; 0 if no region
// holds one. The bytes can be anything (integer adds), so `qkv bench` reads the
// model's own weights between repetitions: a bandwidth figure paired with each
// timed repetition, with no extra buffer to raise the peak RSS. The regions
// together must be much larger than the last-level cache for a DRAM figure,
// unless `cold`: then every line is flushed from all cache levels before each
// pass, so even regions the caller has just read, or that would fit the
// last-level cache, are read from DRAM (the kernel benchmarks pair a decode
// over a 64 MiB KV cache with a read of that same cache this way).
double probe_read_regions(const ProbeRegion* regions, size_t count, int threads, int passes, bool cold = false);

// Flushes every line of the regions from all cache levels (clflush, `threads`
// threads), so that what reads them next reads DRAM: the decode benchmarks'
// cold variants, on machines whose last-level cache holds a whole KV cache.
void flush_regions(const ProbeRegion* regions, size_t count, int threads);

// FLOP/s of `threads` threads each running independent FMA chains for about
// `seconds`, best of 3 runs.
double probe_fma_peak(int threads, double seconds);

// Both probes at 1 and N threads. Allocates (and frees) options.buffer_bytes;
// throws qkv::Error if that fails or an option is out of range.
ProbeResult probe_machine(const ProbeOptions& options = ProbeOptions());

}  // namespace qkv

// The machine probe (see probe.h). The read and FMA loops are Highway kernels
// so they run on the same SIMD target as the decoder's kernels.
#include "kernels/machine/probe.h"

#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "kernels/error.h"
#include "kernels/simd_target.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/machine/probe.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/cache_control.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace qkv {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Sums kProbeReadStreams (4) runs of `len` 32-bit words that start `len` apart
// at `base`: one loop reads all of them at once, two vectors per stream per
// iteration, so 8 independent loads are in flight. Integer adds, so any bytes
// can be read (a model's weights too: as floats they could be subnormals or
// NaNs). Returns the sum so the reads cannot be optimised away.
uint32_t ReadStreams(const uint32_t* HWY_RESTRICT base, size_t len) {
  const hn::ScalableTag<uint32_t> d;
  const size_t N = hn::Lanes(d);
  const uint32_t* s0 = base;
  const uint32_t* s1 = base + len;
  const uint32_t* s2 = base + 2 * len;
  const uint32_t* s3 = base + 3 * len;
  auto a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  auto b0 = hn::Zero(d), b1 = hn::Zero(d), b2 = hn::Zero(d), b3 = hn::Zero(d);
  size_t i = 0;
  for (; i + 2 * N <= len; i += 2 * N) {
    a0 = hn::Add(a0, hn::Load(d, s0 + i));
    a1 = hn::Add(a1, hn::Load(d, s1 + i));
    a2 = hn::Add(a2, hn::Load(d, s2 + i));
    a3 = hn::Add(a3, hn::Load(d, s3 + i));
    b0 = hn::Add(b0, hn::Load(d, s0 + i + N));
    b1 = hn::Add(b1, hn::Load(d, s1 + i + N));
    b2 = hn::Add(b2, hn::Load(d, s2 + i + N));
    b3 = hn::Add(b3, hn::Load(d, s3 + i + N));
  }
  const auto total = hn::Add(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)), hn::Add(hn::Add(b0, b1), hn::Add(b2, b3)));
  uint32_t sum = hn::GetLane(hn::SumOfLanes(d, total));
  for (; i < len; ++i) sum += s0[i] + s1[i] + s2[i] + s3[i];
  return sum;
}

// kChains independent accumulators, each updated acc = acc * m + a per
// iteration: enough chains to keep every FMA port busy through the FMA latency
// (Zen 5: 2 ports x 4 cycles = 8), few enough (12 + 2 constants) to stay in the
// 16 registers of AVX2/SSE4. The values converge to a/(1-m) = 1, never to
// subnormals. Returns the sum; *flops gets the FLOPs done.
constexpr int kChains = 12;

float FmaChains(uint64_t iterations, double* flops) {
  const hn::ScalableTag<float> d;
  const auto m = hn::Set(d, 0.9999f);
  const auto a = hn::Set(d, 0.0001f);
  auto v0 = hn::Set(d, 1.00f), v1 = hn::Set(d, 1.01f), v2 = hn::Set(d, 1.02f), v3 = hn::Set(d, 1.03f);
  auto v4 = hn::Set(d, 1.04f), v5 = hn::Set(d, 1.05f), v6 = hn::Set(d, 1.06f), v7 = hn::Set(d, 1.07f);
  auto v8 = hn::Set(d, 1.08f), v9 = hn::Set(d, 1.09f), v10 = hn::Set(d, 1.10f), v11 = hn::Set(d, 1.11f);
  for (uint64_t it = 0; it < iterations; ++it) {
    v0 = hn::MulAdd(v0, m, a);
    v1 = hn::MulAdd(v1, m, a);
    v2 = hn::MulAdd(v2, m, a);
    v3 = hn::MulAdd(v3, m, a);
    v4 = hn::MulAdd(v4, m, a);
    v5 = hn::MulAdd(v5, m, a);
    v6 = hn::MulAdd(v6, m, a);
    v7 = hn::MulAdd(v7, m, a);
    v8 = hn::MulAdd(v8, m, a);
    v9 = hn::MulAdd(v9, m, a);
    v10 = hn::MulAdd(v10, m, a);
    v11 = hn::MulAdd(v11, m, a);
  }
  const auto s = hn::Add(hn::Add(hn::Add(hn::Add(v0, v1), hn::Add(v2, v3)), hn::Add(hn::Add(v4, v5), hn::Add(v6, v7))),
                         hn::Add(hn::Add(v8, v9), hn::Add(v10, v11)));
  *flops = 2.0 * kChains * static_cast<double>(hn::Lanes(d)) * static_cast<double>(iterations);
  return hn::GetLane(hn::SumOfLanes(d, s));
}

}  // namespace HWY_NAMESPACE
}  // namespace qkv
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qkv {
HWY_EXPORT(ReadStreams);
HWY_EXPORT(FmaChains);

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Keeps the kernels' results observable so no pass is optimised away.
volatile float g_sink = 0.0f;
volatile uint32_t g_word_sink = 0;

// An anonymous mapping advised for transparent huge pages (fewer TLB misses,
// as the KV cache does), written once by the threads that will read it.
class ProbeBuffer {
 public:
  ProbeBuffer(uint64_t bytes, int threads) : bytes_(bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) fail("probe: cannot map a ", bytes, "-byte read buffer");
    data_ = p;
    madvise(p, bytes, MADV_HUGEPAGE);
    float* f = static_cast<float*>(p);
    const int64_t n = static_cast<int64_t>(bytes / sizeof(float));
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; ++i) f[i] = 1.0f;
  }
  ~ProbeBuffer() { munmap(data_, bytes_); }
  ProbeBuffer(const ProbeBuffer&) = delete;
  ProbeBuffer& operator=(const ProbeBuffer&) = delete;
  const void* data() const { return data_; }

 private:
  void* data_ = nullptr;
  uint64_t bytes_;
};

}  // namespace

double probe_read_bandwidth(const void* data, uint64_t bytes, int threads, int passes) {
  QKV_CHECK(data != nullptr && reinterpret_cast<uintptr_t>(data) % 64 == 0,
            "probe: the read buffer must be 64-byte aligned");
  QKV_CHECK(bytes >= 64 && bytes % 64 == 0, "probe: the read buffer size must be a positive multiple of 64, not ",
            bytes);
  const ProbeRegion region{data, bytes};
  return probe_read_regions(&region, 1, threads, passes);
}

void flush_regions(const ProbeRegion* regions, size_t count, int threads) {
  QKV_CHECK(threads >= 1 && threads <= 4096, "probe: thread count must be 1..4096, not ", threads);
  for (size_t k = 0; k < count; ++k) {
    QKV_CHECK(regions[k].data != nullptr || regions[k].bytes == 0, "probe: region ", k, " has no data");
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (size_t k = 0; k < count; ++k) {
    const uint8_t* p = static_cast<const uint8_t*>(regions[k].data);
    for (uint64_t off = 0; off < regions[k].bytes; off += 64) hwy::FlushCacheline(p + off);
    if (regions[k].bytes != 0) hwy::FlushCacheline(p + regions[k].bytes - 1);  // the last, partial line
  }
  hwy::FlushStream();  // a fence: the flushes complete before what follows (clflush is ordered by it)
}

double probe_read_regions(const ProbeRegion* regions, size_t count, int threads, int passes, bool cold) {
  QKV_CHECK(regions != nullptr || count == 0, "probe: no regions given");
  QKV_CHECK(threads >= 1 && threads <= 4096, "probe: thread count must be 1..4096, not ", threads);
  QKV_CHECK(passes >= 1 && passes <= 1000, "probe: passes must be 1..1000, not ", passes);
  // Each region's whole 64-byte lines, as 32-bit words.
  struct Lines {
    const uint32_t* base;
    uint64_t n;  // words, a multiple of 16
  };
  std::vector<Lines> lines;
  uint64_t bytes = 0;
  for (size_t k = 0; k < count; ++k) {
    QKV_CHECK(regions[k].data != nullptr || regions[k].bytes == 0, "probe: region ", k, " has no data");
    const uintptr_t a = reinterpret_cast<uintptr_t>(regions[k].data);
    const uintptr_t first = (a + 63) / 64 * 64, end = (a + regions[k].bytes) / 64 * 64;
    if (end <= first) continue;
    lines.push_back({reinterpret_cast<const uint32_t*>(first), (end - first) / sizeof(uint32_t)});
    bytes += end - first;
  }
  if (bytes == 0) return 0.0;
  double best = 0.0;
  for (int p = 0; p < passes; ++p) {
    if (cold) flush_regions(regions, count, threads);
    uint32_t sum = 0;
    const auto t0 = Clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : sum)
    {
      // Each thread's share of every region is whole cache lines (16 words),
      // split into kProbeReadStreams equal streams of whole cache lines; what
      // does not divide evenly is read by a plain loop at the end of the share.
      const uint64_t t = static_cast<uint64_t>(omp_get_thread_num()), nt = static_cast<uint64_t>(omp_get_num_threads());
      for (const Lines& r : lines) {
        const uint64_t share = r.n / nt / 16 * 16;
        const uint64_t begin = t * share, end = t + 1 == nt ? r.n : begin + share;
        const uint64_t len = (end - begin) / (16 * kProbeReadStreams) * 16;
        if (len > 0) sum += HWY_DYNAMIC_DISPATCH(ReadStreams)(r.base + begin, len);
        for (uint64_t i = begin + kProbeReadStreams * len; i < end; ++i) sum += r.base[i];
      }
    }
    const double s = seconds_since(t0);
    g_word_sink = g_word_sink + sum;
    if (s > 0) best = std::max(best, static_cast<double>(bytes) / s);
  }
  return best;
}

double probe_fma_peak(int threads, double seconds) {
  QKV_CHECK(threads >= 1 && threads <= 4096, "probe: thread count must be 1..4096, not ", threads);
  QKV_CHECK(seconds > 0 && seconds <= 60, "probe: FMA run time must be in (0, 60] seconds, not ", seconds);
  // Calibrate the iteration count on one thread until a run takes a quarter
  // of the target time, then scale it to the whole target.
  uint64_t iterations = 1 << 14;
  double flops = 0;
  for (;;) {
    const auto t0 = Clock::now();
    g_sink = g_sink + HWY_DYNAMIC_DISPATCH(FmaChains)(iterations, &flops);
    const double s = seconds_since(t0);
    if (s >= seconds / 4 || iterations >= (uint64_t(1) << 40)) {
      iterations = static_cast<uint64_t>(static_cast<double>(iterations) * seconds / std::max(s, 1e-9)) + 1;
      break;
    }
    iterations *= 2;
  }
  double best = 0.0;
  for (int run = 0; run < 3; ++run) {
    double total = 0.0;
    float sum = 0.0f;
    const auto t0 = Clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : total, sum)
    {
      double f = 0.0;
      sum += HWY_DYNAMIC_DISPATCH(FmaChains)(iterations, &f);
      total += f;
    }
    const double s = seconds_since(t0);
    g_sink = g_sink + sum;
    if (s > 0) best = std::max(best, total / s);
  }
  return best;
}

ProbeResult probe_machine(const ProbeOptions& options) {
  ProbeResult r;
  r.threads = options.threads > 0 ? options.threads : omp_get_max_threads();
  QKV_CHECK(r.threads <= 4096, "probe: thread count must be 1..4096, not ", r.threads);
  QKV_CHECK(options.buffer_bytes >= (uint64_t(1) << 20) && options.buffer_bytes <= (uint64_t(1) << 40),
            "probe: the read buffer must be 1 MiB .. 1 TiB, not ", options.buffer_bytes, " bytes");
  r.buffer_bytes = options.buffer_bytes / 64 * 64;
  r.read_streams_per_thread = static_cast<int>(kProbeReadStreams);
  r.simd_target = simd_target_name();
  {
    ProbeBuffer buffer(r.buffer_bytes, r.threads);
    r.dram_read_gbs_1t = probe_read_bandwidth(buffer.data(), r.buffer_bytes, 1, options.read_passes) * 1e-9;
    r.dram_read_gbs = r.threads == 1 ? r.dram_read_gbs_1t
                                     : probe_read_bandwidth(buffer.data(), r.buffer_bytes, r.threads,
                                                            options.read_passes) * 1e-9;
  }
  r.fma_gflops_1t = probe_fma_peak(1, options.fma_seconds) * 1e-9;
  r.fma_gflops = r.threads == 1 ? r.fma_gflops_1t : probe_fma_peak(r.threads, options.fma_seconds) * 1e-9;
  return r;
}

}  // namespace qkv
#endif

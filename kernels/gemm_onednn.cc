// Large-batch matmul (prefill) through oneDNN 2.6: Y[M][N] = X[M][K] · Wᵀ with W
// row-major [N][K], read in place as a K x N matrix with strides {1, K}.
//
// F32 weights: one f32 GEMM. Other weights are never converted as a whole (a
// cached copy would double the resident weights): tiles of rows are decoded into
// a reusable per-thread scratch of about 2 MB, in the GEMM's precision, and each
// tile is one GEMM writing its columns of Y. BF16 weights in bf16 mode need no
// decode at all. Primitives are cached by shape (creating one costs far more
// than a small GEMM).
//
// Row buckets: a batch of M rows (rounded up to 16) runs as GEMMs of at most
// 512 rows, each a multiple of 16 up to 256 or of 64 above (row_pieces), so
// a weight shape needs at most 20 primitives however many prompt lengths a
// server meets, and prepare_matmul_onednn can build them all before the first
// request. Creating a primitive JITs oneDNN's kernels for it: ~0.2 ms each on
// AVX-512 BF16, but seconds for a server's first burst of new lengths on an
// AMX host when every length made its own.
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "kernels/error.h"
#include "kernels/linear_internal.h"
#include "kernels/machine/cpu_features.h"
#include "kernels/quant/vec_dot.h"

namespace qkv {
namespace detail {
namespace {

using dnnl::memory;

dnnl::engine& cpu_engine() {
  static dnnl::engine engine = [] {
    // gemm_primitive's cache below holds the primitives qkv reuses; oneDNN's
    // own (1024 entries by default) would keep a second copy of every shape a
    // server meets, about 47 KB each (a 512 x 512 f32 GEMM), so it is off
    // unless ONEDNN_PRIMITIVE_CACHE_CAPACITY asks for it.
    if (std::getenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY") == nullptr) dnnl::set_primitive_cache_capacity(0);
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return engine;
}

// M, K, N, ldc, weight/activation type.
using GemmKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int>;

struct Gemm {
  dnnl::matmul matmul;
  memory::desc scratchpad;
};

// Thread-safe cache of matmul primitives by shape.
// *created (when given) says whether this call made the primitive.
std::shared_ptr<const Gemm> gemm_primitive(int64_t M, int64_t K, int64_t N, int64_t ldc, memory::data_type dt,
                                           bool* created = nullptr) {
  static std::mutex mu;
  static std::map<GemmKey, std::shared_ptr<const Gemm>> cache;
  const GemmKey key{M, K, N, ldc, static_cast<int>(dt)};
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  const memory::desc src({M, K}, dt, memory::dims{K, 1});
  const memory::desc wei({K, N}, dt, memory::dims{1, K});
  const memory::desc dst({M, N}, memory::data_type::f32, memory::dims{ldc, 1});
  // The scratchpad is the caller's (run_gemm), not each primitive's: with
  // oneDNN's default every cached primitive kept its own, about 300 KB for a
  // 512 x 512 f32 GEMM, so a server meeting many batch sizes grew by tens of MB.
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, wei, dst), attr, cpu_engine());
  auto prim = std::make_shared<const Gemm>(Gemm{dnnl::matmul(pd), pd.scratchpad_desc()});
  if (created != nullptr) *created = true;
  std::lock_guard<std::mutex> lock(mu);
  // Bounded: shapes come from the model, but do not grow without limit.
  if (cache.size() >= 256) cache.clear();
  return cache.emplace(key, prim).first->second;
}

// Y (row stride ldc) = A[M][K] · B where B's column n is the K values at b + n*K.
// M is a row bucket (row_pieces).
void run_gemm(const void* a, const void* b, float* y, int64_t M, int64_t K, int64_t N, int64_t ldc,
              memory::data_type dt) {
  auto prim = gemm_primitive(M, K, N, ldc, dt);
  auto& eng = cpu_engine();
  memory ma({{M, K}, dt, memory::dims{K, 1}}, eng, const_cast<void*>(a));
  memory mb({{K, N}, dt, memory::dims{1, K}}, eng, const_cast<void*>(b));
  memory mc({{M, N}, memory::data_type::f32, memory::dims{ldc, 1}}, eng, y);
  // One scratchpad per calling thread, grown to the largest a primitive asked for.
  static thread_local std::vector<uint8_t> pad;
  if (pad.size() < prim->scratchpad.get_size()) pad.resize(prim->scratchpad.get_size());
  memory mpad(prim->scratchpad, eng, pad.data());
  dnnl::stream stream(eng);
  prim->matmul.execute(stream, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}, {DNNL_ARG_SCRATCHPAD, mpad}});
  stream.wait();
}

// Batches run as a multiple of kRowQuantum rows (zero rows appended to X,
// their outputs dropped), in pieces of the row buckets: every multiple of 16
// up to kSmallPieces, every multiple of 64 from there up to kMaxPiece (20).
constexpr int64_t kRowQuantum = 16;
constexpr int64_t kSmallPieces = 256;
constexpr int64_t kLargeQuantum = 64;
constexpr int64_t kMaxPiece = 512;

int64_t padded_rows(int64_t M) { return (M + kRowQuantum - 1) / kRowQuantum * kRowQuantum; }

// fn(first row, rows) for the pieces of Mp (a multiple of kRowQuantum) rows:
// as many kMaxPiece as fit, then what is left in one piece up to
// kSmallPieces, else as a multiple of kLargeQuantum and the rest. Measured on
// 143M F16 prefill (AVX-512 BF16), against one GEMM of the padded rows: 112
// rows as 64 + 32 + 16 cost 12%, 208 rows as 192 + 16 or 112 + 96 4-5%, 304
// rows as 256 + 48 nothing measurable.
template <class Fn>
void row_pieces(int64_t Mp, Fn&& fn) {
  int64_t off = 0;
  for (; Mp - off >= kMaxPiece; off += kMaxPiece) fn(off, kMaxPiece);
  const int64_t rest = Mp - off;
  if (rest == 0) return;
  if (rest <= kSmallPieces) return fn(off, rest);
  const int64_t large = rest / kLargeQuantum * kLargeQuantum;
  fn(off, large);
  if (rest > large) fn(off + large, rest - large);
}

// Every piece size row_pieces gives for up to max_rows rows, in increasing order.
std::vector<int64_t> row_buckets(int64_t max_rows) {
  const int64_t top = std::min(kMaxPiece, padded_rows(max_rows));
  std::vector<int64_t> sizes;
  for (int64_t rows = kRowQuantum; rows <= top; rows += rows < kSmallPieces ? kRowQuantum : kLargeQuantum) {
    sizes.push_back(rows);
  }
  return sizes;
}

// Y (row stride ldc) = A[Mp][K] · B by row pieces; A's rows are elem bytes a value.
void run_gemm_pieces(const void* a, size_t elem, const void* b, float* y, int64_t Mp, int64_t K, int64_t N,
                     int64_t ldc, memory::data_type dt) {
  row_pieces(Mp, [&](int64_t off, int64_t rows) {
    run_gemm(static_cast<const uint8_t*>(a) + static_cast<size_t>(off * K) * elem, b, y + off * ldc, rows, K, N, ldc, dt);
  });
}

// Reusable scratch: grows to the largest tile seen, never shrinks (a few MB).
template <typename T>
T* scratch(std::vector<T>& buf, size_t n) {
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

// Decodes rows [r0, r0+n) of W into `out` as f32 or bf16, rows split over threads.
void decode_tile(const Matrix& W, int64_t r0, int64_t n, GemmPrecision p, void* out) {
  const int64_t K = W.cols;
#pragma omp parallel if (omp_get_max_threads() > 1 && n * K >= 65536)
  {
    const int parts = omp_get_num_threads(), part = omp_get_thread_num();
    const int64_t lo = r0 + n * part / parts, hi = r0 + n * (part + 1) / parts;
    if (p == GemmPrecision::kF32) {
      float* o = static_cast<float*>(out) + (lo - r0) * K;
      if (!decode_rows_f32_blocks(W, lo, hi, o)) decode_rows_f32(W, lo, hi, o);
    } else if (!decode_rows_bf16(W, lo, hi, static_cast<uint16_t*>(out) + (lo - r0) * K)) {
      static thread_local std::vector<float> row;
      float* f = scratch(row, static_cast<size_t>(K));
      for (int64_t r = lo; r < hi; ++r) {
        decode_rows_f32(W, r, r + 1, f);
        round_to_bf16(f, static_cast<size_t>(K), static_cast<uint16_t*>(out) + (r - r0) * K);
      }
    }
  }
}

// Whether oneDNN can make a bf16 matmul on this CPU (it cannot below AVX-512).
bool bf16_gemm_available() {
  static const bool ok = [] {
    try {
      const memory::desc a({16, 32}, memory::data_type::bf16, memory::dims{32, 1});
      const memory::desc b({32, 16}, memory::data_type::bf16, memory::dims{1, 32});
      const memory::desc c({16, 16}, memory::data_type::f32, memory::dims{16, 1});
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), cpu_engine());
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return ok;
}

// Whether the bf16 GEMM outruns the f32 one here. It does with AMX-BF16 tiles
// and on AMD's AVX512_BF16 (not where an ISA cap hides it and oneDNN would
// emulate bf16; Zen 4/5 retire vdpbf16ps at twice the f32 FMA
// rate). Intel cores without AMX (or with AMX hidden from a VM guest) retire
// vdpbf16ps at the f32 FMA's rate, so rounding to bf16 only costs: on such a
// 2-core Xeon, bench_linear onednn_{f32,bf16}/f16/5632x2048/512 ran at 246
// and 155 GFLOP/s, and qkv bench's 143M F16 prefill of 512 tokens at 707-966
// against 576-607 tokens/s.
bool bf16_gemm_faster() {
  static const bool faster = bf16_gemm_available() && (cpu_features().amx_bf16 || (cpu_features().avx512_bf16 && !cpu_features().intel));
  return faster;
}

// The precision a GEMM on W runs in: f32 for F32 weights, and everywhere
// oneDNN has no bf16 matmul.
GemmPrecision effective_precision(const Matrix& W, GemmPrecision p) {
  return W.type == DType::F32 || !bf16_gemm_available() ? GemmPrecision::kF32 : p;
}

// Whether the GEMM reads W as it is (F32, or BF16 in bf16) instead of decoded tiles.
bool in_place_weights(const Matrix& W, GemmPrecision p) {
  return W.type == DType::F32 || (W.type == DType::BF16 && p == GemmPrecision::kBF16);
}

// Rows of a decoded tile: about 2 MB of decoded weights, a multiple of 64 rows.
int64_t tile_rows(int64_t K, size_t elem) {
  return std::max<int64_t>(64, int64_t(2 << 20) / (K * static_cast<int64_t>(elem)) / 64 * 64);
}

}  // namespace

GemmPrecision default_gemm_precision(DType t) {
  // F32 weights stay f32 (an f32 model should compute like its f32 reference).
  // BF16 weights run natively in bf16 (weights exact, no decode). F16 and Q8_0
  // also go through bf16: measured (bench_linear, onednn_f32 vs onednn_bf16,
  // M = 64 and 512) about 1.8x the f32 GEMM's rate, for a relative error per
  // product below 2^-8 (activation and weight each rounded to bf16).
  // On CPUs where oneDNN has no bf16 matmul (AVX2 machines) everything runs in f32,
  // and so it does where bf16 is slower (bf16_gemm_faster).
  return t == DType::F32 || !bf16_gemm_faster() ? GemmPrecision::kF32 : GemmPrecision::kBF16;
}

void matmul_onednn(const Matrix& W, const float* X, int64_t M, float* Y) {
  matmul_onednn(W, X, M, Y, default_gemm_precision(W.type));
}

void matmul_onednn(const Matrix& W, const float* X, int64_t M, float* Y, GemmPrecision p) {
  const int64_t K = W.cols, N = W.rows;
  p = effective_precision(W, p);
  const memory::data_type dt = p == GemmPrecision::kF32 ? memory::data_type::f32 : memory::data_type::bf16;
  const int64_t Mp = padded_rows(M);
  try {
    const void* a = X;
    static thread_local std::vector<uint16_t> x_bf16;
    static thread_local std::vector<float> x_f32;
    if (p == GemmPrecision::kBF16) {
      uint16_t* xb = scratch(x_bf16, static_cast<size_t>(Mp * K));
      round_to_bf16(X, static_cast<size_t>(M * K), xb);
      std::memset(xb + M * K, 0, static_cast<size_t>((Mp - M) * K) * sizeof(uint16_t));
      a = xb;
    } else if (Mp != M) {
      float* xf = scratch(x_f32, static_cast<size_t>(Mp * K));
      std::memcpy(xf, X, static_cast<size_t>(M * K) * sizeof(float));
      std::memset(xf + M * K, 0, static_cast<size_t>((Mp - M) * K) * sizeof(float));
      a = xf;
    }
    const size_t elem = p == GemmPrecision::kF32 ? 4 : 2;
    static thread_local std::vector<float> out_buf;
    if (in_place_weights(W, p)) {
      if (Mp == M) return run_gemm_pieces(a, elem, W.data, Y, M, K, N, N, dt);
      float* yp = scratch(out_buf, static_cast<size_t>(Mp * N));
      run_gemm_pieces(a, elem, W.data, yp, Mp, K, N, N, dt);
      std::memcpy(Y, yp, static_cast<size_t>(M * N) * sizeof(float));
      return;
    }
    const int64_t tile = tile_rows(K, elem);
    // Each tile's product goes to a dense [Mp][n] buffer and is then copied into
    // its columns of Y: oneDNN 2.6 uses its fast brgemm kernels only for a dense
    // destination (a strided one falls back to the slower gemm:jit).
    static thread_local std::vector<uint8_t> tile_buf;
    void* wt = scratch(tile_buf, static_cast<size_t>(std::min(tile, N) * K) * elem);
    float* yt = scratch(out_buf, static_cast<size_t>(std::min(tile, N) * Mp));
    for (int64_t r0 = 0; r0 < N; r0 += tile) {
      const int64_t n = std::min(tile, N - r0);
      decode_tile(W, r0, n, p, wt);
      run_gemm_pieces(a, elem, wt, yt, Mp, K, n, n, dt);
#pragma omp parallel for schedule(static) if (omp_get_max_threads() > 1 && M * n >= 65536)
      for (int64_t m = 0; m < M; ++m) std::memcpy(Y + m * N + r0, yt + m * n, static_cast<size_t>(n) * sizeof(float));
    }
  } catch (const dnnl::error& e) {
    fail("matmul: oneDNN failed for ", M, "x", K, " times ", dtype_name(W.type), " ", N, "x", K, ": ",
         e.what());
  }
}

int64_t prepare_matmul_onednn(const Matrix& W, int64_t max_rows, GemmPrecision p) {
  const int64_t K = W.cols, N = W.rows;
  if (K <= 0 || N <= 0 || max_rows <= 0) return 0;
  p = effective_precision(W, p);
  const memory::data_type dt = p == GemmPrecision::kF32 ? memory::data_type::f32 : memory::data_type::bf16;
  // The GEMMs' widths: all of W in place, else a whole tile and the last one's.
  int64_t widths[2] = {N, 0};
  if (!in_place_weights(W, p)) {
    const int64_t tile = tile_rows(K, p == GemmPrecision::kF32 ? 4 : 2);
    widths[0] = std::min(tile, N);
    if (N > tile && N % tile != 0) widths[1] = N % tile;
  }
  int64_t built = 0;
  try {
    for (int64_t rows : row_buckets(max_rows)) {
      for (int64_t n : widths) {
        bool created = false;
        if (n > 0) gemm_primitive(rows, K, n, n, dt, &created);
        built += created;
      }
    }
  } catch (const dnnl::error& e) {
    fail("matmul: oneDNN failed to build the GEMM for ", K, " columns of ", dtype_name(W.type), ": ", e.what());
  }
  return built;
}

}  // namespace detail

const char* prefill_gemm_kernel_name(DType t) {
  if (detail::block_gemm_type(t, kMatmulSmallMaxM + 1)) return quant_gemm_name();
  return detail::default_gemm_precision(t) == detail::GemmPrecision::kBF16 ? "oneDNN bf16" : "oneDNN f32";
}

}  // namespace qkv

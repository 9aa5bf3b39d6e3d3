// The AMX path of the small-batch matmul: bf16 weight tiles times the inputs
// on AMX-BF16 (TDPBF16PS).
//
// A Highway "-inl" header of the small-batch matmul:
// kernels/matmul_small/matmul_small.cc includes it once per SIMD target
// (foreach_target), after hwy/highway.h.
#if defined(QKV_KERNELS_MATMUL_SMALL_AMX_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef QKV_KERNELS_MATMUL_SMALL_AMX_INL_H_
#undef QKV_KERNELS_MATMUL_SMALL_AMX_INL_H_
#else
#define QKV_KERNELS_MATMUL_SMALL_AMX_INL_H_
#endif

#include "hwy/highway.h"
#include "kernels/error.h"
#include "kernels/machine/amx_tiles.h"
#include "kernels/machine/cpu_features.h"
#include "kernels/transpose16x16.h"
#include "kernels/matmul_small/bf16_decode-inl.h"
#include "kernels/matmul_small/common-inl.h"

HWY_BEFORE_NAMESPACE();
namespace qkv {
namespace HWY_NAMESPACE {
#if HWY_TARGET == HWY_AVX3_DL
// The AMX path (CPUs with AMX-BF16: Xeon Sapphire Rapids and later). Same
// precision as the bf16 path above (weights and inputs rounded to bf16, f32
// sums), but each TDPBF16PS multiplies a 16 x 32 tile of weights by 32 x 16
// inputs: 8192 multiply-adds per instruction. On the Intel Xeon (2 cores)
// where this was written, the bf16 path above ran no faster than the f32 one
// (bench_linear matmul_small/{bf16,f32}/1536x576/16/1: 86 and 89 GFLOP/s,
// about 40% of the FMA peak); on AMX the products cost less than decoding the
// weights. Measured there (bench_linear matmul_small(_stream)(_noamx)): 2.9x
// the bf16 path with the weights in cache, 1.9-2.0x streamed from DRAM, where
// it reads about 60% of the probed bandwidth.
//
// A tile is one block of kRowsAMX rows against all inputs (up to 16):
//  - A (weights): the block's rows decoded to bf16 into a scratch, row-major
//    with a padded stride, tile t = columns [32t, 32t + 32) of 16 rows.
//  - B (inputs): X in AMX's pair-interleaved layout, laid out once per call:
//    step t, row i, column m holds the bf16 pair (X[m][32t + 2i], X[m][32t + 2i + 1]).
//  - C: 16 rows x 16 inputs of f32 sums, kept in 4 tile registers that take
//    the steps in turn (independent accumulations overlap), added at the end.
// The block's rows are contiguous in memory, so the decoding reads one
// sequential stream; it prefetches the next block as it goes.
// The attribute names the target's whole feature set: clang replaces the
// region's target features with a function's own (g++ adds them).
#define QKV_AMX_TARGET __attribute__((target(HWY_TARGET_STR ",avx512bf16,prfchw,amx-tile,amx-bf16")))

constexpr size_t kRowsAMX = 16;  // rows per tile: AMX's 16 tile rows
constexpr size_t kAccAMX = 4;    // C tiles that take the steps in turn
static_assert(kMatmulSmallMaxM <= 16, "a B tile holds 16 inputs");

// The tile registers: C in 0..3, A in 4, B in 5, all 16 rows of 64 bytes
// (palette 1).
struct TileConfigAMX : AmxTileConfig {
  TileConfigAMX() {
    for (int t = 0; t < 6; ++t) set(t, 16, 64);
  }
};

using avx512::Transpose16x16;

// X (M x cols f32) as B tiles: steps x 16 rows x 16 pairs (see above),
// inputs m >= M and columns past cols zero.
QKV_AMX_TARGET void LayOutInputsAMX(const float* X, size_t M, size_t cols, uint32_t* HWY_RESTRICT xb) {
  const size_t steps = StepsBF16(cols);
  for (size_t t = 0; t < steps; ++t) {
    const size_t c0 = t * kBF16Step, n = std::min(kBF16Step, cols - c0);
    const __mmask16 mlo = static_cast<__mmask16>(n >= 16 ? 0xFFFF : (1u << n) - 1);
    const __mmask16 mhi = static_cast<__mmask16>(n >= 32 ? 0xFFFF : n <= 16 ? 0 : (1u << (n - 16)) - 1);
    __m512i v[16];
    for (size_t m = 0; m < 16; ++m) {
      if (m >= M) {
        v[m] = _mm512_setzero_si512();
        continue;
      }
      const float* x = X + m * cols + c0;
      v[m] = PackBF16(_mm512_maskz_loadu_ps(mlo, x), _mm512_maskz_loadu_ps(mhi, x + 16));
    }
    Transpose16x16(v);  // row i: pair i of every input
    for (size_t i = 0; i < 16; ++i) _mm512_store_si512(xb + (t * 16 + i) * 16, v[i]);
  }
}

// How far ahead of its decoding the AMX path prefetches a range's weights
// (into L2), in bytes of the range's one contiguous stream. 4 KiB measured
// best on an Intel Xeon with AMX (2 threads: 1-2 KiB, 8-32 KiB and
// prefetches into L1 no faster; bench_linear matmul_small_stream).
constexpr size_t kPrefetchAMX = 4096;

// Row k of the block at row r of W (R <= kRowsAMX rows) as bf16 into
// out + k * stride (an A tile row; rows k >= R zero, so that their unstored
// sums stay finite). end: the end of the range's weights (no prefetch past it).
template <DType T>
QKV_AMX_TARGET HWY_INLINE void DecodeRowAMX(const Matrix& W, int64_t r, size_t R, size_t k, const uint8_t* end,
                                            uint16_t* HWY_RESTRICT out, size_t stride) {
  const size_t cols = static_cast<size_t>(W.cols);
  uint16_t* o = out + k * stride;
  if (k >= R) {
    std::fill(o, o + StepsBF16(cols) * kBF16Step, 0);
    return;
  }
  // (A step of a 256-value super-block type is an eighth of a block.)
  const size_t row_bytes = dtype_row_bytes(T, cols), step_bytes = row_bytes * kBF16Step / cols;
  const uint8_t* row = static_cast<const uint8_t*>(W.data) + (r + static_cast<int64_t>(k)) * static_cast<int64_t>(row_bytes);
  for (size_t t = 0; t < cols / kBF16Step; ++t) {
    const uint8_t* ahead = row + t * step_bytes + kPrefetchAMX;
    if (ahead < end) __builtin_prefetch(ahead, 0, 2);
    DecodeStepBF16<T>(row, t, o + t * kBF16Step);
  }
  DecodeTailBF16<T>(row, cols, o, kBF16Step);
}

// C tile t % 4 += A tile t (columns [32t, 32t + 32) of the 16 rows at a, row
// stride a_bytes) times B tile t of xb. Four accumulators, so that
// consecutive products do not wait for each other.
QKV_AMX_TARGET HWY_INLINE void ProductStepAMX(const uint16_t* a, size_t a_bytes, const uint32_t* xb, size_t t) {
  _tile_loadd(4, a + t * kBF16Step, a_bytes);
  _tile_loadd(5, xb + t * 256, 64);
  switch (t % kAccAMX) {
    case 0: _tile_dpbf16ps(0, 4, 5); break;
    case 1: _tile_dpbf16ps(1, 4, 5); break;
    case 2: _tile_dpbf16ps(2, 4, 5); break;
    default: _tile_dpbf16ps(3, 4, 5); break;
  }
}

// Y[m * ldy + k] = the sum of C tiles 0..3 at (k, m), for k < R and m < M.
QKV_AMX_TARGET HWY_INLINE void StoreTilesAMX(float* Y, size_t ldy, size_t R, size_t M) {
  HWY_ALIGN float c[kAccAMX][16 * 16];
  _tile_stored(0, c[0], 64);
  _tile_stored(1, c[1], 64);
  _tile_stored(2, c[2], 64);
  _tile_stored(3, c[3], 64);
  __m512i v[16];  // row k of the block: its 16 sums, one per input
  for (size_t k = 0; k < 16; ++k) {
    const __m512 s01 = _mm512_add_ps(_mm512_load_ps(c[0] + k * 16), _mm512_load_ps(c[1] + k * 16));
    const __m512 s23 = _mm512_add_ps(_mm512_load_ps(c[2] + k * 16), _mm512_load_ps(c[3] + k * 16));
    v[k] = _mm512_castps_si512(_mm512_add_ps(s01, s23));
  }
  Transpose16x16(v);  // v[m]: input m's sums for the block's rows
  const __mmask16 rows = static_cast<__mmask16>(R >= 16 ? 0xFFFF : (1u << R) - 1);
  for (size_t m = 0; m < M; ++m) _mm512_mask_storeu_ps(Y + m * ldy, rows, _mm512_castsi512_ps(v[m]));
}

// Y rows [r0, r1) of one matrix for all M inputs, from xb (LayOutInputsAMX).
// scratch: two blocks of kRowsAMX rows of `stride` bf16 (64-byte aligned).
// Software-pipelined: while a block's tile products run, the next block is
// decoded into the other half of scratch, a block row at a time with the
// block's product steps spread between the rows. (Decoding a whole block and
// then running its products left the weight stream idle during the products:
// 1.14x slower, bench_linear matmul_small_stream/f16/1536x576/16/2.)
template <DType T>
QKV_AMX_TARGET void MatmulRangeAMX(const Matrix& W, const uint32_t* HWY_RESTRICT xb, size_t M,
                                   uint16_t* HWY_RESTRICT scratch, size_t stride, float* Y, int64_t r0, int64_t r1) {
  const size_t steps = StepsBF16(static_cast<size_t>(W.cols)), ldy = static_cast<size_t>(W.rows);
  const size_t a_bytes = stride * sizeof(uint16_t);
  const auto rows_at = [&](int64_t r) {
    return static_cast<size_t>(std::max<int64_t>(0, std::min<int64_t>(kRowsAMX, r1 - r)));
  };
  const uint8_t* end =
      static_cast<const uint8_t*>(W.data) + r1 * static_cast<int64_t>(dtype_row_bytes(T, static_cast<size_t>(W.cols)));
  constexpr int64_t kBlock = static_cast<int64_t>(kRowsAMX);
  uint16_t* cur = scratch;
  uint16_t* nxt = scratch + kRowsAMX * stride;
  for (size_t k = 0; k < kRowsAMX; ++k) DecodeRowAMX<T>(W, r0, rows_at(r0), k, end, cur, stride);
  for (int64_t r = r0; r < r1; r += kBlock) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    const int64_t next = r + kBlock;
    size_t t = 0;
    for (size_t k = 0; k < kRowsAMX; ++k) {
      if (next < r1) DecodeRowAMX<T>(W, next, rows_at(next), k, end, nxt, stride);
      for (const size_t t_end = (k + 1) * steps / kRowsAMX; t < t_end; ++t) ProductStepAMX(cur, a_bytes, xb, t);
    }
    StoreTilesAMX(Y + r, ldy, rows_at(r), M);
    std::swap(cur, nxt);
  }
}

// One thread's share of count matrices that share X, as MatmulSmallBF16 but
// on AMX tiles (blocks of kRowsAMX rows).
QKV_AMX_TARGET void MatmulSmallAMX(const Matrix* Ws, float* const* Ys, int count, const float* X, int64_t M,
                                   detail::BlockQueue* queue, int64_t block) {
  const size_t cols = static_cast<size_t>(Ws[0].cols), steps = StepsBF16(cols);
  const size_t m = static_cast<size_t>(M);
  // A rows padded by one line so that strides of 4 KiB (2048 columns) do not
  // put all 16 rows of a tile in the same L1 sets.
  const size_t stride = steps * kBF16Step + (steps * kBF16Step * sizeof(uint16_t) % 4096 == 0 ? 32 : 0);
  static thread_local hwy::AlignedFreeUniquePtr<uint32_t[]> xb;
  static thread_local hwy::AlignedFreeUniquePtr<uint16_t[]> scratch;
  static thread_local size_t xb_size = 0, scratch_size = 0;
  if (steps * 256 > xb_size) {
    xb_size = steps * 256;
    xb = hwy::AllocateAligned<uint32_t>(xb_size);
  }
  if (2 * kRowsAMX * stride > scratch_size) {
    scratch_size = 2 * kRowsAMX * stride;
    scratch = hwy::AllocateAligned<uint16_t>(scratch_size);
  }
  LayOutInputsAMX(X, m, cols, xb.get());
  static const TileConfigAMX config;
  _tile_loadconfig(&config);
  static thread_local std::vector<matmul_small::Segment> segs;  // at most one per matrix
  if (segs.size() < static_cast<size_t>(count)) segs.resize(static_cast<size_t>(count));
  int64_t b0, b1;
  while (queue->take(&b0, &b1)) {
    const int n = matmul_small::SplitRange(Ws, count, block, b0, b1, segs.data());
    for (int k = 0; k < n; ++k) {
      const Matrix& W = Ws[segs[k].i];
      float* Y = Ys[segs[k].i];
      const int64_t r0 = segs[k].r0, r1 = segs[k].r1;
      WithBF16Type(W.type, [&](auto tag) {
        MatmulRangeAMX<decltype(tag)::value>(W, xb.get(), m, scratch.get(), stride, Y, r0, r1);
      });
    }
  }
  _tile_release();
}

// AMX needs the CPU's AMX-BF16 and the kernel's permission to use the tile
// state (Linux 5.16+: arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)),
// asked once for the process.
bool HasAMXPath() {
  if (!cpu_features().amx_bf16 || !cpu_features().avx512_bf16) return false;
  return request_amx_tile_permission() == 0;
}
#else
void MatmulSmallAMX(const Matrix*, float* const*, int, const float*, int64_t, detail::BlockQueue*, int64_t) {
  QKV_CHECK(false, "matmul_small: the AMX path needs AMX-BF16");
}
bool HasAMXPath() { return false; }
#endif  // HWY_TARGET == HWY_AVX3_DL

}  // namespace HWY_NAMESPACE
}  // namespace qkv
HWY_AFTER_NAMESPACE();

#endif  // QKV_KERNELS_MATMUL_SMALL_AMX_INL_H_

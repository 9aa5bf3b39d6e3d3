// The AVX512_BF16 path of the small-batch matmul: vdpbf16ps dot products of
// bf16 weights and inputs, decoding pipelined one block ahead.
//
// A Highway "-inl" header of the small-batch matmul:
// kernels/matmul_small/matmul_small.cc includes it once per SIMD target
// (foreach_target), after hwy/highway.h.
#if defined(QKV_KERNELS_MATMUL_SMALL_BF16_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef QKV_KERNELS_MATMUL_SMALL_BF16_INL_H_
#undef QKV_KERNELS_MATMUL_SMALL_BF16_INL_H_
#else
#define QKV_KERNELS_MATMUL_SMALL_BF16_INL_H_
#endif

#include "hwy/highway.h"
#include "kernels/error.h"
#include "kernels/machine/cpu_features.h"
#include "kernels/matmul_small/bf16_decode-inl.h"
#include "kernels/matmul_small/common-inl.h"

HWY_BEFORE_NAMESPACE();
namespace qkv {
namespace HWY_NAMESPACE {
#if HWY_TARGET == HWY_AVX3_DL
// The bf16 path (CPUs with AVX512_BF16, on the AVX3_DL target): weights and
// inputs rounded to bf16 (nearest even), products by vdpbf16ps, which
// multiplies 32 bf16 pairs and adds them pairwise into 16 f32 sums: twice the
// multiply-adds per instruction of an f32 FMA. The same precision as the
// oneDNN bf16 GEMM that prefill uses for non-F32 weights (each product within
// about 2^-8 relative). Highway 1.0.3 only emulates bf16 dot products, hence
// the intrinsics.
//
// Each thread takes its rows in blocks of kRowsBF16 (4). One tile computes a
// block against every input, with its accumulators in registers throughout,
// from the block's rows decoded to bf16 in a scratch that stays in L1. The
// decoding is pipelined: while a tile runs, each of its steps decodes the
// same 32 columns of the next block (into a second scratch) and prefetches
// the block after that. The conversions then overlap the dot products (alone,
// they cost a quarter of the tile's time), and the loads they wait for were
// prefetched a whole tile earlier. Rows wider than kPassColsBF16 go in passes
// of columns, so that the inputs of a pass stay in L1 too.
//
// Lanes: a vector holds 4 inputs x 8 columns (one 128-bit block per input),
// and a weight row's 8 columns are broadcast to all four blocks. Lane (j, c)
// of accumulator acc[r][q] then sums row r times input 4q + j over the column
// pairs c, c + 4, c + 8, ... of the row, so at the end only 4 lanes per output
// are left to add: an in-block transpose of 4 rows, 6 shuffles and 3 adds per
// 16 outputs. (Accumulators with all 16 lanes along the columns of one input
// need a full transpose-add tree per input and row; at 576 columns that tree
// and its scattered stores took a quarter of the tile's time.)
//
// Both operands are stored per step of 32 columns, so that every load in the
// loop is at a compile-time offset from one pointer per operand:
//  - weights (the scratch): step t, row r: 32 bf16 at (t * kRowsBF16 + r) * 32;
//  - inputs: step t, quad q, sub-step s (8 columns), input 4q + j: 8 bf16 at
//    (((t * Q + q) * 4 + s) * 4 + j) * 8, Q = ceil(M / 4), missing inputs zero.

// The weight rows a tile decodes for the next tile while it runs (its step t
// decodes their step t, so the conversions overlap the dot products): the
// first `steps` whole steps of kRowsBF16 rows at `row` (stride `stride`) into
// `out` (the scratch layout); row == nullptr: none.
struct NextRows {
  const uint8_t* row;
  size_t stride;
  size_t steps;
  uint16_t* out;
};

// Y[m * ldy + r] = w[r] . x[m] (or += if `add`) for r < R and m < M <= 4Q,
// over `steps` steps of 32 columns, w and xq laid out as above. Each step
// also decodes its step of `own` (w's own rows, when the caller has not
// decoded them: the first block of a range) and of `next`, and prefetches its
// share of pf (see Prefetch), spread over the steps so that the weights
// arrive while the dot products run.
template <DType T, size_t R, size_t Q>
QKV_BF16_TARGET HWY_INLINE void DotTileBF16(const uint16_t* HWY_RESTRICT w, const uint16_t* HWY_RESTRICT xq,
                                            size_t steps, size_t M, const NextRows& own, const NextRows& next,
                                            const Prefetch& pf, bool add, float* HWY_RESTRICT Y, size_t ldy,
                                            float* y_ahead = nullptr) {
  // With few quads the sub-steps alternate between S sets of accumulators,
  // so that at least 12 dot products are independent (vdpbf16ps: two per
  // cycle, several cycles of latency).
  constexpr size_t S = Q == 1 ? 4 : Q == 2 ? 2 : 1;
  __m512 acc[S][R][Q];
  for (size_t s = 0; s < S; ++s)
    for (size_t r = 0; r < R; ++r)
      for (size_t q = 0; q < Q; ++q) acc[s][r][q] = _mm512_setzero_ps();
  // Line k of pf's `lines` per row goes out at step k * steps / lines.
  const size_t lines = pf.p != nullptr ? (pf.bytes + 63) / 64 : 0;
  const size_t own_steps = own.row != nullptr ? own.steps : 0, next_steps = next.row != nullptr ? next.steps : 0;
  size_t line = 0, ym = 0;
  for (size_t t = 0; t < steps; ++t) {
    for (; line < lines && line * steps <= t * lines; ++line) {
      for (size_t r = 0; r < kRowsBF16; ++r) __builtin_prefetch(pf.p + r * pf.stride + line * 64, 0, 3);
    }
    // The outputs of the block after next, for writing (see MatmulRangeBF16).
    for (; y_ahead != nullptr && ym < M && ym * steps <= t * M; ++ym) __builtin_prefetch(y_ahead + ym * ldy, 1, 3);  // prefetchw
    if (t < own_steps) {
      for (size_t k = 0; k < kRowsBF16; ++k) {
        DecodeStepBF16<T>(own.row + k * own.stride, t, own.out + (t * kRowsBF16 + k) * kBF16Step);
      }
    }
    if (t < next_steps) {
      for (size_t k = 0; k < kRowsBF16; ++k) {
        DecodeStepBF16<T>(next.row + k * next.stride, t, next.out + (t * kRowsBF16 + k) * kBF16Step);
      }
    }
    const uint16_t* HWY_RESTRICT wt = w + t * kRowsBF16 * kBF16Step;
    const uint16_t* HWY_RESTRICT xt = xq + t * Q * kQuadStep;
    // Unrolled: as a loop, GCC kept the accumulators in memory.
#pragma GCC unroll 4
    for (size_t s = 0; s < kBF16Step / kSub; ++s) {
      __m512i xv[Q];
      for (size_t q = 0; q < Q; ++q) xv[q] = _mm512_load_si512(xt + (q * 4 + s) * kQuad * kSub);
      for (size_t r = 0; r < R; ++r) {
        const __m512i wv =
            _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(wt + r * kBF16Step + s * kSub)));
        for (size_t q = 0; q < Q; ++q) {
          acc[s % S][r][q] = _mm512_dpbf16_ps(acc[s % S][r][q], reinterpret_cast<__m512bh>(wv),
                                              reinterpret_cast<__m512bh>(xv[q]));
        }
      }
    }
  }
  for (size_t s = 1; s < S; ++s)
    for (size_t r = 0; r < R; ++r)
      for (size_t q = 0; q < Q; ++q) acc[0][r][q] = _mm512_add_ps(acc[0][r][q], acc[s][r][q]);
  // Rows in fours: an in-block transpose adds each block's 4 lanes, leaving
  // in block j the sums of rows r0 .. r0 + 3 for input 4q + j.
  for (size_t q = 0; q < Q; ++q) {
    for (size_t r0 = 0; r0 < R; r0 += 4) {
      __m512 a[4];
      for (size_t k = 0; k < 4; ++k) a[k] = r0 + k < R ? acc[0][r0 + k][q] : _mm512_setzero_ps();
      const __m512 s01 = _mm512_add_ps(_mm512_unpacklo_ps(a[0], a[1]), _mm512_unpackhi_ps(a[0], a[1]));
      const __m512 s23 = _mm512_add_ps(_mm512_unpacklo_ps(a[2], a[3]), _mm512_unpackhi_ps(a[2], a[3]));
      const __m512d lo = _mm512_unpacklo_pd(_mm512_castps_pd(s01), _mm512_castps_pd(s23));
      const __m512d hi = _mm512_unpackhi_pd(_mm512_castps_pd(s01), _mm512_castps_pd(s23));
      HWY_ALIGN float sums[16];
      _mm512_store_ps(sums, _mm512_add_ps(_mm512_castpd_ps(lo), _mm512_castpd_ps(hi)));
      const __mmask8 rows = static_cast<__mmask8>((1u << std::min<size_t>(4, R - r0)) - 1);
      for (size_t j = 0; j < kQuad && q * kQuad + j < M; ++j) {
        float* y = Y + (q * kQuad + j) * ldy + r0;
        const __m128 v = _mm_load_ps(sums + j * 4);
        _mm_mask_storeu_ps(y, rows, add ? _mm_add_ps(_mm_maskz_loadu_ps(rows, y), v) : v);
      }
    }
  }
}

// WithGroupSize (1 .. kMaxInputs) also picks the number of quads.
static_assert(kMatmulSmallMaxM <= kMaxInputs * kQuad, "every quad count has a tile");

// At most this many columns per pass over a range of rows: a pass's inputs
// (16 x 768 bf16, 24 KB) and its two blocks of decoded weights then stay in
// L1. Wider rows go in passes of near-equal whole steps, each adding to Y.
constexpr size_t kPassColsBF16 = 768;

// Steps per pass (the last pass may have fewer): whole blocks of type t, so
// that a pass of 256-value super-block rows starts at a block.
inline size_t PassStepsBF16(size_t cols, DType t) {
  const size_t passes = (cols + kPassColsBF16 - 1) / kPassColsBF16;
  const size_t block_steps = std::max<size_t>(1, dtype_block_values(t) / kBF16Step);
  const size_t steps = (StepsBF16(cols) + passes - 1) / passes;
  return (steps + block_steps - 1) / block_steps * block_steps;
}

// The block of kRowsBF16 rows at row r of W, over the pass that starts at
// column c0, as a Prefetch; none if the block does not end by r_end.
inline Prefetch PassBlockBF16(const Matrix& W, size_t c0, int64_t r, int64_t r_end) {
  if (r + static_cast<int64_t>(kRowsBF16) > r_end) return Prefetch{nullptr, 0, 0};
  const size_t cols = static_cast<size_t>(W.cols), row_bytes = dtype_row_bytes(W.type, cols);
  const size_t n = std::min(cols - c0, PassStepsBF16(cols, W.type) * kBF16Step);
  return Prefetch{static_cast<const uint8_t*>(W.data) + dtype_row_bytes(W.type, c0) + r * static_cast<int64_t>(row_bytes),
                  row_bytes, dtype_row_bytes(W.type, n)};
}

// Y for rows [r0, r1) and all M inputs, from xq (the inputs, laid out above).
// scratch holds two blocks of decoded rows: the tile of one block decodes the
// next block into the other. follow(k) says where block k (0 or 1) of what the
// thread computes after this range starts (a Prefetch of its first pass; p null
// if nothing follows or that block is partial): the range's last two tiles
// prefetch it, as every tile prefetches the block after next, so the next
// range (or pass) does not start by waiting for DRAM.
//
// Each tile also asks for the output lines of the block after next in the
// exclusive state (prefetchw): a tile's masked stores go to M lines, which
// the other thread has usually just read (every thread reads all of Y as the
// next call's input), and waiting for that ownership at the stores cost up
// to a sixth of the 2-thread GEMM with the weights in cache
// (bench_linear matmul_small/f16/1536x576/16/2: 50 us with the stores
// removed, 61 with them, 57 with prefetchw).
template <DType T, class Follow>
QKV_BF16_TARGET void MatmulRangeBF16(const Matrix& W, const uint16_t* HWY_RESTRICT xq, size_t M,
                                     uint16_t* HWY_RESTRICT scratch, float* Y, int64_t r0, int64_t r1,
                                     const Follow& follow) {
  const size_t cols = static_cast<size_t>(W.cols), steps = StepsBF16(cols);
  const size_t pass_steps = PassStepsBF16(cols, T);
  const size_t row_bytes = dtype_row_bytes(T, cols), ldy = static_cast<size_t>(W.rows);
  const auto rows_at = [&](int64_t r) {
    return static_cast<size_t>(std::min<int64_t>(kRowsBF16, std::max<int64_t>(0, r1 - r)));
  };
  WithGroupSize((M + kQuad - 1) / kQuad, [&](auto tag) QKV_BF16_TARGET HWY_ATTR {
    constexpr size_t Q = decltype(tag)::value;
    for (size_t t0 = 0; t0 < steps; t0 += pass_steps) {
      // Columns [c0, c0 + n) of every row.
      const size_t c0 = t0 * kBF16Step, n = std::min(cols - c0, pass_steps * kBF16Step);
      const size_t nsteps = StepsBF16(n), full = n / kBF16Step, bytes = dtype_row_bytes(T, n);
      const uint8_t* base = static_cast<const uint8_t*>(W.data) + dtype_row_bytes(T, c0);
      const uint16_t* xp = xq + t0 * Q * kQuadStep;
      const auto row_at = [&](int64_t r) { return base + r * static_cast<int64_t>(row_bytes); };
      const bool add = c0 > 0;
      // Block k of what follows this pass: the next pass's first blocks, or
      // after the last pass, the caller's follow(k).
      const size_t next_c0 = c0 + n;
      const auto follow_block = [&](size_t k) -> Prefetch {
        if (next_c0 >= cols) return follow(k);
        return PassBlockBF16(W, next_c0, r0 + static_cast<int64_t>(k * kRowsBF16), r1);
      };
      uint16_t* cur = scratch;
      uint16_t* nxt = scratch + nsteps * kRowsBF16 * kBF16Step;
      // Nothing has fetched the range's first two blocks: their loads go out
      // now, and the first tile decodes its own rows step by step as they
      // arrive (and the second block's, as every tile decodes the next one).
      // From there on each tile prefetches the block after next.
      for (int64_t r = r0; r < std::min(r1, r0 + 2 * static_cast<int64_t>(kRowsBF16)); ++r) {
        for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(row_at(r) + off, 0, 3);
      }
      // What no tile decodes of the block at row r, into out: a whole
      // block's partial last step (a tile decodes its whole steps), or every
      // row of a partial block.
      const auto decode_rest = [&](int64_t r, uint16_t* out) QKV_BF16_TARGET {  // clang: a lambda has its own target
        const size_t rows = rows_at(r);
        for (size_t k = 0; k < rows; ++k) {
          const uint8_t* row = row_at(r + static_cast<int64_t>(k));
          if (rows == kRowsBF16) {
            DecodeTailBF16<T>(row, n, out + k * kBF16Step, kRowsBF16 * kBF16Step);
          } else {
            DecodeRowBF16<T>(row, n, out + k * kBF16Step, kRowsBF16 * kBF16Step);
          }
        }
      };
      const bool own_first = rows_at(r0) == kRowsBF16;
      decode_rest(r0, cur);
      for (int64_t r = r0; r < r1; r += static_cast<int64_t>(kRowsBF16)) {
        const size_t R = rows_at(r);
        const int64_t next = r + static_cast<int64_t>(kRowsBF16), after = next + static_cast<int64_t>(kRowsBF16);
        const size_t next_rows = rows_at(next);
        if (R == kRowsBF16) {
          // The tile decodes the next block if it is whole (else it is
          // decoded here after the tile), and prefetches the one after it.
          const NextRows nr{next_rows == kRowsBF16 ? row_at(next) : nullptr, row_bytes, full, nxt};
          const Prefetch pf = rows_at(after) == kRowsBF16 ? Prefetch{row_at(after), row_bytes, bytes}
                              : after >= r1 ? follow_block(static_cast<size_t>(after - r1) / kRowsBF16)
                                            : Prefetch{nullptr, 0, 0};
          const NextRows own{own_first && r == r0 ? row_at(r) : nullptr, row_bytes, full, cur};
          DotTileBF16<T, kRowsBF16, Q>(cur, xp, nsteps, M, own, nr, pf, add, Y + r, ldy,
                                       after < r1 ? Y + after : nullptr);
          decode_rest(next, nxt);
        } else {  // the last block (nothing follows it)
          const NextRows none_next{nullptr, 0, 0, nullptr};
          const Prefetch none{nullptr, 0, 0};
          for (size_t k = 0; k < R; ++k) {
            DotTileBF16<T, 1, Q>(cur + k * kBF16Step, xp, nsteps, M, none_next, none_next, none, add,
                                 Y + r + static_cast<int64_t>(k), ldy);
          }
        }
        std::swap(cur, nxt);
      }
    }
  });
}

// One thread's share of count matrices that share X: lays X out in bf16 (its
// own copy), then computes the row blocks (of `block` rows) it takes from the
// queue, which numbers the matrices' blocks one after the other.
QKV_BF16_TARGET void MatmulSmallBF16(const Matrix* Ws, float* const* Ys, int count, const float* X, int64_t M,
                                     detail::BlockQueue* queue, int64_t block) {
  const size_t cols = static_cast<size_t>(Ws[0].cols), steps = StepsBF16(cols);
  const size_t m = static_cast<size_t>(M), quads = (m + kQuad - 1) / kQuad;
  static thread_local hwy::AlignedFreeUniquePtr<uint16_t[]> xq, scratch;
  static thread_local size_t xq_size = 0, scratch_size = 0;
  const auto reserve = [](hwy::AlignedFreeUniquePtr<uint16_t[]>& p, size_t& size, size_t need) {
    if (need > size) {
      p = hwy::AllocateAligned<uint16_t>(need);
      size = need;
    }
  };
  reserve(xq, xq_size, steps * quads * kQuadStep);
  reserve(scratch, scratch_size, 2 * steps * kRowsBF16 * kBF16Step);
  // X in the tiles' layout: input k = 4q + j, step t: 4 pieces of 8 columns
  // at xq + (t * quads + q) * kQuadStep + s * 32 + j * 8, s = 0..3.
  if (m % kQuad != 0) std::fill(xq.get(), xq.get() + steps * quads * kQuadStep, uint16_t{0});
  for (size_t k = 0; k < m; ++k) {
    const float* x = X + k * cols;
    const size_t q = k / kQuad, j = k % kQuad;
    uint16_t* dst = xq.get() + q * kQuadStep + j * kSub;
    for (size_t t = 0; t < cols / kBF16Step; ++t, dst += quads * kQuadStep) {
      const __m512i v = PackBF16(_mm512_loadu_ps(x + t * kBF16Step), _mm512_loadu_ps(x + t * kBF16Step + kLanes));
      _mm_store_si128(reinterpret_cast<__m128i*>(dst), _mm512_castsi512_si128(v));
      _mm_store_si128(reinterpret_cast<__m128i*>(dst + 1 * kQuad * kSub), _mm512_extracti32x4_epi32(v, 1));
      _mm_store_si128(reinterpret_cast<__m128i*>(dst + 2 * kQuad * kSub), _mm512_extracti32x4_epi32(v, 2));
      _mm_store_si128(reinterpret_cast<__m128i*>(dst + 3 * kQuad * kSub), _mm512_extracti32x4_epi32(v, 3));
    }
    for (size_t i = cols / kBF16Step * kBF16Step; i < steps * kBF16Step; ++i) {  // the last, partial step
      const size_t t = i / kBF16Step, c = i % kBF16Step;
      xq[(t * quads + q) * kQuadStep + c / kSub * kQuad * kSub + j * kSub + c % kSub] =
          i < cols ? f32_to_bf16(x[i]) : uint16_t{0};
    }
  }
  // The thread's work is a sequence of segments (rows [r0, r1) of matrix i):
  // the pieces of each range it takes from the queue. The next range is taken
  // only when the current one's last tiles ask what follows it (so the queue
  // still balances the threads at the end), to prefetch its first blocks.
  using matmul_small::Segment;
  // A range has at most one segment per matrix. (Kept per thread, like the
  // buffers above: no allocation per call once they are large enough.)
  static thread_local std::vector<Segment> cur, next;
  if (cur.size() < static_cast<size_t>(count)) {
    cur.resize(static_cast<size_t>(count));
    next.resize(static_cast<size_t>(count));
  }
  int ncur = 0, nnext = 0, at = 0;
  bool taken = false;  // whether `next` holds the next range (nnext == 0: the queue is empty)
  const auto take_next = [&] {
    if (taken) return;
    int64_t b0, b1;
    nnext = queue->take(&b0, &b1) ? matmul_small::SplitRange(Ws, count, block, b0, b1, next.data()) : 0;
    taken = true;
  };
  for (;;) {
    if (at == ncur) {
      take_next();
      if (nnext == 0) break;
      std::swap(cur, next);
      ncur = nnext;
      at = 0;
      taken = false;
    }
    const Segment seg = cur[at++];
    // Block k of the segment after this one, for its first pass.
    const auto follow = [&](size_t k) -> Prefetch {
      const Segment* f = nullptr;
      if (at < ncur) {
        f = &cur[at];
      } else {
        take_next();
        if (nnext > 0) f = &next[0];
      }
      if (f == nullptr) return Prefetch{nullptr, 0, 0};
      return PassBlockBF16(Ws[f->i], 0, f->r0 + static_cast<int64_t>(k * kRowsBF16), f->r1);
    };
    const Matrix& W = Ws[seg.i];
    float* Y = Ys[seg.i];
    WithBF16Type(W.type, [&](auto tag) {
      MatmulRangeBF16<decltype(tag)::value>(W, xq.get(), m, scratch.get(), Y, seg.r0, seg.r1, follow);
    });
  }
}

bool HasBF16Path() { return cpu_features().avx512_bf16; }
// Rows per block of the bf16 path (the threads share its rows in whole blocks).
int64_t MatmulSmallRowsBF16() { return static_cast<int64_t>(kRowsBF16); }
#else
// Other targets have no bf16 dot product; HasBF16Path() keeps this unused.
void MatmulSmallBF16(const Matrix*, float* const*, int, const float*, int64_t, detail::BlockQueue*, int64_t) {
  QKV_CHECK(false, "matmul_small: the bf16 path needs AVX512_BF16");
}
bool HasBF16Path() { return false; }
int64_t MatmulSmallRowsBF16() { return 1; }
#endif  // HWY_TARGET == HWY_AVX3_DL

}  // namespace HWY_NAMESPACE
}  // namespace qkv
HWY_AFTER_NAMESPACE();

#endif  // QKV_KERNELS_MATMUL_SMALL_BF16_INL_H_

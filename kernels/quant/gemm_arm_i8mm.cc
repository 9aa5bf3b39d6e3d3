// i8mm GEMM of the block types (kernels/quant/gemm_arm_i8mm.h). On aarch64
// this file builds with -march=armv8.2-a+dotprod+i8mm (kernels/CMakeLists.txt:
// Armv8.2 as the SDOT file, so that nothing later than the cores with i8mm
// need, Neoverse V1 being Armv8.4, is emitted; gcc's arm_neon.h declares
// vmmlaq_s32 with +i8mm) and -ffp-contract=off, as the scalar kernels it
// matches. As in vec_dot_arm_dotprod.cc, a copy of an inline function
// emitted here may be the one the linker keeps for the whole program, which
// must still run on cores without i8mm: so the file uses no atomics, no
// standard-library templates and no inline function of another header but
// blocks.h's scale unpackers (no loop, inlined) and arm_neon_blocks.h's
// decoders (internal linkage); `nm -C` of its object lists only this file's
// functions.
//
// Layout of one SMMLA (vmmlaq_s32(acc, A, B): acc[2i + j] += sum over k < 8
// of A[8i + k] * B[8j + k]). For the 8 values 8g..8g+7 of a 32-value block
// (the reference's lanes 2g and 2g + 1): A holds one weight row's values
// 8g..8g+3 then 4 zeros (row 0), 4 zeros then values 8g+4..8g+7 (row 1); B
// holds input m0's 8 values (column 0) and input m1's (column 1). The result
// is [lane 2g of m0, lane 2g of m1, lane 2g+1 of m0, lane 2g+1 of m1], each an
// exact int32 sum of 4 products; the f32 accumulators keep that layout, one
// float32x4 per (row, input pair, g), and the final sum reads the lanes back
// in the reference's order.
#include "kernels/quant/gemm_arm_i8mm.h"

#if defined(__aarch64__)

#if !defined(__ARM_FEATURE_MATMUL_INT8)
#error "gemm_arm_i8mm.cc needs -march=...+i8mm (kernels/CMakeLists.txt sets it on aarch64)"
#endif

#include <arm_neon.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/quant/arm_neon_blocks.h"
#include "kernels/quant/blocks.h"

namespace qkv {
namespace {

// A tile: kTileRows weight rows x kTilePairs pairs of inputs. Its f32
// accumulators (2 x 2 x 4 vectors) and a block's operands (2 x 4 A, 4 B)
// fit the 32 NEON registers.
constexpr size_t kTileRows = 2, kTilePairs = 2;

// TBL indices of the A operand from 16 decoded values: values 0-3, 8 zeros,
// values 4-7 (kSplitLo) or 8-11, 8 zeros, 12-15 (kSplitHi). 0xFF selects 0.
const uint8_t kSplitLo[16] = {0, 1, 2, 3, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 4, 5, 6, 7};
const uint8_t kSplitHi[16] = {8, 9, 10, 11, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 12, 13, 14, 15};

// The A operands of 32 weight values (w0: values 0-15, w1: 16-31), g = 0..3.
inline void SplitRow(int8x16_t w0, int8x16_t w1, int8x16_t a[4]) {
  const uint8x16_t lo = vld1q_u8(kSplitLo), hi = vld1q_u8(kSplitHi);
  a[0] = vqtbl1q_s8(w0, lo);
  a[1] = vqtbl1q_s8(w0, hi);
  a[2] = vqtbl1q_s8(w1, lo);
  a[3] = vqtbl1q_s8(w1, hi);
}

// The B operands of 32 activation values of two inputs, g = 0..3.
inline void PairInputs(const int8_t* x0, const int8_t* x1, int8x16_t b[4]) {
  const int64x2_t l0 = vreinterpretq_s64_s8(vld1q_s8(x0)), h0 = vreinterpretq_s64_s8(vld1q_s8(x0 + 16));
  const int64x2_t l1 = vreinterpretq_s64_s8(vld1q_s8(x1)), h1 = vreinterpretq_s64_s8(vld1q_s8(x1 + 16));
  b[0] = vreinterpretq_s8_s64(vzip1q_s64(l0, l1));
  b[1] = vreinterpretq_s8_s64(vzip2q_s64(l0, l1));
  b[2] = vreinterpretq_s8_s64(vzip1q_s64(h0, h1));
  b[3] = vreinterpretq_s8_s64(vzip2q_s64(h0, h1));
}

inline int32x4_t Mmla(int8x16_t a, int8x16_t b) { return vmmlaq_s32(vdupq_n_s32(0), a, b); }

// The reference's Acc8::sum, (a0 + a4 + a2 + a6) + (a1 + a5 + a3 + a7)
// pairwise, of both inputs of a pair: acc[g] holds lanes 2g (elements 0, 1)
// and 2g + 1 (elements 2, 3) of inputs m0 (0, 2) and m1 (1, 3).
inline void Sum8Pair(const float32x4_t acc[4], float out[2]) {
  const float32x4_t h01 = vaddq_f32(acc[2], acc[0]);  // h0 = a4 + a0, h1 = a5 + a1
  const float32x4_t h23 = vaddq_f32(acc[3], acc[1]);  // h2 = a6 + a2, h3 = a7 + a3
  const float32x4_t s = vaddq_f32(h01, h23);          // h0 + h2, h1 + h3
  out[0] = vgetq_lane_f32(s, 0) + vgetq_lane_f32(s, 2);
  out[1] = vgetq_lane_f32(s, 1) + vgetq_lane_f32(s, 3);
}

// The rows and inputs of one tile: row pointers (a short tile repeats its
// last row, whose outputs are not stored) and input pair members likewise.
struct TileRefs {
  const uint8_t* row[kTileRows];
  const uint8_t* in[kTilePairs][2];
  size_t n_rows, n_in;  // valid rows and inputs
};

void Store(const TileRefs& t, const float out[kTileRows][2 * kTilePairs], float* y, size_t ldy) {
  for (size_t m = 0; m < t.n_in; ++m) {
    for (size_t r = 0; r < t.n_rows; ++r) y[m * ldy + r] = out[r][m];
  }
}

// Blocks of 32 (A: BlockQ8_0, or BlockQ8_1 for the types with a min term),
// as the reference's Dot32 / Dot32Min: per block and (row, input), one fused
// multiply-add per lane with d_w * d_a, and m * s into one f32.
template <class B, class A>
void Tile32(const TileRefs& t, size_t nb, float* y, size_t ldy) {
  constexpr bool kMin = kHasMin<B>;
  float32x4_t acc[kTileRows][kTilePairs][4];
  float32x2_t summs[kTileRows][kTilePairs];
  for (size_t r = 0; r < kTileRows; ++r) {
    for (size_t p = 0; p < kTilePairs; ++p) {
      for (int g = 0; g < 4; ++g) acc[r][p][g] = vdupq_n_f32(0.0f);
      summs[r][p] = vdup_n_f32(0.0f);
    }
  }
  for (size_t i = 0; i < nb; ++i) {
    int8x16_t wa[kTileRows][4];
    float dw[kTileRows], mw[kTileRows];
    for (size_t r = 0; r < kTileRows; ++r) {
      const uint8_t* b = t.row[r] + i * sizeof(B);
      int8x16_t w0, w1;
      Decode32<B>(b, &w0, &w1);
      SplitRow(w0, w1, wa[r]);
      dw[r] = Half(b + offsetof(B, d));
      if constexpr (kMin) mw[r] = Half(b + offsetof(B, m));
    }
    for (size_t p = 0; p < kTilePairs; ++p) {
      const A* x0 = reinterpret_cast<const A*>(t.in[p][0]) + i;
      const A* x1 = reinterpret_cast<const A*>(t.in[p][1]) + i;
      int8x16_t xb[4];
      PairInputs(x0->qs, x1->qs, xb);
      const float da0 = Half(reinterpret_cast<const uint8_t*>(&x0->d));
      const float da1 = Half(reinterpret_cast<const uint8_t*>(&x1->d));
      const float32x4_t da = {da0, da1, da0, da1};
      float32x2_t s = vdup_n_f32(0.0f);
      if constexpr (kMin) {
        s = float32x2_t{Half(reinterpret_cast<const uint8_t*>(&x0->s)), Half(reinterpret_cast<const uint8_t*>(&x1->s))};
      }
      for (size_t r = 0; r < kTileRows; ++r) {
        // d_w * d_a per input, one rounding each, as the reference's product.
        const float32x4_t d = vmulq_n_f32(da, dw[r]);
        if constexpr (kMin) summs[r][p] = vfma_f32(summs[r][p], vdup_n_f32(mw[r]), s);
        for (int g = 0; g < 4; ++g) acc[r][p][g] = vfmaq_f32(acc[r][p][g], vcvtq_f32_s32(Mmla(wa[r][g], xb[g])), d);
      }
    }
  }
  float out[kTileRows][2 * kTilePairs];
  for (size_t r = 0; r < kTileRows; ++r) {
    for (size_t p = 0; p < kTilePairs; ++p) {
      Sum8Pair(acc[r][p], &out[r][2 * p]);
      if constexpr (kMin) {
        out[r][2 * p] += vget_lane_f32(summs[r][p], 0);
        out[r][2 * p + 1] += vget_lane_f32(summs[r][p], 1);
      }
    }
  }
  Store(t, out, y, ldy);
}

// The K-quants and IQ4_XS against Q8_K, as the reference's DotQ2K / DotQ3K /
// DotK4 / DotQ6K / DotIQ4XS: per super-block the lanes' integer sums with
// each 16 values' scale, one fused multiply-add per lane with d_a * d_w, and
// the min terms as the reference adds them (KMins).
template <class B>
void TileK(const TileRefs& t, size_t nb, float* y, size_t ldy) {
  constexpr KMins kMins = kKMins<B>;
  float32x4_t acc[kTileRows][kTilePairs][4];
  float accm[kTileRows][2 * kTilePairs][4] = {};
  float summs[kTileRows][2 * kTilePairs] = {};
  for (size_t r = 0; r < kTileRows; ++r) {
    for (size_t p = 0; p < kTilePairs; ++p) {
      for (int g = 0; g < 4; ++g) acc[r][p][g] = vdupq_n_f32(0.0f);
    }
  }
  KRow k[kTileRows];
  for (size_t i = 0; i < nb; ++i) {
    for (size_t r = 0; r < kTileRows; ++r) DecodeK<B>(t.row[r] + i * sizeof(B), &k[r]);
    const BlockQ8_K* x[kTilePairs][2];
    for (size_t p = 0; p < kTilePairs; ++p) {
      for (int j = 0; j < 2; ++j) x[p][j] = reinterpret_cast<const BlockQ8_K*>(t.in[p][j]) + i;
    }
    int32x4_t lanes[kTileRows][kTilePairs][4];
    for (size_t r = 0; r < kTileRows; ++r) {
      for (size_t p = 0; p < kTilePairs; ++p) {
        for (int g = 0; g < 4; ++g) lanes[r][p][g] = vdupq_n_s32(0);
      }
    }
    for (int c = 0; c < 8; ++c) {
      int8x16_t wa[kTileRows][4];
      for (size_t r = 0; r < kTileRows; ++r) SplitRow(vld1q_s8(k[r].w + 32 * c), vld1q_s8(k[r].w + 32 * c + 16), wa[r]);
      for (size_t p = 0; p < kTilePairs; ++p) {
        int8x16_t xb[4];
        PairInputs(x[p][0]->qs + 32 * c, x[p][1]->qs + 32 * c, xb);
        for (size_t r = 0; r < kTileRows; ++r) {
          // Lanes 0-3 (g 0, 1) take the scale of values 0-15, lanes 4-7 that of 16-31.
          for (int g = 0; g < 4; ++g) {
            lanes[r][p][g] = vmlaq_n_s32(lanes[r][p][g], Mmla(wa[r][g], xb[g]), k[r].sc[2 * c + g / 2]);
          }
        }
      }
    }
    for (size_t p = 0; p < kTilePairs; ++p) {
      const float32x4_t da = {x[p][0]->d, x[p][1]->d, x[p][0]->d, x[p][1]->d};
      for (size_t r = 0; r < kTileRows; ++r) {
        if constexpr (kMins != KMins::kNone) {
          // dmin = -d_a * dmin_w per input; the integer min terms per input.
          const float dmin[2] = {-x[p][0]->d * k[r].dmin, -x[p][1]->d * k[r].dmin};
          int32_t mins[2][8];
          for (int j = 0; j < 2; ++j) MinTerms(k[r], x[p][j]->bsums, mins[j]);
          if constexpr (kMins == KMins::kLanes) {
            const float32x4_t dm = {dmin[0], dmin[1], dmin[0], dmin[1]};
            for (int g = 0; g < 4; ++g) {
              const int32x4_t m = {mins[0][2 * g], mins[1][2 * g], mins[0][2 * g + 1], mins[1][2 * g + 1]};
              acc[r][p][g] = vfmaq_f32(acc[r][p][g], vcvtq_f32_s32(m), dm);
            }
          } else {
            for (int j = 0; j < 2; ++j) {
              float* am = accm[r][2 * p + j];
              if constexpr (kMins == KMins::kPairs) {
                for (int q = 0; q < 4; ++q) am[q] = std::fma(dmin[j], static_cast<float>(mins[j][2 * q] + mins[j][2 * q + 1]), am[q]);
              } else {
                int32_t total = 0;
                for (int l = 0; l < 8; ++l) total += mins[j][l];
                summs[r][2 * p + j] = std::fma(dmin[j], static_cast<float>(total), summs[r][2 * p + j]);
              }
            }
          }
        }
        const float32x4_t d = vmulq_n_f32(da, k[r].d);
        for (int g = 0; g < 4; ++g) acc[r][p][g] = vfmaq_f32(acc[r][p][g], vcvtq_f32_s32(lanes[r][p][g]), d);
      }
    }
  }
  float out[kTileRows][2 * kTilePairs];
  for (size_t r = 0; r < kTileRows; ++r) {
    for (size_t p = 0; p < kTilePairs; ++p) Sum8Pair(acc[r][p], &out[r][2 * p]);
    for (size_t m = 0; m < 2 * kTilePairs; ++m) {
      if constexpr (kMins == KMins::kPairs) {
        const float* am = accm[r][m];
        out[r][m] += (am[0] + am[2]) + (am[1] + am[3]);
      } else if constexpr (kMins == KMins::kTotal) {
        out[r][m] += summs[r][m];
      }
    }
  }
  Store(t, out, y, ldy);
}

// Rows by tiles of kTileRows, inputs by tiles of 2 * kTilePairs below them
// (the tile's weight blocks stay in L1 across its input tiles).
template <class Tile>
void Tiles(const void* rows, size_t row_bytes, const void* xa, size_t act_row_bytes, size_t M, float* y, size_t ldy,
           size_t n_rows, Tile&& tile) {
  const auto* w = static_cast<const uint8_t*>(rows);
  const auto* a = static_cast<const uint8_t*>(xa);
  constexpr size_t kTileInputs = 2 * kTilePairs;
  for (size_t r0 = 0; r0 < n_rows; r0 += kTileRows) {
    TileRefs t;
    t.n_rows = n_rows - r0 < kTileRows ? n_rows - r0 : kTileRows;
    for (size_t r = 0; r < kTileRows; ++r) t.row[r] = w + (r0 + (r < t.n_rows ? r : t.n_rows - 1)) * row_bytes;
    for (size_t m0 = 0; m0 < M; m0 += kTileInputs) {
      t.n_in = M - m0 < kTileInputs ? M - m0 : kTileInputs;
      for (size_t m = 0; m < kTileInputs; ++m) {
        t.in[m / 2][m % 2] = a + (m0 + (m < t.n_in ? m : t.n_in - 1)) * act_row_bytes;
      }
      tile(t, y + m0 * ldy + r0);
    }
  }
}

}  // namespace

bool arm_i8mm_kernel(DType t) {
  return dtype_is_quantized(t);  // every block type
}

bool arm_i8mm_gemm(DType t, const void* rows, size_t cols, const void* xa, size_t M, float* y, size_t ldy,
                   size_t n_rows) {
  const size_t nb = cols / 32, nk = cols / kQK;
  auto run32 = [&](auto block, auto act) {
    using B = decltype(block);
    using A = decltype(act);
    Tiles(rows, nb * sizeof(B), xa, nb * sizeof(A), M, y, ldy, n_rows,
          [&](const TileRefs& tr, float* yt) { Tile32<B, A>(tr, nb, yt, ldy); });
    return true;
  };
  auto runk = [&](auto block) {
    using B = decltype(block);
    Tiles(rows, nk * sizeof(B), xa, nk * sizeof(BlockQ8_K), M, y, ldy, n_rows,
          [&](const TileRefs& tr, float* yt) { TileK<B>(tr, nk, yt, ldy); });
    return true;
  };
  return for_block_type(t, run32, runk);
}

}  // namespace qkv

#else  // not aarch64: no i8mm

namespace qkv {
bool arm_i8mm_kernel(DType) { return false; }
bool arm_i8mm_gemm(DType, const void*, size_t, const void*, size_t, float*, size_t, size_t) { return false; }
}  // namespace qkv

#endif

// SDOT GEMM of the block types (kernels/quant/gemm_arm_dotprod.h). On aarch64
// this file builds with -march=armv8.2-a+dotprod (kernels/CMakeLists.txt) and
// -ffp-contract=off, as the SDOT matvec (vec_dot_arm_dotprod.cc) whose
// arithmetic it repeats per (row, input); the same care holds: a copy of an
// inline function emitted here may be the one the linker keeps for the whole
// program, which must still run on an Armv8.0 core, so the file uses no
// atomics, no standard-library templates and no inline function of another
// header but blocks.h's scale unpackers (no loop, inlined) and
// arm_neon_blocks.h's decoders and lanes (internal linkage); `nm -C` of its
// object lists only this file's functions.
//
// A tile is kTileRows rows x kTileInputs inputs. Per 32-value block it
// decodes each row once (2 int8x16 vectors) and loads each input once (2
// more), then runs 2 SDOTs, 2 conversions and 2 fused multiply-adds per
// (row, input): 16 float32x4 accumulators, 4 weight and 2 input vectors
// beside the temporaries, about the 32 NEON registers. Whole loop bodies of
// gcc 12 -O3 (objdump -d): the Q4_0 loop is 123 instructions per block of
// the tile (10 of them reload or spill accumulators), 15.4 per output
// against the matvec's 23; Q4_K 957 per super-block of the tile, 15 per
// output and 32 values against 23.8.
#include "kernels/quant/gemm_arm_dotprod.h"

#if defined(__aarch64__)

#if !defined(__ARM_FEATURE_DOTPROD)
#error "gemm_arm_dotprod.cc needs -march=armv8.2-a+dotprod (kernels/CMakeLists.txt sets it on aarch64)"
#endif

#include <arm_neon.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/quant/arm_neon_blocks.h"
#include "kernels/quant/blocks.h"

namespace qkv {
namespace {

constexpr size_t kTileRows = 2, kTileInputs = 4;

// The rows and inputs of one tile: a short tile repeats its last row or
// input, whose outputs are not stored.
struct TileRefs {
  const uint8_t* row[kTileRows];
  const uint8_t* in[kTileInputs];
  size_t n_rows, n_in;  // valid rows and inputs
};

void Store(const TileRefs& t, const float out[kTileRows][kTileInputs], float* y, size_t ldy) {
  for (size_t m = 0; m < t.n_in; ++m) {
    for (size_t r = 0; r < t.n_rows; ++r) y[m * ldy + r] = out[r][m];
  }
}

// Blocks of 32 (A: BlockQ8_0, or BlockQ8_1 for the types with a min term),
// as the matvec's Dot32: per block and (row, input) one fused multiply-add
// per lane with d_w * d_a, and m * s into one f32 (a lane per input).
template <class B, class A>
void Tile32(const TileRefs& t, size_t nb, float* y, size_t ldy) {
  constexpr bool kMin = kHasMin<B>;
  // Acc's lanes as plain vectors, and the loops over all of them unrolled:
  // gcc 12 keeps an array of Acc, or vectors indexed in a rolled loop, in
  // memory and stores them back every block (Q4_0: 140 instructions per
  // block of a tile, 123 so).
  float32x4_t lo[kTileRows][kTileInputs], hi[kTileRows][kTileInputs], summs[kTileRows];
#pragma GCC unroll 4
  for (size_t r = 0; r < kTileRows; ++r) {
    summs[r] = vdupq_n_f32(0.0f);
#pragma GCC unroll 4
    for (size_t m = 0; m < kTileInputs; ++m) lo[r][m] = hi[r][m] = vdupq_n_f32(0.0f);
  }
  for (size_t i = 0; i < nb; ++i) {
    int8x16_t w[kTileRows][2];
    float dw[kTileRows], mw[kTileRows];
    for (size_t r = 0; r < kTileRows; ++r) {
      const uint8_t* b = t.row[r] + i * sizeof(B);
      Decode32<B>(b, &w[r][0], &w[r][1]);
      dw[r] = Half(b + offsetof(B, d));
      if constexpr (kMin) mw[r] = Half(b + offsetof(B, m));
    }
    float s[kTileInputs];
    for (size_t m = 0; m < kTileInputs; ++m) {
      const A* x = reinterpret_cast<const A*>(t.in[m]) + i;
      const int8x16_t x0 = vld1q_s8(x->qs), x1 = vld1q_s8(x->qs + 16);
      const float da = Half(reinterpret_cast<const uint8_t*>(&x->d));
      if constexpr (kMin) s[m] = Half(reinterpret_cast<const uint8_t*>(&x->s));
      for (size_t r = 0; r < kTileRows; ++r) {
        // As Acc::fma with d = d_w * d_a, one rounding each.
        const float32x4_t d = vdupq_n_f32(dw[r] * da);
        lo[r][m] = vfmaq_f32(lo[r][m], vcvtq_f32_s32(Dot16(w[r][0], x0)), d);
        hi[r][m] = vfmaq_f32(hi[r][m], vcvtq_f32_s32(Dot16(w[r][1], x1)), d);
      }
    }
    if constexpr (kMin) {
      const float32x4_t sv = vld1q_f32(s);
      for (size_t r = 0; r < kTileRows; ++r) summs[r] = vfmaq_f32(summs[r], vdupq_n_f32(mw[r]), sv);
    }
  }
  float out[kTileRows][kTileInputs], sm[kTileInputs];
#pragma GCC unroll 4
  for (size_t r = 0; r < kTileRows; ++r) {
    vst1q_f32(sm, summs[r]);
#pragma GCC unroll 4
    for (size_t m = 0; m < kTileInputs; ++m) {
      Acc acc;
      acc.lo = lo[r][m];
      acc.hi = hi[r][m];
      out[r][m] = kMin ? acc.sum() + sm[m] : acc.sum();
    }
  }
  Store(t, out, y, ldy);
}

// The K-quants and IQ4_XS against Q8_K, as the matvec's DotK: per
// super-block each (row, input)'s lanes summed in int32 with each 16 values'
// scale, one fused multiply-add per lane with d_a * d_w, and the min terms
// added before it as the reference adds them (KMins).
template <class B>
void TileK(const TileRefs& t, size_t nb, float* y, size_t ldy) {
  constexpr KMins kMins = kKMins<B>;
  Acc acc[kTileRows][kTileInputs];
  float accm[kTileRows][kTileInputs][4] = {};
  float summs[kTileRows][kTileInputs] = {};
  KRow k[kTileRows];
  for (size_t i = 0; i < nb; ++i) {
    for (size_t r = 0; r < kTileRows; ++r) DecodeK<B>(t.row[r] + i * sizeof(B), &k[r]);
    const BlockQ8_K* x[kTileInputs];
    for (size_t m = 0; m < kTileInputs; ++m) x[m] = reinterpret_cast<const BlockQ8_K*>(t.in[m]) + i;
    if constexpr (kMins != KMins::kNone) {
      for (size_t r = 0; r < kTileRows; ++r) {
        for (size_t m = 0; m < kTileInputs; ++m) {
          const float dmin = -x[m]->d * k[r].dmin;
          int32_t mins[8];
          MinTerms(k[r], x[m]->bsums, mins);
          if constexpr (kMins == KMins::kLanes) {
            acc[r][m].fma(dmin, vld1q_s32(mins), vld1q_s32(mins + 4));
          } else if constexpr (kMins == KMins::kPairs) {
            float* am = accm[r][m];
            for (int p = 0; p < 4; ++p) {
              am[p] = std::fma(dmin, static_cast<float>(mins[2 * p] + mins[2 * p + 1]), am[p]);
            }
          } else {
            int32_t total = 0;
            for (int j = 0; j < 8; ++j) total += mins[j];
            summs[r][m] = std::fma(dmin, static_cast<float>(total), summs[r][m]);
          }
        }
      }
    }
    // lanes[r][m][h]: lanes 0-3 (h 0, the first 16 values of each 32) and
    // 4-7 (h 1) with their sub-block scales.
    int32x4_t lanes[kTileRows][kTileInputs][2];
    for (size_t r = 0; r < kTileRows; ++r) {
      for (size_t m = 0; m < kTileInputs; ++m) lanes[r][m][0] = lanes[r][m][1] = vdupq_n_s32(0);
    }
    for (int c = 0; c < 8; ++c) {
      int8x16_t w[kTileRows][2];
      for (size_t r = 0; r < kTileRows; ++r) {
        w[r][0] = vld1q_s8(k[r].w + 32 * c);
        w[r][1] = vld1q_s8(k[r].w + 32 * c + 16);
      }
      for (size_t m = 0; m < kTileInputs; ++m) {
        const int8x16_t x0 = vld1q_s8(x[m]->qs + 32 * c), x1 = vld1q_s8(x[m]->qs + 32 * c + 16);
      for (size_t r = 0; r < kTileRows; ++r) {
          lanes[r][m][0] = vmlaq_n_s32(lanes[r][m][0], Dot16(w[r][0], x0), k[r].sc[2 * c]);
          lanes[r][m][1] = vmlaq_n_s32(lanes[r][m][1], Dot16(w[r][1], x1), k[r].sc[2 * c + 1]);
        }
      }
    }
    for (size_t r = 0; r < kTileRows; ++r) {
      for (size_t m = 0; m < kTileInputs; ++m) acc[r][m].fma(x[m]->d * k[r].d, lanes[r][m][0], lanes[r][m][1]);
    }
  }
  float out[kTileRows][kTileInputs];
  for (size_t r = 0; r < kTileRows; ++r) {
    for (size_t m = 0; m < kTileInputs; ++m) {
      out[r][m] = acc[r][m].sum();
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

// Rows by tiles of kTileRows, inputs by tiles of kTileInputs below them (the
// tile's weight blocks stay in L1 across its input tiles).
template <class Tile>
void Tiles(const void* rows, size_t row_bytes, const void* xa, size_t act_row_bytes, size_t M, float* y, size_t ldy,
           size_t n_rows, Tile&& tile) {
  const auto* w = static_cast<const uint8_t*>(rows);
  const auto* a = static_cast<const uint8_t*>(xa);
  for (size_t r0 = 0; r0 < n_rows; r0 += kTileRows) {
    TileRefs t;
    t.n_rows = n_rows - r0 < kTileRows ? n_rows - r0 : kTileRows;
    for (size_t r = 0; r < kTileRows; ++r) t.row[r] = w + (r0 + (r < t.n_rows ? r : t.n_rows - 1)) * row_bytes;
    for (size_t m0 = 0; m0 < M; m0 += kTileInputs) {
      t.n_in = M - m0 < kTileInputs ? M - m0 : kTileInputs;
      for (size_t m = 0; m < kTileInputs; ++m) t.in[m] = a + (m0 + (m < t.n_in ? m : t.n_in - 1)) * act_row_bytes;
      tile(t, y + m0 * ldy + r0);
    }
  }
}

}  // namespace

bool arm_dotprod_gemm_kernel(DType t) {
  return dtype_is_quantized(t);  // every block type
}

bool arm_dotprod_gemm(DType t, const void* rows, size_t cols, const void* xa, size_t M, float* y, size_t ldy,
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

#else  // not aarch64: no SDOT

namespace qkv {
bool arm_dotprod_gemm_kernel(DType) { return false; }
bool arm_dotprod_gemm(DType, const void*, size_t, const void*, size_t, float*, size_t, size_t) { return false; }
}  // namespace qkv

#endif

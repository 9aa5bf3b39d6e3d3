// BFMMLA tiles of the small-batch matmul (kernels/matmul_small/arm_bf16_tiles.h).
// On aarch64 this file builds with -march=armv8.2-a+bf16 (kernels/CMakeLists.txt;
// Armv8.2 plus the extension, as the i8mm file, so that nothing later than
// the cores with BF16 need is emitted). As in kernels/quant/gemm_arm_i8mm.cc,
// a copy of an inline function emitted here may be the one the linker keeps
// for the whole program, which must still run on cores without BF16: so the
// file includes no header of the library but its own, uses no atomics and no
// standard-library function or template, and keeps its helpers in an
// anonymous namespace.
//
// BFMMLA (vbfmmlaq_f32(acc, a, b)) multiplies a 2x4 bf16 matrix by a 4x2 one:
// acc[2i + j] += sum over k < 4 of a[4i + k] * b[4j + k], 16 multiply-adds per
// 128-bit instruction (an f32 FMLA: 4; BFDOT: 8). Here a holds 4 columns of two weight rows (row 2p, then row
// 2p + 1) and b the same 4 columns of two inputs (2q, then 2q + 1), so lane
// 2i + j of accumulator (p, q) sums row 2p + i times input 2q + j. The Arm
// ARM's BFMMLA (without FEAT_EBF16's FPCR.EBF) adds each output's products
// two at a time, each addition rounded to f32 to odd (within one ulp, 2^-23
// relative), denormals flushed to zero; each product of two bf16 is exact.
//
// Layouts, in steps of 8 columns (two BFMMLA k-steps, s = 0 and 1, of 4):
//  - inputs (pack_inputs): step j, sub-step s, input pair q: 8 bf16 at
//    ((2j + s) * pairs + q) * 8, pairs = ceil(M / 2);
//  - a block's weights (the scratch): step j, sub-step s, row pair p: 8 bf16
//    at ((2j + s) * kRowPairs + p) * 8.
// Every load of a tile's step is then at a fixed offset from one pointer per
// operand, and a block of 8 rows is decoded once per pass for all inputs.
#include "kernels/matmul_small/arm_bf16_tiles.h"

#if defined(__aarch64__)

#if !defined(__ARM_FEATURE_BF16_VECTOR_ARITHMETIC)
#error "arm_bf16_tiles.cc needs -march=...+bf16 (kernels/CMakeLists.txt sets it on aarch64)"
#endif

#include <arm_neon.h>

#include <cstddef>
#include <cstdint>

namespace qkv {
namespace arm_bf16 {
namespace {

constexpr size_t kStep = 8;                    // columns per step
constexpr size_t kRowPairs = kBlockRows / 2;   // A operands per block
constexpr size_t kMaxTilePairs = 4;            // input pairs per tile: 16 accumulators
// Columns per pass over a range of rows: the pass's inputs (16 x 512 bf16,
// 16 KB) and the block's decoded weights (8 KB, on the stack) stay in L1
// (32 KB or more on the cores with BF16). Untuned: nothing here has been
// timed on BF16 hardware.
constexpr size_t kPassCols = 512;
static_assert(kPassCols % kStep == 0, "passes are whole steps");

size_t MinSize(size_t a, size_t b) { return a < b ? a : b; }

bfloat16x8_t LoadBF16(const uint16_t* p) { return vreinterpretq_bf16_u16(vld1q_u16(p)); }
void StoreBF16(uint16_t* p, bfloat16x8_t v) { vst1q_u16(p, vreinterpretq_u16_bf16(v)); }

// lo's 4 values then hi's, rounded to bf16 (BFCVTN, BFCVTN2: nearest even).
bfloat16x8_t RoundPair(float32x4_t lo, float32x4_t hi) { return vcvtq_high_bf16_f32(vcvtq_low_bf16_f32(lo), hi); }

// Columns [0, 8) of two rows (raw f16 or bf16 at r0, r1; nullptr: a row of
// zeros; n < 8: only n columns there, the rest zero) as the two sub-steps'
// A operands.
template <bool kF16>
void DecodeStep(const uint16_t* r0, const uint16_t* r1, size_t n, bfloat16x8_t* sub0, bfloat16x8_t* sub1) {
  alignas(16) uint16_t pad[2][kStep];
  const uint16_t* rows[2] = {r0, r1};
  uint16x8_t v[2];
  for (int i = 0; i < 2; ++i) {
    if (rows[i] != nullptr && n == kStep) {
      v[i] = vld1q_u16(rows[i]);
    } else {
      // +0 is all zero bits in f16 and bf16 alike.
      for (size_t c = 0; c < kStep; ++c) pad[i][c] = rows[i] != nullptr && c < n ? rows[i][c] : uint16_t{0};
      v[i] = vld1q_u16(pad[i]);
    }
  }
  if constexpr (kF16) {
    // f16 -> f32 is exact; the one rounding is f32 -> bf16.
    const float16x8_t h0 = vreinterpretq_f16_u16(v[0]), h1 = vreinterpretq_f16_u16(v[1]);
    *sub0 = RoundPair(vcvt_f32_f16(vget_low_f16(h0)), vcvt_f32_f16(vget_low_f16(h1)));
    *sub1 = RoundPair(vcvt_high_f32_f16(h0), vcvt_high_f32_f16(h1));
  } else {
    const uint64x2_t a = vreinterpretq_u64_u16(v[0]), b = vreinterpretq_u64_u16(v[1]);
    *sub0 = vreinterpretq_bf16_u64(vzip1q_u64(a, b));
    *sub1 = vreinterpretq_bf16_u64(vzip2q_u64(a, b));
  }
}

// Columns [0, n) of `rows` (<= kBlockRows) weight rows at w (row stride
// `stride`) into out in the scratch layout, zero past them.
template <bool kF16>
void DecodeBlock(const uint16_t* w, size_t stride, size_t rows, size_t n, uint16_t* out) {
  const size_t steps = (n + kStep - 1) / kStep;
  for (size_t p = 0; p < kRowPairs; ++p) {
    const uint16_t* r0 = 2 * p < rows ? w + 2 * p * stride : nullptr;
    const uint16_t* r1 = 2 * p + 1 < rows ? w + (2 * p + 1) * stride : nullptr;
    for (size_t j = 0; j < steps; ++j) {
      const size_t c = j * kStep;
      bfloat16x8_t s0, s1;
      DecodeStep<kF16>(r0 != nullptr ? r0 + c : nullptr, r1 != nullptr ? r1 + c : nullptr, MinSize(kStep, n - c),
                       &s0, &s1);
      StoreBF16(out + ((2 * j) * kRowPairs + p) * 8, s0);
      StoreBF16(out + ((2 * j + 1) * kRowPairs + p) * 8, s1);
    }
  }
}

// The block's 8 rows (w, scratch layout) times input pairs [q0, q0 + P) over
// `steps` steps (x: the pass's inputs, `pairs` pairs per sub-step), into
// Y[m * ldy + r] for m < M, r < rows (added to Y if `add`). With one or two
// pairs the sub-steps alternate between S = 2 sets of accumulators, so that
// at least 8 BFMMLAs are independent.
template <size_t P>
void Tile(const uint16_t* w, const uint16_t* x, size_t pairs, size_t q0, size_t steps, size_t M, size_t rows,
          bool add, float* Y, size_t ldy) {
  constexpr size_t S = P <= 2 ? 2 : 1;
  float32x4_t acc[S][kRowPairs][P];
  for (size_t s = 0; s < S; ++s)
    for (size_t p = 0; p < kRowPairs; ++p)
      for (size_t q = 0; q < P; ++q) acc[s][p][q] = vdupq_n_f32(0.0f);
  const uint16_t* xq = x + q0 * 8;
  for (size_t j = 0; j < steps; ++j) {
    for (size_t s = 0; s < 2; ++s) {
      const uint16_t* ws = w + (2 * j + s) * kRowPairs * 8;
      const uint16_t* xs = xq + (2 * j + s) * pairs * 8;
      bfloat16x8_t a[kRowPairs], b[P];
      for (size_t p = 0; p < kRowPairs; ++p) a[p] = LoadBF16(ws + p * 8);
      for (size_t q = 0; q < P; ++q) b[q] = LoadBF16(xs + q * 8);
      for (size_t p = 0; p < kRowPairs; ++p)
        for (size_t q = 0; q < P; ++q) acc[s % S][p][q] = vbfmmlaq_f32(acc[s % S][p][q], a[p], b[q]);
    }
  }
  if constexpr (S == 2) {
    for (size_t p = 0; p < kRowPairs; ++p)
      for (size_t q = 0; q < P; ++q) acc[0][p][q] = vaddq_f32(acc[0][p][q], acc[1][p][q]);
  }
  // Row pairs 2h and 2h + 1 hold rows 4h .. 4h + 3: UZP1 gathers their lanes
  // of input 2q (lanes 0 and 2 of each), UZP2 those of input 2q + 1.
  for (size_t q = 0; q < P; ++q) {
    for (size_t h = 0; h < kRowPairs / 2; ++h) {
      const size_t r = 4 * h;
      if (r >= rows) break;
      const float32x4_t lo = acc[0][2 * h][q], hi = acc[0][2 * h + 1][q];
      const float32x4_t by_input[2] = {vuzp1q_f32(lo, hi), vuzp2q_f32(lo, hi)};
      for (size_t e = 0; e < 2; ++e) {
        const size_t m = 2 * (q0 + q) + e;
        if (m >= M) break;
        float* y = Y + m * ldy + r;
        if (r + 4 <= rows) {
          vst1q_f32(y, add ? vaddq_f32(vld1q_f32(y), by_input[e]) : by_input[e]);
        } else {
          alignas(16) float v[4];
          vst1q_f32(v, by_input[e]);
          for (size_t i = 0; i < rows - r; ++i) y[i] = add ? y[i] + v[i] : v[i];
        }
      }
    }
  }
}

template <bool kF16>
void MatmulRows(const uint16_t* w, size_t cols, size_t rows, const uint16_t* xp, size_t M, float* Y, size_t ldy) {
  const size_t pairs = (M + 1) / 2;
  // Input pairs in near-equal groups of at most kMaxTilePairs (5 pairs: 3 + 2).
  const size_t groups = (pairs + kMaxTilePairs - 1) / kMaxTilePairs;
  alignas(64) uint16_t scratch[2 * (kPassCols / kStep) * kRowPairs * 8];
  for (size_t c0 = 0; c0 < cols; c0 += kPassCols) {
    const size_t n = MinSize(kPassCols, cols - c0), steps = (n + kStep - 1) / kStep;
    const uint16_t* x = xp + (c0 / kStep) * 2 * pairs * 8;
    for (size_t r = 0; r < rows; r += kBlockRows) {
      const size_t block_rows = MinSize(kBlockRows, rows - r);
      DecodeBlock<kF16>(w + r * cols + c0, cols, block_rows, n, scratch);
      float* y = Y + r;
      for (size_t g = 0, q0 = 0; g < groups; ++g) {
        const size_t P = pairs / groups + (g < pairs % groups ? 1 : 0);
        switch (P) {
          case 1: Tile<1>(scratch, x, pairs, q0, steps, M, block_rows, c0 > 0, y, ldy); break;
          case 2: Tile<2>(scratch, x, pairs, q0, steps, M, block_rows, c0 > 0, y, ldy); break;
          case 3: Tile<3>(scratch, x, pairs, q0, steps, M, block_rows, c0 > 0, y, ldy); break;
          default: Tile<4>(scratch, x, pairs, q0, steps, M, block_rows, c0 > 0, y, ldy); break;
        }
        q0 += P;
      }
    }
  }
}

}  // namespace

size_t packed_inputs_size(size_t M, size_t cols) { return (cols + kStep - 1) / kStep * 2 * ((M + 1) / 2) * 8; }

void pack_inputs(const float* X, size_t M, size_t cols, uint16_t* out) {
  const size_t pairs = (M + 1) / 2, steps = (cols + kStep - 1) / kStep;
  for (size_t q = 0; q < pairs; ++q) {
    const float* x[2] = {X + 2 * q * cols, 2 * q + 1 < M ? X + (2 * q + 1) * cols : nullptr};
    for (size_t j = 0; j < steps; ++j) {
      const size_t c = j * kStep, n = MinSize(kStep, cols - c);
      float32x4_t v[2][2];  // [input][sub-step]
      for (int i = 0; i < 2; ++i) {
        if (x[i] != nullptr && n == kStep) {
          v[i][0] = vld1q_f32(x[i] + c);
          v[i][1] = vld1q_f32(x[i] + c + 4);
        } else {
          alignas(16) float pad[kStep];
          for (size_t k = 0; k < kStep; ++k) pad[k] = x[i] != nullptr && k < n ? x[i][c + k] : 0.0f;
          v[i][0] = vld1q_f32(pad);
          v[i][1] = vld1q_f32(pad + 4);
        }
      }
      StoreBF16(out + ((2 * j) * pairs + q) * 8, RoundPair(v[0][0], v[1][0]));
      StoreBF16(out + ((2 * j + 1) * pairs + q) * 8, RoundPair(v[0][1], v[1][1]));
    }
  }
}

void matmul_rows(bool f16, const uint16_t* w, size_t cols, size_t rows, const uint16_t* xp, size_t M, float* Y,
                 size_t ldy) {
  if (f16) {
    MatmulRows<true>(w, cols, rows, xp, M, Y, ldy);
  } else {
    MatmulRows<false>(w, cols, rows, xp, M, Y, ldy);
  }
}

}  // namespace arm_bf16
}  // namespace qkv

#endif  // defined(__aarch64__)

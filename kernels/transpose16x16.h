// A 16 x 16 transpose of 32-bit values in AVX-512 registers, shared by the AMX
// kernels (their tiles hold 16 rows of 16 lanes; the outputs and the
// pair-interleaved B operands need the other orientation). Header-only: the
// functions carry their own target attribute and inline into any caller
// compiled for a superset of AVX-512F.
#ifndef QKV_KERNELS_TRANSPOSE16X16_H_
#define QKV_KERNELS_TRANSPOSE16X16_H_

// x86 only: its callers are the HWY_AVX3_DL blocks, which other architectures
// never compile, and <immintrin.h> exists only there.
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <cstdint>

namespace qkv {
namespace avx512 {

#define QKV_AVX512F_INLINE __attribute__((target("avx512f"))) inline __attribute__((always_inline))

// The permutations of one round (distance d): row i takes its own lanes j
// without bit d and row i + d's lanes j - d; row i + d takes row i's lanes
// j + d and its own lanes with bit d. (Indices >= 16: vpermt2d's second operand.)
struct TransposeRoundIdx {
  int32_t lo[16], hi[16];
};
constexpr TransposeRoundIdx MakeTransposeRoundIdx(int d) {
  TransposeRoundIdx x{};
  for (int j = 0; j < 16; ++j) {
    x.lo[j] = (j & d) ? 16 + j - d : j;
    x.hi[j] = (j & d) ? 16 + j : j + d;
  }
  return x;
}

template <int d>
QKV_AVX512F_INLINE void TransposeRound(__m512i (&v)[16]) {
  alignas(64) static constexpr TransposeRoundIdx kIdx = MakeTransposeRoundIdx(d);
  const __m512i lo = _mm512_load_si512(kIdx.lo), hi = _mm512_load_si512(kIdx.hi);
  for (int i = 0; i < 16; ++i) {
    if (i & d) continue;
    const __m512i a = v[i], b = v[i + d];
    v[i] = _mm512_permutex2var_epi32(a, lo, b);
    v[i + d] = _mm512_permutex2var_epi32(a, hi, b);
  }
}

// v[i] lane j <- v[j] lane i: for each bit d of the index, swap the
// off-diagonal d x d blocks of every 2d x 2d block.
QKV_AVX512F_INLINE void Transpose16x16(__m512i (&v)[16]) {
  TransposeRound<8>(v);
  TransposeRound<4>(v);
  TransposeRound<2>(v);
  TransposeRound<1>(v);
}

#undef QKV_AVX512F_INLINE

}  // namespace avx512
}  // namespace qkv

#endif  // defined(__x86_64__) || defined(__i386__)
#endif  // QKV_KERNELS_TRANSPOSE16X16_H_

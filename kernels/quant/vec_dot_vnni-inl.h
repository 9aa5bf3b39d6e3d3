// AVX-512 VNNI matvec of the ggml block types: one kernel per block size
// (32-value blocks against Q8_0/Q8_1, 256-value super-blocks against Q8_K),
// each templated over a small decoder (kernels/quant/vec_dot_vnni_blocks-inl.h)
// that unpacks one block into unsigned bytes u = q + offset, 64 values per
// register, plus its sub-block scales and min terms.
//
// vpdpbusd sums 4 products of unsigned weight bytes and signed activation
// bytes into each int32 lane: lane l of a 64-byte chunk holds values
// 4l .. 4l + 3, so lanes l and l + 8 together are lane l of ggml's 8-lane AVX2
// layout (kernels/quant/vec_dot.h). The offset is removed exactly by starting
// each sum at -offset * (sum of the 4 activation bytes), computed once per
// activation block for all rows of a pass. Integer block sums are exact, and
// the f32 steps (one fused multiply-add per block and lane, the min terms, the
// final pairwise sum) are the scalar kernel's, in its order: the results equal
// the scalar path bit for bit.
//
// K-quants whose pair products fit int16 take vpmaddubsw + vpdpwssd with the
// scales instead (fewer instructions, the same integer sums).
//
// Rows go 4 per pass, in 4 long streams (each a quarter of the caller's rows),
// each prefetching kPrefetchBytes ahead; the 32-value types pair a pass's
// rows in the two halves of each register (RowPairs32Vnni), and Q4_K, Q5_K
// and Q6_K do their per-block scale, min and accumulation steps once for the
// 4 rows (KRows4Vnni, vec_dot_vnni_rows4-inl.h).
//
// Measured on 1 thread with 256x2048 matrices in L2 (busy 2-core machine, best
// of 1000 calls), GB/s of weights: Q6_K 30, Q4_K 20, Q5_K 19, IQ4_XS 16,
// Q4_0 15, Q5_0 15, IQ4_NL 14, Q3_K 13, Q2_K 12, Q4_1 11, Q5_1 11 (the scalar
// kernels: 0.4-1.8; the Q8_0 VNNI kernel of kernels/linear.cc: 26).
//
// Included by kernels/quant/vec_dot.cc inside its per-target namespace when
// HWY_TARGET == HWY_AVX3_DL; Highway 1.0.3's AVX3_DL does not enable
// avx512vnni (kernels/linear.cc has the same note), hence the attributes.
// They name the target's own features too: GCC adds a function's target to
// the pragma's, clang puts it in place of them.

#define QKV_VNNI_TARGET __attribute__((target(HWY_TARGET_STR ",avx512vnni,bmi2,gfni")))
#define QKV_VNNI_INLINE QKV_VNNI_TARGET HWY_INLINE

constexpr size_t kPrefetchBytes = 1024;

// The loops over a pass's rows are unrolled so that each row's accumulators
// stay in registers (a loop over them kept them in memory, putting a store and
// a reload into every block's chain of fused multiply-adds: 2x slower).
#define QKV_UNROLL _Pragma("GCC unroll 4")

// Per-row accumulators: 8 f32 lanes as ggml's AVX2 kernels, plus the min
// terms of Q4_K (4 lanes) and Q4_1/Q5_1/Q5_K (one f32).
struct VnniRow {
  __m256 acc;
  __m128 accm;
  float summs;
};

QKV_VNNI_INLINE float Sum8(__m256 v) {
  HWY_ALIGN float a[8];
  _mm256_store_ps(a, v);
  float h[4];
  for (int i = 0; i < 4; ++i) h[i] = a[i + 4] + a[i];
  return (h[0] + h[2]) + (h[1] + h[3]);
}

// Sum8 of both 256-bit halves of v at once (the same additions in the same
// order): lane 0 holds the low half's sum, lane 8 the high half's.
QKV_VNNI_INLINE __m512 Sum8Halves(__m512 v) {
  const __m512 h = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));  // h[i] = a[i] + a[i + 4]
  const __m512 q = _mm512_add_ps(h, _mm512_permute_ps(h, _MM_SHUFFLE(1, 0, 3, 2)));        // h0 + h2, h1 + h3
  return _mm512_add_ps(q, _mm512_permute_ps(q, _MM_SHUFFLE(2, 3, 0, 1)));
}

QKV_VNNI_INLINE float Sum4(__m128 v) {
  HWY_ALIGN float a[4];
  _mm_store_ps(a, v);
  return (a[0] + a[2]) + (a[1] + a[3]);
}

QKV_VNNI_INLINE float HalfAt(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// Prefetches every cache line of [p, p + n): lines are 64 bytes, so the
// addresses p, p + 64, ... and p + n - 1 hit each line at least once. n is a
// constant: the prefetches unroll, no loop in the kernels' inner loops.
template <size_t n>
QKV_VNNI_INLINE void PrefetchSpan(const uint8_t* p) {
  for (size_t o = 0; o < n; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p + o), _MM_HINT_T0);
  if (n % 64 != 1) _mm_prefetch(reinterpret_cast<const char*>(p + n - 1), _MM_HINT_T0);
}

// -off * (sum of each 4 activation bytes), the start of each vpdpbusd sum.
template <int kOffset>
QKV_VNNI_INLINE __m512i OffsetCorrection(__m512i a) {
  if (kOffset == 0) return _mm512_setzero_si512();
  const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(kOffset), a);
  return _mm512_sub_epi32(_mm512_setzero_si512(), s);
}

// One Q8_K block as every row of a pass uses it.
struct VnniActK {
  __m512i q[4];     // 256 int8 values
  __m512i corr[4];  // OffsetCorrection of each chunk (kMadd16: off * pair sums as int16)
  __m256i bsums;    // 16 int16 sums of 16 values
  __m128i pairs;    // 8 int16: bsums[2j] + bsums[2j + 1]
  float d;
};

template <int kOffset, bool kMadd16>
QKV_VNNI_INLINE void LoadActK(const BlockQ8_K& a, VnniActK* out) {
  for (int c = 0; c < 4; ++c) {
    out->q[c] = _mm512_loadu_si512(a.qs + 64 * c);
    out->corr[c] = kOffset == 0 ? _mm512_setzero_si512()
                   : kMadd16    ? _mm512_maddubs_epi16(_mm512_set1_epi8(kOffset), out->q[c])
                                : OffsetCorrection<kOffset>(out->q[c]);
  }
  out->bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums));
  out->pairs = _mm256_cvtepi32_epi16(_mm256_madd_epi16(out->bsums, _mm256_set1_epi16(1)));
  out->d = a.d;
}

// Chunk c's lanes hold values 64c + 4l ..: lane l belongs to sub-block
// (64c + 4l) / kSub; idx[c] holds those sub-block numbers, per lane.
template <size_t kSub>
QKV_VNNI_INLINE void SubBlockLanes(__m512i idx[4]) {
  for (int c = 0; c < 4; ++c) {
    idx[c] = kSub == 32 ? _mm512_set_epi32(2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1,
                                           2 * c + 1, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c)
                        : _mm512_set_epi32(4 * c + 3, 4 * c + 3, 4 * c + 3, 4 * c + 3, 4 * c + 2, 4 * c + 2, 4 * c + 2,
                                           4 * c + 2, 4 * c + 1, 4 * c + 1, 4 * c + 1, 4 * c + 1, 4 * c, 4 * c, 4 * c,
                                           4 * c);
  }
}

// Rows of 256-value super-blocks. Dec::Mins(block, act, row) adds the block's
// min term to row; Dec::Unpack(block, u) writes the 256 unsigned values into
// u[0..3] and returns the sub-block scales as int32 lanes (lane j = sub-block
// j of Dec::kSub values); Dec::D(block) is the block's f32 scale d.
// Dec::kMadd16: every sum of 2 products u * a fits int16 (u < 128), so each
// chunk takes vpmaddubsw (pairs), the offset's pair sums subtracted as int16,
// and one vpdpwssd with the scales (both 16-bit halves of a lane) instead of
// vpdpbusd and a 32-bit multiply by the scales.
template <class Dec, size_t R>
QKV_VNNI_TARGET void KRowsVnni(const uint8_t* HWY_RESTRICT w, size_t stride, size_t nb,
                               const BlockQ8_K* HWY_RESTRICT a, float* HWY_RESTRICT y, size_t ys) {
  using B = typename Dec::Block;
  static_assert(Dec::kSub == 16 || Dec::kSub == 32, "sub-blocks of 16 or 32 values");
  __m512i idx[4];
  SubBlockLanes<Dec::kSub>(idx);
  VnniRow row[R];
  for (size_t r = 0; r < R; ++r) row[r] = VnniRow{_mm256_setzero_ps(), _mm_setzero_ps(), 0.0f};
  for (size_t i = 0; i < nb; ++i) {
    VnniActK act;
    LoadActK<Dec::kOffset, Dec::kMadd16>(a[i], &act);
    QKV_UNROLL for (size_t r = 0; r < R; ++r) {
      const uint8_t* b = w + r * stride + i * sizeof(B);
      PrefetchSpan<sizeof(B)>(b + kPrefetchBytes);
      __m512i u[4];
      Dec::Mins(b, act, &row[r]);
      const __m512i sc = Dec::Unpack(b, u);
      __m512i s = _mm512_setzero_si512();
      if constexpr (Dec::kMadd16) {
        const __m512i sc2 = _mm512_or_si512(_mm512_and_si512(sc, _mm512_set1_epi32(0xFFFF)), _mm512_slli_epi32(sc, 16));
        for (int c = 0; c < 4; ++c) {
          __m512i p = _mm512_maddubs_epi16(u[c], act.q[c]);
          if (Dec::kOffset != 0) p = _mm512_sub_epi16(p, act.corr[c]);
          s = _mm512_dpwssd_epi32(s, p, _mm512_permutexvar_epi32(idx[c], sc2));
        }
      } else {
        for (int c = 0; c < 4; ++c) {
          const __m512i p = _mm512_dpbusd_epi32(act.corr[c], u[c], act.q[c]);
          s = _mm512_add_epi32(s, _mm512_mullo_epi32(p, _mm512_permutexvar_epi32(idx[c], sc)));
        }
      }
      const __m256i lanes = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
      row[r].acc = _mm256_fmadd_ps(_mm256_set1_ps(act.d * Dec::D(b)), _mm256_cvtepi32_ps(lanes), row[r].acc);
    }
  }
  for (size_t r = 0; r < R; ++r) y[r * ys] = Dec::Finish(row[r]);
}

// The f16 field at byte `at` of each of n <= 16 consecutive blocks of S bytes
// from p, as 16 f32 lanes (lanes past n undefined), by byte permutes of the
// group's bytes: up to 6 masked 64-byte loads (nothing read past the last
// field) and 3 two-register permutes (vpermt2b), then one conversion. A masked
// 16-bit broadcast per block took about 3 instructions per block, a quarter of
// the kernel's; a scalar conversion per block costs as much as its dot product.
template <size_t S>
struct FieldGather {
  static_assert(16 * S <= 384, "16 blocks within 6 registers");
  size_t at;
  __m512i idx;             // byte 2j + e of the result <- source byte (j S + at + e) mod 128
  __mmask64 from2, from4;  // bytes whose source lies in registers 2-3, 4-5
  explicit QKV_VNNI_INLINE FieldGather(size_t at_) : at(at_) {
    HWY_ALIGN uint8_t b[64] = {};
    uint64_t m2 = 0, m4 = 0;
    for (size_t k = 0; k < 32; ++k) {
      const size_t src = k / 2 * S + at + k % 2;
      b[k] = static_cast<uint8_t>(src % 128);
      if (src / 128 == 1) m2 |= uint64_t{1} << k;
      if (src / 128 == 2) m4 |= uint64_t{1} << k;
    }
    idx = _mm512_load_si512(b);
    from2 = _cvtu64_mask64(m2);
    from4 = _cvtu64_mask64(m4);
  }
  QKV_VNNI_INLINE __m512 operator()(const uint8_t* p, size_t n) const {
    const size_t need = (n - 1) * S + at + 2;
    __m512i v[6];
    for (size_t c = 0; c < 6; ++c) {
      const size_t have = need > 64 * c ? need - 64 * c : 0;
      v[c] = _mm512_maskz_loadu_epi8(_cvtu64_mask64(have >= 64 ? ~uint64_t{0} : (uint64_t{1} << have) - 1), p + 64 * c);
    }
    __m512i r = _mm512_permutex2var_epi8(v[0], idx, v[1]);
    r = _mm512_mask_mov_epi8(r, from2, _mm512_permutex2var_epi8(v[2], idx, v[3]));
    r = _mm512_mask_mov_epi8(r, from4, _mm512_permutex2var_epi8(v[4], idx, v[5]));
    return _mm512_cvtph_ps(_mm512_castsi512_si256(r));
  }
};

// One activation row of 32-value blocks: the blocks, their scales d and (Q8_1)
// sums s as f32, each padded with 16 zeros.
template <class A>
struct Act32 {
  const A* blocks;
  const float* d;
  const float* s;
};

// The gathers of a 32-value type's f16 fields: d at byte 0, Q4_1/Q5_1's m at
// byte 2. Built once per matvec or GEMM call: building one (a 32-entry index
// table) per pass of 4 rows took a quarter of the Q5_0 kernel's time at 576
// columns.
template <class Dec, template <size_t> class Gather>
struct HalfFields {
  Gather<sizeof(typename Dec::Block)> d, m;
  QKV_VNNI_INLINE HalfFields() : d(0), m(Dec::kMin ? 2 : 0) {}
};

// Rows of 32-value blocks against Q8_0 or Q8_1 (Dec::Act), two blocks per
// register (lanes 0-7 block i, 8-15 block i + 1), scales converted 16 blocks
// at a time. Dec::Unpack2(b0, b1) gives both blocks' unsigned values;
// Dec::kMin: the block's f16 min m (at byte 2) times the activation's s is
// summed, one scalar fused multiply-add per block as the scalar kernel does.
template <class Dec, size_t R>
QKV_VNNI_TARGET void Rows32Vnni(const uint8_t* HWY_RESTRICT w, size_t stride, size_t nb,
                                const Act32<typename Dec::Act>& a, const HalfFields<Dec, FieldGather>& fields,
                                float* HWY_RESTRICT y, size_t ys) {
  using B = typename Dec::Block;
  VnniRow row[R];
  for (size_t r = 0; r < R; ++r) row[r] = VnniRow{_mm256_setzero_ps(), _mm_setzero_ps(), 0.0f};
  HWY_ALIGN float dsc[R][16], msc[R][16];
  const auto& d_of = fields.d;
  const auto& m_of = fields.m;
  for (size_t g = 0; g < nb; g += 16) {
    const size_t n = std::min<size_t>(16, nb - g);
    QKV_UNROLL for (size_t r = 0; r < R; ++r) {
      const uint8_t* group = w + r * stride + g * sizeof(B);
      _mm512_store_ps(dsc[r], _mm512_mul_ps(d_of(group, n), _mm512_loadu_ps(a.d + g)));
      if (Dec::kMin) _mm512_store_ps(msc[r], m_of(group, n));
    }
    for (size_t k = 0; k < n; k += 2) {
      const size_t i = g + k;
      const bool pair = k + 1 < n;
      const size_t i1 = pair ? i + 1 : i;
      const __m256i a0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.blocks[i].qs));
      const __m256i a1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.blocks[i1].qs));
      const __m512i aq = _mm512_inserti64x4(_mm512_castsi256_si512(a0), a1, 1);
      const __m512i corr = OffsetCorrection<Dec::kOffset>(aq);
      QKV_UNROLL for (size_t r = 0; r < R; ++r) {
        const uint8_t* b0 = w + r * stride + i * sizeof(B);
        const uint8_t* b1 = w + r * stride + i1 * sizeof(B);
        PrefetchSpan<2 * sizeof(B)>(b0 + kPrefetchBytes);
        const __m512 f = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(corr, Dec::Unpack2(b0, b1), aq));
        if (Dec::kMin) row[r].summs = std::fma(msc[r][k], a.s[i], row[r].summs);
        row[r].acc = _mm256_fmadd_ps(_mm256_set1_ps(dsc[r][k]), _mm512_castps512_ps256(f), row[r].acc);
        if (pair) {
          if (Dec::kMin) row[r].summs = std::fma(msc[r][k + 1], a.s[i1], row[r].summs);
          row[r].acc = _mm256_fmadd_ps(_mm256_set1_ps(dsc[r][k + 1]), _mm512_extractf32x8_ps(f, 1), row[r].acc);
        }
      }
    }
  }
  for (size_t r = 0; r < R; ++r) y[r * ys] = Sum8(row[r].acc) + row[r].summs;
}

#include "kernels/quant/vec_dot_vnni_blocks-inl.h"

// Rows of 32-value blocks in pairs, two rows per register: lanes 0-7 row
// 2p's block i, lanes 8-15 row 2p + 1's (Dec::Unpack2 of the two rows'
// blocks), against the activation block in both halves. Each half is its
// row's 8 lanes of Rows32Vnni, with the same fused multiply-add per block in
// the same order (so the same results), but the conversion and the fused
// multiply-add take one 512-bit instruction for two rows instead of two
// 256-bit ones and an extraction for two blocks of one row (Rows32Vnni, which
// takes the rows left over). 143M Q4_0 decode, 2 threads, alternated runs:
// 172-186 tok/s with block pairs, 207-230 with row pairs.
constexpr size_t kScalarFieldsMax = 4;

template <class Dec, size_t R>
QKV_VNNI_TARGET void RowPairs32Vnni(const uint8_t* HWY_RESTRICT w, size_t stride, size_t nb,
                                    const Act32<typename Dec::Act>& a, const HalfFields<Dec, FieldGather>& fields,
                                    float* HWY_RESTRICT y, size_t ys) {
  static_assert(R % 2 == 0, "rows in pairs");
  using B = typename Dec::Block;
  __m512 acc[R / 2];
  float summs[R] = {};
  for (size_t p = 0; p < R / 2; ++p) acc[p] = _mm512_setzero_ps();
  HWY_ALIGN float dsc[R][16], msc[R][16];
  for (size_t g = 0; g < nb; g += 16) {
    const size_t n = std::min<size_t>(16, nb - g);
    if (n > kScalarFieldsMax) {
      QKV_UNROLL for (size_t r = 0; r < R; ++r) {
        const uint8_t* group = w + r * stride + g * sizeof(B);
        _mm512_store_ps(dsc[r], _mm512_mul_ps(fields.d(group, n), _mm512_loadu_ps(a.d + g)));
        if (Dec::kMin) _mm512_store_ps(msc[r], fields.m(group, n));
      }
    } else {  // a short last group: a gather costs as much as for 16 blocks
      for (size_t r = 0; r < R; ++r) {
        for (size_t k = 0; k < n; ++k) {
          const uint8_t* b = w + r * stride + (g + k) * sizeof(B);
          dsc[r][k] = HalfAt(b) * a.d[g + k];
          if (Dec::kMin) msc[r][k] = HalfAt(b + 2);
        }
      }
    }
    for (size_t k = 0; k < n; ++k) {
      const size_t i = g + k;
      const __m512i aq = Broadcast32(reinterpret_cast<const uint8_t*>(a.blocks[i].qs));
      const __m512i corr = OffsetCorrection<Dec::kOffset>(aq);
      QKV_UNROLL for (size_t p = 0; p < R / 2; ++p) {
        const uint8_t* b0 = w + 2 * p * stride + i * sizeof(B);
        const uint8_t* b1 = b0 + stride;
        if (k % 2 == 0) {  // one prefetch per row for two blocks
          PrefetchSpan<2 * sizeof(B)>(b0 + kPrefetchBytes);
          PrefetchSpan<2 * sizeof(B)>(b1 + kPrefetchBytes);
        }
        const __m512 f = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(corr, Dec::Unpack2(b0, b1), aq));
        const __m512 sc = _mm512_mask_broadcastss_ps(_mm512_set1_ps(dsc[2 * p][k]), 0xFF00, _mm_load_ss(&dsc[2 * p + 1][k]));
        acc[p] = _mm512_fmadd_ps(sc, f, acc[p]);
        if (Dec::kMin) {
          summs[2 * p] = std::fma(msc[2 * p][k], a.s[i], summs[2 * p]);
          summs[2 * p + 1] = std::fma(msc[2 * p + 1][k], a.s[i], summs[2 * p + 1]);
        }
      }
    }
  }
  for (size_t p = 0; p < R / 2; ++p) {
    const __m512 sums = Sum8Halves(acc[p]);
    y[2 * p * ys] = _mm512_cvtss_f32(sums) + summs[2 * p];
    y[(2 * p + 1) * ys] = _mm_cvtss_f32(_mm512_extractf32x4_ps(sums, 2)) + summs[2 * p + 1];
  }
}

// n_rows rows in 4 streams of L = n_rows / 4 rows (pass k: rows k, k + L,
// k + 2L, k + 3L), the rest one at a time; the same arithmetic for every row.
template <class Dec, class A, void (*Rows4)(const uint8_t*, size_t, size_t, const A*, float*, size_t),
          void (*Rows1)(const uint8_t*, size_t, size_t, const A*, float*, size_t)>
QKV_VNNI_INLINE void VnniStreams(const uint8_t* base, size_t nb, const void* xa, float* y, size_t n_rows) {
  const size_t rb = nb * sizeof(typename Dec::Block);
  const auto* a = static_cast<const A*>(xa);
  const size_t L = n_rows / 4;
  for (size_t k = 0; k < L; ++k) Rows4(base + k * rb, L * rb, nb, a, y + k, L);
  for (size_t r = 4 * L; r < n_rows; ++r) Rows1(base + r * rb, rb, nb, a, y + r, 1);
}

#include "kernels/quant/vec_dot_vnni_rows4-inl.h"

template <class Dec>
QKV_VNNI_TARGET void KVnni(const uint8_t* base, size_t cols, const void* xa, float* y, size_t n_rows) {
  if constexpr (HasRows4<Dec>::value) {
    VnniStreams<Dec, BlockQ8_K, KRows4Vnni<Dec>, KRowsVnni<Dec, 1>>(base, cols / kQK, xa, y, n_rows);
  } else {
    VnniStreams<Dec, BlockQ8_K, KRowsVnni<Dec, 4>, KRowsVnni<Dec, 1>>(base, cols / kQK, xa, y, n_rows);
  }
}

template <class Dec>
QKV_VNNI_TARGET void Vnni32(const uint8_t* base, size_t cols, const void* xa, float* y, size_t n_rows) {
  using A = typename Dec::Act;
  const size_t nb = cols / 32;
  Act32<A> act{static_cast<const A*>(xa), nullptr, nullptr};
  static thread_local std::vector<float> scales;
  scales.assign(2 * (nb + 16), 0.0f);
  act.d = scales.data();
  act.s = scales.data() + nb + 16;
  ActScalesF32<Dec::kMin>(act.blocks, nb, scales.data(), scales.data() + nb + 16);
  const HalfFields<Dec, FieldGather> fields;
  const size_t rb = nb * sizeof(typename Dec::Block);
  const size_t L = n_rows / 4;
  for (size_t k = 0; k < L; ++k) RowPairs32Vnni<Dec, 4>(base + k * rb, L * rb, nb, act, fields, y + k, L);
  for (size_t r = 4 * L; r < n_rows; ++r) Rows32Vnni<Dec, 1>(base + r * rb, rb, nb, act, fields, y + r, 1);
}

// Returns false for the types without a VNNI kernel (Q8_0's matvec is
// kernels/linear.cc's).
HWY_INLINE bool DotRowsVnni(DType t, const void* rows, size_t cols, const void* xa, float* y, size_t n_rows) {
  if (t == DType::Q8_0) return false;
  const auto* base = static_cast<const uint8_t*>(rows);
  return WithVnniDecoder(t, [&](auto tag) {
    using Dec = typename decltype(tag)::type;
    if constexpr (Dec::Block::kValues == kQK) {
      KVnni<Dec>(base, cols, xa, y, n_rows);
    } else if constexpr (!std::is_same_v<Dec, DecQ8_0>) {  // (its blocks exceed FieldGather's reach)
      Vnni32<Dec>(base, cols, xa, y, n_rows);
    }
  });
}

// The AVX-VNNI kernels of the block types (kernels/quant/vec_dot_avxvnni.h),
// templates over the dot-product op Op::Dot(acc, u, a) = acc + vpdpbusd(u, a)
// per int32 lane. One tile kernel per block size serves both the matvec
// (R = 4 rows from 4 long streams, one input) and the GEMM (R = 2 adjacent
// rows x C <= 4 inputs, each weight block decoded once per tile); the block
// decoders are in vec_dot_avxvnni_blocks-inl.h.
//
// Included by vec_dot_avxvnni_vex.cc and vec_dot_avxvnni_emulated.cc inside
// an anonymous namespace of qkv and a target region (avx2, fma, f16c, and in
// the first avxvnni), after <immintrin.h>, <cstring>, <cstdint> and the
// kernels' headers. No standard-library templates are instantiated here:
// their code would be built for the region's target and could be merged
// with the baseline copies of other files.

constexpr size_t kVnniPrefetchBytes = 1024;
// The GEMM's tile: 2 rows x 4 inputs (8 f32 accumulators, the decoded block
// and the inputs' activation registers).
constexpr size_t kVnniGemmR = 2, kVnniGemmC = 4;

inline float HalfAt(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

inline float FmaF32(float a, float b, float c) {
  return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}

// Per (row, input) accumulators: 8 f32 lanes as the scalar kernel's Acc8,
// the min terms of Q4_K (4 lanes) and of Q4_1/Q5_1/Q5_K (one f32).
struct VnniRow {
  __m256 acc;
  __m128 accm;
  float summs;
};

inline VnniRow ZeroRow() { return VnniRow{_mm256_setzero_ps(), _mm_setzero_ps(), 0.0f}; }

// (a0 + a4 + a2 + a6) + (a1 + a5 + a3 + a7) as the scalar Acc8::sum.
inline float Sum8(__m256 v) {
  alignas(32) float a[8];
  _mm256_store_ps(a, v);
  float h[4];
  for (int i = 0; i < 4; ++i) h[i] = a[i + 4] + a[i];
  return (h[0] + h[2]) + (h[1] + h[3]);
}

inline float Sum4(__m128 v) {
  alignas(16) float a[4];
  _mm_store_ps(a, v);
  return (a[0] + a[2]) + (a[1] + a[3]);
}

inline __m256i Bytes(uint8_t v) { return _mm256_set1_epi8(static_cast<char>(v)); }

// -vpdpbusd(offset, a): the accumulator start that removes the weights' bias.
template <class Op, int kOffset>
inline __m256i NegCorrection(__m256i a) {
  const __m256i zero = _mm256_setzero_si256();
  if constexpr (kOffset == 0) return zero;
  return _mm256_sub_epi32(zero, Op::Dot(zero, Bytes(static_cast<uint8_t>(kOffset)), a));
}

// One Q8_K block as every row of a tile uses it.
struct VnniActK {
  __m256i q[8];
  __m256i neg[8];  // -vpdpbusd(offset, q[k])
  __m256i bsums;   // 16 int16 sums of 16 values
  __m128i pairs;   // 8 int16: bsums[2j] + bsums[2j + 1]
  float d;
};

template <class Op, int kOffset>
inline void LoadActK(const BlockQ8_K& a, VnniActK* out) {
  for (int k = 0; k < 8; ++k) {
    out->q[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs + 32 * k));
    out->neg[k] = NegCorrection<Op, kOffset>(out->q[k]);
  }
  out->bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums));
  const __m256i p = _mm256_madd_epi16(out->bsums, _mm256_set1_epi16(1));
  out->pairs = _mm_packs_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));  // |pair| <= 4096
  out->d = a.d;
}

#include "kernels/quant/vec_dot_avxvnni_blocks-inl.h"

// ---- 32-value blocks against Q8_0 / Q8_1 ----

// Rows w + r * stride (r < R) x inputs in[c] (c < C) from block 0 to nb,
// outputs y[c * ldy + r * ys]. Per (row, input) and block: the lane sums,
// one fused multiply-add of d_w * d_a with them, and (kMin) m_w * s_a into
// one f32, as the scalar Dot32 / Dot32Min.
template <class Op, class Dec, size_t R, size_t C>
__attribute__((noinline)) void Tile32(const uint8_t* __restrict w, size_t stride, size_t nb,
                                      const detail::AvxVnniInput* in, float* __restrict y, size_t ldy, size_t ys,
                                      bool prefetch) {
  using B = typename Dec::Block;
  using A = typename Dec::Act;
  VnniRow row[R][C];
  for (size_t r = 0; r < R; ++r) {
    for (size_t c = 0; c < C; ++c) row[r][c] = ZeroRow();
  }
  const A* act[C];
  for (size_t c = 0; c < C; ++c) act[c] = static_cast<const A*>(in[c].blocks);
  for (size_t i = 0; i < nb; ++i) {
    __m256i aq[C], neg[C];
    for (size_t c = 0; c < C; ++c) {
      aq[c] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act[c][i].qs));
      neg[c] = NegCorrection<Op, Dec::kOffset>(aq[c]);
    }
    for (size_t r = 0; r < R; ++r) {
      const uint8_t* b = w + r * stride + i * sizeof(B);
      if (prefetch) _mm_prefetch(reinterpret_cast<const char*>(b + kVnniPrefetchBytes), _MM_HINT_T0);
      const __m256i u = Dec::Unpack(b);
      const float dw = HalfAt(b);  // d is every 32-value block's first field
      const float mw = Dec::kMin ? HalfAt(b + 2) : 0.0f;
      for (size_t c = 0; c < C; ++c) {
        const __m256i s = Op::Dot(neg[c], u, aq[c]);
        if constexpr (Dec::kMin) row[r][c].summs = FmaF32(mw, in[c].s[i], row[r][c].summs);
        row[r][c].acc = _mm256_fmadd_ps(_mm256_set1_ps(dw * in[c].d[i]), _mm256_cvtepi32_ps(s), row[r][c].acc);
      }
    }
  }
  for (size_t r = 0; r < R; ++r) {
    for (size_t c = 0; c < C; ++c) {
      y[c * ldy + r * ys] = Dec::kMin ? Sum8(row[r][c].acc) + row[r][c].summs : Sum8(row[r][c].acc);
    }
  }
}

// ---- 256-value super-blocks against Q8_K ----

// vpshufb selectors placing sub-block scale words into the int32 lanes of
// register k (values 32k .. 32k + 31) from a vector holding the 16-bit scale
// words 0-7 (or, kSub == 16 and k >= 4, words 8-15) in both 128-bit halves:
// lanes 0-3 take sub-block (32k) / kSub, lanes 4-7 (32k + 16) / kSub. The
// word goes to the low half of the lane and zeros above it (kWide false:
// vpmaddwd then multiplies it with the part's low 16 bits, the part itself
// when it fits int16), or to the high half (kWide: shifted down arithmetically
// to a full int32 for vpmulld).
template <size_t kSub, bool kWide>
inline void ScaleSelectors(__m256i idx[8]) {
  for (int k = 0; k < 8; ++k) {
    alignas(32) int8_t b[32];
    for (int lane = 0; lane < 8; ++lane) {
      const int word = kSub == 32 ? k : (2 * k + (lane >= 4 ? 1 : 0)) % 8;
      const int at = kWide ? 2 : 0;
      for (int j = 0; j < 4; ++j) b[4 * lane + j] = -128;  // a zero byte
      b[4 * lane + at] = static_cast<int8_t>(2 * word);
      b[4 * lane + at + 1] = static_cast<int8_t>(2 * word + 1);
    }
    idx[k] = _mm256_load_si256(reinterpret_cast<const __m256i*>(b));
  }
}

// The scalar DotQ2K / DotQ3K / DotK4 / DotQ6K / DotIQ4XS per (row, input)
// and super-block: Dec::Mins adds the min terms, then lane l of the block is
// sum over k of scale(k, l) * part(k, l) (the parts are the vpdpbusd sums of
// register k, bias removed), converted to f32 and fused-multiply-added with
// d_a * d_w.
template <class Op, class Dec, size_t R, size_t C>
__attribute__((noinline)) void TileK(const uint8_t* __restrict w, size_t stride, size_t nb,
                                     const detail::AvxVnniInput* in, float* __restrict y, size_t ldy, size_t ys,
                                     bool prefetch) {
  using B = typename Dec::Block;
  __m256i idx[8];
  ScaleSelectors<Dec::kSub, Dec::kWide>(idx);
  VnniRow row[R][C];
  for (size_t r = 0; r < R; ++r) {
    for (size_t c = 0; c < C; ++c) row[r][c] = ZeroRow();
  }
  const BlockQ8_K* act[C];
  for (size_t c = 0; c < C; ++c) act[c] = static_cast<const BlockQ8_K*>(in[c].blocks);
  for (size_t i = 0; i < nb; ++i) {
    VnniActK a[C];
    for (size_t c = 0; c < C; ++c) LoadActK<Op, Dec::kOffset>(act[c][i], &a[c]);
    for (size_t r = 0; r < R; ++r) {
      const uint8_t* b = w + r * stride + i * sizeof(B);
      if (prefetch) {
        for (size_t o = 0; o < sizeof(B); o += 64) {
          _mm_prefetch(reinterpret_cast<const char*>(b + kVnniPrefetchBytes + o), _MM_HINT_T0);
        }
        _mm_prefetch(reinterpret_cast<const char*>(b + kVnniPrefetchBytes + sizeof(B) - 1), _MM_HINT_T0);
      }
      __m256i u[8];
      const __m256i words = Dec::Values(b, u);
      const __m256i lo = _mm256_permute2x128_si256(words, words, 0x00);
      const __m256i hi = _mm256_permute2x128_si256(words, words, 0x11);
      __m256i scale[8];
      for (int k = 0; k < 8; ++k) {
        scale[k] = _mm256_shuffle_epi8(Dec::kSub == 16 && k >= 4 ? hi : lo, idx[k]);
        if constexpr (Dec::kWide) scale[k] = _mm256_srai_epi32(scale[k], 16);
      }
      const float dw = Dec::D(b);
      for (size_t c = 0; c < C; ++c) {
        Dec::Mins(b, a[c], &row[r][c]);
        __m256i s = _mm256_setzero_si256();
        for (int k = 0; k < 8; ++k) {
          const __m256i part = Op::Dot(a[c].neg[k], u[k], a[c].q[k]);
          s = _mm256_add_epi32(s, Dec::kWide ? _mm256_mullo_epi32(part, scale[k]) : _mm256_madd_epi16(part, scale[k]));
        }
        row[r][c].acc = _mm256_fmadd_ps(_mm256_set1_ps(a[c].d * dw), _mm256_cvtepi32_ps(s), row[r][c].acc);
      }
    }
  }
  for (size_t r = 0; r < R; ++r) {
    for (size_t c = 0; c < C; ++c) y[c * ldy + r * ys] = Dec::Finish(row[r][c]);
  }
}

// ---- drivers ----

template <class Op, class Dec, size_t R, size_t C>
inline void RunTile(const uint8_t* w, size_t stride, size_t nb, const detail::AvxVnniInput* in, float* y,
                    size_t ldy, size_t ys, bool prefetch) {
  if constexpr (Dec::kBlockValues == 32) {
    Tile32<Op, Dec, R, C>(w, stride, nb, in, y, ldy, ys, prefetch);
  } else {
    TileK<Op, Dec, R, C>(w, stride, nb, in, y, ldy, ys, prefetch);
  }
}

// A tile of R rows and c (1 .. kVnniGemmC) inputs.
template <class Op, class Dec, size_t R>
inline void RunTileInputs(size_t c, const uint8_t* w, size_t stride, size_t nb, const detail::AvxVnniInput* in,
                          float* y, size_t ldy, bool prefetch) {
  static_assert(kVnniGemmC == 4, "one case per input count");
  switch (c) {
    case 1: return RunTile<Op, Dec, R, 1>(w, stride, nb, in, y, ldy, 1, prefetch);
    case 2: return RunTile<Op, Dec, R, 2>(w, stride, nb, in, y, ldy, 1, prefetch);
    case 3: return RunTile<Op, Dec, R, 3>(w, stride, nb, in, y, ldy, 1, prefetch);
    default: return RunTile<Op, Dec, R, 4>(w, stride, nb, in, y, ldy, 1, prefetch);
  }
}

// One input: n_rows rows in 4 streams of L = n_rows / 4 rows (pass k: rows
// k, k + L, k + 2L, k + 3L, each stream prefetching ahead), the rest one at
// a time. M inputs: tiles of kVnniGemmC inputs (the last one smaller) by
// kVnniGemmR rows (the last row alone); the first input tile reads the
// weights from memory and prefetches, the later ones find them in cache.
template <class Op, class Dec>
void RunRows(const void* rows, size_t cols, const detail::AvxVnniInput* in, size_t M, float* y, size_t ldy,
             size_t n_rows) {
  const auto* base = static_cast<const uint8_t*>(rows);
  const size_t nb = cols / Dec::kBlockValues, rb = nb * sizeof(typename Dec::Block);
  if (M == 1) {
    const size_t L = n_rows / 4;
    for (size_t k = 0; k < L; ++k) RunTile<Op, Dec, 4, 1>(base + k * rb, L * rb, nb, in, y + k, 0, L, true);
    for (size_t r = 4 * L; r < n_rows; ++r) RunTile<Op, Dec, 1, 1>(base + r * rb, rb, nb, in, y + r, 0, 1, true);
    return;
  }
  for (size_t m = 0; m < M; m += kVnniGemmC) {
    const size_t c = M - m < kVnniGemmC ? M - m : kVnniGemmC;
    size_t r = 0;
    for (; r + kVnniGemmR <= n_rows; r += kVnniGemmR) {
      RunTileInputs<Op, Dec, kVnniGemmR>(c, base + r * rb, rb, nb, in + m, y + m * ldy + r, ldy, m == 0);
    }
    for (; r < n_rows; ++r) RunTileInputs<Op, Dec, 1>(c, base + r * rb, rb, nb, in + m, y + m * ldy + r, ldy, m == 0);
  }
}

// False for the types without a kernel (avxvnni_kernel).
template <class Op>
bool RunKernel(DType t, const void* rows, size_t cols, const detail::AvxVnniInput* in, size_t M, float* y,
               size_t ldy, size_t n_rows) {
  switch (t) {
    case DType::Q8_0: RunRows<Op, VnniQ8_0>(rows, cols, in, M, y, ldy, n_rows); return true;
    case DType::Q4_0: RunRows<Op, VnniQ4_0>(rows, cols, in, M, y, ldy, n_rows); return true;
    case DType::Q4_1: RunRows<Op, VnniQ4_1>(rows, cols, in, M, y, ldy, n_rows); return true;
    case DType::Q5_0: RunRows<Op, VnniQ5_0>(rows, cols, in, M, y, ldy, n_rows); return true;
    case DType::Q5_1: RunRows<Op, VnniQ5_1>(rows, cols, in, M, y, ldy, n_rows); return true;
    case DType::IQ4_NL: RunRows<Op, VnniIQ4_NL>(rows, cols, in, M, y, ldy, n_rows); return true;
    case DType::Q2_K: RunRows<Op, VnniQ2_K>(rows, cols, in, M, y, ldy, n_rows); return true;
    case DType::Q3_K: RunRows<Op, VnniQ3_K>(rows, cols, in, M, y, ldy, n_rows); return true;
    case DType::Q4_K: RunRows<Op, VnniQ4_K>(rows, cols, in, M, y, ldy, n_rows); return true;
    case DType::Q5_K: RunRows<Op, VnniQ5_K>(rows, cols, in, M, y, ldy, n_rows); return true;
    case DType::Q6_K: RunRows<Op, VnniQ6_K>(rows, cols, in, M, y, ldy, n_rows); return true;
    case DType::IQ4_XS: RunRows<Op, VnniIQ4_XS>(rows, cols, in, M, y, ldy, n_rows); return true;
    default: return false;
  }
}

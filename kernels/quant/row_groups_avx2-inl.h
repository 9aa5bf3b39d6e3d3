// Row groups (kernels/quant/row_groups.h) under AVX2, for CPUs without
// AVX-512 VNNI: a 256-bit register holds the same 4 bytes of one block of 8
// rows, half a group, so a block column's words give those rows' values in
// lanes (line q: values 4q .. 4q + 3 of each row, as in
// row_groups_vnni-inl.h) and the matvec needs no horizontal sum and no
// per-row scale broadcast: per 16 rows and block, 8 loads, 16 vpmaddubsw
// against 8 broadcast activation quads, their int16 sums, 2 vpmaddwd, 2
// conversions, one load of 16 f16 scales and 2 fused multiply-adds, where
// the row kernel (vec_dot_hwy-inl.h) spends a vpmaddubsw, a vpmaddwd, a
// conversion, a scale product and a fused multiply-add per block and row.
//
// The 4-bit types' lines hold u = q + offset in 0..15 (Q5_0 / Q5_1: 0..31,
// the fifth bit from the qh word), so vpmaddubsw's pair sums are at most
// 2 * 31 * 127 and 8 lines (Q4: 30480) or 4 (Q5: 31496) add in int16
// without overflow before one vpmaddwd widens them; the offset comes off as
// corr = -offset * (the activation block's sum). The integer sums are exact
// and the f32 steps are row_group_dot's (one fused multiply-add per block
// and row, then the min's), so the outputs equal the scalar kernel's and the
// VNNI kernel's bit for bit. Q8_0 and IQ4_NL (bytes beyond vpmaddubsw's
// unsigned pairs' range without planes) have no AVX2 group kernel: their
// matrices stay in rows on these CPUs (row_group_dot_simd). Nor have the
// K-quants: their row kernel sums a super-block's sub-blocks in int32 before
// one conversion, and a group kernel written as the VNNI one measured slower
// from DRAM (Zen 5 guest under QKV_ISA=avx2, 2 threads, GB/s rows / groups:
// Q4_K 32.1-32.2 / 23.8-27.5, Q6_K 34.2-35.3 / 14.6-15.8).
//
// Each column is prefetched 4 KiB ahead (2 KiB: Q4_0 5632x2048 from DRAM
// 30.3 against 41.9 GB/s on 2 threads).
//
// Included by kernels/quant/vec_dot.cc when HWY_TARGET is HWY_AVX2 or
// HWY_AVX3.

template <class B>
struct Avx2Group {
  static constexpr bool kMin = std::is_same_v<B, BlockQ4_1> || std::is_same_v<B, BlockQ5_1>;
  static constexpr bool kFifth = std::is_same_v<B, BlockQ5_0> || std::is_same_v<B, BlockQ5_1>;
  static constexpr int kOffset = std::is_same_v<B, BlockQ4_0> ? 8 : std::is_same_v<B, BlockQ5_0> ? 16 : 0;
  static constexpr size_t kHalves = kMin ? 2 : 1;
  static constexpr size_t kColumnBytes = kRowGroup * sizeof(B);
  using Act = std::conditional_t<kMin, BlockQ8_1, BlockQ8_0>;
};

// Line bytes 0x10 where the fifth bit of the line's value is set: qh holds 8
// rows' 32-bit qh words; line q takes bits 4q .. 4q + 3 of each, byte q / 2.
HWY_INLINE __m256i Avx2FifthBits(__m256i qh, int q) {
  const int b = q / 2;
  const __m256i pick = _mm256_setr_epi8(b, b, b, b, 4 + b, 4 + b, 4 + b, 4 + b, 8 + b, 8 + b, 8 + b, 8 + b, 12 + b,
                                        12 + b, 12 + b, 12 + b, b, b, b, b, 4 + b, 4 + b, 4 + b, 4 + b, 8 + b, 8 + b,
                                        8 + b, 8 + b, 12 + b, 12 + b, 12 + b, 12 + b);
  const int s = 4 * (q % 2);
  const __m256i bit = _mm256_set1_epi32(static_cast<int32_t>(1u << s | 2u << s << 8 | 4u << s << 16 | 8u << s << 24));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(qh, pick), bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(16));
}

// G groups (spacing groups apart), nb block columns each.
template <class B, size_t G>
HWY_INLINE void Avx2Groups(const uint8_t* HWY_RESTRICT w, size_t gstride, size_t spacing, size_t nb,
                           const typename Avx2Group<B>::Act* HWY_RESTRICT a, const GroupAct& act,
                           float* HWY_RESTRICT y) {
  using T = Avx2Group<B>;
  constexpr size_t kAhead = 4096;
  const __m256i low4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  __m256 acc[G][2];
  for (size_t g = 0; g < G; ++g) acc[g][0] = acc[g][1] = _mm256_setzero_ps();
  for (size_t i = 0; i < nb; ++i) {
    __m256i aq[8];
    for (size_t q = 0; q < 8; ++q) {
      int32_t v;
      std::memcpy(&v, a[i].qs + 4 * q, 4);
      aq[q] = _mm256_set1_epi32(v);
    }
    const __m256 dai = _mm256_set1_ps(act.da[i]);
    const __m256i corr = _mm256_set1_epi32(act.corr[i]);
    for (size_t g = 0; g < G; ++g) {
      const uint8_t* column = w + g * spacing * gstride + i * T::kColumnBytes;
      for (size_t o = 0; o < T::kColumnBytes; o += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(column + kAhead + o), _MM_HINT_T0);
      }
      const uint8_t* words = column + 32 * T::kHalves;
      const uint8_t* qs = words + (T::kFifth ? 64 : 0);
      for (size_t h = 0; h < 2; ++h) {
        __m256i lo_sum = _mm256_setzero_si256(), hi_sum = _mm256_setzero_si256();
        const __m256i qh = T::kFifth ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(words + 32 * h))
                                     : _mm256_setzero_si256();
        for (int c = 0; c < 4; ++c) {
          const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 64 * c + 32 * h));
          __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
          if constexpr (T::kFifth) {
            lo = _mm256_or_si256(lo, Avx2FifthBits(qh, c));
            hi = _mm256_or_si256(hi, Avx2FifthBits(qh, 4 + c));
          }
          lo_sum = _mm256_add_epi16(lo_sum, _mm256_maddubs_epi16(lo, aq[c]));
          hi_sum = _mm256_add_epi16(hi_sum, _mm256_maddubs_epi16(hi, aq[4 + c]));
        }
        __m256i isum;
        if constexpr (T::kFifth) {  // 4 lines per int16 sum
          isum = _mm256_add_epi32(_mm256_madd_epi16(lo_sum, ones), _mm256_madd_epi16(hi_sum, ones));
        } else {
          isum = _mm256_madd_epi16(_mm256_add_epi16(lo_sum, hi_sum), ones);
        }
        isum = _mm256_add_epi32(isum, corr);
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(column + 16 * h)));
        acc[g][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, dai), acc[g][h]);
        if constexpr (T::kMin) {
          const __m256 mw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(column + 32 + 16 * h)));
          acc[g][h] = _mm256_fmadd_ps(mw, _mm256_set1_ps(act.sa[i]), acc[g][h]);
        }
      }
    }
  }
  for (size_t g = 0; g < G; ++g) {
    _mm256_storeu_ps(y + g * spacing * kRowGroup, acc[g][0]);
    _mm256_storeu_ps(y + g * spacing * kRowGroup + 8, acc[g][1]);
  }
}

template <class B>
HWY_INLINE void Avx2GroupDotType(const uint8_t* groups, size_t cols, const void* xa, float* y, size_t n_groups) {
  using T = Avx2Group<B>;
  using A = typename T::Act;
  const size_t nb = cols / 32, gstride = nb * T::kColumnBytes;
  const auto* a = static_cast<const A*>(xa);
  static thread_local GroupAct act;
  act.Prepare<T::kMin>(a, nb, T::kOffset);
  GroupStreams<2>(groups, gstride, n_groups, y, [&](auto G, const uint8_t* w, size_t spacing, float* yg) {
    Avx2Groups<B, decltype(G)::value>(w, gstride, spacing, nb, a, act, yg);
  });
}

// Whether this target's AVX2 group kernel computes t.
HWY_INLINE bool Avx2GroupType(DType t) {
  return t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q5_0 || t == DType::Q5_1;
}

HWY_INLINE bool GroupDotAvx2(DType t, const void* groups, size_t cols, const void* xa, float* y, size_t n_groups) {
  const auto* w = static_cast<const uint8_t*>(groups);
  switch (t) {
    case DType::Q4_0: Avx2GroupDotType<BlockQ4_0>(w, cols, xa, y, n_groups); return true;
    case DType::Q4_1: Avx2GroupDotType<BlockQ4_1>(w, cols, xa, y, n_groups); return true;
    case DType::Q5_0: Avx2GroupDotType<BlockQ5_0>(w, cols, xa, y, n_groups); return true;
    case DType::Q5_1: Avx2GroupDotType<BlockQ5_1>(w, cols, xa, y, n_groups); return true;
    default: return false;
  }
}

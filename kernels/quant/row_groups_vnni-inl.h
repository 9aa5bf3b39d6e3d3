// Row groups (kernels/quant/row_groups.h) under AVX-512 VNNI: a block
// column's words give the 16 rows' values in lanes directly, as the lines of
// the packed GEMM (line q: values 4q .. 4q + 3 of every row, unsigned u = q +
// offset of the type's decoder), so the decode matvec needs no horizontal sum
// and the packed GEMM no transposition.
//
// Per block column (kernels/quant/row_groups.h): the 16 rows' d (and m), then
// the words. Q4_0 / Q4_1 / IQ4_NL: 4 words of nibbles, word c giving lines c
// (low nibbles) and 4 + c (high ones); Q5_0 / Q5_1: the qh word first, whose
// bits 4q .. 4q + 3 of each row become the fifth bits of line q by one
// vpshufbitqmb (bit gather within each 64-bit lane, i.e. two rows) and a
// masked add of 16; Q8_0: 8 words of bytes, the sign flipped (q + 128).
//
// The K-quants (GroupDecoderK): per super-block column the 16 rows' d (and
// dmin), then the words of their blocks: Q4_K / Q5_K the 3 words of packed
// 6-bit scales and mins, Q5_K's 8 qh words, 32 qs words, each qs word giving
// lines of two sub-blocks (low and high nibbles); Q6_K 32 ql words, 16 qh
// words, 4 words of int8 scales.
//
// Included by kernels/quant/vec_dot.cc after vec_dot_vnni-inl.h (its block
// decoders give the types' offsets), when HWY_TARGET == HWY_AVX3_DL.

#define QKV_GROUP_TARGET __attribute__((target(HWY_TARGET_STR ",avx512vnni,bmi2,gfni,avx512bitalg")))
#define QKV_GROUP_INLINE QKV_GROUP_TARGET HWY_INLINE

QKV_GROUP_INLINE int32_t LoadU32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

template <class Dec>
constexpr bool kGroupDecoder = Dec::Block::kValues == 32;

// The vpshufbitqmb selector of line bits first .. first + 3 of each row: in
// each 64-bit lane (two rows' qh), bytes 0-3 take bits first + k of the low
// row, bytes 4-7 bits 32 + first + k of the high one.
constexpr int64_t FifthBitSelector(int first) {
  uint64_t s = 0;
  for (int k = 0; k < 4; ++k) s |= uint64_t(first + k) << (8 * k) | uint64_t(32 + first + k) << (8 * (4 + k));
  return static_cast<int64_t>(s);
}

// One type's block columns as lines; constants built once per kernel call.
template <class Dec>
struct GroupDecoder {
  using Block = typename Dec::Block;
  static_assert(kGroupDecoder<Dec>, "row groups hold 32-value blocks");
  static constexpr bool kMin = Dec::kMin;
  static constexpr size_t kHalves = kMin ? 2 : 1;
  static constexpr size_t kWords = (sizeof(Block) - 2 * kHalves) / 4;
  static constexpr bool kBytes8 = std::is_same_v<Block, BlockQ8_0>;
  static constexpr bool kFifth = kWords == 5;
  static constexpr bool kTable = std::is_same_v<Block, BlockIQ4_NL>;
  static constexpr size_t kColumnBytes = kRowGroup * sizeof(Block);

  __m512i low4, sixteen, table;
  QKV_GROUP_TARGET GroupDecoder() : low4(_mm512_set1_epi8(0x0F)), sixteen(_mm512_set1_epi8(16)), table(IQ4Table()) {}

  QKV_GROUP_INLINE void Lines(const uint8_t* column, __m512i (&u)[8]) const {
    const uint8_t* words = column + 32 * kHalves;
    if constexpr (kBytes8) {
      for (size_t q = 0; q < 8; ++q) u[q] = _mm512_xor_si512(_mm512_loadu_si512(words + 64 * q), _mm512_set1_epi8(-128));
    } else {
      const uint8_t* qs = words + (kFifth ? 64 : 0);
      const __m512i qh = kFifth ? _mm512_loadu_si512(words) : _mm512_setzero_si512();
      for (int c = 0; c < 4; ++c) {
        const __m512i v = _mm512_loadu_si512(qs + 64 * c);
        __m512i lo = _mm512_and_si512(v, low4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
        if constexpr (kFifth) {
          const __mmask64 blo = _mm512_bitshuffle_epi64_mask(qh, _mm512_set1_epi64(FifthBitSelector(4 * c)));
          const __mmask64 bhi = _mm512_bitshuffle_epi64_mask(qh, _mm512_set1_epi64(FifthBitSelector(16 + 4 * c)));
          lo = _mm512_mask_add_epi8(lo, blo, lo, sixteen);
          hi = _mm512_mask_add_epi8(hi, bhi, hi, sixteen);
        }
        if constexpr (kTable) {
          lo = _mm512_shuffle_epi8(table, lo);
          hi = _mm512_shuffle_epi8(table, hi);
        }
        u[c] = lo;
        u[4 + c] = hi;
      }
    }
  }
  // The 16 rows' d, and (kMin) m.
  QKV_GROUP_INLINE static __m512 Scales(const uint8_t* column) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(column)));
  }
  QKV_GROUP_INLINE static __m512 Mins(const uint8_t* column) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(column + 32)));
  }
};

template <class Dec, size_t G>
QKV_GROUP_TARGET void GroupsVnni(const uint8_t* HWY_RESTRICT w, size_t gstride, size_t spacing, size_t nb,
                                 const typename Dec::Act* HWY_RESTRICT a, const GroupAct& act, float* HWY_RESTRICT y) {
  using D = GroupDecoder<Dec>;
  constexpr size_t kAhead = 2048;
  const D dec;
  __m512 acc[G];
  for (size_t g = 0; g < G; ++g) acc[g] = _mm512_setzero_ps();
  for (size_t i = 0; i < nb; ++i) {
    int32_t aw[8];
    std::memcpy(aw, a[i].qs, 32);
    const __m512 dai = _mm512_set1_ps(act.da[i]);
    for (size_t g = 0; g < G; ++g) {
      const uint8_t* column = w + g * spacing * gstride + i * D::kColumnBytes;
      for (size_t o = 0; o < D::kColumnBytes; o += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(column + kAhead + o), _MM_HINT_T0);
      }
      __m512i u[8];
      dec.Lines(column, u);
      __m512i s0 = _mm512_set1_epi32(act.corr[i]), s1 = _mm512_setzero_si512();
      for (size_t q = 0; q < 4; ++q) {
        s0 = _mm512_dpbusd_epi32(s0, u[q], _mm512_set1_epi32(aw[q]));
        s1 = _mm512_dpbusd_epi32(s1, u[4 + q], _mm512_set1_epi32(aw[4 + q]));
      }
      const __m512 isum = _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1));
      acc[g] = _mm512_fmadd_ps(isum, _mm512_mul_ps(D::Scales(column), dai), acc[g]);
      if constexpr (D::kMin) acc[g] = _mm512_fmadd_ps(D::Mins(column), _mm512_set1_ps(act.sa[i]), acc[g]);
    }
  }
  for (size_t g = 0; g < G; ++g) _mm512_storeu_ps(y + g * spacing * kRowGroup, acc[g]);
}

// n_groups groups at `groups` (gstride bytes each) in passes of S groups,
template <class Dec>
QKV_GROUP_TARGET void GroupDotType(const uint8_t* groups, size_t cols, const void* xa, float* y, size_t n_groups) {
  using A = typename Dec::Act;
  const size_t nb = cols / 32, gstride = nb * GroupDecoder<Dec>::kColumnBytes;
  const auto* a = static_cast<const A*>(xa);
  static thread_local GroupAct act;
  act.Prepare<Dec::kMin>(a, nb, Dec::kOffset);
  // Two groups a pass: two weight streams, and independent chains.
  GroupStreams<2>(groups, gstride, n_groups, y, [&](auto G, const uint8_t* w, size_t spacing, float* yg) {
    GroupsVnni<Dec, decltype(G)::value>(w, gstride, spacing, nb, a, act, yg);
  });
}

template <class Dec>
constexpr bool kGroupDecoderK = std::is_same_v<typename Dec::Block, BlockQ4_K> ||
                                std::is_same_v<typename Dec::Block, BlockQ5_K> ||
                                std::is_same_v<typename Dec::Block, BlockQ6_K>;

// A K-quant's super-block columns in pairs of sub-blocks: pair p gives the
// kLines lines of sub-block 2p, then those of 2p + 1 (line k of sub-block j:
// values kS * j + 4k .. + 3, against the activation's bytes there), and each
// sub-block's scale terms as the packed GEMM has them (UnpackK).
template <class Dec>
struct GroupDecoderK {
  using Block = typename Dec::Block;
  static constexpr bool kQ6 = std::is_same_v<Block, BlockQ6_K>;
  static constexpr bool kFifth = std::is_same_v<Block, BlockQ5_K>;
  static constexpr size_t kS = kQ6 ? 16 : 32, kSubs = kQK / kS, kLines = kS / 4, kPairs = kSubs / 2;
  static constexpr size_t kHalves = kQ6 ? 1 : 2;
  static constexpr size_t kColumnBytes = kRowGroup * sizeof(Block);

  __m512i low4;
  QKV_GROUP_TARGET GroupDecoderK() : low4(_mm512_set1_epi8(0x0F)) {}

  QKV_GROUP_INLINE static const uint8_t* Word(const uint8_t* column, size_t j) { return column + 32 * kHalves + 64 * j; }

  QKV_GROUP_INLINE void Pair(const uint8_t* column, size_t p, __m512i (&u)[2 * kLines]) const {
    if constexpr (kQ6) {
      // Pair p = 4h + s: ql word 16h + 8(s & 1) + k, its low (s < 2) or high
      // nibbles, and bits 2s, 2s + 1 of qh word 32 + 8h + k at bits 4-5.
      const size_t h = p / 4, s = p % 4;
      for (size_t k = 0; k < 8; ++k) {
        const __m512i ql = _mm512_loadu_si512(Word(column, 16 * h + 8 * (s & 1) + k));
        const __m512i qh = _mm512_loadu_si512(Word(column, 32 + 8 * h + k));
        const __m512i nib = s < 2 ? _mm512_and_si512(ql, low4) : _mm512_and_si512(_mm512_srli_epi16(ql, 4), low4);
        const __m512i hb = s < 2 ? _mm512_slli_epi16(qh, static_cast<unsigned>(4 - 2 * s))
                                 : _mm512_srli_epi16(qh, static_cast<unsigned>(2 * s - 4));
        u[k] = _mm512_ternarylogic_epi32(nib, hb, _mm512_set1_epi8(0x30), 0xF8);  // nib | (hb & 0x30)
      }
    } else {
      // Pair c: qs word 8c + k (after the scales' 3 and Q5_K's 8 qh words),
      // low nibbles for sub-block 2c, high for 2c + 1; Q5_K's fifth bits
      // from qh word k, bits 2c and 2c + 1.
      constexpr size_t kQs = kFifth ? 11 : 3;
      for (size_t k = 0; k < 8; ++k) {
        const __m512i v = _mm512_loadu_si512(Word(column, kQs + 8 * p + k));
        __m512i lo = _mm512_and_si512(v, low4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
        if constexpr (kFifth) {
          const __m512i qh = _mm512_loadu_si512(Word(column, 3 + k));
          const __m512i b0 = 2 * p <= 4 ? _mm512_slli_epi16(qh, static_cast<unsigned>(4 - 2 * p))
                                        : _mm512_srli_epi16(qh, static_cast<unsigned>(2 * p - 4));
          const __m512i b1 = 2 * p + 1 <= 4 ? _mm512_slli_epi16(qh, static_cast<unsigned>(3 - 2 * p))
                                            : _mm512_srli_epi16(qh, static_cast<unsigned>(2 * p - 3));
          lo = _mm512_ternarylogic_epi32(lo, b0, _mm512_set1_epi8(0x10), 0xF8);
          hi = _mm512_ternarylogic_epi32(hi, b1, _mm512_set1_epi8(0x10), 0xF8);
        }
        u[k] = lo;
        u[8 + k] = hi;
      }
    }
  }
  QKV_GROUP_INLINE static __m512 D(const uint8_t* column) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(column)));
  }
  QKV_GROUP_INLINE static __m512 NegDmin(const uint8_t* column) {
    const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(column + 32)));
    return _mm512_xor_ps(dmin, _mm512_set1_ps(-0.0f));
  }
  // Q4_K / Q5_K: sub-block j's 6-bit scale (mins: false) or min, per row
  // (ggml's get_scale_min_k4 on the 3 words w0, w1, w2).
  QKV_GROUP_INLINE static __m512i ScaleMin(const uint8_t* column, size_t j, bool mins) {
    const __m512i w0 = _mm512_loadu_si512(Word(column, mins ? 1 : 0));
    if (j < 4) return _mm512_and_si512(_mm512_srli_epi32(w0, static_cast<unsigned>(8 * j)), _mm512_set1_epi32(63));
    const __m512i w2 = _mm512_loadu_si512(Word(column, 2));
    const unsigned b = static_cast<unsigned>(8 * (j - 4));
    const __m512i low = _mm512_and_si512(_mm512_srli_epi32(w2, b + (mins ? 4 : 0)), _mm512_set1_epi32(15));
    const __m512i high = _mm512_and_si512(_mm512_srli_epi32(w0, b + 2), _mm512_set1_epi32(0x30));
    return _mm512_or_si512(low, high);
  }
  // Q6_K: sub-block j's int8 scale, per row.
  QKV_GROUP_INLINE static __m512i Scale6(const uint8_t* column, size_t j) {
    const __m512i w = _mm512_loadu_si512(Word(column, 48 + j / 4));
    return _mm512_srai_epi32(_mm512_slli_epi32(w, static_cast<unsigned>(24 - 8 * (j % 4))), 24);
  }
};

// The activation's per-block terms for the K-quants: da (Q8_K's f32 d), and
// per sub-block ms = its sum (Q4_K / Q5_K) or corr = -32 * (its sum) (Q6_K).
struct GroupActK {
  std::vector<float> da, ms;
  std::vector<int32_t> corr;
};

// G groups against the Q8_K activation a: row_group_dot's K arithmetic
// (kernels/quant/row_groups.h), the packed GEMM's terms in its order.
template <class Dec, size_t G>
QKV_GROUP_TARGET void GroupsVnniK(const uint8_t* HWY_RESTRICT w, size_t gstride, size_t nb,
                                  const BlockQ8_K* HWY_RESTRICT a, const GroupActK& act, float* HWY_RESTRICT y) {
  using D = GroupDecoderK<Dec>;
  constexpr size_t kL = D::kLines, kAhead = 4096;
  const D dec;
  __m512 acc[G];
  for (size_t g = 0; g < G; ++g) acc[g] = _mm512_setzero_ps();
  for (size_t i = 0; i < nb; ++i) {
    const uint8_t* aq = reinterpret_cast<const uint8_t*>(a[i].qs);
    const __m512 da = _mm512_set1_ps(act.da[i]);
    for (size_t g = 0; g < G; ++g) {
      const uint8_t* column = w + g * gstride + i * D::kColumnBytes;
      for (size_t o = 0; o < D::kColumnBytes; o += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(column + kAhead + o), _MM_HINT_T0);
      }
      const __m512 d = D::D(column);
      const __m512 neg_dmin = D::kQ6 ? _mm512_setzero_ps() : D::NegDmin(column);
      __m512i super = _mm512_setzero_si512();
      __m512 super_f = _mm512_setzero_ps();
      for (size_t p = 0; p < D::kPairs; ++p) {
        __m512i u[2 * kL];
        dec.Pair(column, p, u);
        __m512i s[2];
        for (size_t h = 0; h < 2; ++h) {
          const size_t j = 2 * p + h;
          __m512i s0 = D::kQ6 ? _mm512_set1_epi32(act.corr[i * D::kSubs + j]) : _mm512_setzero_si512();
          __m512i s1 = _mm512_setzero_si512();
          for (size_t k = 0; k < kL; k += 2) {
            s0 = _mm512_dpbusd_epi32(s0, u[kL * h + k], _mm512_set1_epi32(LoadU32(aq + 4 * (kL * j + k))));
            s1 = _mm512_dpbusd_epi32(s1, u[kL * h + k + 1], _mm512_set1_epi32(LoadU32(aq + 4 * (kL * j + k + 1))));
          }
          s[h] = _mm512_add_epi32(s0, s1);
        }
        for (size_t h = 0; h < 2; ++h) {
          const size_t j = 2 * p + h;
          if constexpr (D::kQ6) {
            super = _mm512_add_epi32(super, _mm512_mullo_epi32(s[h], D::Scale6(column, j)));
          } else {
            const __m512 dw = _mm512_mul_ps(d, _mm512_cvtepi32_ps(D::ScaleMin(column, j, false)));
            const __m512 mw = _mm512_mul_ps(neg_dmin, _mm512_cvtepi32_ps(D::ScaleMin(column, j, true)));
            super_f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[h]), dw, super_f);
            super_f = _mm512_fmadd_ps(_mm512_set1_ps(act.ms[i * D::kSubs + j]), mw, super_f);
          }
        }
      }
      if constexpr (D::kQ6) {
        acc[g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(super), _mm512_mul_ps(da, d), acc[g]);
      } else {
        acc[g] = _mm512_fmadd_ps(super_f, da, acc[g]);
      }
    }
  }
  for (size_t g = 0; g < G; ++g) _mm512_storeu_ps(y + g * kRowGroup, acc[g]);
}

template <class Dec>
QKV_GROUP_TARGET void GroupDotTypeK(const uint8_t* groups, size_t cols, const void* xa, float* y, size_t n_groups) {
  using D = GroupDecoderK<Dec>;
  const size_t nb = cols / kQK, gstride = nb * D::kColumnBytes;
  const auto* a = static_cast<const BlockQ8_K*>(xa);
  static thread_local GroupActK act;
  act.da.resize(nb);
  if constexpr (D::kQ6) {
    act.corr.resize(nb * D::kSubs);
  } else {
    act.ms.resize(nb * D::kSubs);
  }
  for (size_t i = 0; i < nb; ++i) {
    act.da[i] = a[i].d;
    for (size_t j = 0; j < D::kSubs; ++j) {
      if constexpr (D::kQ6) {
        act.corr[i * D::kSubs + j] = -32 * a[i].bsums[j];
      } else {
        act.ms[i * D::kSubs + j] = static_cast<float>(a[i].bsums[2 * j] + a[i].bsums[2 * j + 1]);
      }
    }
  }
  // Passes over 4 consecutive groups: in 4 or 2 runs (GroupStreams) Q4_K
  // and Q6_K streamed slower from DRAM on 2 threads (Zen 5 guest,
  // bench_linear '^matvec_row_groups/(q4_k|q6_k)/5632x2048/2', GB/s
  // consecutive / 4 runs / 2 runs: Q4_K 39-41 / 27-29 / 40-44, Q6_K 37 / 25
  // / 29).
  size_t g = 0;
  for (; g + 4 <= n_groups; g += 4) GroupsVnniK<Dec, 4>(groups + g * gstride, gstride, nb, a, act, y + g * kRowGroup);
  for (; g + 2 <= n_groups; g += 2) GroupsVnniK<Dec, 2>(groups + g * gstride, gstride, nb, a, act, y + g * kRowGroup);
  if (g < n_groups) GroupsVnniK<Dec, 1>(groups + g * gstride, gstride, nb, a, act, y + g * kRowGroup);
}

// False for the types without row groups.
HWY_INLINE bool GroupDotVnni(DType t, const void* groups, size_t cols, const void* xa, float* y, size_t n_groups) {
  bool done = false;
  WithVnniDecoder(t, [&](auto tag) {
    using Dec = typename decltype(tag)::type;
    if constexpr (kGroupDecoder<Dec>) {
      GroupDotType<Dec>(static_cast<const uint8_t*>(groups), cols, xa, y, n_groups);
      done = true;
    } else if constexpr (kGroupDecoderK<Dec>) {
      GroupDotTypeK<Dec>(static_cast<const uint8_t*>(groups), cols, xa, y, n_groups);
      done = true;
    }
  });
  return done;
}

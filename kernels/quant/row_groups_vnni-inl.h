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
// Included by kernels/quant/vec_dot.cc after vec_dot_vnni-inl.h (its block
// decoders give the types' offsets), when HWY_TARGET == HWY_AVX3_DL.

#define QKV_GROUP_TARGET __attribute__((target("avx512vnni,bmi2,gfni,avx512bitalg")))
#define QKV_GROUP_INLINE QKV_GROUP_TARGET HWY_INLINE

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

// The activation's per-block terms, once per call: da (f32 of d), sa (Q8_1:
// f32 of s) and corr = -offset * (the block's byte sum).
struct GroupAct {
  std::vector<float> da, sa;
  std::vector<int32_t> corr;
};

// G groups (group g at w + g * gstride) against the activation a: per block
// column and group, 8 vpdpbusd of the lines against the activation's words
// (broadcast) in two chains from corr, then
//   acc = fma(float(isum), dw * da, acc)  [+ fma(mw, sa, acc)],
// row_group_dot's arithmetic (kernels/quant/row_groups.h).
template <class Dec, size_t G>
QKV_GROUP_TARGET void GroupsVnni(const uint8_t* HWY_RESTRICT w, size_t gstride, size_t nb,
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
      const uint8_t* column = w + g * gstride + i * D::kColumnBytes;
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
  for (size_t g = 0; g < G; ++g) _mm512_storeu_ps(y + g * kRowGroup, acc[g]);
}

template <class Dec>
QKV_GROUP_TARGET void GroupDotType(const uint8_t* groups, size_t cols, const void* xa, float* y, size_t n_groups) {
  using A = typename Dec::Act;
  const size_t nb = cols / 32, gstride = nb * GroupDecoder<Dec>::kColumnBytes;
  const auto* a = static_cast<const A*>(xa);
  static thread_local GroupAct act;
  act.da.resize(nb);
  act.sa.resize(nb);
  act.corr.resize(nb);
  for (size_t i = 0; i < nb; ++i) {
    act.da[i] = HalfAt(reinterpret_cast<const uint8_t*>(a + i) + offsetof(A, d));
    if constexpr (Dec::kMin) act.sa[i] = HalfAt(reinterpret_cast<const uint8_t*>(a + i) + offsetof(A, s));
    int32_t sum = 0;
    for (size_t k = 0; k < 32; ++k) sum += a[i].qs[k];
    act.corr[i] = -Dec::kOffset * sum;
  }
  // Two groups a pass: two weight streams, and independent chains.
  size_t g = 0;
  for (; g + 2 <= n_groups; g += 2) GroupsVnni<Dec, 2>(groups + g * gstride, gstride, nb, a, act, y + g * kRowGroup);
  if (g < n_groups) GroupsVnni<Dec, 1>(groups + g * gstride, gstride, nb, a, act, y + g * kRowGroup);
}

// False for the types without row groups.
HWY_INLINE bool GroupDotVnni(DType t, const void* groups, size_t cols, const void* xa, float* y, size_t n_groups) {
  bool done = false;
  WithVnniDecoder(t, [&](auto tag) {
    using Dec = typename decltype(tag)::type;
    if constexpr (kGroupDecoder<Dec>) {
      GroupDotType<Dec>(static_cast<const uint8_t*>(groups), cols, xa, y, n_groups);
      done = true;
    }
  });
  return done;
}

// Block decoders of the AVX-VNNI kernels (kernels/quant/vec_dot_avxvnni-inl.h):
// each unpacks one block of its type (layouts in kernels/quant/blocks.h) into
// unsigned bytes u = q + kOffset in value order, 32 values per register.
// 32-value types: Unpack gives the one register. 256-value types: Values
// gives the 8 registers and returns the sub-block scales as 16-bit words
// (word j: sub-block j of kSub values; kWide where a register's bias-free
// part, sum of 4 products, can leave int16: the IQ4 levels reach 4 * 127 *
// 128), D the block's f32 scale, Mins adds the block's min terms for one
// input with the scalar kernel's arithmetic (kernels/quant/vec_dot.cc), and
// Finish gives the row's result.
//
// Included by vec_dot_avxvnni-inl.h only.

// The low 16 bytes at p as 32 values: low nibbles (values 0-15), then high
// nibbles (16-31), ggml's order for 32-value blocks and IQ4_XS sub-blocks.
inline __m256i NibbleHalves(const uint8_t* p) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i m = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}

// The IQ4_NL levels plus 128 (unsigned bytes 1 .. 241) in both 128-bit halves.
inline __m256i IQ4BiasedTable() {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4NLValues));
  return _mm256_broadcastsi128_si256(_mm_xor_si128(t, _mm_set1_epi8(static_cast<char>(0x80))));
}

// Adds 16 to the values whose fifth bit (the little-endian uint32 at qh, bit
// k for value k) is set: byte k takes qh byte k / 8 and tests bit k % 8.
inline __m256i FifthBits(__m256i u, const uint8_t* qh) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(h)),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_or_si256(u, _mm256_and_si256(set, Bytes(16)));
}

// The bytes of v (as 16-bit lanes) shifted right by n, then masked per byte.
inline __m256i FieldsAt(__m256i v, int n, uint16_t mask) {
  return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(n)), _mm256_set1_epi16(static_cast<short>(mask)));
}

inline __m256i Load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// ---- 32-value blocks ----

template <class B, class A, int kOff, bool kHasMin>
struct Vnni32 {
  using Block = B;
  using Act = A;
  static constexpr size_t kBlockValues = 32;
  static constexpr int kOffset = kOff;
  static constexpr bool kMin = kHasMin;  // the f16 min m at byte 2 times the input's s
};

struct VnniQ8_0 : Vnni32<BlockQ8_0, BlockQ8_0, 128, false> {
  static __m256i Unpack(const uint8_t* b) { return _mm256_xor_si256(Load32(b + offsetof(Block, qs)), Bytes(0x80)); }
};
struct VnniQ4_0 : Vnni32<BlockQ4_0, BlockQ8_0, 8, false> {
  static __m256i Unpack(const uint8_t* b) { return NibbleHalves(b + offsetof(Block, qs)); }
};
struct VnniQ4_1 : Vnni32<BlockQ4_1, BlockQ8_1, 0, true> {
  static __m256i Unpack(const uint8_t* b) { return NibbleHalves(b + offsetof(Block, qs)); }
};
struct VnniQ5_0 : Vnni32<BlockQ5_0, BlockQ8_0, 16, false> {
  static __m256i Unpack(const uint8_t* b) {
    return FifthBits(NibbleHalves(b + offsetof(Block, qs)), b + offsetof(Block, qh));
  }
};
struct VnniQ5_1 : Vnni32<BlockQ5_1, BlockQ8_1, 0, true> {
  static __m256i Unpack(const uint8_t* b) {
    return FifthBits(NibbleHalves(b + offsetof(Block, qs)), b + offsetof(Block, qh));
  }
};
struct VnniIQ4_NL : Vnni32<BlockIQ4_NL, BlockQ8_0, 128, false> {
  static __m256i Unpack(const uint8_t* b) {
    return _mm256_shuffle_epi8(IQ4BiasedTable(), NibbleHalves(b + offsetof(Block, qs)));
  }
};

// ---- 256-value super-blocks ----

template <class B, int kOff, size_t kSubValues, bool kWideParts>
struct VnniK {
  using Block = B;
  static constexpr size_t kBlockValues = kQK;
  static constexpr int kOffset = kOff;
  static constexpr size_t kSub = kSubValues;
  static constexpr bool kWide = kWideParts;
  static float D(const uint8_t* b) { return HalfAt(b + offsetof(Block, d)); }
  static void Mins(const uint8_t*, const VnniActK&, VnniRow*) {}
  static float Finish(const VnniRow& row) { return Sum8(row.acc); }
};

// 16 scale bytes as 16 words, sign-extended or not.
inline __m256i SignedWords(__m128i bytes) { return _mm256_cvtepi8_epi16(bytes); }
inline __m256i UnsignedWords(__m128i bytes) { return _mm256_cvtepu8_epi16(bytes); }

struct VnniQ2_K : VnniK<BlockQ2_K, 0, 16, false> {
  static __m256i Values(const uint8_t* b, __m256i u[8]) {
    for (int h = 0; h < 2; ++h) {
      const __m256i q = Load32(b + offsetof(Block, qs) + 32 * h);
      for (int sh = 0; sh < 4; ++sh) u[4 * h + sh] = FieldsAt(q, 2 * sh, 0x0303);
    }
    const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(Block, scales)));
    return UnsignedWords(_mm_and_si128(s, _mm_set1_epi8(15)));
  }
  // mins[l] = m[2l] * bsums[2l] + m[2l + 1] * bsums[2l + 1] into the 8 lanes, before the block's sum.
  static void Mins(const uint8_t* b, const VnniActK& a, VnniRow* row) {
    const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(Block, scales)));
    const __m256i m = UnsignedWords(_mm_and_si128(_mm_srli_epi16(s, 4), _mm_set1_epi8(15)));
    const float dmin = -a.d * HalfAt(b + offsetof(Block, dmin));
    row->acc = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(_mm256_madd_epi16(m, a.bsums)), row->acc);
  }
};

struct VnniQ3_K : VnniK<BlockQ3_K, 4, 16, false> {
  static __m256i Values(const uint8_t* b, __m256i u[8]) {
    const __m256i hm = Load32(b + offsetof(Block, hmask));
    for (int h = 0; h < 2; ++h) {
      const __m256i q = Load32(b + offsetof(Block, qs) + 32 * h);
      for (int sh = 0; sh < 4; ++sh) {
        const int c = 4 * h + sh;
        // hmask bit c of value l moved to bit 2 (+4 when set).
        const __m256i moved = c >= 2 ? _mm256_srl_epi16(hm, _mm_cvtsi32_si128(c - 2)) : _mm256_slli_epi16(hm, 2 - c);
        u[c] = _mm256_or_si256(FieldsAt(q, 2 * sh, 0x0303), _mm256_and_si256(moved, _mm256_set1_epi16(0x0404)));
      }
    }
    // Scale j: bits 0-3 from byte j % 8 (low nibble for j < 8), bits 4-5
    // from byte 8 + j % 4 at bits 2 (j / 4) (q3k_scale), minus 32.
    uint64_t low;
    uint32_t high;
    std::memcpy(&low, b + offsetof(Block, scales), 8);
    std::memcpy(&high, b + offsetof(Block, scales) + 8, 4);
    constexpr uint64_t kNib = 0x0F0F0F0F0F0F0F0Full;
    constexpr uint32_t kCrumb = 0x03030303u;
    const uint64_t first = (low & kNib) | (uint64_t(high & kCrumb) | uint64_t((high >> 2) & kCrumb) << 32) << 4;
    const uint64_t second =
        ((low >> 4) & kNib) | (uint64_t((high >> 4) & kCrumb) | uint64_t((high >> 6) & kCrumb) << 32) << 4;
    const __m128i bytes = _mm_set_epi64x(static_cast<long long>(second), static_cast<long long>(first));
    return SignedWords(_mm_sub_epi8(bytes, _mm_set1_epi8(32)));
  }
};

// Q4_K / Q5_K: 8 6-bit scales and mins from 12 bytes (k4_scale_min), four
// at a time in 32-bit words.
inline void K4ScalesMins(const uint8_t* q, uint64_t* sc, uint64_t* m) {
  uint32_t u[3];
  std::memcpy(u, q, 12);
  const uint32_t s_lo = u[0] & 0x3F3F3F3Fu, m_lo = u[1] & 0x3F3F3F3Fu;
  const uint32_t s_hi = (u[2] & 0x0F0F0F0Fu) | ((u[0] >> 6) & 0x03030303u) << 4;
  const uint32_t m_hi = ((u[2] >> 4) & 0x0F0F0F0Fu) | ((u[1] >> 6) & 0x03030303u) << 4;
  *sc = s_lo | uint64_t(s_hi) << 32;
  *m = m_lo | uint64_t(m_hi) << 32;
}

// 4 int32: m[2p] * pairs[2p] + m[2p + 1] * pairs[2p + 1], the scalar
// msum[2p] + msum[2p + 1].
inline __m128i K4MinSums(const uint8_t* b, const VnniActK& a) {
  uint64_t sc, m;
  K4ScalesMins(b + 4, &sc, &m);  // scales follow d and dmin in Q4_K and Q5_K
  return _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(m))), a.pairs);
}

// The nibbles of 128 bytes: register 2q + 0/1 = low/high nibbles of qs[32q .. 32q + 31].
inline __m256i K4Values(const uint8_t* b, const uint8_t* qs, __m256i u[8]) {
  for (int q = 0; q < 4; ++q) {
    const __m256i v = Load32(qs + 32 * q);
    u[2 * q] = FieldsAt(v, 0, 0x0F0F);
    u[2 * q + 1] = FieldsAt(v, 4, 0x0F0F);
  }
  uint64_t sc, m;
  K4ScalesMins(b + 4, &sc, &m);
  return _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sc))));
}

struct VnniQ4_K : VnniK<BlockQ4_K, 0, 32, false> {
  static __m256i Values(const uint8_t* b, __m256i u[8]) { return K4Values(b, b + offsetof(Block, qs), u); }
  static void Mins(const uint8_t* b, const VnniActK& a, VnniRow* row) {
    const float dmin = -a.d * HalfAt(b + offsetof(Block, dmin));
    row->accm = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(K4MinSums(b, a)), row->accm);
  }
  static float Finish(const VnniRow& row) { return Sum8(row.acc) + Sum4(row.accm); }
};

struct VnniQ5_K : VnniK<BlockQ5_K, 0, 32, false> {
  static __m256i Values(const uint8_t* b, __m256i u[8]) {
    const __m256i words = K4Values(b, b + offsetof(Block, qs), u);
    const __m256i qh = Load32(b + offsetof(Block, qh));
    // qh bit k of value l moved to bit 4 of register k.
    for (int k = 0; k < 8; ++k) u[k] = _mm256_or_si256(u[k], _mm256_slli_epi16(FieldsAt(qh, k, 0x0101), 4));
    return words;
  }
  static void Mins(const uint8_t* b, const VnniActK& a, VnniRow* row) {
    const __m128i s = K4MinSums(b, a);
    const __m128i s2 = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    const int32_t total = _mm_cvtsi128_si32(_mm_add_epi32(s2, _mm_shuffle_epi32(s2, 0xB1)));
    const float dmin = -a.d * HalfAt(b + offsetof(Block, dmin));
    row->summs = FmaF32(dmin, static_cast<float>(total), row->summs);
  }
  static float Finish(const VnniRow& row) { return Sum8(row.acc) + row.summs; }
};

struct VnniQ6_K : VnniK<BlockQ6_K, 32, 16, false> {
  static __m256i Values(const uint8_t* b, __m256i u[8]) {
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = b + offsetof(Block, ql) + 64 * h;
      const __m256i q0 = Load32(ql), q1 = Load32(ql + 32);
      const __m256i qh = Load32(b + offsetof(Block, qh) + 32 * h);
      // Register 4h + r: nibbles of ql (low for r < 2) with qh bits 2r, 2r + 1 at bits 4-5.
      for (int r = 0; r < 4; ++r) {
        const __m256i low = FieldsAt(r % 2 == 0 ? q0 : q1, 4 * (r / 2), 0x0F0F);
        u[4 * h + r] = _mm256_or_si256(low, _mm256_slli_epi16(FieldsAt(qh, 2 * r, 0x0303), 4));
      }
    }
    return SignedWords(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(Block, scales))));
  }
};

struct VnniIQ4_XS : VnniK<BlockIQ4_XS, 128, 32, true> {
  static __m256i Values(const uint8_t* b, __m256i u[8]) {
    const __m256i table = IQ4BiasedTable();
    for (int c = 0; c < 8; ++c) u[c] = _mm256_shuffle_epi8(table, NibbleHalves(b + offsetof(Block, qs) + 16 * c));
    uint16_t sh;
    uint32_t sl;
    std::memcpy(&sh, b + offsetof(Block, scales_h), 2);
    std::memcpy(&sl, b + offsetof(Block, scales_l), 4);
    // Byte j = nibble j of sl | crumb j of sh << 4 (iq4xs_scale), spreading the fields.
    uint64_t lo = sl;
    lo = (lo | lo << 16) & 0x0000FFFF0000FFFFull;
    lo = (lo | lo << 8) & 0x00FF00FF00FF00FFull;
    lo = (lo | lo << 4) & 0x0F0F0F0F0F0F0F0Full;
    uint64_t hi = sh;
    hi = (hi | hi << 24) & 0x000000FF000000FFull;
    hi = (hi | hi << 12) & 0x000F000F000F000Full;
    hi = (hi | hi << 6) & 0x0303030303030303ull;
    const __m128i bytes = _mm_cvtsi64_si128(static_cast<long long>(lo | hi << 4));
    return _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_sub_epi8(bytes, _mm_set1_epi8(32))));
  }
};

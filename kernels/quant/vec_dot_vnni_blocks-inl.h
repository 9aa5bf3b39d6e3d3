// Block decoders of the VNNI matvec (kernels/quant/vec_dot_vnni-inl.h): each
// unpacks one block of its type (layouts in kernels/quant/blocks.h) into
// unsigned bytes u = q + kOffset, in value order, 64 values per register.
// 32-value types give two blocks per register (Unpack2); 256-value types give
// 4 registers and their sub-block scales as int32 lanes (Unpack, weights
// only), and add their min terms to one row's accumulators with the scalar
// kernel's arithmetic (Mins, per activation: kernels/quant/vec_dot.cc), so
// that the batched GEMM unpacks a block once for all its inputs.
//
// Included by vec_dot_vnni-inl.h only.

// 64-bit lane shift counts: the low 256 bits of a register by lo, the high by hi.
QKV_VNNI_INLINE __m512i Halves(int64_t lo, int64_t hi) { return _mm512_set_epi64(hi, hi, hi, hi, lo, lo, lo, lo); }

// Bit fields moved within each byte by one GF(2) affine transform per 64-bit
// lane (vgf2p8affineqb: output bit i is the parity of input & byte 7 - i of
// the lane's matrix), one instruction for a shift and a mask. Field(src, k, dst):
// the matrix putting input bits src .. src + k - 1 at dst .. dst + k - 1, the
// other output bits zero.
constexpr int64_t Field(int src, int k, int dst) {
  uint64_t m = 0;
  for (int i = 0; i < k; ++i) m |= uint64_t{1} << (src + i) << (8 * (7 - (dst + i)));
  return static_cast<int64_t>(m);
}
QKV_VNNI_INLINE __m512i Bits(__m512i x, __m512i matrices) { return _mm512_gf2p8affine_epi64_epi8(x, matrices, 0); }
// Low nibbles in 64-bit lanes 0, 1, 4, 5 and high nibbles in 2, 3, 6, 7.
QKV_VNNI_INLINE __m512i NibbleMatrices() {
  constexpr int64_t lo = Field(0, 4, 0), hi = Field(4, 4, 0);
  return _mm512_set_epi64(hi, hi, lo, lo, hi, hi, lo, lo);
}

QKV_VNNI_INLINE __m512i Broadcast32(const uint8_t* p) {
  return _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

QKV_VNNI_INLINE __m512i Nibbles4(__m512i v) { return _mm512_and_si512(v, _mm512_set1_epi8(0x0F)); }

// The IQ4_NL levels + 128 (1 .. 241), in every 128-bit lane for vpshufb.
QKV_VNNI_INLINE __m512i IQ4Table() {
  HWY_ALIGN uint8_t t[16];
  for (int i = 0; i < 16; ++i) t[i] = static_cast<uint8_t>(kIQ4NLValues[i] + 128);
  return _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(t)));
}

// ---- 32-value blocks ----

// 32 nibble bytes [A, B] (16 each) as [A low, A high, B low, B high] nibbles.
QKV_VNNI_INLINE __m512i NibbleHalves(__m256i q) {
  const __m512i dup = _mm512_permutexvar_epi64(_mm512_set_epi64(3, 2, 3, 2, 1, 0, 1, 0), _mm512_castsi256_si512(q));
  return Bits(dup, NibbleMatrices());
}

// The 64 values of blocks b0 and b1 (16 nibble bytes each at q0, q1), in
// order: [q0, q0, q1, q1] by two 128-bit broadcasts, then low and high nibbles.
QKV_VNNI_INLINE __m512i NibblePair(const uint8_t* q0, const uint8_t* q1) {
  const __m512i lo = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q0)));
  const __m512i both = _mm512_mask_broadcast_i32x4(lo, 0xFF00, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q1)));
  return Bits(both, NibbleMatrices());
}

// Adds 16 to the values whose fifth bit (qh, bit k for value k) is set.
QKV_VNNI_INLINE __m512i FifthBitPair(__m512i u, const uint8_t* qh0, const uint8_t* qh1) {
  uint32_t h0, h1;
  std::memcpy(&h0, qh0, 4);
  std::memcpy(&h1, qh1, 4);
  const __mmask64 m = _cvtu64_mask64(uint64_t(h0) | uint64_t(h1) << 32);
  return _mm512_mask_add_epi8(u, m, u, _mm512_set1_epi8(16));
}

struct NoMin32 {
  static constexpr bool kMin = false;
};
// Q4_1 / Q5_1: the min m (f16 at byte 2) times the activation block's s.
struct Min32 {
  static constexpr bool kMin = true;
};

struct DecQ4_0 : NoMin32 {
  using Block = BlockQ4_0;
  using Act = BlockQ8_0;
  static constexpr int kOffset = 8;
  QKV_VNNI_INLINE static __m512i Unpack2(const uint8_t* b0, const uint8_t* b1) {
    return NibblePair(b0 + offsetof(Block, qs), b1 + offsetof(Block, qs));
  }
};
struct DecQ4_1 : Min32 {
  using Block = BlockQ4_1;
  using Act = BlockQ8_1;
  static constexpr int kOffset = 0;
  QKV_VNNI_INLINE static __m512i Unpack2(const uint8_t* b0, const uint8_t* b1) {
    return NibblePair(b0 + offsetof(Block, qs), b1 + offsetof(Block, qs));
  }
};
struct DecQ5_0 : NoMin32 {
  using Block = BlockQ5_0;
  using Act = BlockQ8_0;
  static constexpr int kOffset = 16;
  QKV_VNNI_INLINE static __m512i Unpack2(const uint8_t* b0, const uint8_t* b1) {
    const __m512i u = NibblePair(b0 + offsetof(Block, qs), b1 + offsetof(Block, qs));
    return FifthBitPair(u, b0 + offsetof(Block, qh), b1 + offsetof(Block, qh));
  }
};
struct DecQ5_1 : Min32 {
  using Block = BlockQ5_1;
  using Act = BlockQ8_1;
  static constexpr int kOffset = 0;
  QKV_VNNI_INLINE static __m512i Unpack2(const uint8_t* b0, const uint8_t* b1) {
    const __m512i u = NibblePair(b0 + offsetof(Block, qs), b1 + offsetof(Block, qs));
    return FifthBitPair(u, b0 + offsetof(Block, qh), b1 + offsetof(Block, qh));
  }
};
// Q8_0: the sign bit flipped (q + 128).
struct DecQ8_0 : NoMin32 {
  using Block = BlockQ8_0;
  using Act = BlockQ8_0;
  static constexpr int kOffset = 128;
  QKV_VNNI_INLINE static __m512i Unpack2(const uint8_t* b0, const uint8_t* b1) {
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b0 + offsetof(Block, qs)));
    const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b1 + offsetof(Block, qs)));
    return _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), _mm512_set1_epi8(-128));
  }
};
struct DecIQ4_NL : NoMin32 {
  using Block = BlockIQ4_NL;
  using Act = BlockQ8_0;
  static constexpr int kOffset = 128;
  QKV_VNNI_INLINE static __m512i Unpack2(const uint8_t* b0, const uint8_t* b1) {
    return _mm512_shuffle_epi8(IQ4Table(), NibblePair(b0 + offsetof(Block, qs), b1 + offsetof(Block, qs)));
  }
};

// ---- 256-value super-blocks ----

struct Finish8 {
  QKV_VNNI_INLINE static float Finish(const VnniRow& row) { return Sum8(row.acc); }
  // No min terms.
  QKV_VNNI_INLINE static void Mins(const uint8_t*, const VnniActK&, VnniRow*) {}
};

// The 2-bit fields of 32 bytes at q, shifted by 2 * sh0 (values 0-31 of the
// chunk) and 2 * sh1 (values 32-63).
QKV_VNNI_INLINE __m512i Crumbs(__m512i q, int sh0, int sh1) {
  return Bits(q, Halves(Field(2 * sh0, 2, 0), Field(2 * sh1, 2, 0)));
}

struct DecQ2_K : Finish8 {
  using Block = BlockQ2_K;
  static constexpr int kOffset = 0, kSub = 16;
  static constexpr bool kMadd16 = true;
  QKV_VNNI_INLINE static float D(const uint8_t* b) { return HalfAt(b + offsetof(Block, d)); }
  // mins[l] = m[2l] * bsums[2l] + m[2l + 1] * bsums[2l + 1], before the block's main sum (as ggml).
  QKV_VNNI_INLINE static void Mins(const uint8_t* b, const VnniActK& a, VnniRow* row) {
    const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(Block, scales)));
    const __m256i m = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s, 4), _mm_set1_epi8(0x0F)));
    const float dmin = -a.d * HalfAt(b + offsetof(Block, dmin));
    row->acc = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(_mm256_madd_epi16(m, a.bsums)), row->acc);
  }
  QKV_VNNI_INLINE static __m512i Unpack(const uint8_t* b, __m512i u[4]) {
    const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(Block, scales)));
    for (int h = 0; h < 2; ++h) {
      const __m512i q = Broadcast32(b + offsetof(Block, qs) + 32 * h);
      u[2 * h] = Crumbs(q, 0, 1);
      u[2 * h + 1] = Crumbs(q, 2, 3);
    }
    return _mm512_and_si512(_mm512_cvtepu8_epi32(s), _mm512_set1_epi32(15));
  }
};

struct DecQ3_K : Finish8 {
  using Block = BlockQ3_K;
  static constexpr int kOffset = 4, kSub = 16;
  static constexpr bool kMadd16 = true;
  QKV_VNNI_INLINE static float D(const uint8_t* b) { return HalfAt(b + offsetof(Block, d)); }
  QKV_VNNI_INLINE static __m512i Unpack(const uint8_t* b, __m512i u[4]) {
    const __m512i hm = Broadcast32(b + offsetof(Block, hmask));
    for (int c = 0; c < 4; ++c) {
      const int h = c / 2, sh = 2 * (c % 2), bit = 4 * h + sh;
      const __m512i low = Crumbs(Broadcast32(b + offsetof(Block, qs) + 32 * h), sh, sh + 1);
      // hmask bit (4h + sh) of value l moved to bit 2 (+4 when set).
      const __m512i high = Bits(hm, Halves(Field(bit, 1, 2), Field(bit + 1, 1, 2)));
      u[c] = _mm512_or_si512(low, high);
    }
    uint32_t s[3];
    std::memcpy(s, b + offsetof(Block, scales), 12);
    const uint32_t lo = 0x0F0F0F0Fu, hi = 0x03030303u;
    const uint32_t w0 = (s[0] & lo) | (s[2] & hi) << 4, w1 = (s[1] & lo) | ((s[2] >> 2) & hi) << 4;
    const uint32_t w2 = ((s[0] >> 4) & lo) | ((s[2] >> 4) & hi) << 4, w3 = ((s[1] >> 4) & lo) | ((s[2] >> 6) & hi) << 4;
    const __m128i sc = _mm_set_epi32(static_cast<int>(w3), static_cast<int>(w2), static_cast<int>(w1), static_cast<int>(w0));
    return _mm512_sub_epi32(_mm512_cvtepu8_epi32(sc), _mm512_set1_epi32(32));
  }
};

// Q4_K / Q5_K: 8 6-bit scales and mins from 12 bytes (kernels/quant/blocks.h
// k4_scale_min), four at a time in 32-bit words.
QKV_VNNI_INLINE void K4ScalesMins(const uint8_t* q, uint64_t* sc, uint64_t* m) {
  uint32_t u[3];
  std::memcpy(u, q, 12);
  const uint32_t s_lo = u[0] & 0x3F3F3F3Fu, m_lo = u[1] & 0x3F3F3F3Fu;
  const uint32_t s_hi = (u[2] & 0x0F0F0F0Fu) | ((u[0] >> 6) & 0x03030303u) << 4;
  const uint32_t m_hi = ((u[2] >> 4) & 0x0F0F0F0Fu) | ((u[1] >> 6) & 0x03030303u) << 4;
  *sc = s_lo | uint64_t(s_hi) << 32;
  *m = m_lo | uint64_t(m_hi) << 32;
}

// The nibbles of 128 bytes: chunk c = low then high nibbles of qs[32c .. 32c + 31].
QKV_VNNI_INLINE void K4Nibbles(const uint8_t* qs, __m512i u[4]) {
  for (int c = 0; c < 4; ++c) u[c] = Bits(Broadcast32(qs + 32 * c), Halves(Field(0, 4, 0), Field(4, 4, 0)));
}

// 4 int32: m[2p] * pairs[2p] + m[2p + 1] * pairs[2p + 1].
QKV_VNNI_INLINE __m128i K4MinSums(uint64_t m, const VnniActK& a) {
  return _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(m))), a.pairs);
}

// The 4-row matvec (vec_dot_vnni_rows4-inl.h) takes each row's 256 values
// from UnpackRow, in value order or (kHalves) in the order below, with the
// sub-block scales as unsigned bytes in every 128-bit lane (kScaleBytes) or
// as int16 elements 0 .. 256 / kSub - 1, and, for types with mins (kMins:
// added per lane as Q4_K, or as one sum as Q5_K), their 8 bytes.
// Q4_K / Q5_K: a 64-byte load of qs holds sub-blocks 4h .. 4h + 3 of half h,
// low nibbles sub-blocks 4h and 4h + 2, high nibbles 4h + 1 and 4h + 3, so
// their chunks come in that order (kHalves) with one instruction each.
enum class MinTerms { kNone, kLanes4, kSum };

QKV_VNNI_INLINE void K4NibbleHalves(const uint8_t* qs, __m512i u[4]) {
  for (int h = 0; h < 2; ++h) {
    const __m512i q = _mm512_loadu_si512(qs + 64 * h);
    u[2 * h] = Nibbles4(q);
    u[2 * h + 1] = Bits(q, _mm512_set1_epi64(Field(4, 4, 0)));
  }
}

// K4ScalesMins of 4 blocks at once: head holds each block's first 16 bytes
// (d, dmin, the 12 scale bytes) in its 128-bit lane r; returns lane r =
// [scales of block r (8 bytes), mins of block r (8 bytes)].
QKV_VNNI_INLINE __m512i K4ScalesMins4(__m512i head) {
  const __m512i u01 = _mm512_shuffle_epi32(head, _MM_PERM_CBCB);  // u0, u1, u0, u1
  const __m512i u2 = _mm512_shuffle_epi32(head, _MM_PERM_DDDD);
  const __m512i lo = _mm512_and_si512(u01, _mm512_set1_epi32(0x3F3F3F3F));
  // s_hi = (u2 & 0x0F..) | ((u0 >> 6) & 0x03..) << 4, m_hi = ((u2 >> 4) & 0x0F..) | ((u1 >> 6) & 0x03..) << 4
  const __m512i low4 = _mm512_and_si512(_mm512_srlv_epi32(u2, _mm512_set4_epi32(4, 0, 4, 0)), _mm512_set1_epi32(0x0F0F0F0F));
  const __m512i hi = _mm512_ternarylogic_epi32(low4, _mm512_srli_epi32(u01, 2), _mm512_set1_epi32(0x30303030), 0xF8);
  return _mm512_unpacklo_epi32(lo, hi);  // s_lo, s_hi, m_lo, m_hi
}

struct DecQ4_K {
  using Block = BlockQ4_K;
  static constexpr int kOffset = 0, kSub = 32;
  static constexpr bool kMadd16 = true, kHalves = true, kScaleBytes = true;
  static constexpr MinTerms kMins = MinTerms::kLanes4;
  // The values for the 4-row matvec (their scales from K4ScalesMins4).
  QKV_VNNI_INLINE static void UnpackValues(const uint8_t* b, __m512i u[4]) { K4NibbleHalves(b + offsetof(Block, qs), u); }
  QKV_VNNI_INLINE static float D(const uint8_t* b) { return HalfAt(b + offsetof(Block, d)); }
  QKV_VNNI_INLINE static void Mins(const uint8_t* b, const VnniActK& a, VnniRow* row) {
    uint64_t sc, m;
    K4ScalesMins(b + offsetof(Block, scales), &sc, &m);
    const float dmin = -a.d * HalfAt(b + offsetof(Block, dmin));
    row->accm = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(K4MinSums(m, a)), row->accm);
  }
  QKV_VNNI_INLINE static __m512i Unpack(const uint8_t* b, __m512i u[4]) {
    uint64_t sc, m;
    K4ScalesMins(b + offsetof(Block, scales), &sc, &m);
    K4Nibbles(b + offsetof(Block, qs), u);
    return _mm512_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(sc)));
  }
  QKV_VNNI_INLINE static float Finish(const VnniRow& row) { return Sum8(row.acc) + Sum4(row.accm); }
};

struct DecQ5_K {
  using Block = BlockQ5_K;
  static constexpr int kOffset = 0, kSub = 32;
  static constexpr bool kMadd16 = true, kHalves = true, kScaleBytes = true;
  static constexpr MinTerms kMins = MinTerms::kSum;
  QKV_VNNI_INLINE static void UnpackValues(const uint8_t* b, __m512i u[4]) {
    K4NibbleHalves(b + offsetof(Block, qs), u);
    FifthBits(b, u);
  }
  QKV_VNNI_INLINE static void FifthBits(const uint8_t* b, __m512i u[4]) {
    const __m512i qh = Broadcast32(b + offsetof(Block, qh));
    for (int c = 0; c < 4; ++c) {
      // Sub-block s takes qh bit s; chunk c holds sub-blocks lo and lo + 2.
      const int lo = 4 * (c / 2) + c % 2;
      u[c] = _mm512_or_si512(u[c], Bits(qh, Halves(Field(lo, 1, 4), Field(lo + 2, 1, 4))));
    }
  }
  QKV_VNNI_INLINE static float D(const uint8_t* b) { return HalfAt(b + offsetof(Block, d)); }
  QKV_VNNI_INLINE static void Mins(const uint8_t* b, const VnniActK& a, VnniRow* row) {
    uint64_t sc, m;
    K4ScalesMins(b + offsetof(Block, scales), &sc, &m);
    const float dmin = -a.d * HalfAt(b + offsetof(Block, dmin));
    HWY_ALIGN int32_t ms[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(ms), K4MinSums(m, a));
    row->summs = std::fma(dmin, static_cast<float>(ms[0] + ms[1] + ms[2] + ms[3]), row->summs);
  }
  QKV_VNNI_INLINE static __m512i Unpack(const uint8_t* b, __m512i u[4]) {
    uint64_t sc, m;
    K4ScalesMins(b + offsetof(Block, scales), &sc, &m);
    K4Nibbles(b + offsetof(Block, qs), u);
    const __m512i qh = Broadcast32(b + offsetof(Block, qh));
    for (int c = 0; c < 4; ++c) {
      // qh bit 2c (values 64c ..) and 2c + 1 (64c + 32 ..) moved to bit 4.
      u[c] = _mm512_or_si512(u[c], Bits(qh, Halves(Field(2 * c, 1, 4), Field(2 * c + 1, 1, 4))));
    }
    return _mm512_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(sc)));
  }
  QKV_VNNI_INLINE static float Finish(const VnniRow& row) { return Sum8(row.acc) + row.summs; }
};

struct DecQ6_K : Finish8 {
  using Block = BlockQ6_K;
  static constexpr int kOffset = 32, kSub = 16;
  static constexpr bool kMadd16 = true, kHalves = false, kScaleBytes = false;
  static constexpr MinTerms kMins = MinTerms::kNone;
  QKV_VNNI_INLINE static float D(const uint8_t* b) { return HalfAt(b + offsetof(Block, d)); }
  QKV_VNNI_INLINE static __m512i UnpackRow(const uint8_t* b, __m512i u[4], uint64_t*) {
    (void)Unpack(b, u);  // (its int32 scales unused: the compiler drops them)
    return _mm512_castsi256_si512(
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(Block, scales)))));
  }
  QKV_VNNI_INLINE static __m512i Unpack(const uint8_t* b, __m512i u[4]) {
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = _mm512_loadu_si512(b + offsetof(Block, ql) + 64 * h);
      const __m512i qh = Broadcast32(b + offsetof(Block, qh) + 32 * h);
      // Values 128h + 0..63: low nibbles, qh bits 0-1 (then 2-3) at bits 4-5;
      // 128h + 64..127: high nibbles, qh bits 4-5 (then 6-7).
      const __m512i h0 = Bits(qh, Halves(Field(0, 2, 4), Field(2, 2, 4)));
      const __m512i h1 = Bits(qh, Halves(Field(4, 2, 4), Field(6, 2, 4)));
      u[2 * h] = _mm512_or_si512(Nibbles4(ql), h0);
      u[2 * h + 1] = _mm512_or_si512(Bits(ql, _mm512_set1_epi64(Field(4, 4, 0))), h1);
    }
    return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(Block, scales))));
  }
};

struct DecIQ4_XS : Finish8 {
  using Block = BlockIQ4_XS;
  static constexpr int kOffset = 128, kSub = 32;
  static constexpr bool kMadd16 = false;
  QKV_VNNI_INLINE static float D(const uint8_t* b) { return HalfAt(b + offsetof(Block, d)); }
  QKV_VNNI_INLINE static __m512i Unpack(const uint8_t* b, __m512i u[4]) {
    const __m512i table = IQ4Table();
    for (int c = 0; c < 4; ++c) {
      // Sub-blocks 2c and 2c + 1: [low, high] nibbles of 16 bytes each.
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + offsetof(Block, qs) + 32 * c));
      u[c] = _mm512_shuffle_epi8(table, NibbleHalves(q));
    }
    uint16_t sh;
    uint32_t sl;
    std::memcpy(&sh, b + offsetof(Block, scales_h), 2);
    std::memcpy(&sl, b + offsetof(Block, scales_l), 4);
    const uint64_t sc = _pdep_u64(sl, 0x0F0F0F0F0F0F0F0Full) | _pdep_u64(sh, 0x0303030303030303ull) << 4;
    return _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(sc))),
                            _mm512_set1_epi32(32));
  }
};

// The decoder of each block type, for the kernels' dispatch:
// f(DecTag<decoder of t>{}); false for the types without one (the
// unquantized types).
template <class Dec>
struct DecTag {
  using type = Dec;
};

template <class F>
HWY_INLINE bool WithVnniDecoder(DType t, const F& f) {
  switch (t) {
    case DType::Q8_0: f(DecTag<DecQ8_0>{}); return true;
    case DType::Q4_0: f(DecTag<DecQ4_0>{}); return true;
    case DType::Q4_1: f(DecTag<DecQ4_1>{}); return true;
    case DType::Q5_0: f(DecTag<DecQ5_0>{}); return true;
    case DType::Q5_1: f(DecTag<DecQ5_1>{}); return true;
    case DType::IQ4_NL: f(DecTag<DecIQ4_NL>{}); return true;
    case DType::Q2_K: f(DecTag<DecQ2_K>{}); return true;
    case DType::Q3_K: f(DecTag<DecQ3_K>{}); return true;
    case DType::Q4_K: f(DecTag<DecQ4_K>{}); return true;
    case DType::Q5_K: f(DecTag<DecQ5_K>{}); return true;
    case DType::Q6_K: f(DecTag<DecQ6_K>{}); return true;
    case DType::IQ4_XS: f(DecTag<DecIQ4_XS>{}); return true;
    default: return false;
  }
}

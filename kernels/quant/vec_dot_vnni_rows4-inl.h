// The VNNI matvec of K-quant rows four at a time, for the decoders with
// UnpackRow or UnpackValues (Q4_K, Q5_K, Q6_K; vec_dot_vnni_blocks-inl.h). Per
// block and row it does only what depends on the row's values: unpack, two
// products per chunk, and a permute of the int16 scales per chunk. The rest is
// done once for the 4 rows in one register:
// - the rows' d (and dmin) gathered, converted and scaled by the activation's d;
// - the min terms of the 4 rows in one vpmaddwd;
// - each pair of rows' 16 int32 lanes folded to 8, converted and accumulated
//   into one register (rows 2p and 2p + 1 in its halves).
// Per row and lane these are the f32 operations of KRowsVnni (one fused
// multiply-add per block and lane, the min terms in their lanes or sum, the
// final pairwise sums), and the integer lane sums do not depend on the chunk
// order (every 32-value sub-block fills one 256-bit half, lane l holding its
// values 4l .. 4l + 3), so the results equal the scalar kernel's bit for bit.
// Q4_K's loop is 209 instructions per super-block of 4 rows against
// KRowsVnni<Dec, 4>'s 336 (docs/design.md has the speeds).
//
// Included by vec_dot_vnni-inl.h after the decoders.

// How far ahead of each row KRows4Vnni prefetches: twice the other row
// kernels' distance. Zen 5 guest, `bench_linear
// --benchmark_filter='^matvec/(q4_k|q6_k)/5632x2048/'`, three alternated
// runs, GB/s 2048 / 1024 / 4096 bytes: Q4_K 1 thread 37-39 / 30-33 / 26-37,
// 2 threads 58-60 / 56-57 / 59; Q6_K 38-39 / 32-36 / 26-37, 64-66 / 59-62 /
// 55-61.
constexpr size_t kRows4PrefetchBytes = 2048;

// Q4_K and Q5_K (UnpackValues): their scales, mins, d and dmin of the 4 rows
// come from one vector of the blocks' first 16 bytes (K4ScalesMins4).
template <class Dec, class = void>
struct HasK4Head : std::false_type {};
template <class Dec>
struct HasK4Head<Dec, std::void_t<decltype(&Dec::UnpackValues)>> : std::true_type {};
// The decoders that KRows4Vnni takes: those with UnpackRow (Q6_K) or UnpackValues.
template <class Dec, class = void>
struct HasRows4 : HasK4Head<Dec> {};
template <class Dec>
struct HasRows4<Dec, std::void_t<decltype(&Dec::UnpackRow)>> : std::true_type {};

// The first value of chunk c's low half: chunks are values [64c, 64c + 64),
// or with kHalves sub-blocks lo and lo + 2 (lo = 4 (c / 2) + c % 2).
template <bool kHalves>
constexpr int ChunkLow(int c) {
  return kHalves ? 32 * (4 * (c / 2) + c % 2) : 64 * c;
}
template <bool kHalves>
constexpr int ChunkHigh(int c) {
  return ChunkLow<kHalves>(c) + (kHalves ? 64 : 32);
}

// idx[c]: int16 element e of chunk c (both halves of each int32 lane) <- the
// scale of its sub-block: from unsigned bytes in every 128-bit lane by vpshufb
// (Dec::kScaleBytes; high bytes zeroed by index 0x80), else from int16
// elements by vpermw.
template <class Dec>
QKV_VNNI_INLINE void ScaleLanes(__m512i idx[4]) {
  for (int c = 0; c < 4; ++c) {
    HWY_ALIGN uint16_t e[32];
    for (int k = 0; k < 32; ++k) {
      const int lane = k / 2, half = lane / 8;
      const int value = (half == 0 ? ChunkLow<Dec::kHalves>(c) : ChunkHigh<Dec::kHalves>(c)) + 4 * (lane % 8);
      e[k] = static_cast<uint16_t>(value / Dec::kSub) | (Dec::kScaleBytes ? 0x8000 : 0);
    }
    idx[c] = _mm512_load_si512(e);
  }
}

template <class Dec>
QKV_VNNI_INLINE __m512i ChunkScales(__m512i idx, __m512i scales) {
  return Dec::kScaleBytes ? _mm512_shuffle_epi8(scales, idx) : _mm512_permutexvar_epi16(idx, scales);
}

// One Q8_K block in the decoder's chunk order.
template <class Dec>
QKV_VNNI_INLINE void LoadActRows4(const BlockQ8_K& a, VnniActK* out) {
  for (int c = 0; c < 4; ++c) {
    const auto* lo = reinterpret_cast<const __m256i*>(a.qs + ChunkLow<Dec::kHalves>(c));
    const auto* hi = reinterpret_cast<const __m256i*>(a.qs + ChunkHigh<Dec::kHalves>(c));
    out->q[c] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(lo)), _mm256_loadu_si256(hi), 1);
    out->corr[c] = Dec::kOffset == 0 ? _mm512_setzero_si512()
                                     : _mm512_maddubs_epi16(_mm512_set1_epi8(Dec::kOffset), out->q[c]);
  }
  out->bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums));
  out->pairs = _mm256_cvtepi32_epi16(_mm256_madd_epi16(out->bsums, _mm256_set1_epi16(1)));
  out->d = a.d;
}

// The f16 at byte `at` of the 4 blocks (and, kTwo, the f16 after it), as
// f32 lanes [h0 (, h0'), h1 (, h1'), ...].
template <bool kTwo>
QKV_VNNI_INLINE __m256 GatherHalves4(const uint8_t* const b[4], size_t at) {
  if constexpr (kTwo) {
    uint32_t w[4];
    for (int r = 0; r < 4; ++r) std::memcpy(&w[r], b[r] + at, 4);
    return _mm256_cvtph_ps(_mm_set_epi32(static_cast<int>(w[3]), static_cast<int>(w[2]), static_cast<int>(w[1]),
                                         static_cast<int>(w[0])));
  } else {
    uint16_t h[4];
    for (int r = 0; r < 4; ++r) std::memcpy(&h[r], b[r] + at, 2);
    return _mm256_castps128_ps256(_mm_cvtph_ps(_mm_set_epi16(0, 0, 0, 0, static_cast<short>(h[3]),
                                                             static_cast<short>(h[2]), static_cast<short>(h[1]),
                                                             static_cast<short>(h[0]))));
  }
}

// Lane indexes for vpermps: a in lanes 0 .. n - 1, b in the rest.
QKV_VNNI_INLINE __m512i Lanes16(int a, int b, int n) {
  HWY_ALIGN int32_t e[16];
  for (int k = 0; k < 16; ++k) e[k] = k < n ? a : b;
  return _mm512_load_si512(e);
}

template <class Dec>
QKV_VNNI_TARGET void KRows4Vnni(const uint8_t* HWY_RESTRICT w, size_t stride, size_t nb,
                                const BlockQ8_K* HWY_RESTRICT a, float* HWY_RESTRICT y, size_t ys) {
  using B = typename Dec::Block;
  constexpr bool kMins = Dec::kMins != MinTerms::kNone;
  // With mins, the gathered scales are [d0, dmin0, d1, dmin1, ...].
  constexpr int kStep = kMins ? 2 : 1;
  __m512i idx[4];
  ScaleLanes<Dec>(idx);
  const __m512i pair_d[2] = {Lanes16(0, kStep, 8), Lanes16(2 * kStep, 3 * kStep, 8)};
  const __m512i dmin_lanes = _mm512_set_epi32(7, 7, 7, 7, 5, 5, 5, 5, 3, 3, 3, 3, 1, 1, 1, 1);
  __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  __m512 accm = _mm512_setzero_ps();
  for (size_t i = 0; i < nb; ++i) {
    VnniActK act;
    LoadActRows4<Dec>(a[i], &act);
    const uint8_t* b[4];
    for (int r = 0; r < 4; ++r) b[r] = w + r * stride + i * sizeof(B);
    __m256 ad = _mm256_set1_ps(act.d);
    if constexpr (kMins) {
      static_assert(offsetof(B, dmin) == offsetof(B, d) + 2, "d and dmin adjacent");
      ad = _mm256_castsi256_ps(_mm256_xor_si256(_mm256_castps_si256(ad), _mm256_set1_epi64x(int64_t{1} << 63)));
    }
    constexpr bool kHead = HasK4Head<Dec>::value;
    __m512i scm = _mm512_setzero_si512();  // kHead: lane r = [scales, mins] of row r
    __m256 halves;
    if constexpr (kHead) {
      static_assert(offsetof(B, d) == 0 && offsetof(B, dmin) == 2 && offsetof(B, scales) == 4, "Q4_K / Q5_K head");
      __m512i head = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b[0])));
      head = _mm512_inserti32x4(head, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[1])), 1);
      head = _mm512_inserti32x4(head, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[2])), 2);
      head = _mm512_inserti32x4(head, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[3])), 3);
      scm = K4ScalesMins4(head);
      // Dword 0 of each lane (d, dmin as f16) -> [d0, dmin0, d1, dmin1, ...].
      const __m512i firsts = _mm512_permutexvar_epi32(_mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0), head);
      halves = _mm256_cvtph_ps(_mm512_castsi512_si128(firsts));
    } else {
      halves = GatherHalves4<kMins>(b, offsetof(B, d));
    }
    // act.d * d_r (and -act.d * dmin_r): the products KRowsVnni forms per row.
    const __m512 dd = _mm512_castps256_ps512(_mm256_mul_ps(ad, halves));
    __m512i s[4];
    uint64_t m[4];
    QKV_UNROLL for (int r = 0; r < 4; ++r) {
      PrefetchSpan<sizeof(B)>(b[r] + kRows4PrefetchBytes);
      __m512i u[4];
      __m512i sc;
      if constexpr (kHead) {
        Dec::UnpackValues(b[r], u);
        sc = _mm512_permutexvar_epi64(_mm512_set1_epi64(2 * r), scm);
      } else {
        sc = Dec::UnpackRow(b[r], u, &m[r]);
      }
      for (int c = 0; c < 4; ++c) {
        __m512i p = _mm512_maddubs_epi16(u[c], act.q[c]);
        if (Dec::kOffset != 0) p = _mm512_sub_epi16(p, act.corr[c]);
        const __m512i scale = ChunkScales<Dec>(idx[c], sc);
        s[r] = c == 0 ? _mm512_madd_epi16(p, scale) : _mm512_dpwssd_epi32(s[r], p, scale);
      }
    }
    if constexpr (kMins) {
      // Row r's int32 lanes 4r .. 4r + 3: m[2p] * pairs[2p] + m[2p + 1] * pairs[2p + 1].
      static_assert(kHead, "the types with mins (Q4_K, Q5_K) take their mins from K4ScalesMins4");
      const __m256i mins = _mm512_castsi512_si256(_mm512_permutexvar_epi64(_mm512_set_epi64(7, 7, 7, 7, 7, 5, 3, 1), scm));
      __m512i ms = _mm512_madd_epi16(_mm512_cvtepu8_epi16(mins), _mm512_broadcast_i32x4(act.pairs));
      if constexpr (Dec::kMins == MinTerms::kSum) {  // each row's 4 sums in all its lanes
        ms = _mm512_add_epi32(ms, _mm512_shuffle_epi32(ms, _MM_PERM_BADC));
        ms = _mm512_add_epi32(ms, _mm512_shuffle_epi32(ms, _MM_PERM_CDAB));
      }
      accm = _mm512_fmadd_ps(_mm512_permutexvar_ps(dmin_lanes, dd), _mm512_cvtepi32_ps(ms), accm);
    }
    for (int p = 0; p < 2; ++p) {
      const __m512i lo = _mm512_shuffle_i64x2(s[2 * p], s[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0));
      const __m512i hi = _mm512_shuffle_i64x2(s[2 * p], s[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2));
      const __m512 lanes = _mm512_cvtepi32_ps(_mm512_add_epi32(lo, hi));
      acc[p] = _mm512_fmadd_ps(_mm512_permutexvar_ps(pair_d[p], dd), lanes, acc[p]);
    }
  }
  HWY_ALIGN float mins[16];
  _mm512_store_ps(mins, accm);
  for (int p = 0; p < 2; ++p) {
    const __m512 sums = Sum8Halves(acc[p]);
    const float sum[2] = {_mm512_cvtss_f32(sums), _mm_cvtss_f32(_mm512_extractf32x4_ps(sums, 2))};
    for (int h = 0; h < 2; ++h) {
      const int r = 2 * p + h;
      float v = sum[h];
      [[maybe_unused]] const float* mr = mins + 4 * r;
      if constexpr (Dec::kMins == MinTerms::kLanes4) v += (mr[0] + mr[2]) + (mr[1] + mr[3]);
      if constexpr (Dec::kMins == MinTerms::kSum) v += mr[0];
      y[r * ys] = v;
    }
  }
}

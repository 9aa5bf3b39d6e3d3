// The inputs-in-lanes kernel of kernels/quant/gemm_avx2_lanes.h, a template
// over the dot-product op (Op::Dot(acc, u, a): acc + per int32 lane the four
// products of unsigned bytes u and signed bytes a) and the block decoder
// (vec_dot_avxvnni_blocks-inl.h's Unpack: a block as 32 unsigned bytes
// u = q + kOffset).
//
// Included by vec_dot_avxvnni_vex.cc and vec_dot_avxvnni_emulated.cc after
// vec_dot_avxvnni-inl.h, inside their anonymous namespace and target region.

// Words of one (group, block) of the layout: 8 x 8 activation quads, then 8
// da, 8 sa and 8 corr (kernels/quant/gemm_avx2_lanes.cc writes it).
constexpr size_t kLanes8BlockWords = 88;
constexpr size_t kLanes8Rows = 4;  // rows per tile: 4 int32 sums and 4 f32 accumulators in registers

// One row's blocks decoded: 32 bytes u per block at u, its f32 scale and
// (Q4_1/Q5_1) min at dw[i], mw[i].
template <class Dec>
inline void Lanes8DecodeRow(const uint8_t* row, size_t nb, uint8_t* u, float* dw, float* mw) {
  using B = typename Dec::Block;
  for (size_t i = 0; i < nb; ++i) {
    const uint8_t* b = row + i * sizeof(B);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(u + 32 * i), Dec::Unpack(b));
    dw[i] = HalfAt(b);  // d is every 32-value block's first field
    if constexpr (Dec::kMin) mw[i] = HalfAt(b + 2);
  }
}

inline __m256i Broadcast4(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// The first `lanes` outputs of each of R rows' accumulators to y[c * ldy + r].
template <size_t R>
inline void StoreLanes(const __m256* acc, float* __restrict y, size_t ldy, size_t lanes) {
  for (size_t r = 0; r < R; ++r) {
    alignas(32) float out[8];
    _mm256_store_ps(out, acc[r]);
    for (size_t c = 0; c < lanes; ++c) y[c * ldy + r] = out[c];
  }
}

// A 32-value block's f32 steps for R rows: acc = fma(float(s), da * dw, acc),
// then (Q4_1/Q5_1) acc = fma(mw, sa, acc); blk is the group's block, row r's
// scales at dw[r * ds] and mw[r * ds].
template <class Dec, size_t R>
inline void Block32Steps(const uint32_t* blk, const __m256i* s, const float* dw, const float* mw, size_t ds,
                         __m256* acc) {
  const __m256 da = _mm256_loadu_ps(reinterpret_cast<const float*>(blk + 64));
  for (size_t r = 0; r < R; ++r) {
    acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[r]), _mm256_mul_ps(da, _mm256_set1_ps(dw[r * ds])), acc[r]);
  }
  if constexpr (Dec::kMin) {
    const __m256 sa = _mm256_loadu_ps(reinterpret_cast<const float*>(blk + 72));
    for (size_t r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(mw[r * ds]), sa, acc[r]);
  }
}

// For each group of 8 inputs (the last `lanes` wide) tile(R, group, lanes)
// with R = rr (1-4) as a std::integral_constant.
template <class Tile>
inline void ForEachGroup(size_t rr, size_t M, Tile&& tile) {
  for (size_t g = 0; g < (M + 7) / 8; ++g) {
    const size_t lanes = M - 8 * g < 8 ? M - 8 * g : 8;
    switch (rr) {
      case 1: tile(std::integral_constant<size_t, 1>{}, g, lanes); break;
      case 2: tile(std::integral_constant<size_t, 2>{}, g, lanes); break;
      case 3: tile(std::integral_constant<size_t, 3>{}, g, lanes); break;
      default: tile(std::integral_constant<size_t, 4>{}, g, lanes); break;
    }
  }
}

// Where a tile's decoded values and scales lie: row r's quad q of block i at
// u + r * row + i * block + q * quad (P planes: the second 32 bytes after the
// first), its scales at dw[r * srow + i * sblock]. Decoded rows:
// {us, 32 P, 4, nb, 1}; a tile decoded out of a row group (one plane):
// {4, 128, 16, 1, 4}.
struct Tile32Layout {
  size_t row, block, quad, srow, sblock;
};
inline Tile32Layout RowsTile32(size_t us, size_t block, size_t nb) { return {us, block, 4, nb, 1}; }
constexpr Tile32Layout kGroupTile32 = {4, 128, 16, 1, 4};

// R decoded rows (laid out as L says) against one group of 8 inputs (tab:
// the group's first block); outputs of the first `lanes` inputs to
// y[c * ldy + r].
template <class Op, class Dec, size_t R>
__attribute__((noinline)) void Lanes8Tile(const uint8_t* __restrict u, Tile32Layout L, const float* __restrict dw,
                                          const float* __restrict mw, size_t nb, const uint32_t* __restrict tab,
                                          float* __restrict y, size_t ldy, size_t lanes) {
  __m256 acc[R];
  for (size_t r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (size_t i = 0; i < nb; ++i) {
    const uint32_t* blk = tab + i * kLanes8BlockWords;
    const __m256i corr = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 80));
    __m256i s[R];
    for (size_t r = 0; r < R; ++r) s[r] = corr;
    for (size_t k = 0; k < 8; ++k) {
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 8 * k));
      for (size_t r = 0; r < R; ++r) s[r] = Op::Dot(s[r], Broadcast4(u + r * L.row + L.block * i + L.quad * k), a);
    }
    Block32Steps<Dec, R>(blk, s, dw + L.sblock * i, mw + L.sblock * i, L.srow, acc);
  }
  StoreLanes<R>(acc, y, ldy, lanes);
}

// Rows in tiles of kLanes8Rows (decoded once, then every group of the batch
// against them), the last tile smaller.
template <class Op, class Dec>
void Lanes8Rows(const uint8_t* rows, size_t cols, const float* tables, size_t M, float* y, size_t ldy, size_t n_rows,
                uint8_t* scratch) {
  const size_t nb = cols / 32, rb = nb * sizeof(typename Dec::Block);
  uint8_t* u = scratch;
  float* dw = reinterpret_cast<float*>(scratch + kLanes8Rows * 32 * nb);
  float* mw = dw + kLanes8Rows * nb;
  const auto* tab = reinterpret_cast<const uint32_t*>(tables);
  const size_t group_words = nb * kLanes8BlockWords;
  for (size_t r0 = 0; r0 < n_rows; r0 += kLanes8Rows) {
    const size_t rr = n_rows - r0 < kLanes8Rows ? n_rows - r0 : kLanes8Rows;
    for (size_t r = 0; r < rr; ++r)
      Lanes8DecodeRow<Dec>(rows + (r0 + r) * rb, nb, u + r * 32 * nb, dw + r * nb, mw + r * nb);
    ForEachGroup(rr, M, [&](auto r_count, size_t g, size_t lanes) {
      Lanes8Tile<Op, Dec, decltype(r_count)::value>(u, RowsTile32(32 * nb, 32, nb), dw, mw, nb, tab + g * group_words,
                                                    y + 8 * g * ldy + r0, ldy, lanes);
    });
  }
}

// ---- 32-value blocks out of row groups (kernels/quant/row_groups.h) ----

// The types whose groups have a tile decoder here (values in one plane).
template <class Dec>
constexpr bool kLanesGroups = std::is_same_v<Dec, VnniQ4_0> || std::is_same_v<Dec, VnniQ4_1> ||
                                std::is_same_v<Dec, VnniQ5_0> || std::is_same_v<Dec, VnniQ5_1>;

// Bytes 0x10 where the fifth bit of two lines' values is set: qh holds 4
// rows' 32-bit qh words in both 128-bit lanes; the low lane's line is q, the
// high lane's q + 1 (bits 4q .. 4q + 3 of each row, byte q / 2).
inline __m256i FifthBitsTile(__m256i qh, int q) {
  alignas(32) int8_t pick[32];
  alignas(32) uint8_t bit[32];
  for (int l = 0; l < 2; ++l) {
    const int line = q + l;
    for (int k = 0; k < 16; ++k) {
      pick[16 * l + k] = static_cast<int8_t>(4 * (k / 4) + line / 2);
      bit[16 * l + k] = static_cast<uint8_t>(1u << (4 * (line % 2) + k % 4));
    }
  }
  const __m256i b = _mm256_load_si256(reinterpret_cast<const __m256i*>(bit));
  const __m256i sel = _mm256_shuffle_epi8(qh, _mm256_load_si256(reinterpret_cast<const __m256i*>(pick)));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(sel, b), b), _mm256_set1_epi8(16));
}

// Rows [4 t, 4 t + 4) of the group at `group` decoded into u in the group
// tile layout ({4, 128, 16, 1, 4}): word c of a block column holds quad c
// (low nibbles) and 4 + c (high) of the 16 rows side by side, so the tile's
// 16 bytes of two words make 32 bytes of quads c, c + 1 and 4 + c, 5 + c.
template <class Dec>
inline void DecodeGroupTile(const uint8_t* group, size_t nb, size_t t, uint8_t* u, float* dw, float* mw) {
  using Block = typename Dec::Block;
  constexpr size_t kHalves = Dec::kMin ? 2 : 1, kColumn = kRowGroup * sizeof(Block);
  constexpr bool kFifth = std::is_same_v<Dec, VnniQ5_0> || std::is_same_v<Dec, VnniQ5_1>;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  for (size_t i = 0; i < nb; ++i) {
    const uint8_t* column = group + i * kColumn;
    _mm_prefetch(reinterpret_cast<const char*>(column + 2048), _MM_HINT_T0);
    _mm_storeu_ps(dw + 4 * i, _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(column + 8 * t))));
    if constexpr (Dec::kMin) {
      _mm_storeu_ps(mw + 4 * i, _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(column + 32 + 8 * t))));
    }
    const uint8_t* words = column + 32 * kHalves + 16 * t;
    const uint8_t* qs = words + (kFifth ? 64 : 0);
    __m256i qh = _mm256_setzero_si256();
    if constexpr (kFifth) qh = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(words)));
    uint8_t* ub = u + 128 * i;
    for (int c = 0; c < 4; c += 2) {
      const __m256i v = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(qs + 64 * (c + 1)),
                                            reinterpret_cast<const __m128i*>(qs + 64 * c));
      __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
      if constexpr (kFifth) {
        lo = _mm256_or_si256(lo, FifthBitsTile(qh, c));
        hi = _mm256_or_si256(hi, FifthBitsTile(qh, 4 + c));
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(ub + 16 * c), lo);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(ub + 16 * (4 + c)), hi);
    }
  }
}

// n_rows (whole groups) at `groups`: each group's four 4-row tiles decoded
// out of it in turn (scratch as the rows' kernels), then
// tile(u, dw, mw, nb, R, input group g, first row, lanes) for every group of inputs.
template <class Dec, class Tile>
void LanesGroups32(const uint8_t* groups, size_t cols, size_t M, size_t n_rows, uint8_t* scratch, Tile&& tile) {
  const size_t nb = cols / 32, gb = kRowGroup * nb * sizeof(typename Dec::Block);
  uint8_t* u = scratch;
  float* dw = reinterpret_cast<float*>(scratch + kLanes8Rows * 32 * nb);
  float* mw = dw + kLanes8Rows * nb;
  for (size_t r0 = 0; r0 < n_rows; r0 += kLanes8Rows) {
    DecodeGroupTile<Dec>(groups + r0 / kRowGroup * gb, nb, r0 % kRowGroup / kLanes8Rows, u, dw, mw);
    ForEachGroup(kLanes8Rows, M, [&](auto r_count, size_t g, size_t lanes) { tile(u, dw, mw, nb, r_count, g, r0, lanes); });
  }
}

// ---- 256-value super-blocks against Q8_K ----

// Words of one (group, super-block): 64 x 8 activation quads, 8 da, then 8
// asum (the inputs' activation sums) per sub-block of Dec::kSub values.
template <class Dec>
constexpr size_t LanesKWords() {
  return 512 + 8 + kQK / Dec::kSub * 8;
}

// The super-block's integer mins per sub-block and its f32 dmin, where the
// type has them (Q2_K per 16 values, Q4_K and Q5_K per 32).
template <class Dec>
struct LanesKMins {
  static constexpr bool kHas = false;
  static void Get(const uint8_t*, int32_t*, float*) {}
};
template <>
struct LanesKMins<VnniQ2_K> {
  static constexpr bool kHas = true;
  static void Get(const uint8_t* b, int32_t* m, float* dmin) {
    for (int j = 0; j < 16; ++j) m[j] = b[offsetof(BlockQ2_K, scales) + j] >> 4;
    *dmin = HalfAt(b + offsetof(BlockQ2_K, dmin));
  }
};
struct LanesK4Mins {
  static constexpr bool kHas = true;
  static void Get(const uint8_t* b, int32_t* m, float* dmin) {
    uint64_t sc, mins;
    K4ScalesMins(b + 4, &sc,
                 &mins);  // scales follow d and dmin in Q4_K and Q5_K
    for (int j = 0; j < 8; ++j) m[j] = static_cast<int32_t>((mins >> (8 * j)) & 0xFF);
    *dmin = HalfAt(b + 2);
  }
};
template <>
struct LanesKMins<VnniQ4_K> : LanesK4Mins {};
template <>
struct LanesKMins<VnniQ5_K> : LanesK4Mins {};

// One row's super-blocks decoded: 256 bytes u each, the sub-block scales
// and mins as int32 (S = kQK / kSub per super-block), d and dmin as f32.
template <class Dec>
inline void LanesKDecodeRow(const uint8_t* row, size_t nb, uint8_t* u, int32_t* sc, int32_t* mn, float* dw, float* dm) {
  constexpr size_t S = kQK / Dec::kSub;
  for (size_t i = 0; i < nb; ++i) {
    const uint8_t* b = row + i * sizeof(typename Dec::Block);
    __m256i v[8];
    const __m256i words = Dec::Values(b, v);
    for (size_t c = 0; c < 8; ++c) _mm256_storeu_si256(reinterpret_cast<__m256i*>(u + 256 * i + 32 * c), v[c]);
    alignas(32) int16_t w16[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(w16), words);
    for (size_t j = 0; j < S; ++j) sc[i * S + j] = w16[j];
    dw[i] = Dec::D(b);
    if constexpr (LanesKMins<Dec>::kHas) LanesKMins<Dec>::Get(b, mn + i * S, dm + i);
  }
}

// A super-block's f32 steps for R rows: acc = fma(float(s), da * d, acc),
// then (types with mins) acc = fma(float(t), -(da * dmin), acc).
template <class Dec, size_t R>
inline void SuperBlockSteps(const uint32_t* blk, const __m256i* s, const __m256i* t, const float* dw, const float* dm,
                            size_t nb, size_t i, __m256* acc) {
  const __m256 da = _mm256_loadu_ps(reinterpret_cast<const float*>(blk + 512));
  for (size_t r = 0; r < R; ++r) {
    acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[r]), _mm256_mul_ps(da, _mm256_set1_ps(dw[r * nb + i])), acc[r]);
    if constexpr (LanesKMins<Dec>::kHas) {
      const __m256 f = _mm256_xor_ps(_mm256_mul_ps(da, _mm256_set1_ps(dm[r * nb + i])), _mm256_set1_ps(-0.0f));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(t[r]), f, acc[r]);
    }
  }
}

// R decoded rows against one group of 8 inputs: per sub-block j the parts
// p = vpdpbusd sums started at -offset * asum_j, then s += p * sc_j (and
// t += asum_j * m_j) in int32; per super-block acc = fma(float(s), da * d,
// acc), acc = fma(float(t), -(da * dmin), acc).
template <class Op, class Dec, size_t R>
__attribute__((noinline)) void LanesKTile(const uint8_t* __restrict u, const int32_t* __restrict sc,
                                          const int32_t* __restrict mn, const float* __restrict dw,
                                          const float* __restrict dm, size_t nb, const uint32_t* __restrict tab,
                                          float* __restrict y, size_t ldy, size_t lanes) {
  constexpr size_t S = kQK / Dec::kSub, Q = Dec::kSub / 4, W = LanesKWords<Dec>();
  constexpr bool kMins = LanesKMins<Dec>::kHas;
  const __m256i neg_offset = _mm256_set1_epi32(-Dec::kOffset);
  __m256 acc[R];
  for (size_t r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (size_t i = 0; i < nb; ++i) {
    const uint32_t* blk = tab + i * W;
    const auto* asum = reinterpret_cast<const __m256i*>(blk + 520);
    __m256i s[R], t[R];
    for (size_t r = 0; r < R; ++r) s[r] = t[r] = _mm256_setzero_si256();
    for (size_t j = 0; j < S; ++j) {
      const __m256i as = _mm256_loadu_si256(asum + j);
      const __m256i corr = Dec::kOffset == 0 ? _mm256_setzero_si256() : _mm256_mullo_epi32(as, neg_offset);
      __m256i p[R];
      for (size_t r = 0; r < R; ++r) p[r] = corr;
      for (size_t q = 0; q < Q; ++q) {
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 8 * (j * Q + q)));
        for (size_t r = 0; r < R; ++r)
          p[r] = Op::Dot(p[r], Broadcast4(u + r * 256 * nb + 256 * i + 4 * (j * Q + q)), a);
      }
      for (size_t r = 0; r < R; ++r) {
        s[r] = _mm256_add_epi32(s[r], _mm256_mullo_epi32(p[r], _mm256_set1_epi32(sc[(r * nb + i) * S + j])));
        if constexpr (kMins)
          t[r] = _mm256_add_epi32(t[r], _mm256_mullo_epi32(as, _mm256_set1_epi32(mn[(r * nb + i) * S + j])));
      }
    }
    SuperBlockSteps<Dec, R>(blk, s, t, dw, dm, nb, i, acc);
  }
  StoreLanes<R>(acc, y, ldy, lanes);
}

template <class Op, class Dec>
void LanesKRows(const uint8_t* rows, size_t cols, const float* tables, size_t M, float* y, size_t ldy, size_t n_rows,
                uint8_t* scratch) {
  constexpr size_t S = kQK / Dec::kSub;
  const size_t nb = cols / kQK, rb = nb * sizeof(typename Dec::Block);
  uint8_t* u = scratch;
  auto* sc = reinterpret_cast<int32_t*>(scratch + kLanes8Rows * 256 * nb);
  int32_t* mn = sc + kLanes8Rows * S * nb;
  auto* dw = reinterpret_cast<float*>(mn + kLanes8Rows * S * nb);
  float* dm = dw + kLanes8Rows * nb;
  const auto* tab = reinterpret_cast<const uint32_t*>(tables);
  const size_t group_words = nb * LanesKWords<Dec>();
  for (size_t r0 = 0; r0 < n_rows; r0 += kLanes8Rows) {
    const size_t rr = n_rows - r0 < kLanes8Rows ? n_rows - r0 : kLanes8Rows;
    // Row r's fields at u + r * 256 nb, sc/mn + r * S nb, dw/dm + r * nb.
    for (size_t r = 0; r < rr; ++r) {
      LanesKDecodeRow<Dec>(rows + (r0 + r) * rb, nb, u + r * 256 * nb, sc + r * S * nb, mn + r * S * nb, dw + r * nb,
                           dm + r * nb);
    }
    ForEachGroup(rr, M, [&](auto r_count, size_t g, size_t lanes) {
      LanesKTile<Op, Dec, decltype(r_count)::value>(u, sc, mn, dw, dm, nb, tab + g * group_words, y + 8 * g * ldy + r0,
                                                    ldy, lanes);
    });
  }
}

template <class Dec>
struct DecTag {
  using type = Dec;
};

// f(DecTag<the decoder of t>{}) for every block type; false for the others.
template <class F>
bool WithLanesDecoder(DType t, F&& f) {
  switch (t) {
    case DType::Q8_0: f(DecTag<VnniQ8_0>{}); return true;
    case DType::Q4_0: f(DecTag<VnniQ4_0>{}); return true;
    case DType::Q4_1: f(DecTag<VnniQ4_1>{}); return true;
    case DType::Q5_0: f(DecTag<VnniQ5_0>{}); return true;
    case DType::Q5_1: f(DecTag<VnniQ5_1>{}); return true;
    case DType::IQ4_NL: f(DecTag<VnniIQ4_NL>{}); return true;
    case DType::Q2_K: f(DecTag<VnniQ2_K>{}); return true;
    case DType::Q3_K: f(DecTag<VnniQ3_K>{}); return true;
    case DType::Q4_K: f(DecTag<VnniQ4_K>{}); return true;
    case DType::Q5_K: f(DecTag<VnniQ5_K>{}); return true;
    case DType::Q6_K: f(DecTag<VnniQ6_K>{}); return true;
    case DType::IQ4_XS: f(DecTag<VnniIQ4_XS>{}); return true;
    default: return false;
  }
}

// The kernel on row groups of the types with a tile decoder; false for the others.
template <class Op>
bool Lanes8GroupsKernel(DType t, const uint8_t* groups, size_t cols, const float* tables, size_t M, float* y,
                        size_t ldy, size_t n_rows, uint8_t* scratch) {
  bool done = false;
  WithLanesDecoder(t, [&](auto tag) {
    using Dec = typename decltype(tag)::type;
    if constexpr (kLanesGroups<Dec>) {
      LanesGroups32<Dec>(groups, cols, M, n_rows, scratch, [&](const uint8_t* u, const float* dw, const float* mw,
                                                               size_t nb, auto r_count, size_t g, size_t r0, size_t lanes) {
        Lanes8Tile<Op, Dec, decltype(r_count)::value>(u, kGroupTile32, dw, mw, nb,
                                                      reinterpret_cast<const uint32_t*>(tables) + g * nb * kLanes8BlockWords,
                                                      y + 8 * g * ldy + r0, ldy, lanes);
      });
      done = true;
    }
  });
  return done;
}

template <class Op>
bool Lanes8Kernel(DType t, const uint8_t* rows, size_t cols, const float* tables, size_t M, float* y, size_t ldy,
                  size_t n_rows, uint8_t* scratch) {
  return WithLanesDecoder(t, [&](auto tag) {
    using Dec = typename decltype(tag)::type;
    if constexpr (Dec::kBlockValues == 32) {
      Lanes8Rows<Op, Dec>(rows, cols, tables, M, y, ldy, n_rows, scratch);
    } else {
      LanesKRows<Op, Dec>(rows, cols, tables, M, y, ldy, n_rows, scratch);
    }
  });
}

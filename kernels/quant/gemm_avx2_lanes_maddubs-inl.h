// The inputs-in-lanes kernel of kernels/quant/gemm_avx2_lanes.h on AVX2's
// vpmaddubsw, with the products summed in int16 as long as they cannot leave
// it: vpmaddubsw(u, a) gives pairs u0 a0 + u1 a1 with |pair| <= 2 * 128 *
// umax, so kChunk = 32767 / (256 * umax) of them add exactly in int16 (umax
// 15: 8 quads, a whole 32-value block; 31: 4; 63: 2) before one vpmaddwd
// widens them, times 1 or the sub-block scale, into int32. Per row, quad and
// group: a broadcast, a vpmaddubsw and an int16 add, where vpdpbusd's
// emulation (gemm_avx2_lanes-inl.h with vpmaddwd after every vpmaddubsw)
// spends a vpmaddwd more.
//
// Types whose biased bytes reach 255 (Q8_0, IQ4_NL, IQ4_XS; vpmaddubsw's
// pairs could reach 2 * 255 * 128) are decoded into two planes, u = 16 hi +
// lo with hi, lo <= 15, and sum 16 * (hi . a) + (lo . a): two vpmaddubsw
// per quad, still exact.
//
// The integer sums equal the other ops' (exact), so the outputs are the
// reference's bit for bit.
//
// Included by vec_dot_avxvnni_emulated.cc after gemm_avx2_lanes-inl.h.

// The largest biased byte u = q + offset of each decoder.
template <class Dec>
constexpr int LanesMaxU() {
  if constexpr (std::is_same_v<Dec, VnniQ2_K>)
    return 3;
  else if constexpr (std::is_same_v<Dec, VnniQ3_K>)
    return 7;
  else if constexpr (std::is_same_v<Dec, VnniQ4_0> || std::is_same_v<Dec, VnniQ4_1> || std::is_same_v<Dec, VnniQ4_K>)
    return 15;
  else if constexpr (std::is_same_v<Dec, VnniQ5_0> || std::is_same_v<Dec, VnniQ5_1> || std::is_same_v<Dec, VnniQ5_K>)
    return 31;
  else if constexpr (std::is_same_v<Dec, VnniQ6_K>)
    return 63;
  else
    return 255;  // Q8_0, IQ4_NL, IQ4_XS
}

template <class Dec>
struct MaddubsPlan {
  static constexpr bool kSplit = LanesMaxU<Dec>() > 127;
  static constexpr int kPlanes = kSplit ? 2 : 1;
  static constexpr int kMaxPlane = kSplit ? 15 : LanesMaxU<Dec>();
  static constexpr size_t kChunk = 32767 / (256 * kMaxPlane);  // quads per int16 sum
  static_assert(kChunk >= 2, "an int16 sum of at least two quads");
};

// 32 bytes u into planes at p (one plane: u; two: u >> 4, then u & 15 at
// p + plane bytes).
template <class Dec>
inline void StorePlanes(__m256i u, uint8_t* p, size_t plane = 32) {
  if constexpr (MaddubsPlan<Dec>::kSplit) {
    const __m256i lo4 = _mm256_set1_epi8(0x0F);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm256_and_si256(_mm256_srli_epi16(u, 4), lo4));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p + plane), _mm256_and_si256(u, lo4));
  } else {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), u);
  }
}

// An empty asm on v: the sums stay one running register per row, in the
// source's order, where the compiler would otherwise reassociate the adds
// into trees over all the products and spill them to the stack.
inline void KeepInRegister(__m256i& v) { asm("" : "+x"(v)); }

// int16 sums of N quads of R rows (row r's plane at u + r * us, quad q at
// q * qs) against the activation registers at act (8 words a quad).
template <size_t R, size_t N>
inline void PairSums16(const uint8_t* __restrict u, size_t us, const uint32_t* __restrict act, __m256i* h,
                       size_t qs = 4) {
  for (size_t r = 0; r < R; ++r) h[r] = _mm256_setzero_si256();
  _Pragma("GCC unroll 8") for (size_t q = 0; q < N; ++q) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act + 8 * q));
    for (size_t r = 0; r < R; ++r) {
      h[r] = _mm256_add_epi16(h[r], _mm256_maddubs_epi16(Broadcast4(u + r * us + q * qs), a));
      KeepInRegister(h[r]);
    }
  }
}

// ---- 32-value blocks ----

template <class Dec, size_t R>
__attribute__((noinline)) void MaddubsTile32(const uint8_t* __restrict u, Tile32Layout L, const float* __restrict dw,
                                             const float* __restrict mw, size_t nb, const uint32_t* __restrict tab,
                                             float* __restrict y, size_t ldy, size_t lanes) {
  using Plan = MaddubsPlan<Dec>;
  const __m256i one = _mm256_set1_epi16(1), sixteen = _mm256_set1_epi16(16);
  __m256 acc[R];
  for (size_t r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (size_t i = 0; i < nb; ++i) {
    const uint32_t* blk = tab + i * kLanes8BlockWords;
    const uint8_t* ub = u + L.block * i;
    __m256i s[R];
    for (size_t r = 0; r < R; ++r) s[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 80));
    constexpr size_t N = Plan::kChunk < 8 ? Plan::kChunk : 8;
    static_assert(8 % N == 0, "whole chunks per block");
    for (size_t q0 = 0; q0 < 8; q0 += N) {
      __m256i h[R];
      PairSums16<R, N>(ub + L.quad * q0, L.row, blk + 8 * q0, h, L.quad);
      for (size_t r = 0; r < R; ++r)
        s[r] = _mm256_add_epi32(s[r], _mm256_madd_epi16(h[r], Plan::kSplit ? sixteen : one));
      if constexpr (Plan::kSplit) {
        PairSums16<R, N>(ub + 32 + L.quad * q0, L.row, blk + 8 * q0, h, L.quad);
        for (size_t r = 0; r < R; ++r) s[r] = _mm256_add_epi32(s[r], _mm256_madd_epi16(h[r], one));
      }
    }
    Block32Steps<Dec, R>(blk, s, dw + L.sblock * i, mw + L.sblock * i, L.srow, acc);
  }
  StoreLanes<R>(acc, y, ldy, lanes);
}

template <class Dec>
void MaddubsRows32(const uint8_t* rows, size_t cols, const float* tables, size_t M, float* y, size_t ldy, size_t n_rows,
                   uint8_t* scratch) {
  constexpr size_t P = MaddubsPlan<Dec>::kPlanes;
  const size_t nb = cols / 32, rb = nb * sizeof(typename Dec::Block), us = 32 * P * nb;
  uint8_t* u = scratch;
  float* dw = reinterpret_cast<float*>(scratch + kLanes8Rows * us);
  float* mw = dw + kLanes8Rows * nb;
  const auto* tab = reinterpret_cast<const uint32_t*>(tables);
  const size_t group_words = nb * kLanes8BlockWords;
  for (size_t r0 = 0; r0 < n_rows; r0 += kLanes8Rows) {
    const size_t rr = n_rows - r0 < kLanes8Rows ? n_rows - r0 : kLanes8Rows;
    for (size_t r = 0; r < rr; ++r) {
      const uint8_t* row = rows + (r0 + r) * rb;
      for (size_t i = 0; i < nb; ++i) {
        const uint8_t* b = row + i * sizeof(typename Dec::Block);
        StorePlanes<Dec>(Dec::Unpack(b), u + r * us + 32 * P * i);
        dw[r * nb + i] = HalfAt(b);
        if constexpr (Dec::kMin) mw[r * nb + i] = HalfAt(b + 2);
      }
    }
    ForEachGroup(rr, M, [&](auto r_count, size_t g, size_t lanes) {
      MaddubsTile32<Dec, decltype(r_count)::value>(u, RowsTile32(us, 32 * P, nb), dw, mw, nb, tab + g * group_words,
                                                   y + 8 * g * ldy + r0, ldy, lanes);
    });
  }
}

template <class Dec>
void MaddubsGroups32(const uint8_t* groups, size_t cols, const float* tables, size_t M, float* y, size_t ldy,
                     size_t n_rows, uint8_t* scratch) {
  static_assert(MaddubsPlan<Dec>::kPlanes == 1, "one plane");
  LanesGroups32<Dec>(groups, cols, M, n_rows, scratch, [&](const uint8_t* u, const float* dw, const float* mw,
                                                           size_t nb, auto r_count, size_t g, size_t r0, size_t lanes) {
    MaddubsTile32<Dec, decltype(r_count)::value>(u, kGroupTile32, dw, mw, nb,
                                                 reinterpret_cast<const uint32_t*>(tables) + g * nb * kLanes8BlockWords,
                                                 y + 8 * g * ldy + r0, ldy, lanes);
  });
}

// ---- 256-value super-blocks: row r's super-block i at u + r * us + 256 P i
// ----

// A sub-block scale sc as vpmaddwd's factors, both int16 halves of a word:
// lo = sc (16 sc for the hi plane: hi), and offset = -offset * sc.
struct KScaleWords {
  int32_t lo, hi, offset;
};

inline int32_t PairWord(int32_t v) { return static_cast<int32_t>((static_cast<uint32_t>(v) & 0xFFFFu) * 0x10001u); }

// Per sub-block j: s += vpmaddwd(int16 sums, sc_j) per chunk (16 sc_j for
// the hi plane), s += asum_j * (-offset sc_j), t += asum_j * m_j; per
// super-block the f32 steps of LanesKTile.
template <class Dec, size_t R>
__attribute__((noinline)) void MaddubsTileK(const uint8_t* __restrict u, size_t us, const KScaleWords* __restrict sw,
                                            const int32_t* __restrict mn, const float* __restrict dw,
                                            const float* __restrict dm, size_t nb, const uint32_t* __restrict tab,
                                            float* __restrict y, size_t ldy, size_t lanes) {
  using Plan = MaddubsPlan<Dec>;
  constexpr size_t S = kQK / Dec::kSub, Q = Dec::kSub / 4, W = LanesKWords<Dec>();
  constexpr bool kMins = LanesKMins<Dec>::kHas;
  __m256 acc[R];
  for (size_t r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (size_t i = 0; i < nb; ++i) {
    const uint32_t* blk = tab + i * W;
    const auto* asum = reinterpret_cast<const __m256i*>(blk + 520);
    const uint8_t* ub = u + 256 * Plan::kPlanes * i;
    __m256i s[R], t[R];
    for (size_t r = 0; r < R; ++r) s[r] = t[r] = _mm256_setzero_si256();
    for (size_t j = 0; j < S; ++j) {
      constexpr size_t N = Plan::kChunk < Q ? Plan::kChunk : Q;
      static_assert(Q % N == 0, "whole chunks per sub-block");
      for (size_t q0 = j * Q; q0 < (j + 1) * Q; q0 += N) {
        __m256i h[R];
        PairSums16<R, N>(ub + 4 * q0, us, blk + 8 * q0, h);
        for (size_t r = 0; r < R; ++r) {
          const KScaleWords& w = sw[(r * nb + i) * S + j];
          s[r] = _mm256_add_epi32(s[r], _mm256_madd_epi16(h[r], _mm256_set1_epi32(Plan::kSplit ? w.hi : w.lo)));
        }
        if constexpr (Plan::kSplit) {
          PairSums16<R, N>(ub + 256 + 4 * q0, us, blk + 8 * q0, h);
          for (size_t r = 0; r < R; ++r) {
            s[r] = _mm256_add_epi32(s[r], _mm256_madd_epi16(h[r], _mm256_set1_epi32(sw[(r * nb + i) * S + j].lo)));
          }
        }
      }
      if constexpr (Dec::kOffset != 0 || kMins) {
        const __m256i as = _mm256_loadu_si256(asum + j);
        for (size_t r = 0; r < R; ++r) {
          if constexpr (Dec::kOffset != 0) {
            s[r] = _mm256_add_epi32(s[r], _mm256_mullo_epi32(as, _mm256_set1_epi32(sw[(r * nb + i) * S + j].offset)));
          }
          if constexpr (kMins)
            t[r] = _mm256_add_epi32(t[r], _mm256_mullo_epi32(as, _mm256_set1_epi32(mn[(r * nb + i) * S + j])));
        }
      }
    }
    SuperBlockSteps<Dec, R>(blk, s, t, dw, dm, nb, i, acc);
  }
  StoreLanes<R>(acc, y, ldy, lanes);
}

template <class Dec>
void MaddubsRowsK(const uint8_t* rows, size_t cols, const float* tables, size_t M, float* y, size_t ldy, size_t n_rows,
                  uint8_t* scratch) {
  constexpr size_t S = kQK / Dec::kSub, P = MaddubsPlan<Dec>::kPlanes;
  const size_t nb = cols / kQK, rb = nb * sizeof(typename Dec::Block), us = 256 * P * nb;
  uint8_t* u = scratch;
  auto* sw = reinterpret_cast<KScaleWords*>(scratch + kLanes8Rows * us);
  auto* mn = reinterpret_cast<int32_t*>(sw + kLanes8Rows * S * nb);
  auto* dw = reinterpret_cast<float*>(mn + kLanes8Rows * S * nb);
  float* dm = dw + kLanes8Rows * nb;
  int32_t sc[S];
  const auto* tab = reinterpret_cast<const uint32_t*>(tables);
  const size_t group_words = nb * LanesKWords<Dec>();
  alignas(32) uint8_t plain[256];
  for (size_t r0 = 0; r0 < n_rows; r0 += kLanes8Rows) {
    const size_t rr = n_rows - r0 < kLanes8Rows ? n_rows - r0 : kLanes8Rows;
    for (size_t r = 0; r < rr; ++r) {
      const uint8_t* row = rows + (r0 + r) * rb;
      for (size_t i = 0; i < nb; ++i) {
        // One super-block through LanesKDecodeRow: in place with one plane,
        // else into plain and from there into the two.
        uint8_t* dst = u + r * us + 256 * P * i;
        LanesKDecodeRow<Dec>(row + i * sizeof(typename Dec::Block), 1, P == 1 ? dst : plain, sc,
                             mn + (r * nb + i) * S, dw + r * nb + i, dm + r * nb + i);
        for (size_t j = 0; j < S; ++j)
          sw[(r * nb + i) * S + j] = {PairWord(sc[j]), PairWord(16 * sc[j]), -Dec::kOffset * sc[j]};
        if constexpr (P == 2) {
          for (size_t c = 0; c < 8; ++c) {
            StorePlanes<Dec>(_mm256_load_si256(reinterpret_cast<const __m256i*>(plain + 32 * c)), dst + 32 * c, 256);
          }
        }
      }
    }
    ForEachGroup(rr, M, [&](auto r_count, size_t g, size_t lanes) {
      MaddubsTileK<Dec, decltype(r_count)::value>(u, us, sw, mn, dw, dm, nb, tab + g * group_words,
                                                  y + 8 * g * ldy + r0, ldy, lanes);
    });
  }
}

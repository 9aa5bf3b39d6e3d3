// AVX-512 VNNI GEMM of the ggml block types: a batch of inputs, each quantized
// once (quantize_activation), against rows of weight blocks. A tile of R rows
// x C inputs unpacks each weight block once (the decoders of
// kernels/quant/vec_dot_vnni_blocks-inl.h) and dots it with the C inputs'
// activation blocks, the R * C accumulators in registers. Per (row, input) the
// operations and their order are the matvec kernel's (vec_dot_vnni-inl.h:
// integer block sums, one fused multiply-add per block and lane, the min
// terms, the final pairwise sum), so every output equals quant_dot_rows for
// that input bit for bit.
//
// Included by kernels/quant/vec_dot.cc after vec_dot_vnni-inl.h, inside its
// per-target namespace when HWY_TARGET == HWY_AVX3_DL.

// Rows R x inputs C of a tile: R * C accumulators plus an unpacked block
// (4 registers, and 4 of permuted scales for the K-quants) fit the 32 zmm.
constexpr size_t kGemmR = 4, kGemmC = 4;

// One super-block of a row against the tile kernels' inputs: the block unpacked
// (u) with its sub-block scales per lane (sc4, from KUnpack), and one input's
// activation block added into that input's accumulators in the matvec's order.
template <class Dec>
QKV_VNNI_INLINE float KUnpack(const uint8_t* b, const __m512i idx[4], __m512i u[4], __m512i sc4[4]) {
  const __m512i sc = Dec::Unpack(b, u);
  if constexpr (Dec::kMadd16) {
    const __m512i sc2 = _mm512_or_si512(_mm512_and_si512(sc, _mm512_set1_epi32(0xFFFF)), _mm512_slli_epi32(sc, 16));
    for (int k = 0; k < 4; ++k) sc4[k] = _mm512_permutexvar_epi32(idx[k], sc2);
  } else {
    for (int k = 0; k < 4; ++k) sc4[k] = _mm512_permutexvar_epi32(idx[k], sc);
  }
  return Dec::D(b);
}

template <class Dec>
QKV_VNNI_INLINE void KDotBlock(const uint8_t* b, const __m512i u[4], const __m512i sc4[4], float dw,
                               const VnniActK& act, VnniRow* row) {
  Dec::Mins(b, act, row);
  __m512i s = _mm512_setzero_si512();
  for (int k = 0; k < 4; ++k) {
    if constexpr (Dec::kMadd16) {
      __m512i p = _mm512_maddubs_epi16(u[k], act.q[k]);
      if (Dec::kOffset != 0) p = _mm512_sub_epi16(p, act.corr[k]);
      s = _mm512_dpwssd_epi32(s, p, sc4[k]);
    } else {
      const __m512i p = _mm512_dpbusd_epi32(act.corr[k], u[k], act.q[k]);
      s = _mm512_add_epi32(s, _mm512_mullo_epi32(p, sc4[k]));
    }
  }
  const __m256i lanes = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
  row->acc = _mm256_fmadd_ps(_mm256_set1_ps(act.d * dw), _mm256_cvtepi32_ps(lanes), row->acc);
}

// Tile of 256-value super-blocks: rows w + r * stride, inputs a + c * nb
// (nb blocks each), y[c * ldy + r].
template <class Dec, size_t R, size_t C>
QKV_VNNI_TARGET void KTileVnni(const uint8_t* HWY_RESTRICT w, size_t stride, size_t nb,
                               const BlockQ8_K* HWY_RESTRICT a, float* HWY_RESTRICT y, size_t ldy, bool prefetch) {
  using B = typename Dec::Block;
  __m512i idx[4];
  SubBlockLanes<Dec::kSub>(idx);
  VnniRow row[R][C];
  for (size_t r = 0; r < R; ++r) {
    for (size_t c = 0; c < C; ++c) row[r][c] = VnniRow{_mm256_setzero_ps(), _mm_setzero_ps(), 0.0f};
  }
  for (size_t i = 0; i < nb; ++i) {
    VnniActK act[C];
    QKV_UNROLL for (size_t c = 0; c < C; ++c) LoadActK<Dec::kOffset, Dec::kMadd16>(a[c * nb + i], &act[c]);
    QKV_UNROLL for (size_t r = 0; r < R; ++r) {
      const uint8_t* b = w + r * stride + i * sizeof(B);
      if (prefetch) PrefetchSpan<sizeof(B)>(b + kPrefetchBytes);
      __m512i u[4], sc4[4];
      const float dw = KUnpack<Dec>(b, idx, u, sc4);
      QKV_UNROLL for (size_t c = 0; c < C; ++c) KDotBlock<Dec>(b, u, sc4, dw, act[c], &row[r][c]);
    }
  }
  for (size_t r = 0; r < R; ++r) {
    for (size_t c = 0; c < C; ++c) y[c * ldy + r] = Dec::Finish(row[r][c]);
  }
}

// The f16 field at byte `at` of n <= 16 blocks of S bytes as f32 lanes, for
// blocks too long for FieldGather (Q8_0's 34 bytes): one scalar copy each.
template <size_t S>
struct CopyGather {
  size_t at;
  explicit QKV_VNNI_INLINE CopyGather(size_t at_) : at(at_) {}
  QKV_VNNI_INLINE __m512 operator()(const uint8_t* p, size_t n) const {
    HWY_ALIGN uint16_t h[16] = {};
    for (size_t j = 0; j < n; ++j) std::memcpy(&h[j], p + j * S + at, 2);
    return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(h)));
  }
};
template <size_t S>
using HalfGather = std::conditional_t<16 * S <= 384, FieldGather<S>, CopyGather<S>>;

// Tile of 32-value blocks (the Rows32Vnni arithmetic): act[c] is input c.
template <class Dec, size_t R, size_t C>
QKV_VNNI_TARGET void Tile32Vnni(const uint8_t* HWY_RESTRICT w, size_t stride, size_t nb,
                                const Act32<typename Dec::Act>* HWY_RESTRICT act,
                                const HalfFields<Dec, HalfGather>& fields, float* HWY_RESTRICT y, size_t ldy,
                                bool prefetch) {
  using B = typename Dec::Block;
  VnniRow row[R][C];
  for (size_t r = 0; r < R; ++r) {
    for (size_t c = 0; c < C; ++c) row[r][c] = VnniRow{_mm256_setzero_ps(), _mm_setzero_ps(), 0.0f};
  }
  HWY_ALIGN float dsc[R][C][16], msc[R][16];
  const auto& d_of = fields.d;
  const auto& m_of = fields.m;
  for (size_t g = 0; g < nb; g += 16) {
    const size_t n = std::min<size_t>(16, nb - g);
    QKV_UNROLL for (size_t r = 0; r < R; ++r) {
      const uint8_t* group = w + r * stride + g * sizeof(B);
      const __m512 dw = d_of(group, n);
      for (size_t c = 0; c < C; ++c) _mm512_store_ps(dsc[r][c], _mm512_mul_ps(dw, _mm512_loadu_ps(act[c].d + g)));
      if (Dec::kMin) _mm512_store_ps(msc[r], m_of(group, n));
    }
    for (size_t k = 0; k < n; k += 2) {
      const size_t i = g + k;
      const bool pair = k + 1 < n;
      const size_t i1 = pair ? i + 1 : i;
      __m512i aq[C], corr[C];
      QKV_UNROLL for (size_t c = 0; c < C; ++c) {
        const __m256i a0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act[c].blocks[i].qs));
        const __m256i a1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act[c].blocks[i1].qs));
        aq[c] = _mm512_inserti64x4(_mm512_castsi256_si512(a0), a1, 1);
        corr[c] = OffsetCorrection<Dec::kOffset>(aq[c]);
      }
      QKV_UNROLL for (size_t r = 0; r < R; ++r) {
        if (prefetch) PrefetchSpan<2 * sizeof(B)>(w + r * stride + i * sizeof(B) + kPrefetchBytes);
        const __m512i u = Dec::Unpack2(w + r * stride + i * sizeof(B), w + r * stride + i1 * sizeof(B));
        QKV_UNROLL for (size_t c = 0; c < C; ++c) {
          VnniRow& o = row[r][c];
          const __m512 f = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(corr[c], u, aq[c]));
          if (Dec::kMin) o.summs = std::fma(msc[r][k], act[c].s[i], o.summs);
          o.acc = _mm256_fmadd_ps(_mm256_set1_ps(dsc[r][c][k]), _mm512_castps512_ps256(f), o.acc);
          if (pair) {
            if (Dec::kMin) o.summs = std::fma(msc[r][k + 1], act[c].s[i1], o.summs);
            o.acc = _mm256_fmadd_ps(_mm256_set1_ps(dsc[r][c][k + 1]), _mm512_extractf32x8_ps(f, 1), o.acc);
          }
        }
      }
    }
  }
  for (size_t r = 0; r < R; ++r) {
    for (size_t c = 0; c < C; ++c) y[c * ldy + r] = Sum8(row[r][c].acc) + row[r][c].summs;
  }
}

// Rows [0, n_rows) x inputs [0, M) by tiles: inputs in tiles of kGemmC (the
// rest one at a time), rows in tiles of kGemmR (the rest one at a time).
// tile(R, C, row, input) runs the matching instantiation. The first input
// tile reads the weights from memory (later ones find them in L2) and
// prefetches kPrefetchBytes ahead in each row as the matvec does: at
// batched-decode sizes the kernel otherwise waited on the scale gathers'
// cache misses (perf, 16 inputs).
template <class Tile>
QKV_VNNI_INLINE void GemmTiles(size_t n_rows, size_t M, const Tile& tile) {
  for (size_t m = 0; m < M;) {
    const bool full_c = m + kGemmC <= M;
    size_t r = 0;
    for (; r + kGemmR <= n_rows; r += kGemmR) full_c ? tile.template run<kGemmR, kGemmC>(r, m) : tile.template run<kGemmR, 1>(r, m);
    for (; r < n_rows; ++r) full_c ? tile.template run<1, kGemmC>(r, m) : tile.template run<1, 1>(r, m);
    m += full_c ? kGemmC : 1;
  }
}

template <class Dec>
struct KGemmTile {
  const uint8_t* base;
  size_t rb, nb;
  const BlockQ8_K* a;
  float* y;
  size_t ldy;
  template <size_t R, size_t C>
  QKV_VNNI_INLINE void run(size_t r, size_t m) const {
    KTileVnni<Dec, R, C>(base + r * rb, rb, nb, a + m * nb, y + m * ldy + r, ldy, m == 0);
  }
};

template <class Dec>
struct Gemm32Tile {
  const uint8_t* base;
  size_t rb, nb;
  const Act32<typename Dec::Act>* act;
  HalfFields<Dec, HalfGather> fields;
  float* y;
  size_t ldy;
  template <size_t R, size_t C>
  QKV_VNNI_INLINE void run(size_t r, size_t m) const {
    Tile32Vnni<Dec, R, C>(base + r * rb, rb, nb, act + m, fields, y + m * ldy + r, ldy, m == 0);
  }
};

// Rows one at a time against all M (2 .. kQuantGemmFewMaxInputs) inputs at once: a
// single pass over the weights, each block unpacked once for every input, the
// inputs' activation blocks loaded (LoadActK) once per call instead of once
// per row tile. Tiles of kGemmC inputs would pass over the rows ceil(M / 4)
// times (from memory each time when the matrix is larger than L2) and take
// their remainder inputs one at a time. Per (row, input) the operations and
// their order are KTileVnni's, so the outputs equal quant_dot_rows' bit for
// bit here too.
template <class Dec, size_t C>
QKV_VNNI_TARGET void KFewVnni(const uint8_t* HWY_RESTRICT w, size_t stride, size_t nb,
                              const VnniActK* HWY_RESTRICT acts, float* HWY_RESTRICT y, size_t ldy, size_t n_rows) {
  using B = typename Dec::Block;
  __m512i idx[4];
  SubBlockLanes<Dec::kSub>(idx);
  for (size_t r = 0; r < n_rows; ++r) {
    VnniRow row[C];
    for (size_t c = 0; c < C; ++c) row[c] = VnniRow{_mm256_setzero_ps(), _mm_setzero_ps(), 0.0f};
    for (size_t i = 0; i < nb; ++i) {
      const uint8_t* b = w + r * stride + i * sizeof(B);
      PrefetchSpan<sizeof(B)>(b + kPrefetchBytes);
      __m512i u[4], sc4[4];
      const float dw = KUnpack<Dec>(b, idx, u, sc4);
      _Pragma("GCC unroll 8") for (size_t c = 0; c < C; ++c) KDotBlock<Dec>(b, u, sc4, dw, acts[c * nb + i], &row[c]);
    }
    for (size_t c = 0; c < C; ++c) y[c * ldy + r] = Dec::Finish(row[c]);
  }
}

template <class Dec>
QKV_VNNI_INLINE void KFewVnniN(size_t C, const uint8_t* w, size_t stride, size_t nb, const VnniActK* acts, float* y,
                               size_t ldy, size_t n_rows) {
  switch (C) {
    case 1: return KFewVnni<Dec, 1>(w, stride, nb, acts, y, ldy, n_rows);
    case 2: return KFewVnni<Dec, 2>(w, stride, nb, acts, y, ldy, n_rows);
    case 3: return KFewVnni<Dec, 3>(w, stride, nb, acts, y, ldy, n_rows);
    case 4: return KFewVnni<Dec, 4>(w, stride, nb, acts, y, ldy, n_rows);
    case 5: return KFewVnni<Dec, 5>(w, stride, nb, acts, y, ldy, n_rows);
    case 6: return KFewVnni<Dec, 6>(w, stride, nb, acts, y, ldy, n_rows);
    case 7: return KFewVnni<Dec, 7>(w, stride, nb, acts, y, ldy, n_rows);
    default: return KFewVnni<Dec, 8>(w, stride, nb, acts, y, ldy, n_rows);
  }
}

// More than 8 inputs (whose accumulators would not fit the registers) go in
// two balanced groups over blocks of rows small enough (kFewRowBytes) that the
// second group finds them in L2.
constexpr size_t kFewGroupInputs = 8, kFewRowBytes = 128 * 1024;

template <class Dec>
QKV_VNNI_TARGET void KGemmFew(const uint8_t* base, size_t stride, size_t nb, const BlockQ8_K* a, size_t M, float* y,
                              size_t ldy, size_t n_rows) {
  // 64-byte aligned for VnniActK's vectors (as the packed kernel's scratch).
  static thread_local hwy::AlignedFreeUniquePtr<uint8_t[]> buf;
  static thread_local size_t buf_size = 0;
  const size_t need = M * nb * sizeof(VnniActK);
  if (need > buf_size) {
    buf = hwy::AllocateAligned<uint8_t>(need);
    buf_size = need;
  }
  auto* acts = reinterpret_cast<VnniActK*>(buf.get());
  for (size_t i = 0; i < M * nb; ++i) LoadActK<Dec::kOffset, Dec::kMadd16>(a[i], &acts[i]);
  if (M <= kFewGroupInputs) return KFewVnniN<Dec>(M, base, stride, nb, acts, y, ldy, n_rows);
  const size_t first = (M + 1) / 2;
  const size_t rows_per = std::max<size_t>(1, kFewRowBytes / stride);
  for (size_t r0 = 0; r0 < n_rows; r0 += rows_per) {
    const size_t n = std::min(rows_per, n_rows - r0);
    KFewVnniN<Dec>(first, base + r0 * stride, stride, nb, acts, y + r0, ldy, n);
    KFewVnniN<Dec>(M - first, base + r0 * stride, stride, nb, acts + first * nb, y + first * ldy + r0, ldy, n);
  }
}

template <class Dec>
QKV_VNNI_TARGET void KGemm(const uint8_t* base, size_t cols, const void* xa, size_t M, float* y, size_t ldy,
                           size_t n_rows) {
  const size_t nb = cols / kQK;
  const KGemmTile<Dec> tile{base, nb * sizeof(typename Dec::Block), nb, static_cast<const BlockQ8_K*>(xa), y, ldy};
  if (M >= 2 && M <= kQuantGemmFewMaxInputs) {
    KGemmFew<Dec>(base, nb * sizeof(typename Dec::Block), nb, static_cast<const BlockQ8_K*>(xa), M, y, ldy, n_rows);
  } else {
    GemmTiles(n_rows, M, tile);
  }
}

// The activation scales d (and Q8_1's s) of the M inputs as f32, each input's
// padded with 16 zeros as Rows32Vnni reads them.
template <class Dec>
QKV_VNNI_TARGET void Gemm32(const uint8_t* base, size_t cols, const void* xa, size_t M, float* y, size_t ldy,
                            size_t n_rows) {
  using A = typename Dec::Act;
  const size_t nb = cols / 32, per = nb + 16;
  static thread_local std::vector<float> scales;
  static thread_local std::vector<Act32<A>> acts;
  scales.assign(2 * per * M, 0.0f);
  acts.resize(M);
  for (size_t m = 0; m < M; ++m) {
    const A* blocks = static_cast<const A*>(xa) + m * nb;
    float* d = scales.data() + 2 * per * m;
    float* s = d + per;
    ActScalesF32<Dec::kMin>(blocks, nb, d, s);
    acts[m] = Act32<A>{blocks, d, s};
  }
  const Gemm32Tile<Dec> tile{base, nb * sizeof(typename Dec::Block), nb, acts.data(), {}, y, ldy};
  GemmTiles(n_rows, M, tile);
}

// Returns false for the types without a VNNI kernel.
HWY_INLINE bool GemmVnni(DType t, const void* rows, size_t cols, const void* xa, size_t M, float* y, size_t ldy,
                         size_t n_rows) {
  const auto* b = static_cast<const uint8_t*>(rows);
  return WithVnniDecoder(t, [&](auto tag) {
    using Dec = typename decltype(tag)::type;
    if constexpr (Dec::Block::kValues == kQK) {
      KGemm<Dec>(b, cols, xa, M, y, ldy, n_rows);
    } else {
      Gemm32<Dec>(b, cols, xa, M, y, ldy, n_rows);
    }
  });
}

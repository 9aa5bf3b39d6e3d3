// 256-bit GEMM of the ggml block types for x86 CPUs without AVX-512 VNNI
// (AVX2, and AVX-512 without VNNI: Highway's AVX2 and AVX3 targets): a batch
// of inputs, each quantized once (quantize_activation), against rows of weight
// blocks, for prefill and batched decode. A tile of R rows x C inputs unpacks
// each weight block once with the matvec's decoders
// (kernels/quant/vec_dot_hwy_blocks-inl.h) and dots it with the C inputs'
// activation blocks: vpmaddubsw pair sums (|q|, |a| <= 127 and u <= 63, so no
// int16 saturation; the offset removed by the activation's correction) and
// vpmaddwd into 8 int32 lanes, exactly as the matvec (vec_dot_hwy-inl.h).
// Per (row, input) the operations and their order are the matvec's (integer
// block sums, one fused multiply-add per block and lane, the min terms, the
// final pairwise sum), so every output equals quant_dot_rows for that input,
// and so the scalar kernels, bit for bit. Q8_0 (no 256-bit matvec: its decode
// keeps exact f32 weights) takes the signed-weight path of IQ4_NL: ggml's
// arithmetic as the VNNI GEMM's Q8_0.
//
// Included by kernels/quant/vec_dot.cc after vec_dot_hwy-inl.h, inside its
// per-target namespace when HWY_TARGET is HWY_AVX2 or HWY_AVX3.

// Rows R x inputs C of a tile: the 16 ymm registers hold an unpacked block
// or a few, and the accumulators of a 2 x 4 tile; larger tiles spill.
constexpr size_t kHwyGemmR = 2, kHwyGemmC = 4;

struct HwyQ8_0 : HwyNoMin32 {
  using Block = BlockQ8_0;
  using Act = BlockQ8_0;
  static constexpr bool kSigned = true;  // shadows HwyNoMin32's
  static constexpr int kOffset = 0;
  HWY_INLINE static VU8 Unpack(const uint8_t* b) { return hn::LoadU(DU8(), b + offsetof(Block, qs)); }
};

// Tile of 256-value super-blocks: rows w + r * stride, inputs a + c * nb
// (nb blocks each), y[c * ldy + r]. Dec::Decode adds the block's min term for
// the activation it is given: for inputs after the first it runs again on the
// same block with the unpacked values discarded (the compiler drops their
// computation), so each (row, input) gets the matvec's min arithmetic.
template <class Dec, size_t R, size_t C>
HWY_NOINLINE void KTileHwy(const uint8_t* HWY_RESTRICT w, size_t stride, size_t nb, const BlockQ8_K* HWY_RESTRICT a,
                           float* HWY_RESTRICT y, size_t ldy, bool prefetch) {
  using B = typename Dec::Block;
  VI8 idx[8];
  ScaleSelectors<Dec::kSub, Dec::kSignedScales>(idx);
  HwyRow row[R][C];
  for (size_t r = 0; r < R; ++r) {
    for (size_t c = 0; c < C; ++c) row[r][c] = ZeroRow();
  }
  for (size_t i = 0; i < nb; ++i) {
    HwyActK act[C];
    for (size_t c = 0; c < C; ++c) LoadActK<Dec::kOffset>(a[c * nb + i], &act[c]);
    for (size_t r = 0; r < R; ++r) {
      const uint8_t* b = w + r * stride + i * sizeof(B);
      if (prefetch) PrefetchSpan<sizeof(B)>(b + kHwyPrefetchBytes);
      VU8 u[8];
      const hn::Vec128<int8_t> sc = Dec::Decode(b, act[0], &row[r][0], u);
      for (size_t c = 1; c < C; ++c) {
        VU8 unused_u[8];
        (void)Dec::Decode(b, act[c], &row[r][c], unused_u);
      }
      const VI8 sc2 = hn::Combine(DI8(), sc, sc);
      VI16 scale[8];
      for (int k = 0; k < 8; ++k) {
        scale[k] = hn::BitCast(DI16(), hn::TableLookupBytes(sc2, idx[k]));
        if (Dec::kSignedScales) scale[k] = hn::ShiftRight<8>(scale[k]);
      }
      const float dw = Dec::D(b);
      QKV_UNROLL for (size_t c = 0; c < C; ++c) {
        VI32 s = hn::Zero(DI32()), unused;
        for (int k = 0; k < 8; ++k) {
          s = hn::ReorderWidenMulAccumulate(DI32(), Products<Dec>(u[k], act[c].q[k], act[c].corr[k]), scale[k], s,
                                            unused);
        }
        row[r][c].acc = hn::MulAdd(hn::Set(DF(), act[c].d * dw), hn::ConvertTo(DF(), s), row[r][c].acc);
      }
    }
  }
  for (size_t r = 0; r < R; ++r) {
    for (size_t c = 0; c < C; ++c) y[c * ldy + r] = Dec::Finish(row[r][c]);
  }
}

// Tile of 32-value blocks (the Rows32Hwy arithmetic): act[c] is input c.
template <class Dec, size_t R, size_t C>
HWY_NOINLINE void Tile32Hwy(const uint8_t* HWY_RESTRICT w, size_t stride, size_t nb,
                            const HwyAct32<typename Dec::Act>* HWY_RESTRICT act, float* HWY_RESTRICT y, size_t ldy,
                            bool prefetch) {
  using B = typename Dec::Block;
  HwyRow row[R][C];
  for (size_t r = 0; r < R; ++r) {
    for (size_t c = 0; c < C; ++c) row[r][c] = ZeroRow();
  }
  const VI16 ones = hn::Set(DI16(), int16_t{1});
  HWY_ALIGN float dsc[R][C][8], msc[R][8];
  for (size_t g = 0; g < nb; g += 8) {
    const size_t n = std::min<size_t>(8, nb - g);
    for (size_t r = 0; r < R; ++r) {
      const uint8_t* group = w + r * stride + g * sizeof(B);
      if (n == 8) {
        const VF dw = Halves8<sizeof(B)>(group);
        for (size_t c = 0; c < C; ++c) hn::Store(hn::Mul(dw, hn::LoadU(DF(), act[c].d + g)), DF(), dsc[r][c]);
        if (Dec::kMin) hn::Store(Halves8<sizeof(B)>(group + 2), DF(), msc[r]);
      } else {
        for (size_t k = 0; k < n; ++k) {
          const float dw = HalfAt(group + k * sizeof(B));
          for (size_t c = 0; c < C; ++c) dsc[r][c][k] = dw * act[c].d[g + k];
          if (Dec::kMin) msc[r][k] = HalfAt(group + k * sizeof(B) + 2);
        }
      }
    }
    for (size_t k = 0; k < n; ++k) {
      const size_t i = g + k;
      VI8 aq[C];
      VI16 corr[C];
      for (size_t c = 0; c < C; ++c) {
        aq[c] = hn::LoadU(DI8(), act[c].blocks[i].qs);
        corr[c] = Correction<Dec::kOffset>(aq[c]);
      }
      QKV_UNROLL for (size_t r = 0; r < R; ++r) {
        const uint8_t* b = w + r * stride + i * sizeof(B);
        if (prefetch) hwy::Prefetch(b + kHwyPrefetchBytes);  // blocks < 64 bytes: every line
        const VU8 u = Dec::Unpack(b);
        QKV_UNROLL for (size_t c = 0; c < C; ++c) {
          VI32 unused;
          const VI32 s =
              hn::ReorderWidenMulAccumulate(DI32(), Products<Dec>(u, aq[c], corr[c]), ones, hn::Zero(DI32()), unused);
          if (Dec::kMin) row[r][c].summs = std::fma(msc[r][k], act[c].s[i], row[r][c].summs);
          row[r][c].acc = hn::MulAdd(hn::Set(DF(), dsc[r][c][k]), hn::ConvertTo(DF(), s), row[r][c].acc);
        }
      }
    }
  }
  for (size_t r = 0; r < R; ++r) {
    for (size_t c = 0; c < C; ++c) y[c * ldy + r] = Sum8(row[r][c].acc) + row[r][c].summs;
  }
}

// Rows [0, n_rows) x inputs [0, M) by tiles: inputs in tiles of kHwyGemmC
// (the rest one at a time), rows in tiles of kHwyGemmR (the rest one at a
// time); tile.run<R, C>(row, input) runs the matching instantiation. The first
// input tile reads the weights from memory (later ones find them in L2) and
// prefetches ahead in each row as the matvec does.
template <class Tile>
HWY_INLINE void HwyGemmTiles(size_t n_rows, size_t M, const Tile& tile) {
  for (size_t m = 0; m < M;) {
    const bool full_c = m + kHwyGemmC <= M;
    size_t r = 0;
    for (; r + kHwyGemmR <= n_rows; r += kHwyGemmR) {
      full_c ? tile.template run<kHwyGemmR, kHwyGemmC>(r, m) : tile.template run<kHwyGemmR, 1>(r, m);
    }
    for (; r < n_rows; ++r) full_c ? tile.template run<1, kHwyGemmC>(r, m) : tile.template run<1, 1>(r, m);
    m += full_c ? kHwyGemmC : 1;
  }
}

template <class Dec>
struct KHwyGemmTile {
  const uint8_t* base;
  size_t rb, nb;
  const BlockQ8_K* a;
  float* y;
  size_t ldy;
  template <size_t R, size_t C>
  HWY_INLINE void run(size_t r, size_t m) const {
    KTileHwy<Dec, R, C>(base + r * rb, rb, nb, a + m * nb, y + m * ldy + r, ldy, m == 0);
  }
};

template <class Dec>
struct Hwy32GemmTile {
  const uint8_t* base;
  size_t rb, nb;
  const HwyAct32<typename Dec::Act>* act;
  float* y;
  size_t ldy;
  template <size_t R, size_t C>
  HWY_INLINE void run(size_t r, size_t m) const {
    Tile32Hwy<Dec, R, C>(base + r * rb, rb, nb, act + m, y + m * ldy + r, ldy, m == 0);
  }
};

template <class Dec>
HWY_INLINE void KGemmHwy(const uint8_t* base, size_t cols, const void* xa, size_t M, float* y, size_t ldy,
                         size_t n_rows) {
  const size_t nb = cols / kQK;
  const KHwyGemmTile<Dec> tile{base, nb * sizeof(typename Dec::Block), nb, static_cast<const BlockQ8_K*>(xa), y, ldy};
  HwyGemmTiles(n_rows, M, tile);
}

// The activation scales d (and Q8_1's s) of the M inputs as f32, each input's
// padded with 8 zeros as Rows32Hwy reads them.
template <class Dec>
HWY_INLINE void Gemm32Hwy(const uint8_t* base, size_t cols, const void* xa, size_t M, float* y, size_t ldy,
                          size_t n_rows) {
  using A = typename Dec::Act;
  const size_t nb = cols / 32, per = nb + 8;
  static thread_local std::vector<float> scales;
  static thread_local std::vector<HwyAct32<A>> acts;
  scales.assign(2 * per * M, 0.0f);
  acts.resize(M);
  for (size_t m = 0; m < M; ++m) {
    const A* blocks = static_cast<const A*>(xa) + m * nb;
    float* d = scales.data() + 2 * per * m;
    float* s = d + per;
    ActScalesF32<Dec::kMin>(blocks, nb, d, s);
    acts[m] = HwyAct32<A>{blocks, d, s};
  }
  const Hwy32GemmTile<Dec> tile{base, nb * sizeof(typename Dec::Block), nb, acts.data(), y, ldy};
  HwyGemmTiles(n_rows, M, tile);
}

// Returns false for the types without a kernel here.
HWY_INLINE bool GemmHwy(DType t, const void* rows, size_t cols, const void* xa, size_t M, float* y, size_t ldy,
                        size_t n_rows) {
  const auto* b = static_cast<const uint8_t*>(rows);
  switch (t) {
    case DType::Q8_0: Gemm32Hwy<HwyQ8_0>(b, cols, xa, M, y, ldy, n_rows); return true;
    case DType::Q4_0: Gemm32Hwy<HwyQ4_0>(b, cols, xa, M, y, ldy, n_rows); return true;
    case DType::Q4_1: Gemm32Hwy<HwyQ4_1>(b, cols, xa, M, y, ldy, n_rows); return true;
    case DType::Q5_0: Gemm32Hwy<HwyQ5_0>(b, cols, xa, M, y, ldy, n_rows); return true;
    case DType::Q5_1: Gemm32Hwy<HwyQ5_1>(b, cols, xa, M, y, ldy, n_rows); return true;
    case DType::IQ4_NL: Gemm32Hwy<HwyIQ4_NL>(b, cols, xa, M, y, ldy, n_rows); return true;
    case DType::Q2_K: KGemmHwy<HwyQ2_K>(b, cols, xa, M, y, ldy, n_rows); return true;
    case DType::Q3_K: KGemmHwy<HwyQ3_K>(b, cols, xa, M, y, ldy, n_rows); return true;
    case DType::Q4_K: KGemmHwy<HwyQ4_K>(b, cols, xa, M, y, ldy, n_rows); return true;
    case DType::Q5_K: KGemmHwy<HwyQ5_K>(b, cols, xa, M, y, ldy, n_rows); return true;
    case DType::Q6_K: KGemmHwy<HwyQ6_K>(b, cols, xa, M, y, ldy, n_rows); return true;
    case DType::IQ4_XS: KGemmHwy<HwyIQ4_XS>(b, cols, xa, M, y, ldy, n_rows); return true;
    default: return false;
  }
}

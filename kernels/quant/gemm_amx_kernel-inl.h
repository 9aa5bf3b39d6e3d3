// The AMX int8 GEMM of the ggml block types, one template over the tile
// instructions (Tiles: the real ones, kernels/quant/gemm_amx.cc, or their
// scalar model, kernels/quant/gemm_amx_model.h) and over the type table
// (kernels/quant/gemm_amx_types-inl.h).
//
// Tiles (palette 1; S = the type's sub-block values, 32 or 16):
//  - A (tiles 4, 5; 16 rows x S bytes): sub-block j of 16 weight rows as
//    unsigned bytes u = q + offset, loaded with a row stride of `cols` from
//    the row block's unpacked panel (16 rows x cols bytes, each weight
//    unpacked once per call and row block, whatever the inputs).
//  - B (tiles 6, 7; S / 4 rows x 64 bytes): sub-block j of 16 inputs in AMX's
//    4-byte interleaved layout: row k holds bytes 4k .. 4k + 3 of inputs
//    0 .. 15 side by side; the inputs' signed int8 activation values, laid out
//    once per call.
//  - C (tiles 0 .. 3; 16 x 16 int32): one TDPBUSD (K = S) per sub-block, so
//    each C element is one sub-block's exact integer sum sum_k u_k * a_k. Four
//    sub-blocks go to the four C tiles in turn, then are stored and go through
//    the epilogue.
// Epilogue, per weight row r, input m and sub-block j in order (the packed
// VNNI GEMM's terms in its order, kernels/quant/gemm_vnni_packed-inl.h, so
// its outputs equal that kernel's bit for bit):
//   isum = C + corr, corr = -offset * (the sub-block's activation sum), int32;
//   32-value types: acc = fma(float(isum), da * dw, acc),
//                   then (Q4_1, Q5_1) acc = fma(ms, mw, acc), ms = Q8_1's s;
//   K-quants, IQ4_XS: sup = fma(float(isum), dw, first sub-block ? 0 : sup),
//                   then (Q2_K, Q4_K, Q5_K) sup = fma(ms, mw, sup), ms the
//                   sub-block's activation sum; at the super-block's last
//                   sub-block acc = fma(sup, da, acc), da Q8_K's d;
//   Q6_K:           isup = sum_j sc_j * isum_j (int32), at the last sub-block
//                   acc = fma(float(isup), da * d, acc).
// quant_dot_rows (ggml's 8-lane kernels) converts 8 partial sums of 4
// products per block to f32 separately; a TDPBUSD element sums K / 4 such
// groups, so that order cannot be had without 8x the tile products: the
// outputs differ from quant_dot_rows' by f32 rounding, as the packed kernel's.
//
// Included by gemm_amx.cc and gemm_amx_model.cc inside a namespace of their
// own, after gemm_amx_types-inl.h.

constexpr size_t kAmxRows = 16;    // weight rows per A and C tile
constexpr size_t kAmxInputs = 16;  // inputs per B and C tile
constexpr int kAmxAcc = 4;         // C tiles that take the sub-blocks in turn

// The inputs of one call laid out for the B tiles, with each sub-block's
// terms: per tile of 16 inputs, `bytes` (cols x 16) then da, ms and corr
// (subs x 16 each). Inputs past M are zero.
struct AmxInputs {
  std::vector<uint8_t> bytes;
  std::vector<float> da, ms;
  std::vector<int32_t> corr;
};

template <class T>
void AmxLayOutInputs(const uint8_t* xa, size_t cols, size_t M, AmxInputs* in) {
  using A = typename T::Act;
  const size_t subs = cols / T::kS, tiles = (M + kAmxInputs - 1) / kAmxInputs;
  const size_t ab = cols / A::kValues * sizeof(A);
  in->bytes.assign(tiles * cols * kAmxInputs, 0);
  in->da.assign(tiles * subs * kAmxInputs, 0.0f);
  in->ms.assign(tiles * subs * kAmxInputs, 0.0f);
  in->corr.assign(tiles * subs * kAmxInputs, 0);
  for (size_t m = 0; m < M; ++m) {
    const size_t tile = m / kAmxInputs, n = m % kAmxInputs;
    uint8_t* bytes = in->bytes.data() + tile * cols * kAmxInputs;
    const uint8_t* row = xa + m * ab;
    for (size_t j = 0; j < subs; ++j) {
      const size_t v0 = j * T::kS;  // the sub-block's first value in the row
      const A a = AmxLoadBlock<A>(row + v0 / A::kValues * sizeof(A));
      const int8_t* q = a.qs + v0 % A::kValues;
      int32_t asum = 0;
      float da, ms = 0.0f;
      if constexpr (T::kK) {
        const size_t s16 = v0 % kQK / 16;
        for (size_t h = 0; h < T::kS / 16; ++h) asum += a.bsums[s16 + h];
        da = a.d;
        if constexpr (T::kMin) ms = static_cast<float>(asum);
      } else {
        for (size_t k = 0; k < T::kS; ++k) asum += q[k];
        da = f16_to_f32(a.d);
        if constexpr (T::kMin) ms = f16_to_f32(a.s);
      }
      const size_t t = (tile * subs + j) * kAmxInputs + n;
      in->da[t] = da;
      in->ms[t] = ms;
      in->corr[t] = -T::kOffset * asum;
      for (size_t k = 0; k < T::kS; k += 4) std::memcpy(bytes + v0 * kAmxInputs + k * kAmxInputs + 4 * n, q + k, 4);
    }
  }
}

// One row block unpacked: u (16 rows x cols bytes), and per row and
// sub-block dw, mw, sc (16 x subs each); rows past n zero.
struct AmxPanel {
  std::vector<uint8_t> u;
  std::vector<float> dw, mw;
  std::vector<int32_t> sc;
};

template <class T>
void AmxUnpackRows(const uint8_t* rows, size_t row_bytes, size_t n, size_t cols, AmxPanel* p) {
  const size_t subs = cols / T::kS, nb = cols / T::kValues;
  p->u.assign(kAmxRows * cols, 0);
  p->dw.assign(kAmxRows * subs, 0.0f);
  p->mw.assign(kAmxRows * subs, 0.0f);
  p->sc.assign(kAmxRows * subs, 0);
  for (size_t r = 0; r < n; ++r) {
    const uint8_t* row = rows + r * row_bytes;
    for (size_t i = 0; i < nb; ++i) {
      const size_t s = r * subs + i * T::kSubs;
      T::Unpack(row + i * sizeof(typename T::Block), p->u.data() + r * cols + i * T::kValues, p->dw.data() + s,
                p->mw.data() + s, p->sc.data() + s);
    }
  }
}

// C tile kQ = sub-block j's sums: A and B tiles alternate between two
// registers each, so that a load need not wait for the previous product.
template <int kQ, class Tiles>
inline void AmxProduct(Tiles& tiles, const uint8_t* a, size_t cols, const uint8_t* b) {
  constexpr int kA = 4 + kQ % 2, kB = 6 + kQ % 2;
  tiles.template zero<kQ>();
  tiles.template load<kA>(a, cols);
  tiles.template load<kB>(b, 64);
  tiles.template dpbusd<kQ, kA, kB>();
}

template <int kQ, class Tiles>
inline void AmxStore(Tiles& tiles, int32_t* c) {
  tiles.template store<kQ>(c, kAmxInputs * sizeof(int32_t));
}

// The epilogue of sub-block j for one tile (the order above): c[r][m] the
// sums, acc and sup the tile's accumulators [r][m], isup Q6_K's.
template <class T>
inline void AmxEpilogue(const int32_t* c, size_t j, size_t subs, const AmxPanel& p, const float* da,
                        const float* ms, const int32_t* corr, float* acc, float* sup, uint32_t* isup) {
  const bool first = j % T::kSubs == 0, last = j % T::kSubs == T::kSubs - 1;
  for (size_t r = 0; r < kAmxRows; ++r) {
    const float dw = p.dw[r * subs + j], mw = p.mw[r * subs + j];
    const int32_t* cr = c + r * kAmxInputs;
    float* ar = acc + r * kAmxInputs;
    float* sr = sup + r * kAmxInputs;
    for (size_t m = 0; m < kAmxInputs; ++m) {
      const int32_t isum = static_cast<int32_t>(static_cast<uint32_t>(cr[m]) + static_cast<uint32_t>(corr[m]));
      if constexpr (T::kSuper) {
        const uint32_t prod = static_cast<uint32_t>(isum) * static_cast<uint32_t>(p.sc[r * subs + j]);
        uint32_t& s = isup[r * kAmxInputs + m];
        s = first ? prod : s + prod;
        if (last) {
          const float d = p.dw[r * subs + j + 1 - T::kSubs];
          ar[m] = std::fma(static_cast<float>(static_cast<int32_t>(s)), da[m] * d, ar[m]);
        }
      } else if constexpr (T::kK) {
        float s = std::fma(static_cast<float>(isum), dw, first ? 0.0f : sr[m]);
        if constexpr (T::kMin) s = std::fma(ms[m], mw, s);
        sr[m] = s;
        if (last) ar[m] = std::fma(s, da[m], ar[m]);
      } else {
        float a = std::fma(static_cast<float>(isum), da[m] * dw, ar[m]);
        if constexpr (T::kMin) a = std::fma(ms[m], mw, a);
        ar[m] = a;
      }
    }
  }
}

// The configuration: C tiles 16 x 64 bytes, A 16 x S, B S / 4 x 64.
template <class T>
inline AmxTileConfig AmxConfig() {
  AmxTileConfig c;
  for (int t = 0; t < kAmxAcc; ++t) c.set(t, 16, 64);
  for (int t = 4; t < 6; ++t) c.set(t, 16, static_cast<uint16_t>(T::kS));
  for (int t = 6; t < 8; ++t) c.set(t, static_cast<uint8_t>(T::kS / 4), 64);
  return c;
}

// y[m * ldy + r] = dot(row r, input m) for r < n_rows, m < M. groups: rows
// holds row groups (kernels/quant/row_groups.h), each turned back into its 16
// rows before the unpacking.
template <class T, class Tiles>
void GemmAmxType(Tiles& tiles, const uint8_t* rows, size_t cols, const uint8_t* xa, size_t M, float* y, size_t ldy,
                 size_t n_rows, bool groups) {
  static_assert(T::kS % 16 == 0 && T::kS <= 64 && kAmxAcc == 4, "sub-blocks of 16 to 64 values, 4 C tiles");
  const size_t subs = cols / T::kS, row_bytes = cols / T::kValues * sizeof(typename T::Block);
  static thread_local AmxInputs in;
  static thread_local AmxPanel panel;
  static thread_local std::vector<uint8_t> group_rows;
  if (groups) group_rows.resize(kAmxRows * row_bytes);
  AmxLayOutInputs<T>(xa, cols, M, &in);
  alignas(64) int32_t c[kAmxAcc][kAmxRows * kAmxInputs];
  alignas(64) float acc[kAmxRows * kAmxInputs], sup[kAmxRows * kAmxInputs];
  alignas(64) uint32_t isup[kAmxRows * kAmxInputs];
  tiles.configure(AmxConfig<T>());
  for (size_t r0 = 0; r0 < n_rows; r0 += kAmxRows) {
    const size_t n = std::min(kAmxRows, n_rows - r0);
    const uint8_t* block = rows + r0 * row_bytes;
    if (groups) {
      unpack_row_groups(T::kType, block, kAmxRows, cols, group_rows.data());
      block = group_rows.data();
    }
    AmxUnpackRows<T>(block, row_bytes, n, cols, &panel);
    for (size_t m0 = 0; m0 < M; m0 += kAmxInputs) {
      const size_t tile = m0 / kAmxInputs, w = std::min(kAmxInputs, M - m0);
      const uint8_t* b = in.bytes.data() + tile * cols * kAmxInputs;
      const size_t terms = tile * subs * kAmxInputs;
      std::fill(acc, acc + kAmxRows * kAmxInputs, 0.0f);
      for (size_t j0 = 0; j0 < subs; j0 += kAmxAcc) {
        const size_t q_end = std::min<size_t>(kAmxAcc, subs - j0);
        const uint8_t* a = panel.u.data() + j0 * T::kS;
        const uint8_t* bj = b + j0 * T::kS * kAmxInputs;
        constexpr size_t kStepA = T::kS, kStepB = T::kS * kAmxInputs;
        AmxProduct<0>(tiles, a, cols, bj);
        if (q_end > 1) AmxProduct<1>(tiles, a + kStepA, cols, bj + kStepB);
        if (q_end > 2) AmxProduct<2>(tiles, a + 2 * kStepA, cols, bj + 2 * kStepB);
        if (q_end > 3) AmxProduct<3>(tiles, a + 3 * kStepA, cols, bj + 3 * kStepB);
        AmxStore<0>(tiles, c[0]);
        if (q_end > 1) AmxStore<1>(tiles, c[1]);
        if (q_end > 2) AmxStore<2>(tiles, c[2]);
        if (q_end > 3) AmxStore<3>(tiles, c[3]);
        for (size_t q = 0; q < q_end; ++q) {
          const size_t j = j0 + q, t = terms + j * kAmxInputs;
          AmxEpilogue<T>(c[q], j, subs, panel, in.da.data() + t, in.ms.data() + t, in.corr.data() + t, acc, sup, isup);
        }
      }
      for (size_t m = 0; m < w; ++m) {
        for (size_t r = 0; r < n; ++r) y[(m0 + m) * ldy + r0 + r] = acc[r * kAmxInputs + m];
      }
    }
  }
  tiles.release();
}

// The type table's entry for t, or false.
template <class Tiles>
bool GemmAmx(Tiles& tiles, DType t, const uint8_t* rows, size_t cols, const uint8_t* xa, size_t M, float* y,
             size_t ldy, size_t n_rows, bool groups) {
  switch (t) {
    case DType::Q4_0: GemmAmxType<AmxQ4_0>(tiles, rows, cols, xa, M, y, ldy, n_rows, groups); return true;
    case DType::Q4_1: GemmAmxType<AmxQ4_1>(tiles, rows, cols, xa, M, y, ldy, n_rows, groups); return true;
    case DType::Q5_0: GemmAmxType<AmxQ5_0>(tiles, rows, cols, xa, M, y, ldy, n_rows, groups); return true;
    case DType::Q5_1: GemmAmxType<AmxQ5_1>(tiles, rows, cols, xa, M, y, ldy, n_rows, groups); return true;
    case DType::Q8_0: GemmAmxType<AmxQ8_0>(tiles, rows, cols, xa, M, y, ldy, n_rows, groups); return true;
    case DType::IQ4_NL: GemmAmxType<AmxIQ4_NL>(tiles, rows, cols, xa, M, y, ldy, n_rows, groups); return true;
    case DType::Q2_K: GemmAmxType<AmxQ2_K>(tiles, rows, cols, xa, M, y, ldy, n_rows, groups); return true;
    case DType::Q3_K: GemmAmxType<AmxQ3_K>(tiles, rows, cols, xa, M, y, ldy, n_rows, groups); return true;
    case DType::Q4_K: GemmAmxType<AmxQ4_K>(tiles, rows, cols, xa, M, y, ldy, n_rows, groups); return true;
    case DType::Q5_K: GemmAmxType<AmxQ5_K>(tiles, rows, cols, xa, M, y, ldy, n_rows, groups); return true;
    case DType::Q6_K: GemmAmxType<AmxQ6_K>(tiles, rows, cols, xa, M, y, ldy, n_rows, groups); return true;
    case DType::IQ4_XS: GemmAmxType<AmxIQ4_XS>(tiles, rows, cols, xa, M, y, ldy, n_rows, groups); return true;
    default: return false;
  }
}

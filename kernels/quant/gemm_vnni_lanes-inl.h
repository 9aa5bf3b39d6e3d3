// Inputs-in-lanes AVX-512 VNNI GEMM of the ggml block types for batches of
// 8 to 16 inputs (12 to 16 for the K-quants; batched decode): lane c of
// every register is input c, so the weights need no transposition. Per 4
// columns, one register holds the 16 inputs' 4 activation bytes (laid out
// once per batch); each weight row's blocks are decoded in row order into an
// L1 scratch and its 4-byte groups broadcast from there into vpdpbusd
// against that register.
//
// Per block i of row r, with the integer sum started at -offset * (the
// block's activation sum) per input:
//   acc[r] += float(sum) * (da[i] * dw[r][i])  (+ ms[i] * mw[r][i] for Q4_1/Q5_1),
// ggml's terms, in the packed kernel's order: the same results. Per 8 rows x
// 32 values x 16 inputs: 64 vpdpbusd, 64 broadcasts from L1, the rows'
// decoding and 3 f32 operations per row; the packed kernel adds a 16 x 16
// transposition per 16 rows x 64 columns and a store and reload of the
// decoded weights (its packing was 42% of a 16-sequence step of 143M
// Q4_K_M, whose 576-column tensors are Q5_0 and Q8_0). The K-quants go the
// same way per sub-block (TileLanesK), with the packed kernel's terms: for
// them the transpositions (PackRows) took 48% of a 16-sequence step of 1.1B
// Q4_K_M, against 38% for the tiles (perf, Zen 5 guest).
//
// Included by kernels/quant/vec_dot.cc after gemm_vnni_packed-inl.h, inside
// its per-target namespace when HWY_TARGET == HWY_AVX3_DL.

static_assert(kQuantGemmLanesMaxInputs == 16, "one input per int32 lane of a 512-bit register");
constexpr size_t kLanesRows = 8;  // rows per tile: 8 int32 sums and 8 f32 accumulators in registers
constexpr size_t kLanesPrefetchBytes = 8192;

#define QKV_UNROLL_LANES _Pragma("GCC unroll 16")

// The batch as the kernel reads it (the tables of quant_gemm_tables, 16 x
// PackedFloatsPerInput floats whatever M): per column quad q, 16 lanes of 4
// activation bytes (act + 16 q); per sub-block j (PackedType's, cols / S of
// them), 16 lanes each of da (the activation scale), ms (the min factor:
// Q8_1's s, or the Q8_K sub-block's sum, da applied per super-block; 0
// without a weight min)
// and corr (-offset * the sub-block's activation sum); lanes from M on are zero.
struct LanesInputs {
  const uint32_t* act;
  const float* da;
  const float* ms;
  const int32_t* corr;
  LanesInputs(const float* tables, size_t cols, size_t subs)
      : act(reinterpret_cast<const uint32_t*>(tables)),
        da(tables + cols / 4 * 16),
        ms(da + subs * 16),
        corr(reinterpret_cast<const int32_t*>(ms + subs * 16)) {}
};

template <class Dec>
QKV_VNNI_TARGET void LanesTablesType(const uint8_t* xa, size_t cols, size_t M, float* tables) {
  using T = PackedType<Dec>;
  using A = typename T::Act;
  const size_t subs = cols / T::kS, ab = cols / A::kValues * sizeof(A);
  std::memset(tables, 0, 16 * PackedFloatsPerInput<Dec>(cols) * sizeof(float));
  auto* act = reinterpret_cast<uint32_t*>(tables);
  float* da = tables + cols / 4 * 16;
  float* ms = da + subs * 16;
  auto* corr = reinterpret_cast<int32_t*>(ms + subs * 16);
  for (size_t c = 0; c < M; ++c) {
    const uint8_t* row = xa + c * ab;
    for (size_t j = 0; j < subs; ++j) {
      SubBlockTerms<Dec>(row, j, &da[j * 16 + c], &ms[j * 16 + c], &corr[j * 16 + c]);
      const uint8_t* src = row + PackedActOffset<Dec>(j);
      for (size_t q = 0; q < T::kS / 4; ++q) std::memcpy(act + (j * T::kS / 4 + q) * 16 + c, src + 4 * q, 4);
    }
  }
}

// A sub-block's f32 terms, the packed kernel's: acc[r] += float(sum[r]) *
// (da * dw(r)), then (kMin) acc[r] += ms * mw(r); da and ms the inputs' 16 lanes.
template <bool kMin, size_t R, class W, class Mw>
QKV_VNNI_INLINE void AddSubBlock(__m512 (&acc)[R], const __m512i (&sum)[R], const float* da, const float* ms,
                                 const W& dw, const Mw& mw) {
  const __m512 dav = _mm512_loadu_ps(da);
  QKV_UNROLL_LANES for (size_t r = 0; r < R; ++r) {
    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[r]), _mm512_mul_ps(dav, _mm512_set1_ps(dw(r))), acc[r]);
  }
  if constexpr (kMin) {
    const __m512 msv = _mm512_loadu_ps(ms);
    QKV_UNROLL_LANES for (size_t r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(msv, _mm512_set1_ps(mw(r)), acc[r]);
  }
}

// R rows (row r at w + r * stride) x the inputs: acc[r] lane c = output (r, c).
template <class Dec, size_t R>
QKV_VNNI_TARGET void TileLanes(const uint8_t* HWY_RESTRICT w, size_t stride, size_t nb, const LanesInputs& in,
                               __m512* HWY_RESTRICT out) {
  using B = typename Dec::Block;
  HWY_ALIGN uint8_t u[R][64];
  HWY_ALIGN float dw[R][2], mw[R][2];
  __m512 acc[R];
  QKV_UNROLL_LANES for (size_t r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (size_t i = 0; i < nb; i += 2) {
    const size_t pair = i + 1 < nb ? 2 : 1;
    QKV_UNROLL_LANES for (size_t r = 0; r < R; ++r) {
      const uint8_t* b0 = w + r * stride + i * sizeof(B);
      const uint8_t* b1 = pair == 2 ? b0 + sizeof(B) : b0;
      // The weights stream in once per step: fetch ahead (the decoding
      // otherwise waits on every row's loads).
      PrefetchSpan<2 * sizeof(B)>(b0 + kLanesPrefetchBytes);
      _mm512_store_si512(u[r], Dec::Unpack2(b0, b1));
      dw[r][0] = HalfAt(b0 + offsetof(B, d));
      dw[r][1] = HalfAt(b1 + offsetof(B, d));
      if constexpr (Dec::kMin) {
        mw[r][0] = HalfAt(b0 + offsetof(B, m));
        mw[r][1] = HalfAt(b1 + offsetof(B, m));
      }
    }
    for (size_t h = 0; h < pair; ++h) {
      const size_t blk = i + h;
      const __m512i corr = _mm512_loadu_si512(in.corr + blk * 16);
      __m512i sum[R];
      QKV_UNROLL_LANES for (size_t r = 0; r < R; ++r) sum[r] = corr;
      QKV_UNROLL_LANES for (size_t q = 0; q < 8; ++q) {
        const __m512i a = _mm512_loadu_si512(in.act + (blk * 8 + q) * 16);
        QKV_UNROLL_LANES for (size_t r = 0; r < R; ++r) sum[r] = _mm512_dpbusd_epi32(sum[r], BroadcastU32(u[r] + 32 * h + 4 * q), a);
      }
      AddSubBlock<Dec::kMin>(acc, sum, in.da + blk * 16, in.ms + blk * 16, [&](size_t r) { return dw[r][h]; },
                             [&](size_t r) { return mw[r][h]; });
    }
  }
  QKV_UNROLL_LANES for (size_t r = 0; r < R; ++r) out[r] = acc[r];
}

// TileLanes of the 256-value types: each super-block of the R rows decoded
// by UnpackK (as PackRows does, without the transposition), then per
// sub-block the packed kernel's f32 terms with the rows and inputs swapped
// between registers and broadcasts: the same products, so the same results.
// Q6_K (kSuper) sums a super-block's integers first, times sc_j.
template <class Dec, size_t R>
QKV_VNNI_TARGET void TileLanesK(const uint8_t* HWY_RESTRICT w, size_t stride, size_t nsb, const LanesInputs& in,
                                __m512* HWY_RESTRICT out) {
  using T = PackedType<Dec>;
  using B = typename T::Block;
  constexpr size_t kLines = T::kS / 4;
  HWY_ALIGN uint8_t u[R][kQK];
  HWY_ALIGN float sd[R][16], sm[R][16];
  __m512 acc[R], super_f[R];  // super_f: a super-block's f32 sums (not kSuper)
  __m512i super[R];
  // Without kSuper the accumulators stay in memory, touched once a
  // super-block (in registers beside super_f and the sums, the loop spilled).
  HWY_ALIGN float acc_mem[R * 16];
  float* acc_k = acc_mem;
  __asm__("" : "+r"(acc_k));
  QKV_UNROLL_LANES for (size_t r = 0; r < R; ++r) {
    acc[r] = super_f[r] = _mm512_setzero_ps();
    super[r] = _mm512_setzero_si512();
    if constexpr (!T::kSuper) _mm512_store_ps(acc_k + 16 * r, acc[r]);
  }
  for (size_t i = 0; i < nsb; ++i) {
    QKV_UNROLL_LANES for (size_t r = 0; r < R; ++r) {
      const uint8_t* b = w + r * stride + i * sizeof(B);
      PrefetchSpan<sizeof(B)>(b + kLanesPrefetchBytes);
      UnpackK<Dec>(b, u[r], sd[r], sm[r]);
    }
    for (size_t j = 0; j < T::kSubs; ++j) {
      const size_t sub = i * T::kSubs + j;
      const __m512i corr = _mm512_loadu_si512(in.corr + sub * 16);
      __m512i sum[R];
      QKV_UNROLL_LANES for (size_t r = 0; r < R; ++r) sum[r] = corr;
      QKV_UNROLL_LANES for (size_t q = 0; q < kLines; ++q) {
        const __m512i a = _mm512_loadu_si512(in.act + (sub * kLines + q) * 16);
        QKV_UNROLL_LANES for (size_t r = 0; r < R; ++r) {
          sum[r] = _mm512_dpbusd_epi32(sum[r], BroadcastU32(u[r] + j * T::kS + 4 * q), a);
        }
      }
      if constexpr (T::kSuper) {
        QKV_UNROLL_LANES for (size_t r = 0; r < R; ++r) {
          int32_t sc;
          std::memcpy(&sc, &sd[r][j], sizeof(sc));
          const __m512i p = _mm512_mullo_epi32(sum[r], _mm512_set1_epi32(sc));
          super[r] = j == 0 ? p : _mm512_add_epi32(super[r], p);
        }
        if (j + 1 == T::kSubs) {
          const __m512 da = _mm512_loadu_ps(in.da + sub * 16);
          QKV_UNROLL_LANES for (size_t r = 0; r < R; ++r) {
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(super[r]), _mm512_mul_ps(da, _mm512_set1_ps(sm[r][0])), acc[r]);
          }
        }
        continue;
      }
      // The packed kernel's terms: the super-block's f32 sum without da,
      // times da at its last sub-block.
      QKV_UNROLL_LANES for (size_t r = 0; r < R; ++r) {
        const __m512 prev = j == 0 ? _mm512_setzero_ps() : super_f[r];
        super_f[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[r]), _mm512_set1_ps(sd[r][j]), prev);
      }
      if constexpr (T::kMin) {
        const __m512 msv = _mm512_loadu_ps(in.ms + sub * 16);
        QKV_UNROLL_LANES for (size_t r = 0; r < R; ++r) {
          super_f[r] = _mm512_fmadd_ps(msv, _mm512_set1_ps(sm[r][j]), super_f[r]);
        }
      }
      if (j + 1 == T::kSubs) {
        const __m512 da = _mm512_loadu_ps(in.da + sub * 16);
        QKV_UNROLL_LANES for (size_t r = 0; r < R; ++r) {
          _mm512_store_ps(acc_k + 16 * r, _mm512_fmadd_ps(super_f[r], da, _mm512_load_ps(acc_k + 16 * r)));
        }
      }
    }
  }
  QKV_UNROLL_LANES for (size_t r = 0; r < R; ++r) out[r] = T::kSuper ? acc[r] : _mm512_load_ps(acc_k + 16 * r);
}

// The tile of R rows for Dec's block size: nb blocks (super-blocks) per row.
template <class Dec, size_t R>
QKV_VNNI_INLINE void TileLanesOf(const uint8_t* w, size_t stride, size_t nb, const LanesInputs& in, __m512* out) {
  if constexpr (PackedType<Dec>::kK) {
    TileLanesK<Dec, R>(w, stride, nb, in, out);
  } else {
    TileLanes<Dec, R>(w, stride, nb, in, out);
  }
}

template <class Dec>
QKV_VNNI_TARGET void GemmLanesType(const uint8_t* base, size_t cols, const float* tables, size_t M, float* y,
                                   size_t ldy, size_t n_rows) {
  using T = PackedType<Dec>;
  const size_t nb = cols / T::kValues, rb = nb * sizeof(typename T::Block);
  const LanesInputs in(tables, cols, cols / T::kS);
  // 16 rows at a time (two tiles), their outputs transposed to rows in lanes
  // and stored per input.
  for (size_t r0 = 0; r0 < n_rows; r0 += 16) {
    const size_t n = std::min<size_t>(16, n_rows - r0);
    __m512i v[16];
    __m512* f = reinterpret_cast<__m512*>(v);
    for (size_t h = 0; h < 16; h += kLanesRows) {
      if (h + kLanesRows <= n) {
        TileLanesOf<Dec, kLanesRows>(base + (r0 + h) * rb, rb, nb, in, f + h);
        continue;
      }
      for (size_t r = h; r < 16; ++r) f[r] = _mm512_setzero_ps();
      for (size_t r = h; r < n; ++r) TileLanesOf<Dec, 1>(base + (r0 + r) * rb, rb, nb, in, f + r);
    }
    avx512::Transpose16x16(v);  // v[c] lane r: output (r0 + r, c)
    const __mmask16 rows = static_cast<__mmask16>(n == 16 ? 0xFFFF : (1u << n) - 1);
    for (size_t c = 0; c < M; ++c) _mm512_mask_storeu_ps(y + c * ldy + r0, rows, _mm512_castsi512_ps(v[c]));
  }
}

#undef QKV_UNROLL_LANES

HWY_INLINE bool GemmLanes(DType t, const void* rows, size_t cols, const float* tables, size_t M, float* y,
                          size_t ldy, size_t n_rows) {
  return WithVnniDecoder(t, [&](auto tag) {
    GemmLanesType<typename decltype(tag)::type>(static_cast<const uint8_t*>(rows), cols, tables, M, y, ldy, n_rows);
  });
}

HWY_INLINE bool LanesTables(DType t, const void* xa, size_t cols, size_t M, float* tables) {
  return WithVnniDecoder(t, [&](auto tag) {
    LanesTablesType<typename decltype(tag)::type>(static_cast<const uint8_t*>(xa), cols, M, tables);
  });
}

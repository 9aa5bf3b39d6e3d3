// Packed-weight AVX-512 VNNI GEMM of the ggml block types, for batches of
// kQuantGemmPackedMinInputs inputs or more (batched decode and prefill): rows
// in lanes, so that no dot product needs a horizontal sum, and each weight
// block decoded once per call and panel of inputs.
//
// Packing: 16 weight rows at a time are decoded once per call by the matvec's
// block decoders (unsigned bytes u = q + offset) and transposed so that line
// k (64 bytes) holds values 4k .. 4k + 3 of each of the 16 rows: one
// vpdpbusd of a line against an input's 4 activation bytes k .. k + 3
// (broadcast) adds those 4 products to each row's int32 lane. Beside the
// lines go each sub-block's weight scale dw (d, or d * sc for the K-quants)
// and min factor mw (Q4_1 / Q5_1: m; Q2_K, Q4_K, Q5_K: -dmin * m_j) per row.
// Row groups (kernels/quant/row_groups.h) are the lines already, bar the
// nibble masks; they are packed a 32-row block ahead, between the tiles'
// steps (GroupPacker).
//
// Per sub-block j of S values (32, or 16 for Q2_K, Q3_K and Q6_K) and input
// m, the integer sum starts at -offset * (the sub-block's activation sum), so
// it ends exact and offset-free, then for the 32-value types
//   acc[m] += float(sum) * (da[m][j] * dw[j]) + ms[m][j] * mw[j],
// da the activation block's scale, ms its min factor (Q8_1's s). The
// K-quants' activation (Q8_K) has one scale per super-block: per sub-block
//   sup[m] += float(sum) * dw[j] + ms[m][j] * mw[j]  (ms: the sub-block's bsums),
// and at its last sub-block acc[m] += sup[m] * da[m]: two f32 operations a
// sub-block instead of three (1.1B Q4_K_M prefill 256 +3% to +19% in four
// alternated rounds, docs/design.md). These are ggml's terms summed in
// another order than its 8-lane kernels (which sum a super-block's integers
// first): the outputs differ from quant_dot_rows' by f32 rounding, within
// the bound of tests/test_quant_matmul.cc. Q6_K sums its super-blocks'
// integers first (PackedType::kSuper): acc[m] += float(sum_j sc_j * sum_j) * (da[m] * d).
//
// A tile is 32 rows (two packed groups) x kPackedC inputs: 2 x kPackedC
// int32 sums and as many f32 accumulators in registers; per 4 columns two
// line loads and one broadcast per input feed 2 x kPackedC vpdpbusd.
//
// The inputs come interleaved, once per batch (PackedActTables): per tile of
// kPackedC inputs and sub-block, the tile's scales, min factors and offset
// sums side by side, then its activation bytes as [4 columns][input][4
// bytes], so a tile reads one sequential stream through one pointer. From
// separate activation rows (6 streams, 6 row pointers) the tile ran at 387
// GOP/s a core with 600 inputs of 576 columns (the inputs in L2) against 535
// interleaved, equal (~530) with the inputs in L1 (a standalone copy of the
// tile loop).
// Against the tile kernel of gemm_vnni-inl.h (4 rows x 4 inputs, horizontal
// sums per block), 143M synthetic model, 2 threads, Xeon guest without AMX:
// prefill 512 Q4_K_M 399 -> ~1450 tok/s, Q4_0 498 -> ~1450; 16 sequences of
// Q4_K_M 307 -> 700-760 (scripts/speed_table.sh, docs/design.md).
//
// Included by kernels/quant/vec_dot.cc after gemm_vnni-inl.h, inside its
// per-target namespace when HWY_TARGET == HWY_AVX3_DL.

constexpr size_t kPackedC = kQuantGemmTileInputs;
constexpr size_t kPackPrefetchBytes = 4096;

// Loops over a tile's inputs unroll whole, so that their sums and
// accumulators stay in registers (QKV_UNROLL's 4 left C = 6 arrays on the stack).
#define QKV_UNROLL_TILE _Pragma("GCC unroll 16")

// What the packed kernel needs of a weight type beyond its VNNI decoder: the
// sub-block size and where each sub-block's scale and min come from.
template <class Dec, bool = Dec::Block::kValues == kQK>
struct PackedType {  // 32-value blocks: one sub-block each
  using Block = typename Dec::Block;
  using Act = typename Dec::Act;
  static constexpr size_t kValues = 32, kS = 32, kSubs = 1;
  static constexpr bool kK = false, kMin = Dec::kMin, kSuper = false;
};
template <class Dec>
struct PackedType<Dec, true> {  // 256-value super-blocks against Q8_K
  using Block = typename Dec::Block;
  using Act = BlockQ8_K;
  static constexpr size_t kValues = kQK, kS = Dec::kSub, kSubs = kQK / kS;
  static constexpr bool kK = true;
  static constexpr bool kMin =
      std::is_same_v<Block, BlockQ2_K> || std::is_same_v<Block, BlockQ4_K> || std::is_same_v<Block, BlockQ5_K>;
  // Sums a super-block's integers first, as ggml's Q6_K kernel does:
  // acc += float(sum_j sc_j * isum_j) * (da * d). With an f32 step per
  // sub-block instead, the rounding differences flip activation roundings
  // downstream: tinystories-3M Q6_K's mean KLD from llama.cpp's logits
  // (qkv perplexity --kl-divergence, first chunk) was 6.8e-5, 16% of the
  // preset's own 4.2e-4; the decode matvec, which sums first, 2.4e-6.
  static constexpr bool kSuper = std::is_same_v<Block, BlockQ6_K>;
};

// One block's unsigned values at out (256-value types: Unpack) and its
// sub-block scales sd[j] = d * sc_j and min factors sm[j] (kMin), as vectors;
// kSuper: sd[j] = sc_j (int32 bits) and sm[0] = d, sm[j > 0] = 0.
template <class Dec>
QKV_VNNI_INLINE void UnpackK(const uint8_t* b, uint8_t* HWY_RESTRICT out, float* sd, float* sm) {
  using T = PackedType<Dec>;
  using B = typename T::Block;
  constexpr __mmask16 kSubsMask = static_cast<__mmask16>((1u << T::kSubs) - 1);
  __m512i u[4];
  const __m512i sc = Dec::Unpack(b, u);
  for (int c = 0; c < 4; ++c) _mm512_storeu_si512(out + 64 * c, u[c]);
  if constexpr (T::kSuper) {
    _mm512_mask_storeu_epi32(sd, kSubsMask, sc);
    _mm512_mask_storeu_ps(sm, kSubsMask, _mm512_maskz_mov_ps(1, _mm512_set1_ps(HalfAt(b + offsetof(B, d)))));
    return;
  }
  _mm512_mask_storeu_ps(sd, kSubsMask, _mm512_mul_ps(_mm512_set1_ps(HalfAt(b + offsetof(B, d))), _mm512_cvtepi32_ps(sc)));
  if constexpr (T::kMin) {
    __m512i m;
    if constexpr (std::is_same_v<B, BlockQ2_K>) {
      m = _mm512_srli_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(B, scales)))), 4);
    } else {
      uint64_t scs, mins;
      K4ScalesMins(b + offsetof(B, scales), &scs, &mins);
      m = _mm512_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(mins)));
    }
    const __m512 dmin = _mm512_set1_ps(-HalfAt(b + offsetof(B, dmin)));
    _mm512_mask_storeu_ps(sm, kSubsMask, _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(m)));
  }
}

// v[0 .. n) to dst + 64 bytes * k. (A loop to a variable n became a copy of
// v through the stack by rep movsq: 6% of a batched decode step.)
template <class T>
QKV_VNNI_INLINE void StoreLines(const __m512i (&v)[16], size_t n, T* dst) {
  auto* out = reinterpret_cast<uint8_t*>(dst);
  if (n == 16) {
    QKV_UNROLL_TILE for (size_t k = 0; k < 16; ++k) _mm512_store_si512(out + 64 * k, v[k]);
    return;
  }
  for (size_t k = 0; k < n; ++k) _mm512_store_si512(out + 64 * k, v[k]);
}

// 16 rows x subs values, row r at src + r * ld (ld a multiple of 16), as
// lines: dst[j * 16 + r].
QKV_VNNI_INLINE void TransposeScales(const float* src, size_t ld, size_t subs, float* HWY_RESTRICT dst) {
  for (size_t j = 0; j < subs; j += 16) {
    __m512i v[16];
    for (size_t r = 0; r < 16; ++r) v[r] = _mm512_castps_si512(_mm512_load_ps(src + r * ld + j));
    avx512::Transpose16x16(v);
    StoreLines(v, std::min<size_t>(16, subs - j), dst + j * 16);
  }
}

// A group of 16 weight rows (n < 16 real, the rest zero) packed: w (cols / 4
// lines of 16 rows x 4 bytes), dw and mw (cols / S sub-blocks x 16 rows;
// kSuper: the int32 sc_j, and d at each super-block's first sub-block).
// Scratch: rowbuf (16 * cols bytes), sd and sm (16 rows of ld floats each,
// ld >= subs rounded up to 16): the rows' values and scales before the
// transposes.
template <class Dec>
QKV_VNNI_TARGET void PackRows(const uint8_t* rows, size_t stride, size_t n, size_t cols, uint8_t* HWY_RESTRICT rowbuf,
                              float* HWY_RESTRICT sd, float* HWY_RESTRICT sm, size_t ld, uint32_t* HWY_RESTRICT w,
                              float* HWY_RESTRICT dw, float* HWY_RESTRICT mw) {
  using T = PackedType<Dec>;
  using B = typename T::Block;
  const size_t nb = cols / T::kValues, subs = cols / T::kS;
  for (size_t r = 0; r < 16; ++r) {
    uint8_t* out = rowbuf + r * cols;
    float* d = sd + r * ld;
    float* m = sm + r * ld;
    if (r >= n) {
      std::memset(out, 0, cols);
      std::memset(d, 0, ld * sizeof(float));
      std::memset(m, 0, ld * sizeof(float));
      continue;
    }
    const uint8_t* row = rows + r * stride;
    // The rows are contiguous and read once: prefetch kPackPrefetchBytes
    // ahead (batched decode streams every weight once per step, and the
    // unpacking otherwise waited on each row's first loads).
    for (size_t o = 0; o < stride; o += 64) _mm_prefetch(reinterpret_cast<const char*>(row + kPackPrefetchBytes + o), _MM_HINT_T0);
    if constexpr (T::kK) {
      for (size_t i = 0; i < nb; ++i) UnpackK<Dec>(row + i * sizeof(B), out + i * kQK, d + i * T::kSubs, m + i * T::kSubs);
    } else {
      for (size_t i = 0; i < nb; i += 2) {
        const bool pair = i + 1 < nb;
        const __m512i u = Dec::Unpack2(row + i * sizeof(B), row + (pair ? i + 1 : i) * sizeof(B));
        if (pair) {
          _mm512_storeu_si512(out + i * 32, u);
        } else {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i * 32), _mm512_castsi512_si256(u));
        }
      }
      for (size_t i = 0; i < nb; ++i) {
        d[i] = HalfAt(row + i * sizeof(B) + offsetof(B, d));
        if constexpr (T::kMin) m[i] = HalfAt(row + i * sizeof(B) + offsetof(B, m));
      }
    }
  }
  TransposeScales(sd, ld, subs, dw);
  if constexpr (T::kMin || T::kSuper) TransposeScales(sm, ld, subs, mw);
  // 64 columns of the 16 rows at a time: row r's 16 words of 4 values,
  // transposed so that line k holds word k of every row.
  for (size_t c = 0; c < cols; c += 64) {
    __m512i v[16];
    const size_t words = std::min<size_t>(16, (cols - c) / 4);
    const __mmask16 lanes = static_cast<__mmask16>(words == 16 ? 0xFFFF : (1u << words) - 1);
    for (size_t r = 0; r < 16; ++r) v[r] = _mm512_maskz_loadu_epi32(lanes, rowbuf + r * cols + c);
    avx512::Transpose16x16(v);
    StoreLines(v, words, w + c / 4 * 16);
  }
}

// A K-quant row group packed: lines by GroupDecoderK, dw and mw as UnpackK
// makes them (Q6_K, kSuper: sc_j as int32 and d at each super-block's first
// sub-block).
template <class Dec>
QKV_GROUP_TARGET void PackGroupK(const uint8_t* group, size_t cols, uint32_t* HWY_RESTRICT w, float* HWY_RESTRICT dw,
                                 float* HWY_RESTRICT mw) {
  using D = GroupDecoderK<Dec>;
  static_assert(PackedType<Dec>::kS == D::kS, "one sub-block size");
  const D dec;
  for (size_t i = 0; i < cols / kQK; ++i) {
    const uint8_t* column = group + i * D::kColumnBytes;
    for (size_t o = 0; o < D::kColumnBytes; o += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(column + kPackPrefetchBytes + o), _MM_HINT_T0);
    }
    const __m512 d = D::D(column);
    float* dwi = dw + i * D::kSubs * 16;
    float* mwi = mw + i * D::kSubs * 16;
    for (size_t j = 0; j < D::kSubs; ++j) {
      if constexpr (D::kQ6) {
        _mm512_store_si512(dwi + j * 16, D::Scale6(column, j));
        _mm512_store_ps(mwi + j * 16, j == 0 ? d : _mm512_setzero_ps());
      } else {
        _mm512_store_ps(dwi + j * 16, _mm512_mul_ps(d, _mm512_cvtepi32_ps(D::ScaleMin(column, j, false))));
        _mm512_store_ps(mwi + j * 16, _mm512_mul_ps(D::NegDmin(column), _mm512_cvtepi32_ps(D::ScaleMin(column, j, true))));
      }
    }
    for (size_t p = 0; p < D::kPairs; ++p) {
      __m512i u[2 * D::kLines];
      dec.Pair(column, p, u);
      for (size_t k = 0; k < 2 * D::kLines; ++k) _mm512_store_si512(w + (64 * i + 2 * D::kLines * p + k) * 16, u[k]);
    }
  }
}

// Block column i of a row group of a 32-value type (kernels/quant/row_groups.h)
// packed: its words already hold the 16 rows in lanes (GroupDecoder gives the
// lines), dw the 16 rows' d and mw (Q4_1 / Q5_1) their m; no transposition.
template <class Dec>
QKV_GROUP_INLINE void PackColumn32(const GroupDecoder<Dec>& dec, const uint8_t* group, size_t i,
                                   uint32_t* HWY_RESTRICT w, float* HWY_RESTRICT dw, float* HWY_RESTRICT mw) {
  using D = GroupDecoder<Dec>;
  const uint8_t* column = group + i * D::kColumnBytes;
  for (size_t o = 0; o < D::kColumnBytes; o += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(column + kPackPrefetchBytes + o), _MM_HINT_T0);
  }
  _mm512_store_ps(dw + i * 16, D::Scales(column));
  if constexpr (D::kMin) _mm512_store_ps(mw + i * 16, D::Mins(column));
  __m512i u[8];
  dec.Lines(column, u);
  for (size_t q = 0; q < 8; ++q) _mm512_store_si512(w + (8 * i + q) * 16, u[q]);
}

// Where a block's two groups of lines (cols / 4 lines of 16 rows x 4 bytes)
// and scales (dw, mw: cols / S sub-blocks x 16 rows) go.
struct PackSet {
  uint32_t* w[2];
  float* dw[2];
  float* mw[2];
};

// Row groups of a 32-row block packed in steps, so that the next block's
// packing runs between the current block's tile steps (one Step() per
// sub-block, TilePacked): packed alone, between the tiles, it left the
// vpdpbusd ports idle while it ran, and the tiles left the others idle.
// The 32-value types go one block column of a group a step (their words are
// the lines already), the K-quants a group a step (PackGroupK).
// Start(block, n, set) names the block (n rows, a multiple of 16; zero rows
// past them) and the set of lines and scales it goes to, Finish() does what
// the steps left. Zen 5 guest, 2 threads, against packing between the tiles:
// `bench_linear --benchmark_filter='^matmul_row_groups/(q4_0|q5_0)/5632x2048/16/2'`
// 848-857 against 754-793 GFLOP/s (Q4_0), 790-809 against 721-787 (Q5_0);
// 16 sequences of 143M Q4_K_M (its 576-column tensors Q5_0) 1700-1746
// against 1531-1599 tok/s. Rows in the file's layout (PackRows) are not
// packed in steps: so, K-quant batches of 16 ran slower (bench_linear
// '^matmul/(q4_k|q6_k)/(2048x768|5632x2048)/16/2', four rounds: Q6_K 4-15%,
// Q4_K 1-4%), likely as their 16x16 transposes take the shuffle port that
// vpdpbusd shares; with only their unpacking in steps, mixed (-16% to +12%).
template <class Dec>
struct GroupPacker {
  static constexpr bool kColumns = kGroupDecoder<Dec>;
  // A group's bytes; a set's bytes of lines and of scales per group.
  const size_t cols, group_bytes, line_bytes, scale_bytes, steps;  // steps per group
  std::conditional_t<kColumns, GroupDecoder<Dec>, char> dec;
  const uint8_t* groups = nullptr;
  size_t next = 0, total = 0;
  PackSet set{};

  GroupPacker(size_t cols_, size_t group_bytes_, size_t line_bytes_, size_t scale_bytes_)
      : cols(cols_), group_bytes(group_bytes_), line_bytes(line_bytes_), scale_bytes(scale_bytes_),
        steps(kColumns ? cols_ / 32 : 1) {}
  QKV_GROUP_INLINE void Start(const uint8_t* block, size_t n, const PackSet& s) {
    groups = block, set = s, next = 0, total = n / 16 * steps;
    if (n < 32) {  // past the last group (n_rows % 32 == 16): zero rows
      std::memset(set.w[1], 0, line_bytes);
      std::memset(set.dw[1], 0, scale_bytes);
      std::memset(set.mw[1], 0, scale_bytes);
    }
  }
  QKV_GROUP_INLINE void Step() {
    if (next == total) return;
    const size_t g = next / steps, i = next % steps;
    ++next;
    if constexpr (kColumns) {
      PackColumn32<Dec>(dec, groups + g * group_bytes, i, set.w[g], set.dw[g], set.mw[g]);
    } else {
      PackGroupK<Dec>(groups + g * group_bytes, cols, set.w[g], set.dw[g], set.mw[g]);
    }
  }
  QKV_GROUP_INLINE void Finish() {
    while (next < total) Step();
  }
};

// No steps between the tiles (rows, packed before them).
struct NoSteps {
  HWY_INLINE void Step() {}
};

// 4 bytes at p in every 32-bit lane by vbroadcastss from memory, a load-port
// operation: the vpbroadcastd that the compiler makes of _mm512_set1_epi32
// also took a shuffle port here, which vpdpbusd shares (bench/bench_isa.cc,
// this kernel's k-step in a loop: 4.26 against 5.02 G vpdpbusd/s per core
// on the Xeon guest; on the Zen 5 guest both run at the port's peak, ~7.0).
QKV_VNNI_INLINE __m512i BroadcastU32(const uint8_t* p) {
  using U32 = uint32_t __attribute__((may_alias, aligned(1)));
  __m512i v;
  __asm__("vbroadcastss %1, %0" : "=v"(v) : "m"(*reinterpret_cast<const U32*>(p)));
  return v;
}

// Where sub-block j's activation bytes start in an input's quantized row.
template <class Dec>
QKV_VNNI_INLINE size_t PackedActOffset(size_t j) {
  using T = PackedType<Dec>;
  using A = typename T::Act;
  if constexpr (T::kK) return (j / T::kSubs) * sizeof(A) + offsetof(A, qs) + (j % T::kSubs) * T::kS;
  return j * sizeof(A) + offsetof(A, qs);
}

// The sum of 32 signed bytes at p: vpsadbw of the bytes + 128 against 0.
QKV_VNNI_INLINE int32_t ByteSum32(const void* p) {
  const __m256i q = _mm256_loadu_si256(static_cast<const __m256i*>(p));
  const __m256i u = _mm256_sad_epu8(_mm256_xor_si256(q, _mm256_set1_epi8(-128)), _mm256_setzero_si256());
  const __m128i h = _mm_add_epi64(_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1));
  return static_cast<int32_t>(_mm_cvtsi128_si64(_mm_add_epi64(h, _mm_unpackhi_epi64(h, h)))) - 32 * 128;
}

// The packed kernel's input tables for M inputs (kernels/quant/vec_dot.h):
// tiles of kPackedC inputs from input 0, the last one of M % kPackedC if
// that is not 0; the tile from input m at tables + m * PackedFloatsPerInput
// with its width w (inputs in it):
//   per sub-block j (subs = cols / S), 3 * w floats at j * 3 * w: da (the
//     activation scale of sub-block j), ms (its min factor, kMin, else 0)
//     and corr (-offset * the sub-block's activation sum, int32), w each;
//   then, from float 3 * subs * w on, the activation bytes: sub-block j at
//     byte j * S * w, as [S / 4 column quads][w inputs][4 bytes].
template <class Dec>
HWY_INLINE size_t PackedFloatsPerInput(size_t cols) {
  return 3 * (cols / PackedType<Dec>::kS) + cols / 4;
}

// Sub-block j's terms of one input's quantized row: da (the activation
// scale), ms (its min factor for the types with a min, else 0; Q8_K: the
// sub-block's sum, the kernels apply da per super-block) and corr
// (-offset * the sub-block's activation sum), as both kernels' tables hold them.
template <class Dec>
QKV_VNNI_INLINE void SubBlockTerms(const uint8_t* row, size_t j, float* da, float* ms, int32_t* corr) {
  using T = PackedType<Dec>;
  using A = typename T::Act;
  int32_t asum = 0;
  if constexpr (T::kK) {
    const uint8_t* blk = row + (j / T::kSubs) * sizeof(A);
    float dk;
    std::memcpy(&dk, blk + offsetof(A, d), sizeof(float));
    int16_t bs[2] = {0, 0};
    const size_t n16 = T::kS / 16;
    std::memcpy(bs, blk + offsetof(A, bsums) + (j % T::kSubs) * n16 * 2, n16 * 2);
    asum = bs[0] + (n16 == 2 ? bs[1] : 0);
    *da = dk;
    *ms = T::kMin ? static_cast<float>(asum) : 0.0f;
  } else {
    *da = HalfAt(row + j * sizeof(A) + offsetof(A, d));
    if constexpr (T::kMin) {
      *ms = HalfAt(row + j * sizeof(A) + offsetof(A, s));
    } else {
      *ms = 0.0f;
    }
    if constexpr (Dec::kOffset != 0) asum = ByteSum32(row + j * sizeof(A) + offsetof(A, qs));
  }
  *corr = -Dec::kOffset * asum;
}

template <class Dec>
QKV_VNNI_TARGET void PackedActTables(const uint8_t* xa, size_t cols, size_t M, float* HWY_RESTRICT tables) {
  using T = PackedType<Dec>;
  using A = typename T::Act;
  const size_t ab = cols / A::kValues * sizeof(A), subs = cols / T::kS, per = PackedFloatsPerInput<Dec>(cols);
  for (size_t m0 = 0; m0 < M; m0 += kPackedC) {
    const size_t w = std::min(kPackedC, M - m0);
    float* tile = tables + m0 * per;
    uint8_t* bytes = reinterpret_cast<uint8_t*>(tile + 3 * subs * w);
    for (size_t c = 0; c < w; ++c) {
      const uint8_t* row = xa + (m0 + c) * ab;
      for (size_t j = 0; j < subs; ++j) {
        float* t = tile + j * 3 * w;
        int32_t corr;
        SubBlockTerms<Dec>(row, j, &t[c], &t[w + c], &corr);
        std::memcpy(t + 2 * w + c, &corr, sizeof(corr));
        // The sub-block's bytes, 4 columns at a time, beside the other inputs'.
        const uint8_t* src = row + PackedActOffset<Dec>(j);
        uint8_t* dst = bytes + j * T::kS * w + 4 * c;
        for (size_t q = 0; q < T::kS / 4; ++q) std::memcpy(dst + q * 4 * w, src + 4 * q, 4);
      }
    }
  }
}

// A tile of C inputs (its part of the tables at tile, see PackedActTables)
// x 32 packed rows (groups at w[0], w[1]): y[m * ldy + r] for m < C, r < n.
// steps->Step() runs once per sub-block (the next block's packing).
template <class Dec, size_t C, class Steps>
QKV_VNNI_TARGET void TilePacked(const float* HWY_RESTRICT tile, size_t subs, const uint32_t* const (&w)[2],
                                const float* const (&dw)[2], const float* const (&mw)[2], float* HWY_RESTRICT y,
                                size_t ldy, size_t n, Steps* steps) {
  using T = PackedType<Dec>;
  constexpr size_t kLines = T::kS / 4;
  const auto* bytes = reinterpret_cast<const uint8_t*>(tile + 3 * subs * C);
  const __mmask16 lo = static_cast<__mmask16>(n >= 16 ? 0xFFFF : (1u << n) - 1);
  const __mmask16 hi = static_cast<__mmask16>(n >= 32 ? 0xFFFF : n <= 16 ? 0 : (1u << (n - 16)) - 1);
  __m512 acc[C][2];
  __m512i super[C][2];  // kSuper: the super-block's integer sums
  __m512 super_f[C][2];  // the other K-quants: its f32 sums
  // Their accumulators in memory, touched once a super-block: in registers
  // beside the sums and super_f (36), the tile's loop spilled.
  HWY_ALIGN float acc_mem[C * 32];
  float* acc_k = acc_mem;
  __asm__("" : "+r"(acc_k));
  QKV_UNROLL_TILE for (size_t c = 0; c < C; ++c) {
    acc[c][0] = acc[c][1] = _mm512_setzero_ps();
    super[c][0] = super[c][1] = _mm512_setzero_si512();
    super_f[c][0] = super_f[c][1] = _mm512_setzero_ps();
    if constexpr (T::kK && !T::kSuper) {
      _mm512_store_ps(acc_k + 32 * c, acc[c][0]);
      _mm512_store_ps(acc_k + 32 * c + 16, acc[c][1]);
    }
  }
  for (size_t j = 0; j < subs; ++j) {
    steps->Step();
    const float* da = tile + j * 3 * C;
    const float* ms = da + C;
    const auto* corr = reinterpret_cast<const uint8_t*>(da + 2 * C);
    __m512i sum[C][2];
    QKV_UNROLL_TILE for (size_t c = 0; c < C; ++c) {
      sum[c][0] = Dec::kOffset != 0 ? BroadcastU32(corr + 4 * c) : _mm512_setzero_si512();
      sum[c][1] = sum[c][0];
    }
    const uint8_t* aj = bytes + j * T::kS * C;
    const uint32_t* w0 = w[0] + j * kLines * 16;
    const uint32_t* w1 = w[1] + j * kLines * 16;
    QKV_UNROLL_TILE for (size_t k = 0; k < kLines; ++k) {
      const __m512i l0 = _mm512_load_si512(w0 + k * 16), l1 = _mm512_load_si512(w1 + k * 16);
      QKV_UNROLL_TILE for (size_t c = 0; c < C; ++c) {
        const __m512i x = BroadcastU32(aj + 4 * (k * C + c));
        sum[c][0] = _mm512_dpbusd_epi32(sum[c][0], l0, x);
        sum[c][1] = _mm512_dpbusd_epi32(sum[c][1], l1, x);
      }
    }
    if constexpr (T::kSuper) {
      // The sub-block's sum times sc_j into the super-block's integer sum;
      // at its last sub-block one fused multiply-add with da * d.
      const __m512i sc0 = _mm512_load_si512(dw[0] + j * 16), sc1 = _mm512_load_si512(dw[1] + j * 16);
      const bool first = j % T::kSubs == 0, last = j % T::kSubs == T::kSubs - 1;
      QKV_UNROLL_TILE for (size_t c = 0; c < C; ++c) {
        const __m512i p0 = _mm512_mullo_epi32(sum[c][0], sc0), p1 = _mm512_mullo_epi32(sum[c][1], sc1);
        super[c][0] = first ? p0 : _mm512_add_epi32(super[c][0], p0);
        super[c][1] = first ? p1 : _mm512_add_epi32(super[c][1], p1);
      }
      if (last) {
        const size_t j0 = j + 1 - T::kSubs;
        const __m512 d0 = _mm512_load_ps(mw[0] + j0 * 16), d1 = _mm512_load_ps(mw[1] + j0 * 16);
        QKV_UNROLL_TILE for (size_t c = 0; c < C; ++c) {
          const __m512 s = _mm512_set1_ps(da[c]);
          acc[c][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(super[c][0]), _mm512_mul_ps(s, d0), acc[c][0]);
          acc[c][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(super[c][1]), _mm512_mul_ps(s, d1), acc[c][1]);
        }
      }
      continue;
    }
    // The 32-value types add into the accumulators; the K-quants into the
    // super-block's f32 sum without da (Q8_K's one scale per 256 values),
    // which times da goes into the accumulators at its last sub-block: two
    // f32 operations per sub-block, not three.
    __m512(&into)[C][2] = T::kK ? super_f : acc;
    const bool first = T::kK && j % T::kSubs == 0;
    const __m512 d0 = _mm512_load_ps(dw[0] + j * 16), d1 = _mm512_load_ps(dw[1] + j * 16);
    QKV_UNROLL_TILE for (size_t c = 0; c < C; ++c) {
      const __m512 s = _mm512_set1_ps(da[c]), z = _mm512_setzero_ps();
      into[c][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[c][0]), T::kK ? d0 : _mm512_mul_ps(s, d0), first ? z : into[c][0]);
      into[c][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[c][1]), T::kK ? d1 : _mm512_mul_ps(s, d1), first ? z : into[c][1]);
    }
    if constexpr (T::kMin) {
      const __m512 m0 = _mm512_load_ps(mw[0] + j * 16), m1 = _mm512_load_ps(mw[1] + j * 16);
      QKV_UNROLL_TILE for (size_t c = 0; c < C; ++c) {
        const __m512 s = _mm512_set1_ps(ms[c]);
        into[c][0] = _mm512_fmadd_ps(s, m0, into[c][0]);
        into[c][1] = _mm512_fmadd_ps(s, m1, into[c][1]);
      }
    }
    if (T::kK && j % T::kSubs == T::kSubs - 1) {
      QKV_UNROLL_TILE for (size_t c = 0; c < C; ++c) {
        const __m512 s = _mm512_set1_ps(da[c]);
        float* a = acc_k + 32 * c;
        _mm512_store_ps(a, _mm512_fmadd_ps(super_f[c][0], s, _mm512_load_ps(a)));
        _mm512_store_ps(a + 16, _mm512_fmadd_ps(super_f[c][1], s, _mm512_load_ps(a + 16)));
      }
    }
  }
  QKV_UNROLL_TILE for (size_t c = 0; c < C; ++c) {
    if constexpr (T::kK && !T::kSuper) {
      acc[c][0] = _mm512_load_ps(acc_k + 32 * c);
      acc[c][1] = _mm512_load_ps(acc_k + 32 * c + 16);
    }
    _mm512_mask_storeu_ps(y + c * ldy, lo, acc[c][0]);
    _mm512_mask_storeu_ps(y + c * ldy + 16, hi, acc[c][1]);
  }
}

template <class Dec, size_t C, class Steps>
struct PackedTiles {
  // Inputs [0, M) in tiles of C, the last C' < C by TilePacked<Dec, C'>
  // (the tables' tiles, `per` floats per input apart).
  QKV_VNNI_INLINE static void Run(size_t M, const float* tab, size_t per, size_t subs, const uint32_t* const (&w)[2],
                                  const float* const (&dw)[2], const float* const (&mw)[2], float* y, size_t ldy,
                                  size_t n, Steps* steps) {
    size_t m = 0;
    for (; m + C <= M; m += C) TilePacked<Dec, C>(tab + m * per, subs, w, dw, mw, y + m * ldy, ldy, n, steps);
    if constexpr (C > 1) {
      if (m < M) {
        PackedTiles<Dec, C - 1, Steps>::Run(M - m, tab + m * per, per, subs, w, dw, mw, y + m * ldy, ldy, n, steps);
      }
    }
  }
};

// kGroups: base holds row groups (n_rows a multiple of 16), each 32-row block
// packed during the previous block's tiles (GroupPacker); else rows, each
// block packed before its tiles (PackRows).
template <class Dec, bool kGroups = false>
QKV_VNNI_TARGET void GemmPackedType(const uint8_t* base, size_t cols, const float* tab, size_t M, float* y,
                                    size_t ldy, size_t n_rows) {
  using T = PackedType<Dec>;
  const size_t per = PackedFloatsPerInput<Dec>(cols);
  const size_t rb = cols / T::kValues * sizeof(typename T::Block);
  const size_t subs = cols / T::kS;
  // Scratch (64-byte aligned pieces): rows: the decoded rows of one group
  // and their scales, and one set of two packed groups with their dw and mw;
  // groups: two sets (the current block's, the next one's).
  const size_t n_sets = kGroups ? 2 : 1;
  const size_t lines = cols / 4 * 64, scales = subs * 16 * sizeof(float), ld = (subs + 15) / 16 * 16;
  static thread_local hwy::AlignedFreeUniquePtr<uint8_t[]> scratch;
  static thread_local size_t scratch_size = 0;
  auto up = [](size_t b) { return (b + 63) / 64 * 64; };
  const size_t rows_scratch = kGroups ? 0 : up(16 * cols) + 2 * up(16 * ld * sizeof(float));
  const size_t need = rows_scratch + n_sets * (2 * up(lines) + 4 * up(scales));
  if (need > scratch_size) {
    scratch = hwy::AllocateAligned<uint8_t>(need);
    scratch_size = need;
  }
  uint8_t* p = scratch.get();
  auto take = [&](size_t bytes) {
    uint8_t* q = p;
    p += up(bytes);
    return q;
  };
  PackSet sets[2];
  for (size_t k = 0; k < n_sets; ++k) {
    for (int g = 0; g < 2; ++g) {
      sets[k].w[g] = reinterpret_cast<uint32_t*>(take(lines));
      sets[k].dw[g] = reinterpret_cast<float*>(take(scales));
      sets[k].mw[g] = reinterpret_cast<float*>(take(scales));
    }
  }
  // (A lambda has its own target: clang does not give it the function's.)
  auto tiles = [&](const PackSet& set, size_t r, auto* steps) QKV_VNNI_TARGET {
    const uint32_t* const wc[2] = {set.w[0], set.w[1]};
    const float* const dwc[2] = {set.dw[0], set.dw[1]};
    const float* const mwc[2] = {set.mw[0], set.mw[1]};
    PackedTiles<Dec, kPackedC, std::remove_pointer_t<decltype(steps)>>::Run(
        M, tab, per, subs, wc, dwc, mwc, y + r, ldy, std::min<size_t>(32, n_rows - r), steps);
  };
  if constexpr (kGroups) {
    GroupPacker<Dec> packer(cols, kRowGroup * rb, lines, scales);
    packer.Start(base, std::min<size_t>(32, n_rows), sets[0]);
    packer.Finish();
    for (size_t r = 0, k = 0; r < n_rows; r += 32, k = 1 - k) {
      if (r + 32 < n_rows) packer.Start(base + (r + 32) * rb, std::min<size_t>(32, n_rows - r - 32), sets[1 - k]);
      tiles(sets[k], r, &packer);
      packer.Finish();
    }
  } else {
    auto* rowbuf = take(16 * cols);
    auto* sd = reinterpret_cast<float*>(take(16 * ld * sizeof(float)));
    auto* sm = reinterpret_cast<float*>(take(16 * ld * sizeof(float)));
    NoSteps none;
    for (size_t r = 0; r < n_rows; r += 32) {
      const size_t n = std::min<size_t>(32, n_rows - r);
      for (size_t g = 0; g < 2; ++g) {
        const size_t n_g = n > 16 * g ? std::min<size_t>(16, n - 16 * g) : 0;
        PackRows<Dec>(base + (r + 16 * g) * rb, rb, n_g, cols, rowbuf, sd, sm, ld, sets[0].w[g], sets[0].dw[g],
                      sets[0].mw[g]);
      }
      tiles(sets[0], r, &none);
    }
  }
}

#undef QKV_UNROLL_TILE

HWY_INLINE bool GemmPacked(DType t, const void* rows, size_t cols, const float* tab, size_t M, float* y, size_t ldy,
                           size_t n_rows) {
  return WithVnniDecoder(t, [&](auto tag) {
    GemmPackedType<typename decltype(tag)::type>(static_cast<const uint8_t*>(rows), cols, tab, M, y, ldy, n_rows);
  });
}

// The packed kernel on row groups; false for the types without them.
HWY_INLINE bool GemmPackedGroups(DType t, const void* groups, size_t cols, const float* tab, size_t M, float* y,
                                 size_t ldy, size_t n_rows) {
  bool done = false;
  WithVnniDecoder(t, [&](auto tag) {
    using Dec = typename decltype(tag)::type;
    if constexpr (kGroupDecoder<Dec> || kGroupDecoderK<Dec>) {
      GemmPackedType<Dec, true>(static_cast<const uint8_t*>(groups), cols, tab, M, y, ldy, n_rows);
      done = true;
    }
  });
  return done;
}

HWY_INLINE bool PackedTables(DType t, const void* xa, size_t cols, size_t M, float* tables) {
  return WithVnniDecoder(t, [&](auto tag) {
    PackedActTables<typename decltype(tag)::type>(static_cast<const uint8_t*>(xa), cols, M, tables);
  });
}

// Table floats per input for weights of type t (PackedFloatsPerInput).
HWY_INLINE size_t PackedTableFloats(DType t, size_t cols) {
  size_t n = 0;
  WithVnniDecoder(t, [&](auto tag) { n = PackedFloatsPerInput<typename decltype(tag)::type>(cols); });
  return n;
}

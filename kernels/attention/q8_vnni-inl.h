// Integer Q·K against a Q8_0 cache with AVX-512 VNNI (AVX3_DL only): the query
// rows quantized per 32-value block and the scores of 16 keys at a time.
//
// A Highway "-inl" header of the attention kernel: kernels/attention/attention.cc
// includes it once per SIMD target (foreach_target), after hwy/highway.h.
#if defined(QKV_KERNELS_ATTENTION_Q8_VNNI_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef QKV_KERNELS_ATTENTION_Q8_VNNI_INL_H_
#undef QKV_KERNELS_ATTENTION_Q8_VNNI_INL_H_
#else
#define QKV_KERNELS_ATTENTION_Q8_VNNI_INL_H_
#endif

#include "hwy/highway.h"
#include "kernels/attention/prefetch-inl.h"

// Only AVX3_DL has code here: another target's region would be empty (clang warns).
#if HWY_TARGET == HWY_AVX3_DL
HWY_BEFORE_NAMESPACE();
namespace qkv {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Query rows of one item quantized for an integer Q·K against a Q8_0 cache: per
// 32-value block b of row r, q ≈ dq[r][b] * q8[r][b*32 ..] with q8 in
// [-127, 127] (|error| <= dq/2 = max|q_block| / 254 per element), and
// corr[r][b] = -128 * Σ q8 over the block (see ScoresQ8Vnni). The scale of the
// scores is folded into q before quantizing.
struct QueryQ8 {
  int8_t* q8 = nullptr;     // [rows][d]
  float* dq = nullptr;      // [rows][nb]
  int32_t* corr = nullptr;  // [rows][nb]
  size_t d = 0, nb = 0;

  // false if a value is not finite (the f32 path then keeps NaN/inf semantics).
  bool Quantize(const float* qs, int64_t rows) {
    for (int64_t r = 0; r < rows; ++r) {
      for (size_t b = 0; b < nb; ++b) {
        const float* x = qs + r * d + b * kQ8BlockSize;
        float amax = 0.0f;
        for (size_t i = 0; i < kQ8BlockSize; ++i) amax = std::max(amax, std::fabs(x[i]));
        if (!std::isfinite(amax)) return false;
        const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        int8_t* q = q8 + r * d + b * kQ8BlockSize;
        int32_t sum = 0;
        for (size_t i = 0; i < kQ8BlockSize; ++i) {
          // |x * inv| <= 127 up to rounding, so the clamp only guards that rounding.
          const float v = std::min(127.0f, std::max(-127.0f, std::nearbyint(x[i] * inv)));
          q[i] = static_cast<int8_t>(v);
          sum += q[i];
        }
        dq[r * nb + b] = amax / 127.0f;
        corr[r * nb + b] = -128 * sum;
      }
    }
    return true;
  }
};

// Scores of nk keys (a block) against RB quantized query rows with AVX-512 VNNI:
// st[r*bk + j] = Σ_b dq[r][b] * dk[j][b] * Σ_{x in block b} q8[r][x] * k8[j][x].
// Keys sit along the lanes, 16 at a time: each 32-byte block of 16 key rows is
// transposed in registers into 8 vectors of 4-byte groups (lane j = bytes 4c..4c+3
// of key j), so one vpdpbusd with a broadcast 4-byte group of the query adds 4
// products to each of 16 keys' sums, and a block needs 8 of them per row; the
// integer block sums are exact. No horizontal reduction is left, and the
// transpose is paid once per key for all RB rows (the GQA group). vpdpbusd takes
// unsigned x signed bytes: K's sign bit is flipped (k + 128) and corr removes
// the 128 * Σq that adds. Against the f32 path this cuts the Q·K work ~3x for a
// GQA group of 8. Highway 1.0.3 has no such op (and its AVX3_DL target does not
// enable avx512vnni, which every AVX3_DL CPU has), hence the intrinsics. The
// attribute names the target's whole feature set: clang replaces the region's
// target features with a function's own (g++ adds them).
template <int RB>
__attribute__((target(HWY_TARGET_STR ",avx512vnni"))) void ScoresQ8Vnni(
    const QueryQ8& qq, int64_t r0, const uint8_t* kblk, int64_t rs, size_t nk, float* st, size_t bk,
    const RowPrefetch* pf) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i take_lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
  const __m512i take_hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
  const size_t d = qq.d, nb = qq.nb;
  for (size_t jg = 0; jg < nk; jg += 16) {
    const size_t ng = std::min<size_t>(16, nk - jg);
    // Lanes past the block's end repeat its last key; the caller sets their
    // scores to -inf.
    const uint8_t* row[16];
    int32_t off[16];
    for (size_t j = 0; j < 16; ++j) {
      const size_t jj = std::min(j, ng - 1);
      row[j] = kblk + static_cast<int64_t>(jg + jj) * rs;
      off[j] = static_cast<int32_t>(static_cast<int64_t>(jj) * rs);
    }
    const __m512i offsets = _mm512_loadu_si512(off);
    const uint8_t* first = kblk + static_cast<int64_t>(jg) * rs;
    __m512 score[RB];
    for (int r = 0; r < RB; ++r) score[r] = _mm512_setzero_ps();
    for (size_t b = 0; b < nb; ++b) {
      // The group's prefetches spread over its 32-value blocks, a few keys'
      // rows each: all 16 keys' at once measured ~10% slower, warm and cold.
      if (pf) {
        const size_t per = (ng + nb - 1) / nb, k0 = b * per;
        if (k0 < ng) pf->Keys(pf->from + static_cast<int64_t>(jg + k0), static_cast<int64_t>(std::min(per, ng - k0)));
      }
      const size_t bo = b * sizeof(BlockQ8_0);
      // The 16 keys' f16 block scales: 4 bytes gathered at each block start
      // (scale + 2 quant bytes, dropped by the narrowing).
      const __m512i raw = _mm512_i32gather_epi32(offsets, first + bo, 1);
      const __m512 dk = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(raw));
      __m512i z[8], t[8], u[8], kt[8];
      for (int i = 0; i < 8; ++i) {
        const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row[i] + bo + 2));
        const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row[i + 8] + bo + 2));
        z[i] = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), flip);
      }
      // 8x8 transpose of 4-byte groups within each 256-bit half (keys 0-7 and 8-15),
      // then the halves' 128-bit pieces are regrouped so lane j is key j.
      for (int i = 0; i < 8; i += 2) {
        t[i] = _mm512_unpacklo_epi32(z[i], z[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(z[i], z[i + 1]);
      }
      for (int h = 0; h < 8; h += 4) {
        u[h + 0] = _mm512_unpacklo_epi64(t[h + 0], t[h + 2]);
        u[h + 1] = _mm512_unpackhi_epi64(t[h + 0], t[h + 2]);
        u[h + 2] = _mm512_unpacklo_epi64(t[h + 1], t[h + 3]);
        u[h + 3] = _mm512_unpackhi_epi64(t[h + 1], t[h + 3]);
      }
      for (int c = 0; c < 4; ++c) {
        kt[c] = _mm512_permutex2var_epi64(u[c], take_lo, u[c + 4]);
        kt[c + 4] = _mm512_permutex2var_epi64(u[c], take_hi, u[c + 4]);
      }
      for (int r = 0; r < RB; ++r) {
        const int64_t rr = r0 + r;
        const int8_t* q = qq.q8 + rr * static_cast<int64_t>(d) + b * kQ8BlockSize;
        __m512i acc = _mm512_set1_epi32(qq.corr[rr * static_cast<int64_t>(nb) + b]);
        for (int c = 0; c < 8; ++c) {
          int32_t group;
          std::memcpy(&group, q + 4 * c, 4);
          acc = _mm512_dpbusd_epi32(acc, kt[c], _mm512_set1_epi32(group));
        }
        const __m512 w = _mm512_mul_ps(dk, _mm512_set1_ps(qq.dq[rr * static_cast<int64_t>(nb) + b]));
        score[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), w, score[r]);
      }
    }
    for (int r = 0; r < RB; ++r) _mm512_storeu_ps(st + (r0 + r) * static_cast<int64_t>(bk) + jg, score[r]);
  }
}
}  // namespace HWY_NAMESPACE
}  // namespace qkv
HWY_AFTER_NAMESPACE();
#endif  // HWY_TARGET == HWY_AVX3_DL

#endif  // QKV_KERNELS_ATTENTION_Q8_VNNI_INL_H_

#include "kernels/quant/row_groups.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/error.h"
#include "kernels/quant/blocks.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/quant/row_groups.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

// The layout, target-independent: (halves, words) of a 32-value block type.
#ifndef QKV_KERNELS_QUANT_ROW_GROUPS_LAYOUT_
#define QKV_KERNELS_QUANT_ROW_GROUPS_LAYOUT_
namespace qkv {
namespace {

struct GroupLayout {
  size_t halves;  // leading 2-byte fields (d; Q4_1 / Q5_1: d, m)
  size_t words;   // 4-byte words after them (qh, qs)
};

inline bool LayoutOf(DType t, GroupLayout* out) {
  switch (t) {
    case DType::Q4_1:
    case DType::Q5_1: out->halves = 2; break;
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0:
    case DType::IQ4_NL: out->halves = 1; break;
    default: return false;
  }
  out->words = (dtype_block_bytes(t) - 2 * out->halves) / 4;
  return true;
}

}  // namespace
}  // namespace qkv
#endif

HWY_BEFORE_NAMESPACE();
namespace qkv {
namespace HWY_NAMESPACE {

// The integer values of a block's 32 weights (ggml's: Q4_0 nibble - 8,
// IQ4_NL's table), from its 16 nibble bytes.
HWY_INLINE void NibbleValues(DType t, const uint8_t* qs, int8_t* w) {
  for (size_t l = 0; l < 16; ++l) {
    const int lo = qs[l] & 15, hi = qs[l] >> 4;
    w[l] = static_cast<int8_t>(t == DType::IQ4_NL ? kIQ4NLValues[lo] : lo - 8);
    w[16 + l] = static_cast<int8_t>(t == DType::IQ4_NL ? kIQ4NLValues[hi] : hi - 8);
  }
}

// Group layout of the nibble types: per block column, 16 d (32 bytes), then
// 4 words of 16 rows (word c holds qs[4c .. 4c + 3]).
constexpr size_t kNibbleColumnBytes = 16 * sizeof(BlockQ4_0);
static_assert(sizeof(BlockQ4_0) == sizeof(BlockIQ4_NL), "one layout for both nibble types");

void GroupDotScalar(DType t, const uint8_t* groups, size_t cols, const BlockQ8_0* a, float* y, size_t n_groups) {
  const size_t nb = cols / 32;
  for (size_t g = 0; g < n_groups; ++g) {
    const uint8_t* group = groups + g * nb * kNibbleColumnBytes;
    for (size_t r = 0; r < kRowGroup; ++r) {
      float acc = 0.0f;
      for (size_t i = 0; i < nb; ++i) {
        const uint8_t* column = group + i * kNibbleColumnBytes;
        uint16_t d;
        std::memcpy(&d, column + 2 * r, 2);
        uint8_t qs[16];
        for (size_t c = 0; c < 4; ++c) std::memcpy(qs + 4 * c, column + 32 + 64 * c + 4 * r, 4);
        int8_t w[32];
        NibbleValues(t, qs, w);
        int32_t isum = 0;
        for (size_t k = 0; k < 32; ++k) isum += int32_t(w[k]) * int32_t(a[i].qs[k]);
        acc = std::fma(static_cast<float>(isum), f16_to_f32(d) * f16_to_f32(a[i].d), acc);
      }
      y[g * kRowGroup + r] = acc;
    }
  }
}

#if HWY_TARGET == HWY_AVX3_DL
// Highway 1.0.3's AVX3_DL does not enable avx512vnni (kernels/linear.cc has the same note).
#define QKV_GROUP_TARGET __attribute__((target("avx512vnni")))

// G groups (G x 16 rows, group g at w + g * gstride) against the activation:
// per block column, each 64-byte word register (one word of the 16 rows)
// gives its low and high nibbles (values 4c .. 4c + 3 and 16 + 4c ..), unsigned
// u = q + off (Q4_0: the nibble itself, off 8; IQ4_NL: its level + 128 by a
// byte shuffle), each dotted with the activation's matching 4 bytes
// (broadcast) by vpdpbusd, the sum started at -off * (the block's activation
// sum). Two sums per group halve the chain of dependent vpdpbusd.
template <bool kTable, size_t G>
QKV_GROUP_TARGET void GroupsVnni(const uint8_t* HWY_RESTRICT w, size_t gstride, size_t nb,
                                 const BlockQ8_0* HWY_RESTRICT a, const float* HWY_RESTRICT da,
                                 const int32_t* HWY_RESTRICT corr, float* HWY_RESTRICT y) {
  constexpr size_t kPrefetchBytes = 2048;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  __m512i table = _mm512_setzero_si512();
  if constexpr (kTable) {
    alignas(16) uint8_t levels[16];
    for (int i = 0; i < 16; ++i) levels[i] = static_cast<uint8_t>(kIQ4NLValues[i] + 128);
    table = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(levels)));
  }
  __m512 acc[G];
  for (size_t g = 0; g < G; ++g) acc[g] = _mm512_setzero_ps();
  for (size_t i = 0; i < nb; ++i) {
    int32_t aw[8];
    std::memcpy(aw, a[i].qs, 32);
    const __m512 dai = _mm512_set1_ps(da[i]);
    for (size_t g = 0; g < G; ++g) {
      const uint8_t* column = w + g * gstride + i * kNibbleColumnBytes;
      for (size_t o = 0; o < kNibbleColumnBytes; o += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(column + kPrefetchBytes + o), _MM_HINT_T0);
      }
      __m512i s0 = _mm512_set1_epi32(corr[i]), s1 = _mm512_setzero_si512();
      for (size_t c = 0; c < 4; ++c) {
        const __m512i v = _mm512_loadu_si512(column + 32 + 64 * c);
        __m512i lo = _mm512_and_si512(v, low4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
        if constexpr (kTable) {
          lo = _mm512_shuffle_epi8(table, lo);
          hi = _mm512_shuffle_epi8(table, hi);
        }
        s0 = _mm512_dpbusd_epi32(s0, lo, _mm512_set1_epi32(aw[c]));
        s1 = _mm512_dpbusd_epi32(s1, hi, _mm512_set1_epi32(aw[c + 4]));
      }
      const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(column)));
      acc[g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), _mm512_mul_ps(dw, dai), acc[g]);
    }
  }
  for (size_t g = 0; g < G; ++g) _mm512_storeu_ps(y + g * kRowGroup, acc[g]);
}

template <bool kTable>
QKV_GROUP_TARGET void GroupDotVnni(const uint8_t* groups, size_t cols, const BlockQ8_0* a, float* y, size_t n_groups) {
  const size_t nb = cols / 32, gstride = nb * kNibbleColumnBytes;
  // The activation's scales and offset corrections, once per call.
  static thread_local std::vector<float> da;
  static thread_local std::vector<int32_t> corr;
  da.resize(nb);
  corr.resize(nb);
  const int off = kTable ? 128 : 8;
  for (size_t i = 0; i < nb; ++i) {
    da[i] = f16_to_f32(a[i].d);
    int32_t sum = 0;
    for (size_t k = 0; k < 32; ++k) sum += a[i].qs[k];
    corr[i] = -off * sum;
  }
  // Two groups a pass: two weight streams, and independent chains.
  size_t g = 0;
  for (; g + 2 <= n_groups; g += 2) {
    GroupsVnni<kTable, 2>(groups + g * gstride, gstride, nb, a, da.data(), corr.data(), y + g * kRowGroup);
  }
  if (g < n_groups) GroupsVnni<kTable, 1>(groups + g * gstride, gstride, nb, a, da.data(), corr.data(), y + g * kRowGroup);
}
#undef QKV_GROUP_TARGET
#endif

void GroupDot(DType t, const void* groups, size_t cols, const void* xa, float* y, size_t n_groups, bool simd) {
  const auto* w = static_cast<const uint8_t*>(groups);
  const auto* a = static_cast<const BlockQ8_0*>(xa);
#if HWY_TARGET == HWY_AVX3_DL
  if (simd) {
    return t == DType::IQ4_NL ? GroupDotVnni<true>(w, cols, a, y, n_groups) : GroupDotVnni<false>(w, cols, a, y, n_groups);
  }
#else
  (void)simd;
#endif
  GroupDotScalar(t, w, cols, a, y, n_groups);
}

}  // namespace HWY_NAMESPACE
}  // namespace qkv
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qkv {
HWY_EXPORT(GroupDot);

bool row_groups_layout(DType t) {
  GroupLayout l;
  return LayoutOf(t, &l);
}

bool row_group_dot_available(DType t) { return t == DType::Q4_0 || t == DType::IQ4_NL; }

namespace {

void check_groups(const char* what, DType t, size_t n_rows, size_t cols) {
  QKV_CHECK(row_groups_layout(t), what, ": ", dtype_name(t), " has no row-group layout (32-value block types only)");
  QKV_CHECK(dtype_row_ok(t, cols), what, ": ", cols, " columns of ", dtype_name(t), " (a multiple of 32)");
  QKV_CHECK(n_rows % kRowGroup == 0, what, ": ", n_rows, " rows (a multiple of ", kRowGroup, ")");
}

// Calls f(row byte offset, group byte offset, size) for every field and word
// of every block of every row: the one map both directions use.
template <class F>
void for_each_piece(DType t, size_t n_rows, size_t cols, F&& f) {
  GroupLayout l;
  LayoutOf(t, &l);
  const size_t bb = dtype_block_bytes(t), nb = cols / 32, rb = nb * bb;
  for (size_t g = 0; g < n_rows / kRowGroup; ++g) {
    for (size_t i = 0; i < nb; ++i) {
      const size_t column = g * kRowGroup * rb + i * kRowGroup * bb;
      for (size_t r = 0; r < kRowGroup; ++r) {
        const size_t block = (g * kRowGroup + r) * rb + i * bb;
        for (size_t h = 0; h < l.halves; ++h) f(block + 2 * h, column + h * 32 + 2 * r, size_t{2});
        for (size_t j = 0; j < l.words; ++j) {
          f(block + 2 * l.halves + 4 * j, column + l.halves * 32 + j * 64 + 4 * r, size_t{4});
        }
      }
    }
  }
}

}  // namespace

void pack_row_groups(DType t, const void* rows, size_t n_rows, size_t cols, void* out) {
  check_groups("pack_row_groups", t, n_rows, cols);
  const auto* src = static_cast<const uint8_t*>(rows);
  auto* dst = static_cast<uint8_t*>(out);
  for_each_piece(t, n_rows, cols, [&](size_t row_at, size_t group_at, size_t n) { std::memcpy(dst + group_at, src + row_at, n); });
}

void unpack_row_groups(DType t, const void* groups, size_t n_rows, size_t cols, void* rows) {
  check_groups("unpack_row_groups", t, n_rows, cols);
  const auto* src = static_cast<const uint8_t*>(groups);
  auto* dst = static_cast<uint8_t*>(rows);
  for_each_piece(t, n_rows, cols, [&](size_t row_at, size_t group_at, size_t n) { std::memcpy(dst + row_at, src + group_at, n); });
}

void row_group_dot(DType t, const void* groups, size_t cols, const void* xa, float* y, size_t n_groups) {
  check_groups("row_group_dot", t, 0, cols);
  QKV_CHECK(row_group_dot_available(t), "row_group_dot: no kernel for ", dtype_name(t), " (Q4_0, IQ4_NL)");
  HWY_DYNAMIC_DISPATCH(GroupDot)(t, groups, cols, xa, y, n_groups, true);
}

void row_group_dot_scalar(DType t, const void* groups, size_t cols, const void* xa, float* y, size_t n_groups) {
  check_groups("row_group_dot_scalar", t, 0, cols);
  QKV_CHECK(row_group_dot_available(t), "row_group_dot_scalar: no kernel for ", dtype_name(t), " (Q4_0, IQ4_NL)");
  HWY_DYNAMIC_DISPATCH(GroupDot)(t, groups, cols, xa, y, n_groups, false);
}

}  // namespace qkv
#endif  // HWY_ONCE

// GGUF / ggml quantized block layouts, byte for byte as ggml stores them.
//
// Every multi-byte field is little endian; `uint16_t d` fields hold IEEE
// binary16 scales (convert with f16_to_f32 in kernels/dtype.h). A row of n
// values of a block type is n / kValues consecutive blocks (n % kValues == 0).
//
// The value at position k of a block (k < kValues) decodes as follows
// (q = the stored integer, sc/m = the sub-block scale/min):
//
//   Q4_0   32: q = nibble(qs, k) - 8                 x = d * q
//              nibble(qs, k) = k < 16 ? qs[k] & 15 : qs[k - 16] >> 4
//   Q4_1   32: q = nibble(qs, k)                     x = d * q + m
//   Q5_0   32: q = nibble(qs, k) | bit(qh, k) << 4, minus 16;   x = d * q
//              (qh is a little-endian uint32, bit k belongs to value k)
//   Q5_1   32: q = nibble(qs, k) | bit(qh, k) << 4   x = d * q + m
//   Q8_0   32: q = qs[k]                             x = d * q
//   IQ4_NL 32: q = kIQ4NLValues[nibble(qs, k)]       x = d * q
//
// The K-quants hold 256 values (kQK) in sub-blocks of 16 or 32:
//   Q2_K   16 sub-blocks of 16: sc = scales[j] & 15, m = scales[j] >> 4 (j = k / 16);
//          q = (qs[32 * (k / 128) + k % 32] >> (2 * ((k % 128) / 32))) & 3;
//          x = (d * sc) * q - (dmin * m)
//   Q3_K   16 sub-blocks of 16, 6-bit signed scales packed in 12 bytes:
//          sc_j = (j < 8 ? scales[j] & 15 : scales[j - 8] >> 4)
//                 | ((scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4, minus 32;
//          low = (qs[32 * (k / 128) + k % 32] >> (2 * ((k % 128) / 32))) & 3;
//          q = low - (hmask[k % 32] >> (k / 32) & 1 ? 0 : 4);  x = (d * sc) * q
//   Q4_K   8 sub-blocks of 32 with 6-bit scales and mins packed in 12 bytes
//          (q3k_scale_min / k4_scale_min below): x = (d * sc) * q - (dmin * m),
//          q = (qs[32 * (k / 64) + k % 32] >> (4 * ((k % 64) / 32))) & 15
//   Q5_K   as Q4_K plus a fifth bit: q |= ((qh[k % 32] >> (k / 32)) & 1) << 4
//   Q6_K   16 sub-blocks of 16 with int8 scales: x = (d * scales[k / 16]) * q,
//          h = k / 128, r = k % 128,
//          q = ((ql[64 * h + r % 64] >> (4 * (r / 64))) & 15
//               | ((qh[32 * h + r % 32] >> (2 * (r / 32))) & 3) << 4) - 32
//   IQ4_XS 8 sub-blocks of 32, 6-bit signed scales:
//          sc_j = ((scales_l[j / 2] >> (4 * (j % 2))) & 15
//                  | ((scales_h >> (2 * j)) & 3) << 4) - 32;
//          x = (d * sc_j) * kIQ4NLValues[nibble(qs + 16 * j, k % 32)]
//
// Activation blocks (what ggml's vec_dot multiplies weight blocks with):
//   Q8_1   32 values: d (f16) and s = f16(d * sum(qs)), int8 qs
//   Q8_K   256 values: f32 d, int8 qs, bsums[j] = sum of qs[16 j .. 16 j + 15]
#pragma once

#include <cstddef>
#include <cstdint>

namespace qkv {

constexpr size_t kQK = 256;  // values per K-quant / IQ4_XS super-block (ggml's QK_K)

struct BlockQ4_0 {
  static constexpr size_t kValues = 32;
  uint16_t d;
  uint8_t qs[16];
};
struct BlockQ4_1 {
  static constexpr size_t kValues = 32;
  uint16_t d, m;
  uint8_t qs[16];
};
struct BlockQ5_0 {
  static constexpr size_t kValues = 32;
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ5_1 {
  static constexpr size_t kValues = 32;
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ8_0 {
  static constexpr size_t kValues = 32;
  uint16_t d;  // f16 scale
  int8_t qs[32];
};
struct BlockQ8_1 {
  static constexpr size_t kValues = 32;
  uint16_t d, s;  // f16 scale, f16 of d * sum(qs)
  int8_t qs[32];
};
struct BlockQ2_K {
  static constexpr size_t kValues = kQK;
  uint8_t scales[16];  // low nibble scale, high nibble min
  uint8_t qs[64];
  uint16_t d, dmin;
};
struct BlockQ3_K {
  static constexpr size_t kValues = kQK;
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;
};
struct BlockQ4_K {
  static constexpr size_t kValues = kQK;
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};
struct BlockQ5_K {
  static constexpr size_t kValues = kQK;
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
struct BlockQ6_K {
  static constexpr size_t kValues = kQK;
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
struct BlockQ8_K {
  static constexpr size_t kValues = kQK;
  float d;
  int8_t qs[kQK];
  int16_t bsums[kQK / 16];
};
struct BlockIQ4_NL {
  static constexpr size_t kValues = 32;
  uint16_t d;
  uint8_t qs[16];
};
struct BlockIQ4_XS {
  static constexpr size_t kValues = kQK;
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};

static_assert(sizeof(BlockQ4_0) == 18, "ggml block_q4_0");
static_assert(sizeof(BlockQ4_1) == 20, "ggml block_q4_1");
static_assert(sizeof(BlockQ5_0) == 22, "ggml block_q5_0");
static_assert(sizeof(BlockQ5_1) == 24, "ggml block_q5_1");
static_assert(sizeof(BlockQ8_0) == 34, "ggml block_q8_0");
static_assert(sizeof(BlockQ8_1) == 36, "ggml block_q8_1");
static_assert(sizeof(BlockQ2_K) == 84, "ggml block_q2_K");
static_assert(sizeof(BlockQ3_K) == 110, "ggml block_q3_K");
static_assert(sizeof(BlockQ4_K) == 144, "ggml block_q4_K");
static_assert(sizeof(BlockQ5_K) == 176, "ggml block_q5_K");
static_assert(sizeof(BlockQ6_K) == 210, "ggml block_q6_K");
static_assert(sizeof(BlockQ8_K) == 292, "ggml block_q8_K");
static_assert(sizeof(BlockIQ4_NL) == 18, "ggml block_iq4_nl");
static_assert(sizeof(BlockIQ4_XS) == 136, "ggml block_iq4_xs");
static_assert(alignof(BlockQ4_0) == 2 && alignof(BlockQ2_K) == 2 && alignof(BlockQ6_K) == 2,
              "blocks are read in place from 2-byte aligned GGUF data");

// The 16 levels of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl).
constexpr int8_t kIQ4NLValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                     1,    13,   25,  38,  53,  69,  89,  113};

// Sub-block j (0..7) scale and min of Q4_K/Q5_K from the 12 packed bytes:
// j < 4: the low 6 bits of bytes j and j + 4; j >= 4: the nibbles of byte
// j + 4 with the top 2 bits of bytes j - 4 (scale) and j (min) above them.
inline void k4_scale_min(const uint8_t* q, int j, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Sub-block j (0..15) signed scale of Q3_K from its 12 packed bytes.
inline int q3k_scale(const uint8_t* s, int j) {
  const int lo = j < 8 ? s[j] & 15 : s[j - 8] >> 4;
  const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (lo | hi << 4) - 32;
}

// Sub-block j (0..7) signed scale of IQ4_XS.
inline int iq4xs_scale(const BlockIQ4_XS& b, int j) {
  const int lo = (b.scales_l[j / 2] >> (4 * (j % 2))) & 15;
  const int hi = (b.scales_h >> (2 * j)) & 3;
  return (lo | hi << 4) - 32;
}

}  // namespace qkv

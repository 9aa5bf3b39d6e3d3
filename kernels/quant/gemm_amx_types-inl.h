// The block types of the AMX int8 GEMM (kernels/quant/gemm_amx_kernel-inl.h),
// one table entry each: how a weight block unpacks to unsigned bytes
// u = q + kOffset (TDPBUSD's unsigned operand; the activations are its signed
// one) with its sub-block scales, and which activation block it meets.
//
// An entry gives, per weight block (Unpack), u for its kValues values and per
// sub-block j of kS values:
//   32-value types: dw[0] = d, mw[0] = m (kMin: Q4_1, Q5_1);
//   K-quants and IQ4_XS: dw[j] = d * sc_j and mw[j] = -dmin * m_j (kMin:
//     Q2_K, Q4_K, Q5_K), each one f32 product;
//   Q6_K (kSuper: its integers summed over the super-block first): sc[j] =
//     sc_j and dw[0] = d.
// These are the packed VNNI GEMM's values (UnpackK in
// kernels/quant/gemm_vnni_packed-inl.h), so the f32 epilogue that follows
// its order gives its results bit for bit.
//
// Included by the GEMM's translation units (gemm_amx.cc, gemm_amx_model.cc)
// inside a namespace of their own, after kernels/quant/blocks.h and
// kernels/dtype.h: each compiles it for its own target.

template <class B>
inline B AmxLoadBlock(const uint8_t* p) {
  B b;
  std::memcpy(&b, p, sizeof(B));
  return b;
}

inline int AmxNibble(const uint8_t* qs, size_t k) { return k < 16 ? qs[k] & 15 : qs[k - 16] >> 4; }

// Fields every entry shares, from the sub-block size.
template <DType kT, class B, class A, size_t S, int kOff, bool kHasMin, bool kSum = false>
struct AmxTypeBase {
  static constexpr DType kType = kT;
  using Block = B;
  using Act = A;
  static constexpr size_t kValues = B::kValues, kS = S, kSubs = B::kValues / S;
  static constexpr int kOffset = kOff;
  static constexpr bool kMin = kHasMin, kSuper = kSum, kK = B::kValues == kQK;
};

struct AmxQ4_0 : AmxTypeBase<DType::Q4_0, BlockQ4_0, BlockQ8_0, 32, 8, false> {
  static void Unpack(const uint8_t* p, uint8_t* u, float* dw, float*, int32_t*) {
    const Block b = AmxLoadBlock<Block>(p);
    for (size_t k = 0; k < 32; ++k) u[k] = static_cast<uint8_t>(AmxNibble(b.qs, k));
    dw[0] = f16_to_f32(b.d);
  }
};
struct AmxQ4_1 : AmxTypeBase<DType::Q4_1, BlockQ4_1, BlockQ8_1, 32, 0, true> {
  static void Unpack(const uint8_t* p, uint8_t* u, float* dw, float* mw, int32_t*) {
    const Block b = AmxLoadBlock<Block>(p);
    for (size_t k = 0; k < 32; ++k) u[k] = static_cast<uint8_t>(AmxNibble(b.qs, k));
    dw[0] = f16_to_f32(b.d);
    mw[0] = f16_to_f32(b.m);
  }
};
// Q5_0 / Q5_1: the nibble and bit k of qh as the fifth bit.
template <class B>
inline void AmxFiveBits(const B& b, uint8_t* u) {
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  for (size_t k = 0; k < 32; ++k) u[k] = static_cast<uint8_t>(AmxNibble(b.qs, k) | ((qh >> k) & 1) << 4);
}
struct AmxQ5_0 : AmxTypeBase<DType::Q5_0, BlockQ5_0, BlockQ8_0, 32, 16, false> {
  static void Unpack(const uint8_t* p, uint8_t* u, float* dw, float*, int32_t*) {
    const Block b = AmxLoadBlock<Block>(p);
    AmxFiveBits(b, u);
    dw[0] = f16_to_f32(b.d);
  }
};
struct AmxQ5_1 : AmxTypeBase<DType::Q5_1, BlockQ5_1, BlockQ8_1, 32, 0, true> {
  static void Unpack(const uint8_t* p, uint8_t* u, float* dw, float* mw, int32_t*) {
    const Block b = AmxLoadBlock<Block>(p);
    AmxFiveBits(b, u);
    dw[0] = f16_to_f32(b.d);
    mw[0] = f16_to_f32(b.m);
  }
};
struct AmxQ8_0 : AmxTypeBase<DType::Q8_0, BlockQ8_0, BlockQ8_0, 32, 128, false> {
  static void Unpack(const uint8_t* p, uint8_t* u, float* dw, float*, int32_t*) {
    const Block b = AmxLoadBlock<Block>(p);
    for (size_t k = 0; k < 32; ++k) u[k] = static_cast<uint8_t>(b.qs[k] + 128);
    dw[0] = f16_to_f32(b.d);
  }
};
struct AmxIQ4_NL : AmxTypeBase<DType::IQ4_NL, BlockIQ4_NL, BlockQ8_0, 32, 128, false> {
  static void Unpack(const uint8_t* p, uint8_t* u, float* dw, float*, int32_t*) {
    const Block b = AmxLoadBlock<Block>(p);
    for (size_t k = 0; k < 32; ++k) u[k] = static_cast<uint8_t>(kIQ4NLValues[AmxNibble(b.qs, k)] + 128);
    dw[0] = f16_to_f32(b.d);
  }
};
// Q2_K / Q3_K: the 2-bit value k of a 256-value block.
inline int AmxTwoBits(const uint8_t* qs, size_t k) { return (qs[32 * (k / 128) + k % 32] >> (2 * ((k % 128) / 32))) & 3; }
struct AmxQ2_K : AmxTypeBase<DType::Q2_K, BlockQ2_K, BlockQ8_K, 16, 0, true> {
  static void Unpack(const uint8_t* p, uint8_t* u, float* dw, float* mw, int32_t*) {
    const Block b = AmxLoadBlock<Block>(p);
    for (size_t k = 0; k < kQK; ++k) u[k] = static_cast<uint8_t>(AmxTwoBits(b.qs, k));
    const float d = f16_to_f32(b.d), dmin = -f16_to_f32(b.dmin);
    for (size_t j = 0; j < kSubs; ++j) {
      dw[j] = d * static_cast<float>(b.scales[j] & 15);
      mw[j] = dmin * static_cast<float>(b.scales[j] >> 4);
    }
  }
};
struct AmxQ3_K : AmxTypeBase<DType::Q3_K, BlockQ3_K, BlockQ8_K, 16, 4, false> {
  static void Unpack(const uint8_t* p, uint8_t* u, float* dw, float*, int32_t*) {
    const Block b = AmxLoadBlock<Block>(p);
    for (size_t k = 0; k < kQK; ++k) u[k] = static_cast<uint8_t>(AmxTwoBits(b.qs, k) + 4 * ((b.hmask[k % 32] >> (k / 32)) & 1));
    const float d = f16_to_f32(b.d);
    for (size_t j = 0; j < kSubs; ++j) dw[j] = d * static_cast<float>(q3k_scale(b.scales, static_cast<int>(j)));
  }
};
// Q4_K / Q5_K: value k's nibble (and fifth bit), sub-block scales and mins.
template <class B, bool kFifth>
inline void AmxK4(const B& b, uint8_t* u, float* dw, float* mw) {
  for (size_t k = 0; k < kQK; ++k) {
    int q = (b.qs[32 * (k / 64) + k % 32] >> (4 * ((k % 64) / 32))) & 15;
    if constexpr (kFifth) q |= ((b.qh[k % 32] >> (k / 32)) & 1) << 4;
    u[k] = static_cast<uint8_t>(q);
  }
  const float d = f16_to_f32(b.d), dmin = -f16_to_f32(b.dmin);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    k4_scale_min(b.scales, j, &sc, &m);
    dw[j] = d * static_cast<float>(sc);
    mw[j] = dmin * static_cast<float>(m);
  }
}
struct AmxQ4_K : AmxTypeBase<DType::Q4_K, BlockQ4_K, BlockQ8_K, 32, 0, true> {
  static void Unpack(const uint8_t* p, uint8_t* u, float* dw, float* mw, int32_t*) {
    AmxK4<Block, false>(AmxLoadBlock<Block>(p), u, dw, mw);
  }
};
struct AmxQ5_K : AmxTypeBase<DType::Q5_K, BlockQ5_K, BlockQ8_K, 32, 0, true> {
  static void Unpack(const uint8_t* p, uint8_t* u, float* dw, float* mw, int32_t*) {
    AmxK4<Block, true>(AmxLoadBlock<Block>(p), u, dw, mw);
  }
};
struct AmxQ6_K : AmxTypeBase<DType::Q6_K, BlockQ6_K, BlockQ8_K, 16, 32, false, true> {
  static void Unpack(const uint8_t* p, uint8_t* u, float* dw, float*, int32_t* sc) {
    const Block b = AmxLoadBlock<Block>(p);
    for (size_t k = 0; k < kQK; ++k) {
      const size_t h = k / 128, r = k % 128;
      u[k] = static_cast<uint8_t>(((b.ql[64 * h + r % 64] >> (4 * (r / 64))) & 15) |
                                  ((b.qh[32 * h + r % 32] >> (2 * (r / 32))) & 3) << 4);
    }
    for (size_t j = 0; j < kSubs; ++j) {
      sc[j] = b.scales[j];
      dw[j] = 0.0f;
    }
    dw[0] = f16_to_f32(b.d);
  }
};
struct AmxIQ4_XS : AmxTypeBase<DType::IQ4_XS, BlockIQ4_XS, BlockQ8_K, 32, 128, false> {
  static void Unpack(const uint8_t* p, uint8_t* u, float* dw, float*, int32_t*) {
    const Block b = AmxLoadBlock<Block>(p);
    for (size_t k = 0; k < kQK; ++k) {
      u[k] = static_cast<uint8_t>(kIQ4NLValues[AmxNibble(b.qs + 16 * (k / 32), k % 32)] + 128);
    }
    const float d = f16_to_f32(b.d);
    for (size_t j = 0; j < kSubs; ++j) dw[j] = d * static_cast<float>(iq4xs_scale(b, static_cast<int>(j)));
  }
};

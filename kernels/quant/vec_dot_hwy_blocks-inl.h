// Block decoders of the 256-bit matvec (kernels/quant/vec_dot_hwy-inl.h): each
// unpacks one block of its type (layouts in kernels/quant/blocks.h) into bytes
// in value order, 32 values per register: u = q + kOffset, or the signed q
// itself when kSigned. 32-value types give one register (Unpack); 256-value
// types give 8, their sub-block scales as bytes, and add their min terms with
// the scalar kernel's arithmetic (kernels/quant/vec_dot.cc).
//
// Included by vec_dot_hwy-inl.h only.

HWY_INLINE VU8 Mask8(uint8_t m) { return hn::Set(DU8(), m); }

// The 16-bit lanes of v shifted right by n, then masked: the bit fields of
// each byte at bits n .. (mask bits of the byte), mask repeated per byte.
HWY_INLINE VU8 FieldsAt(hn::Vec256<uint16_t> v, int n, uint16_t mask) {
  return hn::BitCast(DU8(), hn::And(hn::ShiftRightSame(v, n), hn::Set(DU16(), mask)));
}

HWY_INLINE hn::Vec128<int8_t> ScaleBytes(uint64_t lo) {
  return hn::BitCast(hn::Full128<int8_t>(), hn::Set(hn::Full128<uint64_t>(), lo));
}

// ---- 32-value blocks ----

// Adds 16 to the values whose fifth bit (the little-endian uint32 at qh, bit
// k for value k) is set: byte k takes qh byte k / 8 and tests bit k % 8.
HWY_INLINE VU8 FifthBits(VU8 u, const uint8_t* qh) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  HWY_ALIGN static constexpr uint8_t kByte[32] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                                  2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
  HWY_ALIGN static constexpr uint8_t kBit[32] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128,
                                                 1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const VU8 bytes = hn::TableLookupBytes(hn::BitCast(DU8(), hn::Set(DU32(), h)), hn::Load(DU8(), kByte));
  const auto set = hn::TestBit(bytes, hn::Load(DU8(), kBit));
  return hn::Or(u, hn::IfThenElseZero(set, Mask8(16)));
}

struct HwyNoMin32 {
  static constexpr bool kMin = false;
  static constexpr bool kSigned = false;
};
// Q4_1 / Q5_1: the min m (f16 at byte 2) times the activation block's s.
struct HwyMin32 {
  static constexpr bool kMin = true;
  static constexpr bool kSigned = false;
};

struct HwyQ4_0 : HwyNoMin32 {
  using Block = BlockQ4_0;
  using Act = BlockQ8_0;
  static constexpr int kOffset = 8;
  HWY_INLINE static VU8 Unpack(const uint8_t* b) { return NibbleHalves(b + offsetof(Block, qs)); }
};
struct HwyQ4_1 : HwyMin32 {
  using Block = BlockQ4_1;
  using Act = BlockQ8_1;
  static constexpr int kOffset = 0;
  HWY_INLINE static VU8 Unpack(const uint8_t* b) { return NibbleHalves(b + offsetof(Block, qs)); }
};
struct HwyQ5_0 : HwyNoMin32 {
  using Block = BlockQ5_0;
  using Act = BlockQ8_0;
  static constexpr int kOffset = 16;
  HWY_INLINE static VU8 Unpack(const uint8_t* b) {
    return FifthBits(NibbleHalves(b + offsetof(Block, qs)), b + offsetof(Block, qh));
  }
};
struct HwyQ5_1 : HwyMin32 {
  using Block = BlockQ5_1;
  using Act = BlockQ8_1;
  static constexpr int kOffset = 0;
  HWY_INLINE static VU8 Unpack(const uint8_t* b) {
    return FifthBits(NibbleHalves(b + offsetof(Block, qs)), b + offsetof(Block, qh));
  }
};
struct HwyIQ4_NL {
  using Block = BlockIQ4_NL;
  using Act = BlockQ8_0;
  static constexpr bool kMin = false;
  static constexpr bool kSigned = true;
  static constexpr int kOffset = 0;
  HWY_INLINE static VU8 Unpack(const uint8_t* b) {
    return hn::BitCast(DU8(), hn::TableLookupBytes(IQ4Table(), NibbleHalves(b + offsetof(Block, qs))));
  }
};

// ---- 256-value super-blocks ----

struct HwyFinish8 {
  HWY_INLINE static float Finish(const HwyRow& row) { return Sum8(row.acc); }
};

struct HwyQ2_K : HwyFinish8 {
  using Block = BlockQ2_K;
  static constexpr int kOffset = 0;
  static constexpr size_t kSub = 16;
  static constexpr bool kSigned = false, kSignedScales = false;
  HWY_INLINE static float D(const uint8_t* b) { return HalfAt(b + offsetof(Block, d)); }
  HWY_INLINE static hn::Vec128<int8_t> Decode(const uint8_t* b, const HwyActK& a, HwyRow* row, VU8 u[8]) {
    const hn::Full128<uint8_t> d16;
    const auto s = hn::LoadU(d16, b + offsetof(Block, scales));
    // mins[l] = m[2l] * bsums[2l] + m[2l + 1] * bsums[2l + 1], before the block's main sum (as ggml).
    const VI16 m = hn::BitCast(DI16(), hn::PromoteTo(DU16(), hn::ShiftRight<4>(s)));
    VI32 unused;
    const VI32 mins = hn::ReorderWidenMulAccumulate(DI32(), m, a.bsums, hn::Zero(DI32()), unused);
    const float dmin = -a.d * HalfAt(b + offsetof(Block, dmin));
    row->acc = hn::MulAdd(hn::Set(DF(), dmin), hn::ConvertTo(DF(), mins), row->acc);
    for (int h = 0; h < 2; ++h) {
      const auto q = hn::LoadU(DU16(), reinterpret_cast<const uint16_t*>(b + offsetof(Block, qs) + 32 * h));
      for (int sh = 0; sh < 4; ++sh) u[4 * h + sh] = FieldsAt(q, 2 * sh, 0x0303);
    }
    return hn::BitCast(hn::Full128<int8_t>(), hn::And(s, hn::Set(d16, uint8_t{15})));
  }
};

struct HwyQ3_K : HwyFinish8 {
  using Block = BlockQ3_K;
  static constexpr int kOffset = 4;
  static constexpr size_t kSub = 16;
  static constexpr bool kSigned = false, kSignedScales = true;
  HWY_INLINE static float D(const uint8_t* b) { return HalfAt(b + offsetof(Block, d)); }
  HWY_INLINE static hn::Vec128<int8_t> Decode(const uint8_t* b, const HwyActK&, HwyRow*, VU8 u[8]) {
    const auto hm = hn::LoadU(DU16(), reinterpret_cast<const uint16_t*>(b + offsetof(Block, hmask)));
    for (int h = 0; h < 2; ++h) {
      const auto q = hn::LoadU(DU16(), reinterpret_cast<const uint16_t*>(b + offsetof(Block, qs) + 32 * h));
      for (int sh = 0; sh < 4; ++sh) {
        const int c = 4 * h + sh;
        // hmask bit c of value l moved to bit 2 (+4 when set) by one shift.
        const auto moved = c >= 2 ? hn::ShiftRightSame(hm, c - 2) : hn::ShiftLeftSame(hm, 2 - c);
        const VU8 high = hn::BitCast(DU8(), hn::And(moved, hn::Set(DU16(), uint16_t{0x0404})));
        u[c] = hn::Or(FieldsAt(q, 2 * sh, 0x0303), high);
      }
    }
    // Scale j: bits 0-3 from byte j % 8 (j < 8 low nibble, else high), bits 4-5
    // from byte 8 + j % 4 at bits 2 (j / 4), .. (kernels/quant/blocks.h), in
    // vector registers (building them in memory stalled store forwarding:
    // Q3_K took 1.6x longer, 5.9 against 9.6 GB/s in L2). The 16 bytes read end with the scales.
    const hn::Full128<uint8_t> du8;
    const hn::Full128<uint32_t> du32;
    const hn::Full128<uint64_t> du64;
    HWY_ALIGN static constexpr uint8_t kLow[16] = {4, 5, 6, 7, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11};
    HWY_ALIGN static constexpr uint8_t kHigh[16] = {12, 13, 14, 15, 12, 13, 14, 15, 12, 13, 14, 15, 12, 13, 14, 15};
    HWY_ALIGN static constexpr uint64_t kLowShift[2] = {0, 4};
    HWY_ALIGN static constexpr uint32_t kHighShift[4] = {0, 2, 4, 6};
    const auto v = hn::LoadU(du8, b + offsetof(Block, scales) - 4);
    const auto low8 = hn::BitCast(du64, hn::TableLookupBytes(v, hn::Load(du8, kLow)));
    const auto low = hn::And(hn::BitCast(du8, hn::operator>>(low8, hn::Load(du64, kLowShift))), hn::Set(du8, uint8_t{15}));
    const auto high4 = hn::BitCast(du32, hn::TableLookupBytes(v, hn::Load(du8, kHigh)));
    const auto high = hn::ShiftLeft<4>(hn::And(hn::operator>>(high4, hn::Load(du32, kHighShift)), hn::Set(du32, 0x03030303u)));
    const hn::Full128<int8_t> d8;
    return hn::Sub(hn::BitCast(d8, hn::Or(low, hn::BitCast(du8, high))), hn::Set(d8, int8_t{32}));
  }
};

// Q4_K / Q5_K: 8 6-bit scales and mins from 12 bytes (kernels/quant/blocks.h
// k4_scale_min), four at a time in 32-bit words.
HWY_INLINE void HwyK4ScalesMins(const uint8_t* q, uint64_t* sc, uint64_t* m) {
  uint32_t u[3];
  std::memcpy(u, q, 12);
  const uint32_t s_lo = u[0] & 0x3F3F3F3Fu, m_lo = u[1] & 0x3F3F3F3Fu;
  const uint32_t s_hi = (u[2] & 0x0F0F0F0Fu) | ((u[0] >> 6) & 0x03030303u) << 4;
  const uint32_t m_hi = ((u[2] >> 4) & 0x0F0F0F0Fu) | ((u[1] >> 6) & 0x03030303u) << 4;
  *sc = s_lo | uint64_t(s_hi) << 32;
  *m = m_lo | uint64_t(m_hi) << 32;
}

// 4 int32: m[2p] * pairs[2p] + m[2p + 1] * pairs[2p + 1].
HWY_INLINE hn::Vec128<int32_t> HwyK4MinSums(uint64_t m, const HwyActK& a) {
  const auto m8 = hn::LowerHalf(hn::BitCast(hn::Full128<uint8_t>(), hn::Set(hn::Full128<uint64_t>(), m)));
  const auto m16 = hn::BitCast(hn::Full128<int16_t>(), hn::PromoteTo(hn::Full128<uint16_t>(), m8));
  hn::Vec128<int32_t> unused;
  return hn::ReorderWidenMulAccumulate(hn::Full128<int32_t>(), m16, a.pairs, hn::Zero(hn::Full128<int32_t>()),
                                       unused);
}

// The nibbles of 128 bytes: register 2q + 0/1 = low/high nibbles of qs[32q .. 32q + 31].
HWY_INLINE void HwyK4Nibbles(const uint8_t* qs, VU8 u[8]) {
  for (int q = 0; q < 4; ++q) {
    const auto v = hn::LoadU(DU16(), reinterpret_cast<const uint16_t*>(qs + 32 * q));
    u[2 * q] = FieldsAt(v, 0, 0x0F0F);
    u[2 * q + 1] = FieldsAt(v, 4, 0x0F0F);
  }
}

struct HwyQ4_K {
  using Block = BlockQ4_K;
  static constexpr int kOffset = 0;
  static constexpr size_t kSub = 32;
  static constexpr bool kSigned = false, kSignedScales = false;
  HWY_INLINE static float D(const uint8_t* b) { return HalfAt(b + offsetof(Block, d)); }
  HWY_INLINE static hn::Vec128<int8_t> Decode(const uint8_t* b, const HwyActK& a, HwyRow* row, VU8 u[8]) {
    uint64_t sc, m;
    HwyK4ScalesMins(b + offsetof(Block, scales), &sc, &m);
    const float dmin = -a.d * HalfAt(b + offsetof(Block, dmin));
    const hn::Full128<float> df4;
    row->accm = hn::MulAdd(hn::Set(df4, dmin), hn::ConvertTo(df4, HwyK4MinSums(m, a)), row->accm);
    HwyK4Nibbles(b + offsetof(Block, qs), u);
    return ScaleBytes(sc);
  }
  HWY_INLINE static float Finish(const HwyRow& row) { return Sum8(row.acc) + Sum4(row.accm); }
};

struct HwyQ5_K {
  using Block = BlockQ5_K;
  static constexpr int kOffset = 0;
  static constexpr size_t kSub = 32;
  static constexpr bool kSigned = false, kSignedScales = false;
  HWY_INLINE static float D(const uint8_t* b) { return HalfAt(b + offsetof(Block, d)); }
  HWY_INLINE static hn::Vec128<int8_t> Decode(const uint8_t* b, const HwyActK& a, HwyRow* row, VU8 u[8]) {
    uint64_t sc, m;
    HwyK4ScalesMins(b + offsetof(Block, scales), &sc, &m);
    const float dmin = -a.d * HalfAt(b + offsetof(Block, dmin));
    const hn::Full128<int32_t> d32;
    const int32_t total = hn::GetLane(hn::SumOfLanes(d32, HwyK4MinSums(m, a)));
    row->summs = std::fma(dmin, static_cast<float>(total), row->summs);
    HwyK4Nibbles(b + offsetof(Block, qs), u);
    const auto qh = hn::LoadU(DU16(), reinterpret_cast<const uint16_t*>(b + offsetof(Block, qh)));
    for (int c = 0; c < 8; ++c) {
      // qh bit c of value l moved to bit 4.
      u[c] = hn::Or(u[c], hn::BitCast(DU8(), hn::ShiftLeft<4>(hn::BitCast(DU16(), FieldsAt(qh, c, 0x0101)))));
    }
    return ScaleBytes(sc);
  }
  HWY_INLINE static float Finish(const HwyRow& row) { return Sum8(row.acc) + row.summs; }
};

struct HwyQ6_K : HwyFinish8 {
  using Block = BlockQ6_K;
  static constexpr int kOffset = 32;
  static constexpr size_t kSub = 16;
  static constexpr bool kSigned = false, kSignedScales = true;
  HWY_INLINE static float D(const uint8_t* b) { return HalfAt(b + offsetof(Block, d)); }
  HWY_INLINE static hn::Vec128<int8_t> Decode(const uint8_t* b, const HwyActK&, HwyRow*, VU8 u[8]) {
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = b + offsetof(Block, ql) + 64 * h;
      const auto q0 = hn::LoadU(DU16(), reinterpret_cast<const uint16_t*>(ql));
      const auto q1 = hn::LoadU(DU16(), reinterpret_cast<const uint16_t*>(ql + 32));
      const auto qh = hn::LoadU(DU16(), reinterpret_cast<const uint16_t*>(b + offsetof(Block, qh) + 32 * h));
      // Register 4h + r: nibbles of ql (low for r < 2) with qh bits 2r, 2r + 1 at bits 4-5.
      for (int r = 0; r < 4; ++r) {
        const VU8 low = FieldsAt(r % 2 == 0 ? q0 : q1, 4 * (r / 2), 0x0F0F);
        const VU8 high = hn::BitCast(DU8(), hn::ShiftLeft<4>(hn::BitCast(DU16(), FieldsAt(qh, 2 * r, 0x0303))));
        u[4 * h + r] = hn::Or(low, high);
      }
    }
    return hn::LoadU(hn::Full128<int8_t>(), reinterpret_cast<const int8_t*>(b + offsetof(Block, scales)));
  }
};

struct HwyIQ4_XS : HwyFinish8 {
  using Block = BlockIQ4_XS;
  static constexpr int kOffset = 0;
  static constexpr size_t kSub = 32;
  static constexpr bool kSigned = true, kSignedScales = true;
  HWY_INLINE static float D(const uint8_t* b) { return HalfAt(b + offsetof(Block, d)); }
  HWY_INLINE static hn::Vec128<int8_t> Decode(const uint8_t* b, const HwyActK&, HwyRow*, VU8 u[8]) {
    const VI8 table = IQ4Table();
    for (int c = 0; c < 8; ++c) {
      u[c] = hn::BitCast(DU8(), hn::TableLookupBytes(table, NibbleHalves(b + offsetof(Block, qs) + 16 * c)));
    }
    uint16_t sh;
    uint32_t sl;
    std::memcpy(&sh, b + offsetof(Block, scales_h), 2);
    std::memcpy(&sl, b + offsetof(Block, scales_l), 4);
    // Byte j = nibble j of sl | crumb j of sh << 4, by spreading the fields
    // (a loop over j took ~60 scalar instructions per block, as many as the
    // dot product; pdep is microcoded on Zen 2).
    uint64_t lo = sl;
    lo = (lo | lo << 16) & 0x0000FFFF0000FFFFull;
    lo = (lo | lo << 8) & 0x00FF00FF00FF00FFull;
    lo = (lo | lo << 4) & 0x0F0F0F0F0F0F0F0Full;
    uint64_t hi = sh;
    hi = (hi | hi << 24) & 0x000000FF000000FFull;
    hi = (hi | hi << 12) & 0x000F000F000F000Full;
    hi = (hi | hi << 6) & 0x0303030303030303ull;
    const hn::Full128<int8_t> d8;
    return hn::Sub(ScaleBytes(lo | hi << 4), hn::Set(d8, int8_t{32}));
  }
};

// The key-group kernel (decode with GQA groups that divide the vector): Q·K,
// softmax and P·V every few keys, so a key's K and V rows are consumed together.
//
// A Highway "-inl" header of the attention kernel: kernels/attention/attention.cc
// includes it once per SIMD target (foreach_target), after hwy/highway.h.
#if defined(QKV_KERNELS_ATTENTION_GROUP_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef QKV_KERNELS_ATTENTION_GROUP_INL_H_
#undef QKV_KERNELS_ATTENTION_GROUP_INL_H_
#else
#define QKV_KERNELS_ATTENTION_GROUP_INL_H_
#endif

#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
#include "kernels/attention/row-inl.h"

HWY_BEFORE_NAMESPACE();
namespace qkv {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR
// Key-group kernel (decode): the Q·K, softmax and P·V of every few keys run
// before the next keys are read, so each key's K and V rows are consumed
// together, a few keys after their prefetch. RowItem instead runs a 64-key
// block's Q·K, then its P·V in column passes: in the P·V phase no new lines are
// requested, so from DRAM the stream idles for part of every block. This order
// measured 1.2-1.3x faster cold at 32768 keys (f16, GQA 8, 2 threads) and
// 1.03-1.1x warm (docs/design.md, the key-group kernel).
//
// A step is GS score vectors of KG = N / rows keys each. Lane i of a score
// vector is (key i / rows, row i % rows): the transpose-add tree over the
// KG x rows dot-product vectors yields that order directly, so the softmax
// (running max, exp, sum) is lane-wise, each row's max spread over its key
// lanes by rotations. The accumulators [rows][d] stay in L1 and are loaded
// and stored once per step.
constexpr int kGroupSteps = 2;  // score vectors per step: 2 measured faster than 1 (warm) and 4 (cold)

// Whether the key-group kernel takes `rows` query rows on this target: rows
// divides the vector, and a group's dot products (N vectors), its keys' K, q
// and the step's first scores fit the registers, as do a step's V vectors,
// weights and one accumulator in the P·V pass.
constexpr bool GroupRowsOk(int64_t rows) {
  constexpr int64_t kN = static_cast<int64_t>(hn::MaxLanes(DF()));
  if (rows < 1 || kN % rows != 0) return false;
  const int64_t kg = kN / rows, ks = kGroupSteps * kg;
  return kg >= 2 && kN + kg + 2 <= kVecRegs && 2 * ks + 1 <= kVecRegs;
}

// Value vectors per P·V pass for KS keys: a power of two, KS x XC vectors plus
// the KS weights and an accumulator in registers.
constexpr int GroupPassVectors(int ks) {
  int xc = 1;
  while (xc < 8 && ks * 2 * xc + ks + 1 <= kVecRegs) xc *= 2;
  return xc;
}

// acc[r][x .. x + XC*N) += Σ_k p[k][r] * V[k][x ..] over the KS keys of a step;
// p[k][r] is pbuf[k * R + r] (the score vectors' lane order).
template <DType T, int R, int KS, int XC, size_t kD>
HWY_INLINE void GroupAccumulate(DF df, const float* HWY_RESTRICT pbuf, const uint8_t* const* vrow, size_t d_runtime,
                                size_t x, float* HWY_RESTRICT acc) {
  const size_t d = kD != 0 ? kD : d_runtime;
  const size_t N = hn::Lanes(df);
  VF vv[KS][XC];
  for (int k = 0; k < KS; ++k)
    for (int xc = 0; xc < XC; ++xc) vv[k][xc] = Elem<T>::Load(df, vrow[k], x + xc * N);
  for (int r = 0; r < R; ++r) {
    VF pb[KS];
    for (int k = 0; k < KS; ++k) pb[k] = hn::Set(df, pbuf[k * R + r]);
    for (int xc = 0; xc < XC; ++xc) {
      float* a = acc + r * d + x + xc * N;
      VF av = hn::Load(df, a);
      for (int k = 0; k < KS; ++k) av = hn::MulAdd(pb[k], vv[k][xc], av);
      hn::Store(av, df, a);
    }
  }
}

// kCap: scores soft-capped (Call::softcap), a separate instantiation so the
// uncapped loop keeps its registers.
template <DType T, int R, size_t kD, bool kCap>
void GroupItem(const Call& c, const Plan& p, const Item& it, float* scratch, float* partials, int64_t idx) {
  const DF df;
  constexpr int kN = static_cast<int>(hn::MaxLanes(DF()));
  constexpr int KG = kN / R;                // keys per score vector
  constexpr int GS = kGroupSteps;
  constexpr int KS = KG * GS;                  // keys per step: one softmax update, one P·V
  constexpr int XC = GroupPassVectors(KS);     // value vectors per P·V pass
  const size_t N = hn::Lanes(df);
  const size_t d = kD != 0 ? kD : static_cast<size_t>(c.s.d);
  const size_t Rp = static_cast<size_t>(p.rows);
  float* qs = scratch;
  float* acc = qs + RoundUp(Rp * d, 16);
  float* buf = acc + RoundUp(Rp * d, 16);  // (GS + 1) x N floats: a step's p, then m / corr
  const float ninf = -std::numeric_limits<float>::infinity();

  ScaledQueries(c, it, R, d, qs);
  std::fill(acc, acc + R * d, 0.0f);

  // Rotations by R, 2R, ... lanes: after them every key lane of a row holds the row's max.
  constexpr int kRot = KG >= 8 ? 3 : KG >= 4 ? 2 : 1;
  alignas(64) int32_t rot_lanes[kN];
  decltype(hn::SetTableIndices(df, rot_lanes)) rot[kRot];
  for (int t = 0; t < kRot; ++t) {
    for (int i = 0; i < kN; ++i) rot_lanes[i] = (i + (R << t)) % kN;
    rot[t] = hn::SetTableIndices(df, rot_lanes);
  }

  const uint8_t* kbase = ItemRows(c.k, it);
  const uint8_t* vbase = ItemRows(c.v, it);
  const int64_t krs = c.k.row_stride, vrs = c.v.row_stride;
  const int64_t row_bytes = static_cast<int64_t>(dtype_row_bytes(T, d));
  const int64_t pf_dist = RowPrefetch::Distance(row_bytes);
  const RowPrefetch pf{kbase, vbase, krs, vrs, row_bytes, pf_dist, it.hi};
  const VF vninf = hn::Set(df, ninf);
  const SoftCap cap(df, kCap ? c.softcap : 1.0f);

  VF m = vninf, l = hn::Zero(df);
  for (int64_t j = it.lo; j < it.hi; j += KS) {
    const int64_t nvalid = std::min<int64_t>(KS, it.hi - j);
    // A partial last step repeats its last key (masked below), so no row past
    // the item is read.
    const uint8_t* krow[KS];
    const uint8_t* vrow[KS];
    for (int k = 0; k < KS; ++k) {
      const int64_t jj = j + std::min<int64_t>(k, nvalid - 1);
      krow[k] = kbase + jj * krs;
      vrow[k] = vbase + jj * vrs;
    }

    // Q·K of each group of KG keys: KG x R dot-product vectors, then the tree in registers.
    VF s[GS];
    for (int g = 0; g < GS; ++g) {
      pf.Keys(j + g * KG + pf_dist, KG);  // KG keys' lines at a time: bursts stall (RowPrefetch)
      VF dot[KG][R];
      for (int k = 0; k < KG; ++k)
        for (int r = 0; r < R; ++r) dot[k][r] = hn::Zero(df);
      for (size_t x = 0; x < d; x += N) {
        VF kv[KG];
        for (int k = 0; k < KG; ++k) kv[k] = Elem<T>::Load(df, krow[g * KG + k], x);
        for (int r = 0; r < R; ++r) {
          VF qv = hn::Load(df, qs + r * d + x);
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
          asm("" : "+v"(qv.raw));  // q in a register for its KG uses (see RowDots)
#endif
          for (int k = 0; k < KG; ++k) dot[k][r] = hn::MulAdd(qv, kv[k], dot[k][r]);
        }
      }
      VF pairs[kN / 2];
      for (int i = 0; i < kN / 2; ++i) {
        const int a = 2 * i, b = 2 * i + 1;
        pairs[i] = TreeLevel(df, dot[a / R][a % R], dot[b / R][b % R], 0);
      }
      s[g] = TransposeSum<static_cast<size_t>(kN / 2)>(df, pairs);
      if constexpr (kCap) s[g] = cap(df, s[g]);
    }

    const bool full = nvalid == KS && j >= it.flo && j + KS <= it.fhi && !c.mi.per_key_parts();
    if (!full) {
      for (int g = 0; g < GS; ++g) {
        const int64_t ng = std::clamp<int64_t>(nvalid - g * KG, 0, KG);
        hn::Store(s[g], df, buf);
        ApplyMask(c, it, R, j + g * KG, ng, buf, R, 1);
        for (int i = static_cast<int>(ng) * R; i < kN; ++i) buf[i] = ninf;
        s[g] = hn::Load(df, buf);
      }
    }

    // Online softmax, lane-wise; the accumulators are rescaled only when a
    // row's max grows.
    VF mx = s[0];
    for (int g = 1; g < GS; ++g) mx = hn::Max(mx, s[g]);
    for (int t = 0; t < kRot; ++t) mx = hn::Max(mx, hn::TableLookupLanes(mx, rot[t]));
    const VF m_new = hn::Max(m, mx);
    if (!hn::AllFalse(df, hn::Gt(m_new, m))) {
      const VF safe = hn::IfThenZeroElse(hn::Eq(m_new, vninf), m_new);
      const VF corr = hn::Exp(df, hn::Sub(m, safe));
      l = hn::Mul(l, corr);
      hn::Store(corr, df, buf + GS * N);
      for (int r = 0; r < R; ++r) {
        const float f = buf[GS * N + static_cast<size_t>(r)];
        if (f == 1.0f) continue;
        const VF fv = hn::Set(df, f);
        float* a = acc + r * d;
        for (size_t x = 0; x < d; x += N) hn::Store(hn::Mul(hn::Load(df, a + x), fv), df, a + x);
      }
      m = m_new;
    }
    const VF safe = hn::IfThenZeroElse(hn::Eq(m, vninf), m);
    for (int g = 0; g < GS; ++g) {
      const VF pg = hn::Exp(df, hn::Sub(s[g], safe));
      l = hn::Add(l, pg);
      hn::Store(pg, df, buf + g * N);  // key k of the step, row r: buf[k * R + r]
    }

    // P·V of the step.
    size_t x = 0;
    for (; x + XC * N <= d; x += XC * N) GroupAccumulate<T, R, KS, XC, kD>(df, buf, vrow, d, x, acc);
    for (; x < d; x += N) GroupAccumulate<T, R, KS, 1, kD>(df, buf, vrow, d, x, acc);
  }

  // Each row's sum over its key lanes; m is the same in all of them.
  hn::Store(l, df, buf);
  hn::Store(m, df, buf + N);  // (GS + 1) x N floats fit in the tree-pairs region
  float lr[R], mr[R];
  for (int r = 0; r < R; ++r) {
    lr[r] = 0.0f;
    for (int k = 0; k < KG; ++k) lr[r] += buf[k * R + r];
    mr[r] = buf[N + static_cast<size_t>(r)];
  }
  FinishRows(c, p, it, idx, R, mr, lr, acc, partials);
}

// GroupItem for the item's row count (GroupRowsOk must hold).
template <DType T>
void GroupItemRows(const Call& c, const Plan& p, const Item& it, float* scratch, float* partials, int64_t idx) {
  const int64_t rows = it.gh * it.qr;
  WithHeadDim(static_cast<size_t>(c.s.d), [&](auto head_dim) HWY_ATTR {
    constexpr size_t kD = decltype(head_dim)::value;
    if constexpr (GroupRowsOk(8)) {
      if (rows == 8) {
        if (c.softcap > 0.0f) return GroupItem<T, 8, kD, true>(c, p, it, scratch, partials, idx);
        return GroupItem<T, 8, kD, false>(c, p, it, scratch, partials, idx);
      }
    }
    if constexpr (GroupRowsOk(4)) {
      if (rows == 4) {
        if (c.softcap > 0.0f) return GroupItem<T, 4, kD, true>(c, p, it, scratch, partials, idx);
        return GroupItem<T, 4, kD, false>(c, p, it, scratch, partials, idx);
      }
    }
    if constexpr (GroupRowsOk(2)) {
      if (rows == 2) {
        if (c.softcap > 0.0f) return GroupItem<T, 2, kD, true>(c, p, it, scratch, partials, idx);
        return GroupItem<T, 2, kD, false>(c, p, it, scratch, partials, idx);
      }
    }
    QKV_CHECK(false, "attention: no key-group kernel for ", rows, " rows");
  });
}

// Q8_0 keeps RowItem: on AVX3_DL its integer Q·K scores 16 keys at once.
template <DType T>
HWY_INLINE bool UseGroupKernel(int64_t rows) {
  return T != DType::Q8_0 && (rows == 8 || rows == 4 || rows == 2) && GroupRowsOk(rows);
}

#endif  // HWY_TARGET != HWY_SCALAR

}  // namespace HWY_NAMESPACE
}  // namespace qkv
HWY_AFTER_NAMESPACE();

#endif  // QKV_KERNELS_ATTENTION_GROUP_INL_H_

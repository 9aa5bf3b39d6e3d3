// Selection, layout and plain-C++ reference of the 256-bit inputs-in-lanes
// GEMM (kernels/quant/gemm_avx2_lanes.h). Compiled for the baseline: the
// kernels live in vec_dot_avxvnni_vex.cc and vec_dot_avxvnni_emulated.cc,
// reached only after the CPU checks here.
#include "kernels/quant/gemm_avx2_lanes.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/error.h"
#include "kernels/machine/cpu_features.h"
#include "kernels/quant/blocks.h"
#include "kernels/quant/row_groups.h"
#include "kernels/quant/vec_dot.h"
#include "kernels/quant/vec_dot_avxvnni.h"

namespace qkv {

namespace {

// The decoders' bias: weights become u = q + offset >= 0.
int lanes_offset(DType t) {
  switch (t) {
    case DType::Q8_0: case DType::IQ4_NL: case DType::IQ4_XS: return 128;
    case DType::Q4_0: return 8;
    case DType::Q5_0: return 16;
    case DType::Q3_K: return 4;
    case DType::Q6_K: return 32;
    default: return 0;  // Q4_1, Q5_1, Q2_K, Q4_K, Q5_K: unsigned q and a min
  }
}

// Words per (group, block): 32-value types 8 x 8 activation quads, 8 da,
// 8 sa, 8 corr (gemm_avx2_lanes-inl.h's kLanes8BlockWords); K-quants 64 x 8
// quads, 8 da, 8 asum per sub-block (LanesKWords).
constexpr size_t kBlockWords = 88;
size_t sub_values(DType t) {
  return t == DType::Q2_K || t == DType::Q3_K || t == DType::Q6_K ? 16 : 32;
}
size_t block_words(DType t) {
  return dtype_block_values(t) == 32 ? kBlockWords : 512 + 8 + kQK / sub_values(t) * 8;
}

// Super-block values q (bias-free), sub-block scales and mins (blocks.h),
// dmin; mins and dmin zero for the types without.
struct KBlock {
  int32_t q[kQK];
  int32_t sc[16], m[16];
  float d, dmin;
};

void k_block(DType t, const uint8_t* b, KBlock* k) {
  auto half = [](const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return f16_to_f32(h);
  };
  std::memset(k->m, 0, sizeof(k->m));
  k->dmin = 0.0f;
  switch (t) {
    case DType::Q2_K: case DType::Q3_K: {
      const bool q2 = t == DType::Q2_K;
      const uint8_t* qs = b + (q2 ? offsetof(BlockQ2_K, qs) : offsetof(BlockQ3_K, qs));
      for (int v = 0; v < 256; ++v) {
        k->q[v] = (qs[32 * (v / 128) + v % 32] >> (2 * ((v % 128) / 32))) & 3;
        if (!q2) k->q[v] -= (b[offsetof(BlockQ3_K, hmask) + v % 32] >> (v / 32)) & 1 ? 0 : 4;
      }
      for (int j = 0; j < 16; ++j) {
        if (q2) {
          k->sc[j] = b[offsetof(BlockQ2_K, scales) + j] & 15;
          k->m[j] = b[offsetof(BlockQ2_K, scales) + j] >> 4;
        } else {
          k->sc[j] = q3k_scale(b + offsetof(BlockQ3_K, scales), j);
        }
      }
      k->d = half(b + (q2 ? offsetof(BlockQ2_K, d) : offsetof(BlockQ3_K, d)));
      if (q2) k->dmin = half(b + offsetof(BlockQ2_K, dmin));
      return;
    }
    case DType::Q4_K: case DType::Q5_K: {
      const bool q5 = t == DType::Q5_K;
      const uint8_t* qs = b + (q5 ? offsetof(BlockQ5_K, qs) : offsetof(BlockQ4_K, qs));
      for (int v = 0; v < 256; ++v) {
        k->q[v] = (qs[32 * (v / 64) + v % 32] >> (4 * ((v % 64) / 32))) & 15;
        if (q5) k->q[v] |= ((b[offsetof(BlockQ5_K, qh) + v % 32] >> (v / 32)) & 1) << 4;
      }
      for (int j = 0; j < 8; ++j) {
        uint8_t sc, m;
        k4_scale_min(b + 4, j, &sc, &m);  // scales follow d and dmin in both
        k->sc[j] = sc;
        k->m[j] = m;
      }
      k->d = half(b);
      k->dmin = half(b + 2);
      return;
    }
    case DType::Q6_K: {
      const uint8_t* ql = b + offsetof(BlockQ6_K, ql);
      const uint8_t* qh = b + offsetof(BlockQ6_K, qh);
      for (int v = 0; v < 256; ++v) {
        const int h = v / 128, r = v % 128;
        k->q[v] = (((ql[64 * h + r % 64] >> (4 * (r / 64))) & 15) | ((qh[32 * h + r % 32] >> (2 * (r / 32))) & 3) << 4) - 32;
      }
      for (int j = 0; j < 16; ++j) k->sc[j] = reinterpret_cast<const int8_t*>(b + offsetof(BlockQ6_K, scales))[j];
      k->d = half(b + offsetof(BlockQ6_K, d));
      return;
    }
    default: {  // IQ4_XS
      const auto& x = *reinterpret_cast<const BlockIQ4_XS*>(b);
      for (int v = 0; v < 256; ++v) {
        const uint8_t* qs = x.qs + 16 * (v / 32);
        const int k32 = v % 32;
        k->q[v] = kIQ4NLValues[k32 < 16 ? qs[k32] & 15 : qs[k32 - 16] >> 4];
      }
      for (int j = 0; j < 8; ++j) k->sc[j] = iq4xs_scale(x, j);
      k->d = half(b);
      return;
    }
  }
}

// Block i's 32 weight values q of a 32-value type (blocks.h), as integers.
void block_values(DType t, const uint8_t* b, int32_t q[32]) {
  auto nibble = [](const uint8_t* qs, int k) { return k < 16 ? qs[k] & 15 : qs[k - 16] >> 4; };
  auto fifth = [](const uint8_t* qh, int k) {
    uint32_t h;
    std::memcpy(&h, qh, 4);
    return static_cast<int>((h >> k) & 1) << 4;
  };
  for (int k = 0; k < 32; ++k) {
    switch (t) {
      case DType::Q8_0: q[k] = reinterpret_cast<const BlockQ8_0*>(b)->qs[k]; break;
      case DType::Q4_0: q[k] = nibble(b + offsetof(BlockQ4_0, qs), k) - 8; break;
      case DType::Q4_1: q[k] = nibble(b + offsetof(BlockQ4_1, qs), k); break;
      case DType::Q5_0: q[k] = (nibble(b + offsetof(BlockQ5_0, qs), k) | fifth(b + offsetof(BlockQ5_0, qh), k)) - 16; break;
      case DType::Q5_1: q[k] = nibble(b + offsetof(BlockQ5_1, qs), k) | fifth(b + offsetof(BlockQ5_1, qh), k); break;
      default: q[k] = kIQ4NLValues[nibble(b + offsetof(BlockIQ4_NL, qs), k)]; break;
    }
  }
}

bool has_min(DType t) { return t == DType::Q4_1 || t == DType::Q5_1; }

// One activation block's fields: bytes, f32 scale and (Q8_1) f32 sum.
struct ActBlock {
  const int8_t* qs;
  float d, s;
};

ActBlock act_block(DType t, const uint8_t* xa, size_t i) {
  if (act_type(t) == ActType::kQ8_K) {
    const auto* a = reinterpret_cast<const BlockQ8_K*>(xa) + i;
    return ActBlock{a->qs, a->d, 0.0f};
  }
  if (act_type(t) == ActType::kQ8_1) {
    const auto* a = reinterpret_cast<const BlockQ8_1*>(xa) + i;
    return ActBlock{a->qs, f16_to_f32(a->d), f16_to_f32(a->s)};
  }
  const auto* a = reinterpret_cast<const BlockQ8_0*>(xa) + i;
  return ActBlock{a->qs, f16_to_f32(a->d), 0.0f};
}

// avx2_lanes_gemm_scalar for the K-quants.
void k_scalar(DType t, const uint8_t* rows, size_t cols, const uint8_t* xa, size_t M, float* y, size_t ldy,
              size_t n_rows) {
  const size_t nb = cols / kQK, rb = dtype_row_bytes(t, cols), sub = sub_values(t), bb = rb / nb;
  KBlock k;
  for (size_t r = 0; r < n_rows; ++r) {
    for (size_t c = 0; c < M; ++c) {
      const auto* in = reinterpret_cast<const BlockQ8_K*>(xa) + c * nb;
      float acc = 0.0f;
      for (size_t i = 0; i < nb; ++i) {
        k_block(t, rows + r * rb + i * bb, &k);
        int32_t s = 0, tm = 0;
        for (size_t j = 0; j < kQK / sub; ++j) {
          int32_t p = 0, asum = 0;
          for (size_t v = sub * j; v < sub * (j + 1); ++v) p += k.q[v] * in[i].qs[v], asum += in[i].qs[v];
          s += p * k.sc[j];
          tm += asum * k.m[j];
        }
        acc = std::fma(static_cast<float>(s), in[i].d * k.d, acc);
        if (t == DType::Q2_K || t == DType::Q4_K || t == DType::Q5_K) {
          acc = std::fma(static_cast<float>(tm), -(in[i].d * k.dmin), acc);
        }
      }
      y[c * ldy + r] = acc;
    }
  }
}

void check(DType t, size_t cols, size_t ldy, size_t n_rows, size_t M, const char* what) {
  QKV_CHECK(avx2_lanes_kernel(t) && dtype_row_ok(t, cols), what, ": ", cols, " columns of ", dtype_name(t),
            " (the ggml block types on x86-64)");
  QKV_CHECK(ldy >= n_rows || M <= 1, what, ": output stride ", ldy, " below the row count ", n_rows);
}

}  // namespace

bool avx2_lanes_kernel(DType t) {
#if defined(__x86_64__)
  return dtype_is_quantized(t);
#else
  (void)t;
  return false;
#endif
}

bool avx2_lanes_op_runs(Avx2LanesOp op, DType t) {
  if (!avx2_lanes_kernel(t)) return false;
  const CpuFeatures& h = host_cpu_features();
  switch (op) {
    case Avx2LanesOp::kVex: return h.avx_vnni;
    default: return h.avx2;
  }
}

namespace {
bool g_allowed = true;
}  // namespace

void set_avx2_lanes(bool allowed) { g_allowed = allowed; }

bool avx2_lanes_takes(DType t, size_t M, Avx2LanesOp* op) {
  if (!g_allowed || M < kAvx2LanesMinInputs || !avx2_lanes_kernel(t) || quant_gemm_available(t)) return false;
  const CpuFeatures& f = cpu_features();
  Avx2LanesOp chosen;
  if (avxvnni_takes(t)) {
    chosen = Avx2LanesOp::kVex;
  } else if (f.avx2) {
    chosen = Avx2LanesOp::kMaddubs;
  } else {
    return false;
  }
  if (op != nullptr) *op = chosen;
  return true;
}

size_t avx2_lanes_table_floats(DType t, size_t cols) {
  return cols / dtype_block_values(t) * block_words(t) / kAvx2LanesGroup;
}

void avx2_lanes_tables(DType t, const void* xa, size_t cols, size_t M, float* tables) {
  check(t, cols, 0, 0, 1, "avx2_lanes_tables");
  const size_t groups = (M + kAvx2LanesGroup - 1) / kAvx2LanesGroup, bv = dtype_block_values(t);
  const size_t nb = cols / bv, ab = act_bytes(t, cols), W = block_words(t), sub = sub_values(t);
  const int offset = lanes_offset(t);
  std::memset(tables, 0, groups * nb * W * sizeof(float));
  for (size_t c = 0; c < M; ++c) {
    const auto* in = static_cast<const uint8_t*>(xa) + c * ab;
    const size_t lane = c % kAvx2LanesGroup;
    float* group = tables + c / kAvx2LanesGroup * nb * W;
    for (size_t i = 0; i < nb; ++i) {
      const ActBlock a = act_block(t, in, i);
      float* blk = group + i * W;
      for (size_t k = 0; k < bv / 4; ++k) std::memcpy(blk + 8 * k + lane, a.qs + 4 * k, 4);
      blk[2 * bv + lane] = a.d;  // after the bv / 4 registers of 8 quads
      if (bv == 32) {
        int32_t sum = 0;
        for (int k = 0; k < 32; ++k) sum += a.qs[k];
        const int32_t corr = -offset * sum;
        blk[72 + lane] = a.s;
        std::memcpy(blk + 80 + lane, &corr, 4);
        continue;
      }
      for (size_t j = 0; j < kQK / sub; ++j) {
        int32_t sum = 0;
        for (size_t k = 0; k < sub; ++k) sum += a.qs[sub * j + k];
        std::memcpy(blk + 520 + 8 * j + lane, &sum, 4);
      }
    }
  }
}

void avx2_lanes_gemm(DType t, const void* rows, size_t cols, const float* tables, size_t M, float* y, size_t ldy,
                     size_t n_rows, Avx2LanesOp op, bool row_groups) {
  check(t, cols, ldy, n_rows, M, "avx2_lanes_gemm");
  QKV_CHECK(avx2_lanes_op_runs(op, t), "avx2_lanes_gemm: this CPU cannot run the ",
            op == Avx2LanesOp::kVex ? "AVX-VNNI" : op == Avx2LanesOp::kMaddubs ? "AVX2 vpmaddubsw" : "emulated AVX-VNNI",
            " op on ", dtype_name(t));
  QKV_CHECK(!row_groups || (row_groups_layout(t) && n_rows % kRowGroup == 0), "avx2_lanes_gemm: ", n_rows,
            " rows of ", dtype_name(t), " are not whole row groups");
  if (M == 0 || n_rows == 0) return;
  static thread_local std::vector<uint8_t> scratch;
  scratch.resize(detail::avx2_lanes_scratch_bytes(cols));
  auto run = [&](const uint8_t* w, size_t n, float* out) {
    if (op == Avx2LanesOp::kVex) {
      detail::avx2_lanes_vex_kernel(t, w, cols, tables, M, out, ldy, n, scratch.data());
    } else {
      detail::avx2_lanes_avx2_kernel(t, w, cols, tables, M, out, ldy, n, scratch.data(), op == Avx2LanesOp::kMaddubs);
    }
  };
  const auto* w = static_cast<const uint8_t*>(rows);
  if (!row_groups) return run(w, n_rows, y);
  const bool done = op == Avx2LanesOp::kVex
                        ? detail::avx2_lanes_vex_groups_kernel(t, w, cols, tables, M, y, ldy, n_rows, scratch.data())
                        : detail::avx2_lanes_avx2_groups_kernel(t, w, cols, tables, M, y, ldy, n_rows, scratch.data(),
                                                                op == Avx2LanesOp::kMaddubs);
  if (done) return;
  // Other types (none that models lay out in groups on these CPUs, row_groups_chosen):
  // a group's 16 rows back in rows, then the rows' kernel on them.
  static thread_local std::vector<uint8_t> unpacked;
  const size_t group_bytes = kRowGroup * dtype_row_bytes(t, cols);
  unpacked.resize(group_bytes);
  for (size_t r = 0; r < n_rows; r += kRowGroup) {
    unpack_row_groups(t, w + r / kRowGroup * group_bytes, kRowGroup, cols, unpacked.data());
    run(unpacked.data(), kRowGroup, y + r);
  }
}

void avx2_lanes_gemm_scalar(DType t, const void* rows, size_t cols, const void* xa, size_t M, float* y, size_t ldy,
                            size_t n_rows) {
  check(t, cols, ldy, n_rows, M, "avx2_lanes_gemm_scalar");
  if (dtype_block_values(t) == kQK) {
    k_scalar(t, static_cast<const uint8_t*>(rows), cols, static_cast<const uint8_t*>(xa), M, y, ldy, n_rows);
    return;
  }
  const size_t nb = cols / 32, rb = dtype_row_bytes(t, cols), ab = act_bytes(t, cols);
  const bool min = has_min(t);
  for (size_t r = 0; r < n_rows; ++r) {
    const auto* row = static_cast<const uint8_t*>(rows) + r * rb;
    for (size_t c = 0; c < M; ++c) {
      const auto* in = static_cast<const uint8_t*>(xa) + c * ab;
      float acc = 0.0f;
      for (size_t i = 0; i < nb; ++i) {
        const uint8_t* b = row + i * (rb / nb);
        int32_t q[32];
        block_values(t, b, q);
        const ActBlock a = act_block(t, in, i);
        int32_t s = 0;
        for (int k = 0; k < 32; ++k) s += q[k] * a.qs[k];
        uint16_t h;
        std::memcpy(&h, b, 2);  // d is every 32-value block's first field, m (Q4_1/Q5_1) its second
        const float dw = f16_to_f32(h);
        acc = std::fma(static_cast<float>(s), a.d * dw, acc);
        if (min) {
          std::memcpy(&h, b + 2, 2);
          acc = std::fma(f16_to_f32(h), a.s, acc);
        }
      }
      y[c * ldy + r] = acc;
    }
  }
}

size_t detail::avx2_lanes_scratch_bytes(size_t cols) {
  // Per row of a tile: 32 bytes (64 in two planes) and two floats per
  // 32-value block, or per super-block 256 bytes (512), per sub-block (16
  // or 8) 4 int32 (the scale's words and the min) and two floats
  // (gemm_avx2_lanes-inl.h, gemm_avx2_lanes_maddubs-inl.h): at most 96
  // bytes per 32 values.
  return 4 * (cols / 32) * 96;
}

}  // namespace qkv

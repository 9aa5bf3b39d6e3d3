// The attention tests' problem builder: one call's tensors with cache-like
// strides, the mask kinds, and the comparison with the fp64 reference
// (test_attention.cc, test_attention_softcap.cc).
//
// Tolerances. Both sides read the same stored K/V values (f16/bf16/q8_0 rows
// decoded identically), so the only differences are the kernel's f32
// arithmetic: a score is a d-term f32 dot product (error <= d·2⁻²⁴·Σ|q·k|·scale),
// exp() is accurate to a few ulp, and the output is a convex combination of
// values summed in f32 over Lk keys (relative error <= Lk·2⁻²⁴ worst case).
// With |q|, |k|, |v| <= 1 that gives the bound kTolPerTerm·(d + Lk) + kTolFloor used
// below (absolute, outputs are <= 1 in magnitude), a few times the observed error.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/dtype.h"
#include "tests/q8_query.h"

namespace qkv {
namespace attention_test {

constexpr double kTolPerTerm = 4.0 * 5.96e-8;  // 4 ulp of f32 per accumulated term
constexpr double kTolFloor = 2e-6;
inline const float kInf = std::numeric_limits<float>::infinity();

inline double tolerance(int64_t d, int64_t lk) { return kTolPerTerm * double(d + lk) + kTolFloor; }

// Tensors of one attention call with configurable strides. K/V are laid out like a
// KV cache ([B][Hkv][capacity][row], rows possibly padded); Q and out either
// head-major [B][H][L][d] or token-major [B][L][H][d] (what a decoder produces).
struct Problem {
  AttentionShape s;
  DType type = DType::F32;
  std::vector<float> q, out, out_ref;
  std::vector<uint8_t> k, v;
  QueryView qv;
  OutputView ov, ov_ref;
  KVView kv, vv;
  AttentionMask mask;
  std::vector<float> additive;
  std::vector<uint8_t> padding;
  std::vector<int64_t> kv_len, pos0;

  Problem(const AttentionShape& shape, DType t, bool token_major, int64_t extra_rows, int64_t row_pad_bytes)
      : s(shape), type(t) {
    const int64_t hq_rows = s.B * s.Hq * s.Lq * s.d;
    q.assign(static_cast<size_t>(hq_rows), 0.0f);
    out.assign(static_cast<size_t>(hq_rows), -7.0f);  // garbage the kernel must overwrite
    out_ref.assign(static_cast<size_t>(hq_rows), -7.0f);
    if (token_major) {
      qv = {q.data(), s.Lq * s.Hq * s.d, s.d, s.Hq * s.d};
      ov = {out.data(), s.Lq * s.Hq * s.d, s.d, s.Hq * s.d};
      ov_ref = {out_ref.data(), s.Lq * s.Hq * s.d, s.d, s.Hq * s.d};
    } else {
      qv = {q.data(), s.Hq * s.Lq * s.d, s.Lq * s.d, s.d};
      ov = {out.data(), s.Hq * s.Lq * s.d, s.Lq * s.d, s.d};
      ov_ref = {out_ref.data(), s.Hq * s.Lq * s.d, s.Lq * s.d, s.d};
    }
    const int64_t row = static_cast<int64_t>(dtype_row_bytes(t, static_cast<size_t>(s.d))) + row_pad_bytes;
    const int64_t cap = s.Lk + extra_rows;
    const size_t bytes = static_cast<size_t>(s.B * s.Hkv * cap * row);
    k.assign(bytes, 0);
    v.assign(bytes, 0);
    kv = {k.data(), t, s.Hkv * cap * row, cap * row, row};
    vv = {v.data(), t, s.Hkv * cap * row, cap * row, row};
  }

  float* q_row(int64_t b, int64_t h, int64_t i) {
    return q.data() + b * qv.batch_stride + h * qv.head_stride + i * qv.row_stride;
  }
  const float* out_row(int64_t b, int64_t h, int64_t i) const {
    return out.data() + b * ov.batch_stride + h * ov.head_stride + i * ov.row_stride;
  }
  const float* ref_row(int64_t b, int64_t h, int64_t i) const {
    return out_ref.data() + b * ov.batch_stride + h * ov.head_stride + i * ov.row_stride;
  }
  uint8_t* k_row(int64_t b, int64_t h, int64_t j) {
    return k.data() + b * kv.batch_stride + h * kv.head_stride + j * kv.row_stride;
  }
  uint8_t* v_row(int64_t b, int64_t h, int64_t j) {
    return v.data() + b * vv.batch_stride + h * vv.head_stride + j * vv.row_stride;
  }
  void set_k(int64_t b, int64_t h, int64_t j, const float* x) { encode_row(type, x, static_cast<size_t>(s.d), k_row(b, h, j)); }
  void set_v(int64_t b, int64_t h, int64_t j, const float* x) { encode_row(type, x, static_cast<size_t>(s.d), v_row(b, h, j)); }

  void fill_random(std::mt19937& rng, float qk_range = 1.0f) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(s.d));
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t h = 0; h < s.Hq; ++h)
        for (int64_t i = 0; i < s.Lq; ++i) {
          float* r = q_row(b, h, i);
          for (int64_t c = 0; c < s.d; ++c) r[c] = u(rng) * qk_range;
        }
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t h = 0; h < s.Hkv; ++h)
        for (int64_t j = 0; j < s.Lk; ++j) {
          for (auto& e : x) e = u(rng) * qk_range;
          set_k(b, h, j, x.data());
          for (auto& e : x) e = u(rng);
          set_v(b, h, j, x.data());
        }
  }

  void run(const AttentionOptions& o = {}) { attention(s, qv, kv, vv, mask, ov, o); }
  void run_ref(const AttentionOptions& o = {}) { attention_reference(s, qv, kv, vv, mask, ov_ref, o); }

  // Largest |kernel - reference| over every output element.
  double max_diff() const {
    double worst = 0.0;
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t h = 0; h < s.Hq; ++h)
        for (int64_t i = 0; i < s.Lq; ++i) {
          const float* a = out_row(b, h, i);
          const float* r = ref_row(b, h, i);
          for (int64_t c = 0; c < s.d; ++c) {
            const double e = std::fabs(double(a[c]) - double(r[c]));
            if (!(e <= worst)) worst = std::isnan(e) ? INFINITY : e;
          }
        }
    return worst;
  }
};

enum MaskKind {
  kNone, kCausal, kCausalOffset, kAdditive, kPadding, kWindow, kWindowCausal, kKvLen, kBatchedDecode, kMaskKinds
};
const char* const kMaskNames[] = {"none", "causal", "causal+offset", "additive", "key-padding",
                                  "window", "window+causal", "kv_len", "batched-decode"};

inline void apply_mask(Problem& p, MaskKind kind, std::mt19937& rng) {
  const AttentionShape& s = p.s;
  std::uniform_int_distribution<int64_t> any_key(0, std::max<int64_t>(s.Lk, 1));
  switch (kind) {
    case kNone: break;
    case kCausal:
      p.mask.causal = true;
      p.mask.q_pos0 = std::max<int64_t>(0, s.Lk - s.Lq);
      break;
    case kCausalOffset:
      p.mask.causal = true;
      p.mask.q_pos0 = any_key(rng);
      break;
    case kAdditive: {
      p.additive.resize(static_cast<size_t>(s.Lq * (s.Lk + 3)));
      std::uniform_real_distribution<float> u(0.0f, 1.0f);
      for (auto& e : p.additive) {
        const float r = u(rng);
        e = r < 0.6f ? 0.0f : r < 0.7f ? -1e9f : r < 0.85f ? -kInf : (u(rng) - 0.5f) * 4.0f;
      }
      // One row fully -inf: it must come out as zeros.
      if (s.Lq > 1)
        for (int64_t j = 0; j < s.Lk; ++j) p.additive[static_cast<size_t>((s.Lq / 2) * (s.Lk + 3) + j)] = -kInf;
      p.mask.additive = p.additive.data();
      p.mask.additive_row_stride = s.Lk + 3;
      break;
    }
    case kPadding: {
      p.padding.assign(static_cast<size_t>(s.B * s.Lk), 0);
      std::bernoulli_distribution pad(0.3);
      for (auto& e : p.padding) e = pad(rng) ? 1 : 0;
      p.mask.key_padding = p.padding.data();
      break;
    }
    case kWindow:
      p.mask.window = 1 + any_key(rng) / 3;
      p.mask.q_pos0 = any_key(rng) / 2;
      break;
    case kWindowCausal:
      p.mask.causal = true;
      p.mask.window = 1 + any_key(rng) / 4;
      p.mask.q_pos0 = std::max<int64_t>(0, s.Lk - s.Lq);
      break;
    case kKvLen:
      p.kv_len.resize(static_cast<size_t>(s.B));
      for (auto& e : p.kv_len) e = std::min<int64_t>(s.Lk, any_key(rng));
      if (s.B > 1) p.kv_len[0] = 0;  // a sequence with no keys at all
      p.mask.kv_len_per_batch = p.kv_len.data();
      break;
    case kBatchedDecode:
      p.kv_len.resize(static_cast<size_t>(s.B));
      p.pos0.resize(static_cast<size_t>(s.B));
      for (int64_t b = 0; b < s.B; ++b) {
        p.kv_len[b] = std::min<int64_t>(s.Lk, 1 + any_key(rng));
        p.pos0[b] = std::max<int64_t>(0, p.kv_len[b] - s.Lq);
      }
      p.mask.causal = true;
      p.mask.kv_len_per_batch = p.kv_len.data();
      p.mask.q_pos0_per_batch = p.pos0.data();
      break;
    default: break;
  }
}

inline std::string describe(const Problem& p, MaskKind kind, int threads) {
  const AttentionShape& s = p.s;
  return "B=" + std::to_string(s.B) + " Hq=" + std::to_string(s.Hq) + " Hkv=" + std::to_string(s.Hkv) +
         " Lq=" + std::to_string(s.Lq) + " Lk=" + std::to_string(s.Lk) + " d=" + std::to_string(s.d) + " " +
         dtype_name(p.type) + " mask=" + kMaskNames[kind] + " threads=" + std::to_string(threads);
}

// Q8_0 decode on AVX-512 VNNI CPUs: see test_attention.cc ("q8_0 decode").
// Replaces every query row by its quantized value (tests/q8_query.h).
inline void quantize_queries_like_decode(Problem& p, float scale) {
  const AttentionShape& s = p.s;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.Hq; ++h)
      for (int64_t i = 0; i < s.Lq; ++i) testing::quantize_query_like_q8_decode(p.q_row(b, h, i), s.d, scale);
}

// max |kernel - reference| over the exact query and over the quantized query:
// the smaller of the two (which one applies depends on the CPU's SIMD target).
inline double q8_decode_diff(Problem& p, const AttentionOptions& o) {
  p.run(o);
  p.run_ref(o);
  const double exact = p.max_diff();
  Problem quant = p;
  quant.qv.data = quant.q.data();
  quant.ov.data = quant.out.data();
  quant.ov_ref.data = quant.out_ref.data();
  quant.kv.data = quant.k.data();
  quant.vv.data = quant.v.data();
  quant.mask.kv_len_per_batch = quant.kv_len.empty() ? nullptr : quant.kv_len.data();
  quant.mask.q_pos0_per_batch = quant.pos0.empty() ? nullptr : quant.pos0.data();
  const float scale = o.scale != 0.0f ? o.scale : 1.0f / std::sqrt(static_cast<float>(p.s.d));
  quantize_queries_like_decode(quant, scale);
  quant.run_ref(o);  // the reference on the quantized query; p.out is the kernel's output
  double emulated = 0.0;
  for (size_t x = 0; x < p.out.size(); ++x) {
    const double e = std::fabs(double(p.out[x]) - double(quant.out_ref[x]));
    if (!(e <= emulated)) emulated = std::isnan(e) ? INFINITY : e;
  }
  return std::min(exact, emulated);
}

}  // namespace attention_test
}  // namespace qkv

// Internal to the attention kernels (attention.cc, reference.cc): the
// argument checks both entry points share, and the one definition of which keys a
// query row may see, so the streaming kernel and the reference agree on masking.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/attention.h"
#include "kernels/dtype.h"
#include "kernels/error.h"

namespace qkv {
namespace attn {

// Masking resolved for one call: defaults filled in.
struct MaskInfo {
  AttentionMask m;
  int64_t Lk = 0;
  int64_t add_stride = 0;  // additive mask row stride
  int64_t pad_stride = 0;  // key padding batch stride

  int64_t pos0(int64_t b) const { return m.q_pos0_per_batch ? m.q_pos0_per_batch[b] : m.q_pos0; }
  int64_t kv_len(int64_t b) const { return m.kv_len_per_batch ? m.kv_len_per_batch[b] : Lk; }

  // Keys [lo, hi) a query at position pos of batch row b can possibly see
  // (causal, window and key count only; padding and the additive mask are per key).
  void key_range(int64_t b, int64_t pos, int64_t* lo, int64_t* hi) const {
    int64_t l = 0, h = kv_len(b);
    if (m.causal) h = std::min(h, pos + 1);
    if (m.window > 0) {
      l = std::max<int64_t>(l, pos - m.window + 1);
      if (!m.causal) h = std::min(h, pos + m.window);
    }
    // An empty range is [min(l, kv_len), same): never past the keys that exist.
    *lo = std::min(l, kv_len(b));
    *hi = std::max(h, *lo);
  }

  bool per_key_parts() const { return m.additive != nullptr || m.key_padding != nullptr; }

  // The additive term for (batch b, query row i, key j) given j is inside
  // key_range: -inf when the key is padded out.
  float per_key_term(int64_t b, int64_t i, int64_t j) const {
    if (m.key_padding && m.key_padding[b * pad_stride + j] != 0)
      return -std::numeric_limits<float>::infinity();
    return m.additive ? m.additive[i * add_stride + j] : 0.0f;
  }
};

// A scaled score after soft-capping (cap > 0; cap 0 leaves it), in fp64: the
// reference's and the materialized weights' form of the kernels' SoftCap.
inline double soft_capped(double scaled, double cap) { return cap > 0 ? cap * std::tanh(scaled / cap) : scaled; }

inline bool mul_ok(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }

// Checks every argument; throws qkv::Error naming the problem. Returns the
// resolved mask. `who` prefixes messages ("attention", "attention_reference").
inline MaskInfo validate(const char* who, const AttentionShape& s, const QueryView& q,
                         const KVView& k, const KVView& v, const AttentionMask& mask,
                         const OutputView& out, const AttentionOptions& opts) {
  QKV_CHECK(s.B >= 0 && s.Lq >= 0 && s.Lk >= 0, who, ": B, Lq and Lk must be >= 0 (got B=", s.B,
            ", Lq=", s.Lq, ", Lk=", s.Lk, ")");
  QKV_CHECK(s.Hq >= 1 && s.Hkv >= 1, who, ": Hq and Hkv must be >= 1 (got Hq=", s.Hq, ", Hkv=",
            s.Hkv, ")");
  QKV_CHECK(s.Hq % s.Hkv == 0, who, ": Hq (", s.Hq, ") must be a multiple of Hkv (", s.Hkv, ")");
  QKV_CHECK(s.d >= 1, who, ": head dim d must be >= 1 (got ", s.d, ")");
  QKV_CHECK(s.d <= (int64_t(1) << 20), who, ": head dim d = ", s.d, " is unreasonably large");
  QKV_CHECK(s.Lk < (int64_t(1) << 40) && s.Lq < (int64_t(1) << 40), who,
            ": Lq/Lk too large (Lq=", s.Lq, ", Lk=", s.Lk, ")");
  const int kt = static_cast<int>(k.type), vt = static_cast<int>(v.type);
  QKV_CHECK(kt >= 0 && kt <= 3 && vt >= 0 && vt <= 3, who, ": unknown K/V element type");
  QKV_CHECK(k.type == v.type, who, ": K (", dtype_name(k.type), ") and V (", dtype_name(v.type),
            ") must have the same element type");
  QKV_CHECK(dtype_row_ok(k.type, static_cast<size_t>(s.d)), who, ": K/V type ", dtype_name(k.type),
            " needs d to be a multiple of ", dtype_block_values(k.type), " (got d=", s.d, ")");
  QKV_CHECK(std::isfinite(opts.scale), who, ": scale must be finite");
  // (The kernels multiply by 1/softcap, which must be finite too.)
  QKV_CHECK(std::isfinite(opts.softcap) && opts.softcap >= 0.0f, who, ": softcap must be finite and >= 0 (got ",
            opts.softcap, ")");
  QKV_CHECK(opts.softcap == 0.0f || std::isfinite(1.0f / opts.softcap), who, ": softcap ", opts.softcap,
            " is too small (1/softcap overflows)");
  QKV_CHECK(opts.threads >= 0, who, ": threads must be >= 0 (got ", opts.threads, ")");
  int64_t rows = 0, pairs = 0;
  QKV_CHECK(mul_ok(s.B, s.Hq, &rows) && mul_ok(rows, s.Lq, &rows) && mul_ok(rows, s.Lk, &pairs),
            who, ": B*Hq*Lq*Lk overflows");
  const bool any_rows = rows > 0;
  if (any_rows) {
    QKV_CHECK(q.data != nullptr, who, ": Q data is null");
    QKV_CHECK(out.data != nullptr, who, ": output data is null");
  }
  if (any_rows && s.Lk > 0) {
    QKV_CHECK(k.data != nullptr, who, ": K data is null");
    QKV_CHECK(v.data != nullptr, who, ": V data is null");
  }
  MaskInfo mi;
  mi.m = mask;
  mi.Lk = s.Lk;
  QKV_CHECK(mask.window >= 0, who, ": window must be >= 0 (got ", mask.window, ")");
  QKV_CHECK(mask.q_pos0 >= 0, who, ": q_pos0 must be >= 0 (got ", mask.q_pos0, ")");
  QKV_CHECK(mask.additive_row_stride == 0 || mask.additive_row_stride >= s.Lk, who,
            ": additive_row_stride (", mask.additive_row_stride, ") must be 0 or >= Lk (", s.Lk, ")");
  QKV_CHECK(mask.key_padding_batch_stride == 0 || mask.key_padding_batch_stride >= s.Lk, who,
            ": key_padding_batch_stride (", mask.key_padding_batch_stride, ") must be 0 or >= Lk (",
            s.Lk, ")");
  mi.add_stride = mask.additive_row_stride ? mask.additive_row_stride : s.Lk;
  mi.pad_stride = mask.key_padding_batch_stride ? mask.key_padding_batch_stride : s.Lk;
  for (int64_t b = 0; b < s.B; ++b) {
    if (mask.kv_len_per_batch) {
      const int64_t n = mask.kv_len_per_batch[b];
      QKV_CHECK(n >= 0 && n <= s.Lk, who, ": kv_len_per_batch[", b, "] = ", n,
                " is outside 0..Lk (Lk=", s.Lk, ")");
    }
    if (mask.q_pos0_per_batch) {
      const int64_t p = mask.q_pos0_per_batch[b];
      QKV_CHECK(p >= 0 && p < (int64_t(1) << 40), who, ": q_pos0_per_batch[", b, "] = ", p,
                " must be >= 0");
    }
  }
  QKV_CHECK(mask.q_pos0 < (int64_t(1) << 40) && mask.window < (int64_t(1) << 40), who,
            ": q_pos0/window too large");
  return mi;
}

}  // namespace attn
}  // namespace qkv

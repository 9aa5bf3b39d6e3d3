// ctest-labels: kernels asan
// The streaming attention kernel against the scalar fp64 reference, textbook
// examples with known numbers, softmax/attention properties, and bad arguments.
//
// Tolerances: tests/attention_problem.h.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "kernels/attention.h"
#include "kernels/dtype.h"
#include "kernels/error.h"
#include "tests/attention_problem.h"
#include "tests/simd_targets.h"

using namespace qkv;
using namespace qkv::attention_test;

namespace {

void set_row(Problem& p, bool key, int64_t j, const std::vector<float>& x) {
  if (key) p.set_k(0, 0, j, x.data());
  else p.set_v(0, 0, j, x.data());
}

}  // namespace

TEST_CASE("textbook example: one query, six keys, d = 4") {
  const std::vector<std::vector<float>> keys = {{0.9f, 0.1f, -0.2f, 0.4f}, {0.3f, 1.2f, 0.5f, -0.1f},
                                                {0.6f, -0.3f, 0.7f, 0.9f}, {-0.2f, 0.5f, 0.1f, 0.3f},
                                                {0.8f, 0.0f, 0.2f, -0.1f}, {0.1f, 0.4f, -0.3f, 0.6f}};
  const std::vector<std::vector<float>> values = {{0.2f, 0.3f, -0.1f, 0.4f}, {0.5f, -0.2f, 0.8f, 0.1f},
                                                  {0.3f, 0.7f, 0.2f, -0.3f}, {-0.1f, 0.4f, 0.5f, 0.2f},
                                                  {0.4f, 0.1f, -0.2f, 0.3f}, {0.0f, 0.6f, 0.3f, 0.5f}};
  const float expect_w[] = {0.1917f, 0.1247f, 0.2734f, 0.0996f, 0.2016f, 0.1090f};
  const float expect_o[] = {0.2534f, 0.3494f, 0.1775f, 0.1420f};
  Problem p({1, 1, 1, 1, 6, 4}, DType::F32, false, 0, 0);
  const float q[] = {1.2f, -0.5f, 0.8f, 0.3f};
  std::copy(q, q + 4, p.q_row(0, 0, 0));
  for (int j = 0; j < 6; ++j) {
    set_row(p, true, j, keys[j]);
    set_row(p, false, j, values[j]);
  }
  // The published figures have 4 decimals: they are within 5e-5 of exact; f32 adds ~1e-7.
  const double tol = 5.1e-5;
  std::vector<float> w(6), w_ref(6);
  float lse = 0, lse_ref = 0;
  AttentionOptions o;
  o.weights = w.data();
  o.lse = &lse;
  p.run(o);
  AttentionOptions oref;
  oref.weights = w_ref.data();
  oref.lse = &lse_ref;
  p.run_ref(oref);
  for (int j = 0; j < 6; ++j) {
    CHECK(std::fabs(w[j] - expect_w[j]) <= tol);
    CHECK(std::fabs(w_ref[j] - expect_w[j]) <= tol);
  }
  for (int c = 0; c < 4; ++c) {
    CHECK(std::fabs(p.out[c] - expect_o[c]) <= tol);
    CHECK(std::fabs(p.out_ref[c] - expect_o[c]) <= tol);
  }
  CHECK(std::fabs(lse - lse_ref) <= 1e-6);
  // Without the weights option the streaming path alone gives the same output.
  Problem p2 = p;
  p2.qv.data = p2.q.data();
  p2.ov.data = p2.out.data();
  p2.kv.data = p2.k.data();
  p2.vv.data = p2.v.data();
  std::fill(p2.out.begin(), p2.out.end(), -1.0f);
  p2.run();
  for (int c = 0; c < 4; ++c) CHECK(std::fabs(p2.out[c] - expect_o[c]) <= tol);
}

TEST_CASE("textbook example: two tokens, d_k = 2") {
  Problem p({1, 1, 1, 2, 2, 2}, DType::F32, false, 0, 0);
  const float qs[2][2] = {{0.76f, 0.09f}, {0.19f, 0.62f}};
  const std::vector<std::vector<float>> keys = {{0.35f, 0.42f}, {0.25f, 0.18f}};
  const std::vector<std::vector<float>> values = {{0.21f, 0.33f}, {0.28f, 0.15f}};
  for (int i = 0; i < 2; ++i) std::copy(qs[i], qs[i] + 2, p.q_row(0, 0, i));
  for (int j = 0; j < 2; ++j) {
    set_row(p, true, j, keys[j]);
    set_row(p, false, j, values[j]);
  }
  const float expect_w[2][2] = {{0.5172f, 0.4828f}, {0.5296f, 0.4704f}};
  const float expect_o[2][2] = {{0.2438f, 0.2431f}, {0.2429f, 0.2453f}};
  std::vector<float> w(4);
  AttentionOptions o;
  o.weights = w.data();
  p.run(o);
  p.run_ref();
  const double tol = 5.1e-5;  // 4 published decimals
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      CHECK(std::fabs(w[i * 2 + j] - expect_w[i][j]) <= tol);
      CHECK(std::fabs(p.out_row(0, 0, i)[j] - expect_o[i][j]) <= tol);
      CHECK(std::fabs(p.ref_row(0, 0, i)[j] - expect_o[i][j]) <= tol);
    }
}

TEST_CASE("random shapes, every mask kind and K/V type, against the reference") {
  const int64_t groups[] = {1, 2, 4, 8};
  const int64_t dims[] = {1, 3, 8, 64, 80, 128, 256};
  const int64_t lqs[] = {1, 7, 64, 300};
  const int64_t lks[] = {1, 5, 64, 1000, 4097};
  const DType types[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0};
  // Reference work (query-key pairs times d, over all heads) allowed per case;
  // large Lq x Lk pairs get small d and few heads so the suite stays fast under ASan.
  const double budget = 6e6;
  std::mt19937 rng(1234);
  const int n_cases = 2 * 7 * 9;  // every d and mask kind several times; sets cycle at coprime rates
  int checked = 0;
  for (int n = 0; n < n_cases; ++n) {
    const int64_t g = groups[(n / 7) % 4];
    int64_t d = dims[n % 7];
    int li = (n / 3) % 4;
    const int64_t lk = lks[(n / 2 + n / 9) % 5];
    const MaskKind kind = static_cast<MaskKind>(n % kMaskKinds);
    DType type = types[(n / 5) % 4];
    if (!dtype_row_ok(type, static_cast<size_t>(d))) type = DType::F16;
    const int64_t B = (kind == kPadding || kind == kKvLen || kind == kBatchedDecode || n % 4 == 0) ? 2 : 1;
    int64_t hkv = n % 3 == 0 ? 2 : 1;
    while (li > 0 && double(B * g * hkv) * double(lqs[li]) * double(lk) * double(d) > budget) --li;
    if (double(B * g * hkv) * double(lqs[li]) * double(lk) * double(d) > budget) hkv = 1;
    while (double(B * g * hkv) * double(lqs[li]) * double(lk) * double(d) > budget && d > 8) d /= 2;
    if (!dtype_row_ok(type, static_cast<size_t>(d))) type = DType::F16;
    const AttentionShape s{B, g * hkv, hkv, lqs[li], lk, d};
    Problem p(s, type, n % 2 == 1, n % 3, (type == DType::F32 && n % 5 == 0) ? 4 : 2 * (n % 2));
    p.fill_random(rng);
    apply_mask(p, kind, rng);
    const int threads = 1 + n % 2;
    AttentionOptions o;
    o.threads = threads;
    std::vector<float> lse(static_cast<size_t>(B * s.Hq * s.Lq)), lse_ref(lse.size());
    o.lse = lse.data();
    p.run(o);
    AttentionOptions oref;
    oref.lse = lse_ref.data();
    p.run_ref(oref);
    INFO(describe(p, kind, threads));
    CHECK(p.max_diff() <= tolerance(d, lk));
    for (size_t r = 0; r < lse.size(); ++r) {
      if (std::isinf(lse_ref[r])) {
        CHECK(lse[r] == lse_ref[r]);
      } else {
        CHECK(std::fabs(lse[r] - lse_ref[r]) <= tolerance(d, lk) * (1.0 + std::fabs(lse_ref[r])));
      }
    }
    ++checked;
  }
  CHECK(checked == n_cases);
}

TEST_CASE("each K/V type matches the reference on prefill and split decode") {
  std::mt19937 rng(99);
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
    for (int64_t d : {64, 128}) {
      // Prefill tile path: GQA causal.
      {
        Problem p({1, 8, 2, 40, 70, d}, t, true, 1, 0);
        p.fill_random(rng);
        p.mask.causal = true;
        p.mask.q_pos0 = 30;
        AttentionOptions o;
        o.threads = 2;
        p.run(o);
        p.run_ref();
        INFO("prefill ", dtype_name(t), " d=", d);
        CHECK(p.max_diff() <= tolerance(d, 70));
      }
      // Decode with a long key range: the keys are split across threads and merged.
      {
        Problem p({1, 8, 1, 1, 2500, d}, t, false, 0, 0);
        p.fill_random(rng);
        AttentionOptions o;
        o.threads = 2;
        p.run(o);
        p.run_ref();
        INFO("decode ", dtype_name(t), " d=", d);
        CHECK(p.max_diff() <= tolerance(d, 2500));
        Problem mha({1, 2, 2, 1, 700, d}, t, false, 0, 0);
        mha.fill_random(rng);
        mha.run(o);
        mha.run_ref();
        CHECK(mha.max_diff() <= tolerance(d, 700));
      }
    }
  }
}

// Q8_0 decode on AVX-512 VNNI CPUs scores keys with integer dot products against
// the query quantized per 32-value block (the kernel's ScoresQ8Vnni): scaled
// q ≈ dq * q8, dq = max|q_block| / 127, q8 = round(q / dq) in [-127, 127]. The
// quantized query is then exact input, so the result must match the fp64
// reference run on that query within the f32 tolerance. Against the unquantized
// reference the error is larger: each q element moves by <= dq/2, a score by
// delta <= Σ_blocks dq/2 · Σ|k| over the block, and the output by
// <= max|v| · (exp(2 delta) - 1) (the same argument as the cache-type bounds of
// test_kv_cache.cc) — too loose to catch mistakes, hence the emulation. Other
// targets keep the f32 path: an output must match one of the two references
// to the f32 tolerance (q8_decode_diff, tests/attention_problem.h).

TEST_CASE("q8_0 decode: integer Q·K path matches the reference on the quantized query") {
  std::mt19937 rng(2024);
  struct Case {
    AttentionShape s;
    int64_t row_pad;  // bytes of padding after each K/V row
    bool batched;     // per-batch key counts and positions
    float scale;
  };
  // Key counts around the 16-key groups and 64-key blocks (tails of 1..15), GQA
  // groups of 1..8, d from one block to eight, padded rows, several threads.
  const Case cases[] = {
      {{1, 8, 1, 1, 1, 128}, 0, false, 0.0f},   {{1, 8, 1, 1, 5, 128}, 0, false, 0.0f},
      {{1, 8, 1, 1, 17, 32}, 6, false, 0.0f},   {{1, 4, 1, 1, 63, 64}, 0, false, 0.0f},
      {{1, 6, 2, 1, 100, 96}, 2, false, 0.0f},  {{1, 32, 4, 1, 300, 128}, 0, false, 0.0f},
      {{1, 2, 2, 1, 129, 256}, 0, false, 0.5f}, {{3, 8, 4, 1, 90, 128}, 0, true, 0.0f},
      {{1, 3, 3, 1, 33, 64}, 4, false, 0.0f},   {{1, 2, 1, 3, 40, 64}, 0, false, 0.0f},
      {{1, 8, 1, 1, 2000, 128}, 0, false, 0.0f},
  };
  for (const Case& c : cases) {
    for (int threads : {1, 2}) {
      Problem p(c.s, DType::Q8_0, false, 1, c.row_pad);
      p.fill_random(rng);
      // A query block of zeros (scale 0) and one with a single large value.
      std::fill(p.q_row(0, 0, 0), p.q_row(0, 0, 0) + 32, 0.0f);
      if (c.s.Hq > 1) p.q_row(0, 1, 0)[c.s.d - 1] = 40.0f;
      if (c.batched) apply_mask(p, kBatchedDecode, rng);
      AttentionOptions o;
      o.threads = threads;
      o.scale = c.scale;
      INFO(describe(p, c.batched ? kBatchedDecode : kNone, threads));
      CHECK(q8_decode_diff(p, o) <= tolerance(c.s.d, c.s.Lk));
    }
  }
}

TEST_CASE("decode on every compiled SIMD target matches the reference") {
  // The row kernel's reduction tree and the Q8_0 integer path are target
  // specific (AVX-512 shuffles, AVX3_DL VNNI; generic permutes elsewhere).
  std::mt19937 rng(77);
  testing::for_each_simd_target([&] {
    for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
      for (const AttentionShape& s : {AttentionShape{1, 8, 1, 1, 77, 128}, AttentionShape{2, 4, 2, 1, 33, 64},
                                      AttentionShape{1, 4, 4, 1, 200, 32}, AttentionShape{1, 2, 1, 2, 19, 256}}) {
        Problem p(s, t, true, 2, 0);
        p.fill_random(rng);
        if (s.B > 1) apply_mask(p, kBatchedDecode, rng);
        AttentionOptions o;
        o.threads = 2;
        INFO(describe(p, s.B > 1 ? kBatchedDecode : kNone, 2));
        if (t == DType::Q8_0) {
          CHECK(q8_decode_diff(p, o) <= tolerance(s.d, s.Lk));
        } else {
          p.run(o);
          p.run_ref(o);
          CHECK(p.max_diff() <= tolerance(s.d, s.Lk));
        }
      }
    }
  });
}

TEST_CASE("properties") {
  std::mt19937 rng(7);

  SUBCASE("weight rows sum to 1 and match the reference weights") {
    Problem p({2, 4, 2, 9, 37, 16}, DType::F16, false, 0, 0);
    p.fill_random(rng);
    apply_mask(p, kPadding, rng);
    std::vector<float> w(static_cast<size_t>(2 * 4 * 9 * 37)), wr(w.size());
    AttentionOptions o;
    o.weights = w.data();
    p.run(o);
    AttentionOptions oref;
    oref.weights = wr.data();
    p.run_ref(oref);
    for (int64_t row = 0; row < 2 * 4 * 9; ++row) {
      double sum = 0.0;
      for (int64_t j = 0; j < 37; ++j) {
        sum += w[row * 37 + j];
        CHECK(std::fabs(w[row * 37 + j] - wr[row * 37 + j]) <= 1e-5);
      }
      const bool all_padded = std::all_of(p.padding.begin() + (row / 36) * 37, p.padding.begin() + (row / 36 + 1) * 37,
                                          [](uint8_t x) { return x != 0; });
      CHECK(std::fabs(sum - (all_padded ? 0.0 : 1.0)) <= 1e-5);
    }
  }

  SUBCASE("permuting keys with their values leaves the output unchanged") {
    const int64_t lk = 150, d = 24;
    Problem p({1, 2, 1, 5, lk, d}, DType::F32, false, 0, 0);
    p.fill_random(rng);
    p.run();
    Problem perm = p;
    perm.kv.data = perm.k.data();
    perm.vv.data = perm.v.data();
    perm.qv.data = perm.q.data();
    perm.ov.data = perm.out.data();
    std::vector<int64_t> order(lk);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    const size_t row = static_cast<size_t>(p.kv.row_stride);
    for (int64_t j = 0; j < lk; ++j) {
      std::memcpy(perm.k_row(0, 0, j), p.k_row(0, 0, order[j]), row);
      std::memcpy(perm.v_row(0, 0, j), p.v_row(0, 0, order[j]), row);
    }
    perm.run();
    for (size_t x = 0; x < p.out.size(); ++x) CHECK(std::fabs(p.out[x] - perm.out[x]) <= tolerance(d, lk));
  }

  SUBCASE("MQA and GQA equal MHA with the K/V heads duplicated") {
    for (int64_t hkv : {1, 2}) {
      for (int64_t lq : {1, 33}) {
        const int64_t hq = 8, lk = 90, d = 64;
        Problem g({1, hq, hkv, lq, lk, d}, DType::F16, false, 0, 0);
        g.fill_random(rng);
        g.mask.causal = true;
        g.mask.q_pos0 = lk - lq;
        Problem mha({1, hq, hq, lq, lk, d}, DType::F16, false, 0, 0);
        mha.q = g.q;
        mha.qv.data = mha.q.data();
        mha.mask = g.mask;
        for (int64_t h = 0; h < hq; ++h)
          for (int64_t j = 0; j < lk; ++j) {
            std::memcpy(mha.k_row(0, h, j), g.k_row(0, h / (hq / hkv), j), static_cast<size_t>(g.kv.row_stride));
            std::memcpy(mha.v_row(0, h, j), g.v_row(0, h / (hq / hkv), j), static_cast<size_t>(g.vv.row_stride));
          }
        g.run();
        mha.run();
        INFO("Hkv=", hkv, " Lq=", lq);
        for (size_t x = 0; x < g.out.size(); ++x) CHECK(std::fabs(g.out[x] - mha.out[x]) <= tolerance(d, lk));
      }
    }
  }

  SUBCASE("adding a constant to every score of a row changes nothing") {
    const int64_t lq = 6, lk = 77, d = 32;
    Problem p({1, 1, 1, lq, lk, d}, DType::F32, false, 0, 0);
    p.fill_random(rng);
    std::vector<float> lse0(lq), lse1(lq);
    AttentionOptions o;
    o.lse = lse0.data();
    p.run(o);
    const std::vector<float> base = p.out;
    p.additive.assign(static_cast<size_t>(lq * lk), 0.0f);
    for (int64_t i = 0; i < lq; ++i)
      for (int64_t j = 0; j < lk; ++j) p.additive[i * lk + j] = 3.0f * float(i) - 7.0f;
    p.mask.additive = p.additive.data();
    o.lse = lse1.data();
    p.run(o);
    for (size_t x = 0; x < base.size(); ++x) CHECK(std::fabs(base[x] - p.out[x]) <= tolerance(d, lk));
    // The log-sum-exp shifts by exactly that constant.
    for (int64_t i = 0; i < lq; ++i) CHECK(std::fabs(lse1[i] - (lse0[i] + 3.0f * float(i) - 7.0f)) <= 1e-5 * 20);
  }

  SUBCASE("scores near 1e4 give no inf or NaN") {
    const int64_t lk = 300, d = 64;
    Problem p({1, 2, 1, 3, lk, d}, DType::F32, false, 0, 0);
    // |q·k| up to 64·12.5² = 1e4 with scale 1: exp() overflows unless the max is subtracted.
    p.fill_random(rng, 12.5f);
    AttentionOptions o;
    o.scale = 1.0f;
    p.run(o);
    p.run_ref(o);
    for (float x : p.out) CHECK(std::isfinite(x));
    // Scores of size 1e4 carry f32 rounding ~1e4·2⁻²⁴·d in the exponent: weights to ~1e-2 relative.
    CHECK(p.max_diff() <= 2e-2);
  }

  SUBCASE("fully masked rows give zeros, and Lk = 0 gives zeros") {
    Problem p({2, 2, 1, 4, 20, 8}, DType::F16, false, 0, 0);
    p.fill_random(rng);
    p.kv_len = {0, 20};
    p.mask.kv_len_per_batch = p.kv_len.data();
    p.padding.assign(40, 0);
    std::fill(p.padding.begin() + 20, p.padding.end(), 1);  // batch 1: every key padded
    p.mask.key_padding = p.padding.data();
    std::vector<float> lse(16);
    AttentionOptions o;
    o.lse = lse.data();
    p.run(o);
    for (float x : p.out) CHECK(x == 0.0f);
    for (float x : lse) CHECK(x == -kInf);

    Problem w({1, 1, 1, 3, 20, 8}, DType::F32, false, 0, 0);
    w.fill_random(rng);
    w.additive.assign(60, 0.0f);
    for (int j = 0; j < 20; ++j) w.additive[20 + j] = -kInf;  // row 1 sees nothing
    w.mask.additive = w.additive.data();
    w.run();
    for (int c = 0; c < 8; ++c) CHECK(w.out_row(0, 0, 1)[c] == 0.0f);
    CHECK(w.out_row(0, 0, 0)[0] != 0.0f);

    Problem z({1, 4, 2, 3, 0, 16}, DType::BF16, false, 0, 0);
    z.fill_random(rng);
    z.run();
    for (float x : z.out) CHECK(x == 0.0f);
  }

  SUBCASE("1 thread equals 2 threads within rounding") {
    struct Shape {
      AttentionShape s;
      bool causal;
    };
    for (const Shape& sh : {Shape{{1, 8, 1, 1, 4097, 128}, false}, Shape{{2, 4, 4, 1, 1000, 64}, false},
                            Shape{{1, 8, 2, 65, 300, 80}, true}}) {
      Problem p(sh.s, DType::F16, true, 0, 0);
      p.fill_random(rng);
      p.mask.causal = sh.causal;
      AttentionOptions o1, o2;
      o1.threads = 1;
      o2.threads = 2;
      p.run(o1);
      const std::vector<float> one = p.out;
      p.run(o2);
      for (size_t x = 0; x < one.size(); ++x) CHECK(std::fabs(one[x] - p.out[x]) <= tolerance(sh.s.d, sh.s.Lk));
    }
  }
}

TEST_CASE("scratch is O(block), not O(Lq x Lk)") {
  const size_t small = attention_scratch_bytes_per_thread({1, 32, 4, 4096, 4096, 128}, DType::F16);
  const size_t big = attention_scratch_bytes_per_thread({1, 32, 4, 1 << 20, 1 << 20, 128}, DType::F16);
  CHECK(small > 0);
  CHECK(small == big);
  CHECK(small < (size_t(1) << 20));
  const size_t decode = attention_scratch_bytes_per_thread({1, 32, 32, 1, 32768, 128}, DType::F16);
  CHECK(decode > 0);
  CHECK(decode < (size_t(1) << 20));
}

TEST_CASE("bad arguments give a clear qkv::Error") {
  Problem p({1, 4, 2, 3, 5, 32}, DType::F32, false, 0, 0);
  auto expect_error = [&](Problem& x, const char* needle) {
    bool threw = false;
    try {
      x.run();
    } catch (const Error& e) {
      threw = true;
      INFO(e.what());
      CHECK(std::string(e.what()).find(needle) != std::string::npos);
    }
    CHECK_MESSAGE(threw, needle);
    // The reference checks the same things.
    CHECK_THROWS_WITH_AS(x.run_ref(), doctest::Contains(needle), Error);
  };
  {
    Problem x = p;
    x.s.Hq = 3;
    expect_error(x, "multiple of Hkv");
  }
  {
    Problem x = p;
    x.s.d = 0;
    expect_error(x, "head dim");
  }
  {
    Problem x = p;
    x.s.Lq = -1;
    expect_error(x, ">= 0");
  }
  {
    Problem x = p;
    x.s.Hkv = 0;
    expect_error(x, "Hkv must be >= 1");
  }
  {
    Problem x = p;
    x.qv.data = nullptr;
    expect_error(x, "Q data is null");
  }
  {
    Problem x = p;
    x.kv.data = nullptr;
    expect_error(x, "K data is null");
  }
  {
    Problem x = p;
    x.vv.data = nullptr;
    expect_error(x, "V data is null");
  }
  {
    Problem x = p;
    x.ov.data = nullptr;
    x.ov_ref.data = nullptr;
    expect_error(x, "output data is null");
  }
  {
    Problem x({1, 1, 1, 1, 4, 40}, DType::Q8_0, false, 0, 0);
    x.s.d = 40;
    expect_error(x, "multiple of 32");
  }
  {
    Problem x = p;
    x.vv.type = DType::F16;
    expect_error(x, "same element type");
  }
  {
    Problem x = p;
    x.kv.type = static_cast<DType>(9);
    x.vv.type = static_cast<DType>(9);
    expect_error(x, "unknown K/V element type");
  }
  {
    Problem x = p;
    x.kv_len = {6};
    x.mask.kv_len_per_batch = x.kv_len.data();
    expect_error(x, "kv_len_per_batch[0] = 6");
  }
  {
    Problem x = p;
    x.mask.window = -2;
    expect_error(x, "window");
  }
  {
    Problem x = p;
    x.mask.q_pos0 = -1;
    expect_error(x, "q_pos0");
  }
  {
    Problem x = p;
    x.pos0 = {-4};
    x.mask.q_pos0_per_batch = x.pos0.data();
    expect_error(x, "q_pos0_per_batch[0]");
  }
  {
    Problem x = p;
    x.additive.assign(15, 0.0f);
    x.mask.additive = x.additive.data();
    x.mask.additive_row_stride = 2;
    expect_error(x, "additive_row_stride");
  }
  {
    Problem x = p;
    x.s.B = int64_t(1) << 40;
    x.s.Lq = int64_t(1) << 30;
    expect_error(x, "overflows");
  }
  // Nothing to do is fine: no rows, null pointers allowed.
  AttentionShape empty{0, 4, 2, 3, 5, 32};
  CHECK_NOTHROW(attention(empty, {}, {}, {}, {}, {}));
}

// ctest-labels: kernels asan
// Score soft-capping (AttentionOptions::softcap, gemma2): every score path of
// the streaming kernel (row, key-group and Q8_0 integer decode, the prefill
// tile, split keys, the materialized weights, each SIMD target) against the
// fp64 reference, which caps as c * tanh(s / c) after the scale and before the
// mask. Tolerances as test_attention.cc (tests/attention_problem.h): the cap's
// derivative is at most 1, so it does not widen a score's f32 error, and
// Highway's tanh adds a few ulp of c.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
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

struct Case {
  AttentionShape s;
  MaskKind mask;
  float cap;
  float qk_range;  // |q|, |k| <= qk_range: 3 pushes scores far past a cap of 1
};

// The decode shapes reach the key-group kernel (GQA 8, 4, 2 rows), the row
// kernel (1 and 3 rows; Q8_0 through the integer path on AVX3_DL) and split
// keys (Lk 2500 on 2 threads); the others the prefill tile kernel.
const Case kCases[] = {
    {{1, 8, 1, 1, 300, 128}, kNone, 0.5f, 1.0f},          {{1, 8, 2, 1, 77, 64}, kNone, 1.0f, 3.0f},
    {{2, 8, 2, 1, 90, 128}, kBatchedDecode, 0.3f, 1.0f},  {{1, 4, 2, 1, 65, 64}, kKvLen, 2.0f, 1.0f},
    {{1, 2, 2, 1, 100, 64}, kNone, 0.5f, 1.0f},           {{1, 6, 2, 1, 100, 96}, kNone, 0.5f, 1.0f},
    {{1, 8, 1, 1, 2500, 128}, kNone, 0.5f, 1.0f},         {{1, 4, 1, 2, 40, 64}, kWindowCausal, 0.5f, 1.0f},
    {{1, 8, 2, 40, 70, 64}, kCausal, 0.5f, 1.0f},         {{1, 4, 2, 130, 130, 128}, kWindowCausal, 1.0f, 3.0f},
    {{2, 4, 4, 33, 100, 32}, kCausalOffset, 0.3f, 1.0f},  {{1, 4, 2, 9, 64, 64}, kAdditive, 0.5f, 1.0f},
    {{2, 2, 1, 17, 50, 32}, kPadding, 50.0f, 3.0f},
};

struct Outcome {
  double diff = 0;        // against the capped reference
  double uncapped = 0;    // the capped reference against the uncapped one: > tol, or the check proves nothing
  double lse_diff = 0;    // relative, over rows with keys
};

Outcome run_case(const Case& c, DType t, int threads, uint32_t seed) {
  std::mt19937 rng(seed);
  Problem p(c.s, t, true, 1, 0);
  p.fill_random(rng, c.qk_range);
  apply_mask(p, c.mask, rng);
  // At least 8 visible keys, so that capping changes the output (one key's
  // weight is 1 at any score).
  if (p.mask.window > 0) p.mask.window = std::max<int64_t>(p.mask.window, 8);
  if (c.mask == kKvLen)
    for (int64_t& n : p.kv_len) n = std::max<int64_t>(n, std::min<int64_t>(c.s.Lk, 8));
  const size_t rows = static_cast<size_t>(c.s.B * c.s.Hq * c.s.Lq);
  std::vector<float> lse(rows), lse_ref(rows);
  AttentionOptions o;
  o.threads = threads;
  o.softcap = c.cap;
  o.lse = lse.data();
  Outcome r;
  if (t == DType::Q8_0) {
    r.diff = q8_decode_diff(p, o);  // runs the kernel and the reference (lse of the exact query)
  } else {
    p.run(o);
    AttentionOptions oref = o;
    oref.lse = lse_ref.data();
    p.run_ref(oref);
    r.diff = p.max_diff();
    for (size_t i = 0; i < rows; ++i) {
      if (std::isinf(lse_ref[i])) {
        r.lse_diff = std::max(r.lse_diff, lse[i] == lse_ref[i] ? 0.0 : INFINITY);
      } else {
        r.lse_diff = std::max(r.lse_diff, std::fabs(double(lse[i]) - lse_ref[i]) / (1.0 + std::fabs(lse_ref[i])));
      }
    }
  }
  Problem plain = p;
  plain.ov_ref.data = plain.out_ref.data();
  AttentionOptions off;
  plain.run_ref(off);
  for (size_t x = 0; x < p.out_ref.size(); ++x)
    r.uncapped = std::max(r.uncapped, std::fabs(double(plain.out_ref[x]) - double(p.out_ref[x])));
  return r;
}

}  // namespace

TEST_CASE("soft-capped scores match the reference on every kernel path and K/V type") {
  uint32_t seed = 5;
  for (const Case& c : kCases) {
    for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
      if (!dtype_row_ok(t, static_cast<size_t>(c.s.d))) continue;
      for (int threads : {1, 2}) {
        const std::string what = describe(Problem(c.s, t, true, 1, 0), c.mask, threads) + " cap=" + std::to_string(c.cap);
        CAPTURE(what);
        const Outcome r = run_case(c, t, threads, seed++);
        const double tol = tolerance(c.s.d, c.s.Lk);
        CHECK(r.diff <= tol);
        CHECK(r.lse_diff <= tol);
        CHECK(r.uncapped > 2 * tol);  // a kernel ignoring the cap would fail
      }
    }
  }
}

TEST_CASE("soft-capped decode and prefill on every compiled SIMD target match the reference") {
  testing::for_each_simd_target([] {
    for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
      for (const Case& c : {kCases[0], kCases[2], kCases[5], kCases[7], kCases[8]}) {
        const Outcome r = run_case(c, t, 2, 17);
        CHECK(r.diff <= tolerance(c.s.d, c.s.Lk));
      }
    }
  });
}

TEST_CASE("soft-capped weights: the materialized path caps like the reference") {
  std::mt19937 rng(3);
  Problem p({1, 4, 2, 9, 37, 16}, DType::F16, false, 0, 0);
  p.fill_random(rng, 3.0f);
  apply_mask(p, kCausal, rng);
  std::vector<float> w(static_cast<size_t>(4 * 9 * 37)), wr(w.size());
  AttentionOptions o;
  o.softcap = 0.7f;
  o.weights = w.data();
  p.run(o);
  AttentionOptions oref = o;
  oref.weights = wr.data();
  p.run_ref(oref);
  CHECK(p.max_diff() <= tolerance(16, 37));
  double worst = 0;
  for (size_t x = 0; x < w.size(); ++x) worst = std::max(worst, std::fabs(double(w[x]) - wr[x]));
  CHECK(worst <= 1e-5);
}

TEST_CASE("a negative, non-finite or vanishing soft-cap is a clear error") {
  Problem p({1, 4, 2, 3, 5, 32}, DType::F32, false, 0, 0);
  for (float bad : {-1.0f, std::numeric_limits<float>::infinity(), std::nanf("")}) {
    AttentionOptions o;
    o.softcap = bad;
    CHECK_THROWS_WITH_AS(p.run(o), doctest::Contains("softcap must be finite and >= 0"), Error);
    CHECK_THROWS_WITH_AS(p.run_ref(o), doctest::Contains("softcap must be finite and >= 0"), Error);
  }
  AttentionOptions tiny;
  tiny.softcap = 1e-39f;
  CHECK_THROWS_WITH_AS(p.run(tiny), doctest::Contains("too small"), Error);
  CHECK_THROWS_WITH_AS(p.run_ref(tiny), doctest::Contains("too small"), Error);
}

// ctest-labels: kernels asan
// rmsnorm, rope, softmax, silu_mul and add_inplace against fp64 references
// (u = 2^-24 is the f32 unit roundoff; each bound is stated where it is used).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/error.h"
#include "kernels/ops.h"
#include "tests/simd_targets.h"

using namespace qkv;

namespace {

constexpr double u = 0x1p-24;
constexpr size_t kSizes[] = {1, 3, 7, 16, 17, 33, 100, 576, 1003};

// a * b rounded to float on its own. The references below are written as
// a * b - c * d, and gcc contracts that into a fused multiply-add where the
// target has one (it does by default for GNU C: -ffp-contract=fast), e.g. on
// aarch64, which skips a rounding; the kernels build with -ffp-contract=off
// and round every product, as x86's SSE4 baseline must. The volatile store
// makes the reference round each product on every target and compiler.
float product(float a, float b) {
  volatile float p = a * b;
  return p;
}

std::vector<float> random_vec(size_t n, uint32_t seed, float lo = -3.0f, float hi = 3.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

}  // namespace

TEST_CASE("rmsnorm matches fp64, row by row, also in place") {
  for (size_t n : kSizes) {
    CAPTURE(n);
    const size_t M = 3;
    auto x = random_vec(n * M, static_cast<uint32_t>(n));
    const auto w = random_vec(n, 99);
    const float eps = 1e-5f;
    std::vector<float> out(n * M);
    rmsnorm(x.data(), w.data(), out.data(), n, eps, M);
    for (size_t m = 0; m < M; ++m) {
      double ss = 0;
      for (size_t i = 0; i < n; ++i) ss += double(x[m * n + i]) * x[m * n + i];
      const double scale = 1.0 / std::sqrt(ss / n + eps);
      for (size_t i = 0; i < n; ++i) {
        const double ref = double(x[m * n + i]) * scale * w[i];
        // The f32 sum of squares is off by at most n*u relative, the scale by
        // half that plus a few roundings, the product by 2u more.
        CHECK(std::fabs(out[m * n + i] - ref) <= (n / 2.0 + 6) * u * std::fabs(ref));
      }
    }
    rmsnorm(x.data(), w.data(), x.data(), n, eps, M);  // aliasing allowed
    CHECK(x == out);
  }
}

TEST_CASE("rope is llama2.c's float formula exactly, and close to the exact rotation") {
  const size_t n_heads = 3, head_dim = 48;
  for (int64_t pos : {0, 1, 7, 100, 4095}) {
    CAPTURE(pos);
    const auto x0 = random_vec(n_heads * head_dim, static_cast<uint32_t>(pos + 1));
    auto x = x0;
    rope(x.data(), n_heads, head_dim, head_dim, pos, 10000.0f);
    // llama2.c's loop, written as it is there: i over the whole vector in steps
    // of 2, head_dim index i % head_size.
    auto l = x0;
    for (size_t i = 0; i < n_heads * head_dim; i += 2) {
      const int hd = static_cast<int>(i % head_dim);
      const float freq = 1.0f / powf(10000.0f, hd / static_cast<float>(head_dim));
      const float val = static_cast<float>(pos) * freq;
      const float fcr = cosf(val), fci = sinf(val);
      const float v0 = l[i], v1 = l[i + 1];
      l[i] = product(v0, fcr) - product(v1, fci);
      l[i + 1] = product(v0, fci) + product(v1, fcr);
    }
    CHECK(x == l);
    for (size_t h = 0; h < n_heads; ++h) {
      for (size_t k = 0; k < head_dim / 2; ++k) {
        const double theta = pos * std::pow(10000.0, -2.0 * k / head_dim);
        const double a = x0[h * head_dim + 2 * k], b = x0[h * head_dim + 2 * k + 1];
        const double r0 = a * std::cos(theta) - b * std::sin(theta);
        const double r1 = a * std::sin(theta) + b * std::cos(theta);
        // The f32 angle is off by about |theta| * 4u (power, reciprocal, product),
        // which moves the rotated pair by that times its length; plus a few u.
        const double tol = (std::fabs(theta) * 4 + 6) * u * (std::fabs(a) + std::fabs(b));
        CHECK(std::fabs(x[h * head_dim + 2 * k] - r0) <= tol);
        CHECK(std::fabs(x[h * head_dim + 2 * k + 1] - r1) <= tol);
      }
    }
  }
}

TEST_CASE("rope_angles then rope_rotate is rope exactly; their bad arguments throw") {
  // The decoder computes a position's angles once and rotates every layer's
  // q and k with them: the same float operations as rope(), so bit-identical.
  const size_t n_heads = 3, head_dim = 16;
  for (size_t rope_dim : {size_t{8}, size_t{16}}) {
    for (int64_t pos : {int64_t{0}, int64_t{7}, int64_t{4095}}) {
      CAPTURE(rope_dim);
      CAPTURE(pos);
      auto a = random_vec(n_heads * head_dim, 11);
      auto b = a;
      rope(a.data(), n_heads, head_dim, rope_dim, pos, 10000.0f);
      std::vector<float> cs(rope_dim);
      rope_angles(rope_dim, pos, 10000.0f, cs.data());
      rope_rotate(b.data(), n_heads, head_dim, rope_dim, cs.data());
      CHECK(a == b);
    }
  }
  std::vector<float> cs(18), x(n_heads * head_dim, 1.0f);
  CHECK_THROWS_AS(rope_angles(7, 1, 10000.0f, cs.data()), Error);
  CHECK_THROWS_AS(rope_angles(8, -1, 10000.0f, cs.data()), Error);
  CHECK_THROWS_AS(rope_angles(8, 1, 0.0f, cs.data()), Error);
  CHECK_THROWS_AS(rope_angles(8, 1, 10000.0f, nullptr), Error);
  CHECK_THROWS_AS(rope_rotate(x.data(), n_heads, head_dim, 18, cs.data()), Error);
  CHECK_THROWS_AS(rope_rotate(x.data(), n_heads, head_dim, 7, cs.data()), Error);
  CHECK_THROWS_AS(rope_rotate(nullptr, n_heads, head_dim, 8, cs.data()), Error);
  CHECK_THROWS_AS(rope_rotate(x.data(), n_heads, head_dim, 8, nullptr), Error);
}

TEST_CASE("rope_rotate on every SIMD target is the scalar formula bit for bit, both pair styles") {
  // Vectors of pairs and a scalar tail: rope_dim 96 (whole vectors on every
  // width), 40 and 20 (tails), 6 (tail only) in heads of 128, 80, 64 and 8.
  const size_t shapes[][2] = {{128, 96}, {80, 40}, {64, 20}, {8, 6}, {64, 64}};
  for (const auto& shape : shapes) {
    // Plain variables: lambdas cannot capture structured bindings before C++20 (clang).
    const size_t head_dim = shape[0], rope_dim = shape[1];
    for (RopeStyle style : {RopeStyle::Adjacent, RopeStyle::Neox}) {
      CAPTURE(head_dim);
      CAPTURE(rope_dim);
      CAPTURE(style == RopeStyle::Neox);
      const size_t n_heads = 3, half = rope_dim / 2;
      const auto x0 = random_vec(n_heads * head_dim, static_cast<uint32_t>(head_dim + rope_dim));
      std::vector<float> cs(rope_dim);
      rope_angles(rope_dim, 777, 10000.0f, cs.data());
      auto want = x0;
      for (size_t h = 0; h < n_heads; ++h) {
        for (size_t k = 0; k < half; ++k) {
          const size_t i = h * head_dim + (style == RopeStyle::Neox ? k : 2 * k);
          const size_t j = i + (style == RopeStyle::Neox ? half : 1);
          const float v0 = x0[i], v1 = x0[j];
          want[i] = product(v0, cs[2 * k]) - product(v1, cs[2 * k + 1]);
          want[j] = product(v0, cs[2 * k + 1]) + product(v1, cs[2 * k]);
        }
      }
      qkv::testing::for_each_simd_target([&] {
        auto x = x0;
        rope_rotate(x.data(), n_heads, head_dim, rope_dim, cs.data(), style);
        CHECK(x == want);
      });
    }
  }
}

TEST_CASE("rope with a partial rope_dim leaves the tail alone; bad arguments throw") {
  const size_t n_heads = 2, head_dim = 16, rope_dim = 8;
  const auto x0 = random_vec(n_heads * head_dim, 3);
  auto x = x0;
  rope(x.data(), n_heads, head_dim, rope_dim, 5, 500000.0f);
  for (size_t h = 0; h < n_heads; ++h) {
    for (size_t i = rope_dim; i < head_dim; ++i) CHECK(x[h * head_dim + i] == x0[h * head_dim + i]);
    // Pair 0 has theta = pos exactly.
    const float c = std::cos(5.0f), s = std::sin(5.0f);
    CHECK(x[h * head_dim] == doctest::Approx(x0[h * head_dim] * c - x0[h * head_dim + 1] * s).epsilon(1e-6));
  }
  // Position 0 is the identity.
  auto y = x0;
  rope(y.data(), n_heads, head_dim, head_dim, 0, 10000.0f);
  CHECK(y == x0);
  CHECK_THROWS_AS(rope(x.data(), n_heads, head_dim, 7, 1, 10000.0f), Error);
  CHECK_THROWS_AS(rope(x.data(), n_heads, head_dim, 18, 1, 10000.0f), Error);
  CHECK_THROWS_AS(rope(x.data(), n_heads, head_dim, 16, -1, 10000.0f), Error);
  CHECK_THROWS_AS(rope(x.data(), n_heads, head_dim, 16, 1, 0.0f), Error);
  CHECK_THROWS_AS(rope(nullptr, n_heads, head_dim, 16, 1, 10000.0f), Error);
}

TEST_CASE("softmax matches fp64 and handles -inf") {
  for (size_t n : kSizes) {
    CAPTURE(n);
    auto x = random_vec(n, static_cast<uint32_t>(n), -20.0f, 20.0f);
    const auto x0 = x;
    softmax(x.data(), n);
    double mx = -INFINITY, sum = 0;
    for (float v : x0) mx = std::max<double>(mx, v);
    for (float v : x0) sum += std::exp(v - mx);
    for (size_t i = 0; i < n; ++i) {
      const double ref = std::exp(x0[i] - mx) / sum;
      // exp of a rounded difference: |x - max| * u relative from the argument,
      // a few u from exp itself, n*u from the f32 sum, u from the division.
      const double tol = ((std::fabs(x0[i] - mx) + 8) * 2 + n) * u * ref;
      CHECK(std::fabs(x[i] - ref) <= tol + 1e-37);
    }
  }
  std::vector<float> m = {-INFINITY, 1.0f, -INFINITY, 1.0f};
  softmax(m.data(), m.size());
  CHECK(m[0] == 0.0f);
  CHECK(m[1] == 0.5f);
  CHECK(m[3] == 0.5f);
  std::vector<float> big(37, -1000.0f);  // underflowing terms become exactly 0
  big[20] = 0.0f;
  softmax(big.data(), big.size());
  CHECK(big[20] == 1.0f);
  CHECK(big[0] == 0.0f);
  std::vector<float> all_inf(20, -INFINITY);
  CHECK_THROWS_AS(softmax(all_inf.data(), all_inf.size()), Error);
  CHECK_THROWS_AS(softmax(nullptr, 3), Error);
}

TEST_CASE("silu_mul matches fp64") {
  for (size_t n : kSizes) {
    CAPTURE(n);
    auto g = random_vec(n, static_cast<uint32_t>(n), -12.0f, 12.0f);
    const auto up = random_vec(n, 77);
    if (n > 2) {
      g[0] = -200.0f;  // e^-z would overflow: silu is ~0
      g[1] = 150.0f;   // silu(z) = z
    }
    const auto g0 = g;
    silu_mul(g.data(), up.data(), n);
    for (size_t i = 0; i < n; ++i) {
      const double z = g0[i];
      const double ref = z / (1.0 + std::exp(-z)) * up[i];
      // e^-z: a few u from exp; 1 + e, the division and the product one u each.
      CHECK(std::fabs(g[i] - ref) <= 8 * u * std::fabs(ref) + 1e-30);
    }
  }
  CHECK_THROWS_AS(silu_mul(nullptr, nullptr, 4), Error);
}

TEST_CASE("add_inplace is exact f32 addition") {
  for (size_t n : kSizes) {
    auto y = random_vec(n, 1);
    const auto y0 = y;
    const auto x = random_vec(n, 2);
    add_inplace(y.data(), x.data(), n);
    for (size_t i = 0; i < n; ++i) CHECK(y[i] == y0[i] + x[i]);
  }
  CHECK_THROWS_AS(add_inplace(nullptr, nullptr, 4), Error);
}

// ctest-labels: asan kernels
// The KV cache: slot semantics, every misuse error, the store path's conversions,
// and decode attention over the cache against the fp64 reference.
#include <doctest/doctest.h>

#include <hwy/targets.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/dtype.h"
#include "kernels/error.h"
#include "runtime/kv_cache.h"
#include "tests/q8_query.h"
#include "tests/simd_targets.h"

using namespace qkv;

namespace {

const DType kAllTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0};

KVCacheConfig make_config(DType t, int64_t layers, int64_t hkv, int64_t d, int64_t cap, int64_t seqs) {
  KVCacheConfig c;
  c.n_layers = layers;
  c.n_kv_heads = hkv;
  c.head_dim = d;
  c.capacity = cap;
  c.n_seqs = seqs;
  c.type = t;
  return c;
}

std::vector<float> random_values(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

// The raw bytes of row (seq, head, pos) of K (kv = 0) or V (kv = 1) in layer,
// addressed through the public view exactly as the attention kernel addresses it.
const uint8_t* row_ptr(const KVCache& c, int64_t layer, int kv, int64_t seq, int64_t head, int64_t pos) {
  const KVView v = kv == 0 ? c.keys(layer) : c.values(layer);
  return static_cast<const uint8_t*>(v.data) + seq * v.batch_stride + head * v.head_stride +
         pos * v.row_stride;
}

std::vector<float> read_row(const KVCache& c, int64_t layer, int kv, int64_t seq, int64_t head, int64_t pos) {
  std::vector<float> out(static_cast<size_t>(c.config().head_dim));
  decode_row(c.config().type, row_ptr(c, layer, kv, seq, head, pos), out.size(), out.data());
  return out;
}

// A value that identifies where it was written: layer, K|V, a tag chosen per
// write, position, head, element. Exactly representable in f32.
float tagged(int64_t layer, int kv, int tag, int64_t pos, int64_t head, int64_t i) {
  return static_cast<float>(layer * 100000 + kv * 50000 + tag * 1000 + pos * 50 + head * 10 + i);
}

// K and V for positions pos0 .. pos0+n-1 of every layer, laid out as append() takes them.
void tagged_block(const KVCacheConfig& c, int tag, int64_t pos0, int64_t n, std::vector<float>* k,
                  std::vector<float>* v) {
  const int64_t kv_dim = c.n_kv_heads * c.head_dim;
  k->assign(static_cast<size_t>(c.n_layers * n * kv_dim), 0.0f);
  v->assign(k->size(), 0.0f);
  for (int64_t l = 0; l < c.n_layers; ++l)
    for (int64_t p = 0; p < n; ++p)
      for (int64_t h = 0; h < c.n_kv_heads; ++h)
        for (int64_t i = 0; i < c.head_dim; ++i) {
          const size_t at = static_cast<size_t>(((l * n + p) * c.n_kv_heads + h) * c.head_dim + i);
          (*k)[at] = tagged(l, 0, tag, pos0 + p, h, i);
          (*v)[at] = tagged(l, 1, tag, pos0 + p, h, i);
        }
}

// Every row of seq at positions [from, to) holds the tagged values of `tag`.
void check_tagged(const KVCache& c, int64_t seq, int tag, int64_t from, int64_t to) {
  const KVCacheConfig& cfg = c.config();
  for (int64_t l = 0; l < cfg.n_layers; ++l)
    for (int kv = 0; kv < 2; ++kv)
      for (int64_t h = 0; h < cfg.n_kv_heads; ++h)
        for (int64_t p = from; p < to; ++p) {
          const std::vector<float> row = read_row(c, l, kv, seq, h, p);
          for (int64_t i = 0; i < cfg.head_dim; ++i) {
            REQUIRE(row[static_cast<size_t>(i)] == tagged(l, kv, tag, p, h, i));
          }
        }
}

// Reference decode attention for one sequence of the cache: fp64 scalar oracle on
// the very bytes the cache holds.
std::vector<float> reference_decode(const KVCache& c, int64_t layer, int64_t seq, int64_t len,
                                    int64_t n_heads, const float* q, float scale = 0.0f) {
  const KVCacheConfig& cfg = c.config();
  AttentionShape s;
  s.B = 1;
  s.Hq = n_heads;
  s.Hkv = cfg.n_kv_heads;
  s.Lq = 1;
  s.Lk = len;
  s.d = cfg.head_dim;
  KVView k = c.keys(layer), v = c.values(layer);
  k.data = static_cast<const uint8_t*>(k.data) + seq * k.batch_stride;
  v.data = static_cast<const uint8_t*>(v.data) + seq * v.batch_stride;
  std::vector<float> out(static_cast<size_t>(n_heads * cfg.head_dim));
  const int64_t row = n_heads * cfg.head_dim;
  QueryView qv{q, row, cfg.head_dim, row};
  OutputView ov{out.data(), row, cfg.head_dim, row};
  AttentionOptions opts;
  opts.scale = scale;
  attention_reference(s, qv, k, v, AttentionMask{}, ov, opts);
  return out;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - double(b[i])));
  return m;
}

// The query rows as the Q8_0 decode path quantizes them (tests/q8_query.h).
std::vector<float> quantized_like_decode(const float* q, int64_t n, int64_t d, float scale) {
  std::vector<float> out(q, q + n * d);
  for (int64_t h = 0; h < n; ++h) testing::quantize_query_like_q8_decode(out.data() + h * d, d, scale);
  return out;
}

// max |got - reference|; for a Q8_0 cache the smaller of the distances to the
// reference on q and on its quantized form (which path runs depends on the CPU).
double decode_diff(const KVCache& c, const std::vector<float>& got, int64_t layer, int64_t seq, int64_t len,
                   int64_t n_heads, const float* q, float scale = 0.0f) {
  double diff = max_abs_diff(got, reference_decode(c, layer, seq, len, n_heads, q, scale));
  if (c.config().type == DType::Q8_0) {
    const int64_t d = c.config().head_dim;
    const float s = scale != 0.0f ? scale : 1.0f / std::sqrt(static_cast<float>(d));
    const auto qq = quantized_like_decode(q, n_heads, d, s);
    diff = std::min(diff, max_abs_diff(got, reference_decode(c, layer, seq, len, n_heads, qq.data(), scale)));
  }
  return diff;
}

}  // namespace

TEST_CASE("configuration: exact size, validation, memory limit and overflow before allocating") {
  KVCacheConfig c = make_config(DType::F16, 3, 2, 64, 10, 2);
  CHECK(KVCache::bytes_for(c) == 3u * 2 * 2 * 2 * 10 * 64 * 2);
  c.type = DType::Q8_0;
  CHECK(KVCache::bytes_for(c) == 3u * 2 * 2 * 2 * 10 * (2 * 34));
  c.type = DType::BF16;
  {
    KVCache cache(c);
    CHECK(cache.bytes() == KVCache::bytes_for(c));
    CHECK(cache.bytes_per_token() == 3u * 2 * 2 * 64 * 2);
    CHECK(cache.row_bytes() == 128);
    for (int64_t s = 0; s < 2; ++s) CHECK(cache.length(s) == 0);
    const KVView k = cache.keys(0);
    CHECK(k.type == DType::BF16);
    CHECK(k.row_stride == 128);
    CHECK(k.head_stride == 10 * 128);
    CHECK(k.batch_stride == 2 * 10 * 128);
    // The data lies in one block: V of the last layer ends exactly bytes() after K of layer 0.
    const KVView v = cache.values(2);
    CHECK(static_cast<const uint8_t*>(v.data) + 2 * v.batch_stride ==
          static_cast<const uint8_t*>(k.data) + cache.bytes());
    CHECK(reinterpret_cast<uintptr_t>(k.data) % 64 == 0);
  }

  auto bad = [](KVCacheConfig x, const char* msg) {
    CHECK_THROWS_WITH_AS(KVCache{x}, doctest::Contains(msg), Error);
  };
  KVCacheConfig x = make_config(DType::F16, 1, 1, 32, 4, 1);
  x.n_layers = 0;   bad(x, "n_layers");
  x.n_layers = 1;   x.n_kv_heads = -1; bad(x, "n_kv_heads");
  x.n_kv_heads = 1; x.head_dim = 0;    bad(x, "head_dim");
  x.head_dim = 32;  x.capacity = 0;    bad(x, "capacity");
  x.capacity = 4;   x.n_seqs = 0;      bad(x, "n_seqs");
  x.n_seqs = 1;     x.type = static_cast<DType>(9); bad(x, "unknown element type");
  x.type = DType::Q8_0; x.head_dim = 48;  bad(x, "cannot be stored as q8_0");
  x.head_dim = 96;
  CHECK_NOTHROW(KVCache{x});  // 96 = 3 blocks

  // The limit is checked against the exact size: at the size it passes, one byte under it fails.
  KVCacheConfig lim = make_config(DType::F32, 2, 4, 128, 1024, 2);
  lim.memory_limit = KVCache::bytes_for(lim);
  CHECK_NOTHROW(KVCache{lim});
  lim.memory_limit -= 1;
  bad(lim, "over the memory limit");
  // A terabyte request fails on the limit without touching the allocator.
  KVCacheConfig tb = make_config(DType::F32, 80, 8, 128, int64_t(1) << 20, 4);
  tb.memory_limit = uint64_t(1) << 30;
  bad(tb, "over the memory limit");
  // Sizes that do not fit in 63 bits fail on the arithmetic, limit or not.
  KVCacheConfig huge = make_config(DType::F32, int64_t(1) << 20, 1024, 128, int64_t(1) << 30, 1024);
  CHECK_THROWS_WITH_AS(KVCache::bytes_for(huge), doctest::Contains("overflows"), Error);
  bad(huge, "overflows");
}

TEST_CASE("append, store/commit, truncate, clear and prefix copy keep each sequence's rows") {
  const KVCacheConfig cfg = make_config(DType::F32, 2, 2, 4, 8, 3);
  KVCache c(cfg);
  std::vector<float> k, v;

  tagged_block(cfg, 1, 0, 3, &k, &v);
  c.append(0, 3, k.data(), v.data());
  CHECK(c.length(0) == 3);
  CHECK(c.length(1) == 0);
  CHECK(c.length(2) == 0);
  check_tagged(c, 0, 1, 0, 3);

  tagged_block(cfg, 1, 3, 2, &k, &v);  // a second append continues where the first ended
  c.append(0, 2, k.data(), v.data());
  CHECK(c.length(0) == 5);
  check_tagged(c, 0, 1, 0, 5);

  tagged_block(cfg, 2, 0, 4, &k, &v);  // another sequence is independent
  c.append(1, 4, k.data(), v.data());
  CHECK(c.length(1) == 4);
  check_tagged(c, 1, 2, 0, 4);
  check_tagged(c, 0, 1, 0, 5);

  c.truncate(0, 2);
  CHECK(c.length(0) == 2);
  tagged_block(cfg, 3, 2, 1, &k, &v);  // overwrite position 2 after the truncate
  c.append(0, 1, k.data(), v.data());
  CHECK(c.length(0) == 3);
  check_tagged(c, 0, 1, 0, 2);
  check_tagged(c, 0, 3, 2, 3);

  // The decoder's path: store each layer separately, then commit once.
  const int64_t kv_dim = cfg.n_kv_heads * cfg.head_dim;
  tagged_block(cfg, 4, 3, 1, &k, &v);
  c.store(0, 0, 3, 1, k.data(), v.data());
  CHECK(c.length(0) == 3);  // not visible until committed
  CHECK(c.stored(0, 0) == 4);
  CHECK(c.stored(1, 0) == 3);
  CHECK_THROWS_WITH_AS(c.commit(0, 4), doctest::Contains("layer 1 holds only 3"), Error);
  c.store(1, 0, 3, 1, k.data() + kv_dim, v.data() + kv_dim);
  c.commit(0, 4);
  CHECK(c.length(0) == 4);
  check_tagged(c, 0, 3, 2, 3);
  check_tagged(c, 0, 4, 3, 4);

  // Prefix copy: dst gets the first n rows of src and length n; src unchanged.
  c.copy_prefix(0, 2, 3);
  CHECK(c.length(2) == 3);
  check_tagged(c, 2, 1, 0, 2);
  check_tagged(c, 2, 3, 2, 3);
  check_tagged(c, 0, 4, 3, 4);
  // Copying over a longer sequence shortens it to n.
  c.copy_prefix(0, 1, 1);
  CHECK(c.length(1) == 1);
  check_tagged(c, 1, 1, 0, 1);
  CHECK(c.stored(0, 1) == 1);
  // Copying a sequence onto itself is a truncate.
  c.copy_prefix(2, 2, 2);
  CHECK(c.length(2) == 2);
  check_tagged(c, 2, 1, 0, 2);
  c.copy_prefix(0, 1, 0);
  CHECK(c.length(1) == 0);

  c.clear(0);
  CHECK(c.length(0) == 0);
  CHECK(c.stored(0, 0) == 0);
  CHECK(c.length(2) == 2);
  check_tagged(c, 2, 1, 0, 2);

  // Fill to capacity exactly; one more is an error that changes nothing.
  tagged_block(cfg, 5, 0, 8, &k, &v);
  c.append(0, 8, k.data(), v.data());
  CHECK(c.length(0) == 8);
  tagged_block(cfg, 6, 8, 1, &k, &v);
  CHECK_THROWS_WITH_AS(c.append(0, 1, k.data(), v.data()), doctest::Contains("exceed the capacity of 8"),
                       Error);
  CHECK(c.length(0) == 8);
  check_tagged(c, 0, 5, 0, 8);
  c.append(0, 0, nullptr, nullptr);  // empty appends are allowed and change nothing
  CHECK(c.length(0) == 8);
}

TEST_CASE("every misuse is a clear error") {
  const KVCacheConfig cfg = make_config(DType::F16, 2, 2, 32, 6, 2);
  KVCache c(cfg);
  std::vector<float> k(static_cast<size_t>(2 * 6 * 64), 0.5f), v = k, q(4 * 32, 0.1f), out(4 * 32);
  c.append(0, 3, k.data(), v.data());
  const int64_t seq0 = 0, len3 = 3;

  SUBCASE("sequence out of range") {
    for (int64_t s : {int64_t(-1), int64_t(2)}) {
      CHECK_THROWS_WITH_AS(c.length(s), doctest::Contains("out of range"), Error);
      CHECK_THROWS_WITH_AS(c.store(0, s, 0, 1, k.data(), v.data()), doctest::Contains("sequence"), Error);
      CHECK_THROWS_WITH_AS(c.commit(s, 0), doctest::Contains("out of range"), Error);
      CHECK_THROWS_WITH_AS(c.append(s, 1, k.data(), v.data()), doctest::Contains("out of range"), Error);
      CHECK_THROWS_WITH_AS(c.truncate(s, 0), doctest::Contains("out of range"), Error);
      CHECK_THROWS_WITH_AS(c.clear(s), doctest::Contains("out of range"), Error);
      CHECK_THROWS_WITH_AS(c.copy_prefix(s, 0, 0), doctest::Contains("source"), Error);
      CHECK_THROWS_WITH_AS(c.copy_prefix(0, s, 0), doctest::Contains("destination"), Error);
      CHECK_THROWS_WITH_AS(c.attend_decode(0, &s, &len3, 1, 4, q.data(), out.data()),
                           doctest::Contains("out of range"), Error);
    }
  }
  SUBCASE("bad layer index") {
    for (int64_t l : {int64_t(-1), int64_t(2)}) {
      CHECK_THROWS_WITH_AS(c.store(l, 0, 0, 1, k.data(), v.data()), doctest::Contains("layer"), Error);
      CHECK_THROWS_WITH_AS(c.keys(l), doctest::Contains("out of range (2 layers)"), Error);
      CHECK_THROWS_WITH_AS(c.values(l), doctest::Contains("out of range (2 layers)"), Error);
      CHECK_THROWS_WITH_AS(c.attend_decode(l, &seq0, &len3, 1, 4, q.data(), out.data()),
                           doctest::Contains("layer"), Error);
    }
  }
  SUBCASE("store past the length or the capacity") {
    CHECK_THROWS_WITH_AS(c.store(0, 0, 4, 1, k.data(), v.data()), doctest::Contains("past its length 3"),
                         Error);
    CHECK_THROWS_WITH_AS(c.store(0, 0, -1, 1, k.data(), v.data()), doctest::Contains("past its length"),
                         Error);
    CHECK_THROWS_WITH_AS(c.store(0, 0, 3, 4, k.data(), v.data()), doctest::Contains("capacity of 6"),
                         Error);
    CHECK_THROWS_WITH_AS(c.store(0, 0, 3, -1, k.data(), v.data()), doctest::Contains("negative"), Error);
    CHECK_THROWS_WITH_AS(c.store(0, 0, 3, 1, nullptr, v.data()), doctest::Contains("null"), Error);
    CHECK_THROWS_WITH_AS(c.append(0, 4, k.data(), v.data()), doctest::Contains("capacity of 6"), Error);
    CHECK_THROWS_WITH_AS(c.append(0, -2, k.data(), v.data()), doctest::Contains("negative"), Error);
    CHECK(c.length(0) == 3);
    CHECK(c.stored(0, 0) == 3);
    CHECK(c.stored(1, 0) == 3);
  }
  SUBCASE("prefetch_store, a hint, ignores what store refuses") {
    for (const auto& lsp : {std::array<int64_t, 3>{-1, 0, 0}, {2, 0, 0}, {0, -1, 0}, {0, 2, 0},
                            {0, 0, -1}, {0, 0, 6}, {0, 0, int64_t{1} << 62}}) {
      // Plain variables: CHECK's lambdas cannot capture structured bindings before C++20 (clang).
      const int64_t l = lsp[0], s = lsp[1], p = lsp[2];
      CAPTURE(l);
      CAPTURE(s);
      CAPTURE(p);
      CHECK_NOTHROW(c.prefetch_store(l, s, p));
      CHECK_THROWS_AS(c.store(l, s, p, 1, k.data(), v.data()), Error);
    }
    CHECK_NOTHROW(c.prefetch_store(0, 0, 3));  // the next row, in range
    CHECK(c.length(0) == 3);
    CHECK(c.stored(0, 0) == 3);
  }
  SUBCASE("commit beyond what every layer stored, or outside the capacity") {
    CHECK_THROWS_WITH_AS(c.commit(0, 4), doctest::Contains("store every layer first"), Error);
    CHECK_THROWS_WITH_AS(c.commit(0, 7), doctest::Contains("outside 0..6"), Error);
    CHECK_THROWS_WITH_AS(c.commit(0, -1), doctest::Contains("outside 0..6"), Error);
    c.commit(0, 2);  // shrinking by commit forgets the dropped row, like truncate
    CHECK(c.length(0) == 2);
    CHECK(c.stored(1, 0) == 2);
  }
  SUBCASE("truncate beyond the length") {
    CHECK_THROWS_WITH_AS(c.truncate(0, 4), doctest::Contains("holds 3 positions"), Error);
    CHECK_THROWS_WITH_AS(c.truncate(0, -1), doctest::Contains("holds 3 positions"), Error);
    CHECK_THROWS_WITH_AS(c.truncate(1, 1), doctest::Contains("holds 0 positions"), Error);
  }
  SUBCASE("copy_prefix longer than the source") {
    CHECK_THROWS_WITH_AS(c.copy_prefix(0, 1, 4), doctest::Contains("which holds 3"), Error);
    CHECK_THROWS_WITH_AS(c.copy_prefix(1, 0, 1), doctest::Contains("which holds 0"), Error);
    CHECK(c.length(0) == 3);
  }
  SUBCASE("attend_decode over keys that were never stored, or with bad heads") {
    const int64_t len4 = 4, len0 = 0;
    CHECK_THROWS_WITH_AS(c.attend_decode(0, &seq0, &len4, 1, 4, q.data(), out.data()),
                         doctest::Contains("store the new token first"), Error);
    CHECK_THROWS_WITH_AS(c.attend_decode(0, &seq0, &len0, 1, 4, q.data(), out.data()),
                         doctest::Contains("length 0"), Error);
    CHECK_THROWS_WITH_AS(c.attend_decode(0, &seq0, &len3, 1, 3, q.data(), out.data()),
                         doctest::Contains("not a multiple"), Error);
    CHECK_THROWS_WITH_AS(c.attend_decode(0, &seq0, &len3, 1, 0, q.data(), out.data()),
                         doctest::Contains("not a multiple"), Error);
    CHECK_THROWS_WITH_AS(c.attend_decode(0, &seq0, &len3, 1, 4, nullptr, out.data()),
                         doctest::Contains("null"), Error);
    // After truncate, the dropped rows are no longer attendable.
    c.truncate(0, 1);
    const int64_t len2 = 2;
    CHECK_THROWS_WITH_AS(c.attend_decode(1, &seq0, &len2, 1, 4, q.data(), out.data()),
                         doctest::Contains("holds 1 stored"), Error);
  }
}

TEST_CASE("store path: bf16 and f16 round to nearest even, on ties and subnormals") {
  // Chosen values and the bits they must store as, derived by hand:
  struct Case { float x; uint16_t bf16, f16; };
  const Case cases[] = {
      {1.005859375f, 0x3F81, 0x3C06},        // bf16: above the tie -> 1.0078125; f16 exact (1+6/1024)
      {1.00390625f, 0x3F80, 0x3C04},         // bf16 tie (1 + 2^-8) -> even 1.0; f16 exact
      {1.01171875f, 0x3F82, 0x3C0C},         // bf16 tie (1 + 3*2^-8) -> even 1.015625
      {1.0f + 0x1p-11f, 0x3F80, 0x3C00},     // f16 tie -> even 1.0
      {1.0f + 3 * 0x1p-11f, 0x3F80, 0x3C02}, // f16 tie -> even 1 + 2^-9
      {-2.5f, 0xC020, 0xC100},
      {0.0f, 0x0000, 0x0000},
      {-0.0f, 0x8000, 0x8000},
      {65504.0f, 0x4780, 0x7BFF},            // bf16: 65536 is nearer than 65280; f16 max
      {65520.0f, 0x4780, 0x7C00},            // f16 overflows to inf at the tie
      {0x1p-24f, 0x3380, 0x0001},            // smallest f16 subnormal
      {0x1p-25f, 0x3300, 0x0000},            // f16 tie between 0 and 2^-24 -> 0
      {3 * 0x1p-25f, 0x33C0, 0x0002},        // f16 tie between 1 and 2 units -> 2
      {f32_from_bits(0x00010000u), 0x0001, 0x0000},  // f32 subnormal bf16 holds exactly
      {f32_from_bits(0x00018000u), 0x0002, 0x0000},  // bf16 subnormal tie -> even (2)
      {f32_from_bits(0x00008000u), 0x0000, 0x0000},  // bf16 subnormal tie -> even (0)
      {f32_from_bits(0x80000003u), 0x8000, 0x8000},  // tiny negative -> -0
      {std::numeric_limits<float>::infinity(), 0x7F80, 0x7C00},
      {-std::numeric_limits<float>::max(), 0xFF80, 0xFC00},  // rounds up to -inf in both
  };
  const int64_t d = 32;
  std::vector<float> row(d);
  for (int64_t i = 0; i < d; ++i) row[i] = i < int64_t(std::size(cases)) ? cases[i].x : 0.25f * float(i);
  for (DType t : {DType::BF16, DType::F16}) {
    const std::string type_name = dtype_name(t);
    CAPTURE(type_name);
    KVCache c(make_config(t, 1, 1, d, 2, 1));
    c.append(0, 1, row.data(), row.data());
    for (int kv = 0; kv < 2; ++kv) {
      const auto* bits = reinterpret_cast<const uint16_t*>(row_ptr(c, 0, kv, 0, 0, 0));
      for (size_t i = 0; i < std::size(cases); ++i) {
        CAPTURE(i);
        CHECK(bits[i] == (t == DType::BF16 ? cases[i].bf16 : cases[i].f16));
      }
      for (int64_t i = std::size(cases); i < d; ++i) {
        CHECK(bits[i] == (t == DType::BF16 ? f32_to_bf16(row[i]) : f32_to_f16(row[i])));
      }
    }
    // The documented example reads back as 1.0078125 from bf16 (f16 holds it exactly).
    CHECK(read_row(c, 0, 0, 0, 0, 0)[0] == (t == DType::BF16 ? 1.0078125f : 1.005859375f));
  }
  // NaN stays NaN through the store path.
  KVCache c(make_config(DType::BF16, 1, 1, d, 1, 1));
  std::vector<float> nan_row(d, std::numeric_limits<float>::quiet_NaN());
  c.append(0, 1, nan_row.data(), nan_row.data());
  CHECK(std::isnan(read_row(c, 0, 0, 0, 0, 0)[7]));
}

TEST_CASE("store path: q8_0 blocks (zeros, all-equal, one outlier, ties, subnormals)") {
  const int64_t d = 32 * 6;
  std::vector<float> row(d, 0.0f);
  // row[0..31] stays zero
  float* b1 = &row[32];   // all equal
  float* b2 = &row[64];   // one huge outlier
  float* b3 = &row[96];   // scale exactly 1: ties round half away from zero
  float* b4 = &row[128];  // f32 subnormals: the scale is 0 in f16
  float* b5 = &row[160];  // negative maximum, general values
  for (int i = 0; i < 32; ++i) b1[i] = 0.75f;
  for (int i = 0; i < 32; ++i) b2[i] = 0.01f * float(i - 16);
  b2[5] = 1000.0f;
  const float ties[] = {127.0f, 0.5f, -0.5f, 1.5f, -1.5f, 2.5f, -2.5f, 126.5f, -126.5f, 0.49999997f, 3.0f};
  std::copy(std::begin(ties), std::end(ties), b3);
  for (int i = 0; i < 32; ++i) b4[i] = f32_from_bits(0x00000100u * uint32_t(i));
  for (int i = 0; i < 32; ++i) b5[i] = std::sin(0.7f * float(i)) * 3.0f;
  b5[9] = -4.0f;

  KVCache c(make_config(DType::Q8_0, 1, 1, d, 1, 1));
  c.append(0, 1, row.data(), row.data());
  const auto* blocks = reinterpret_cast<const BlockQ8_0*>(row_ptr(c, 0, 1, 0, 0, 0));

  // Zeros: scale 0, every q 0.
  CHECK(blocks[0].d == 0);
  for (int i = 0; i < 32; ++i) CHECK(blocks[0].qs[i] == 0);
  // All equal: every q is 127 and the scale is f16(0.75/127).
  CHECK(blocks[1].d == f32_to_f16(0.75f / 127.0f));
  for (int i = 0; i < 32; ++i) CHECK(blocks[1].qs[i] == 127);
  // Outlier: it alone gets 127; the small values (|x| <= 0.16) fall below half a
  // step (1000/127/2 = 3.9) and store as 0, the error the format implies.
  CHECK(blocks[2].d == f32_to_f16(1000.0f / 127.0f));
  for (int i = 0; i < 32; ++i) CHECK(blocks[2].qs[i] == (i == 5 ? 127 : 0));
  // Scale exactly 1 (max 127): q = round half away from zero, as GGUF's roundf.
  CHECK(blocks[3].d == 0x3C00);
  const int8_t tie_q[] = {127, 1, -1, 2, -2, 3, -3, 127, -127, 0, 3};
  for (size_t i = 0; i < std::size(tie_q); ++i) CHECK(blocks[3].qs[i] == tie_q[i]);
  for (size_t i = std::size(tie_q); i < 32; ++i) CHECK(blocks[3].qs[i] == 0);
  // Subnormal inputs: the scale underflows f16 to 0, so the block reads back as
  // zeros (an error of at most 31*2^-141, far below anything attention can see).
  CHECK(blocks[4].d == 0);
  // General block: bit-identical to the scalar GGUF reference quantizer.
  BlockQ8_0 want;
  quantize_q8_0_block(b5, &want);
  CHECK(blocks[5].d == want.d);
  for (int i = 0; i < 32; ++i) CHECK(blocks[5].qs[i] == want.qs[i]);
  CHECK(blocks[5].qs[9] == -127);

  // K and V rows of the same input are identical, and reading back is within half a step.
  CHECK(std::memcmp(row_ptr(c, 0, 0, 0, 0, 0), row_ptr(c, 0, 1, 0, 0, 0), c.row_bytes()) == 0);
  const std::vector<float> back = read_row(c, 0, 0, 0, 0, 0);
  for (int b = 0; b < 6; ++b) {
    const float step = f16_to_f32(blocks[b].d);
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(row[b * 32 + i]));
    for (int i = 0; i < 32; ++i) {
      // Half a step, plus the f16 rounding of the scale carried by |q| <= 127.
      CHECK(std::fabs(back[b * 32 + i] - row[b * 32 + i]) <= 0.5f * step + 127 * amax / 127 * 0x1p-11f + 1e-30f);
    }
  }
}

TEST_CASE("store path matches the scalar encoders on random rows of every type") {
  const int64_t hkv = 3, d = 64, n = 7;
  const std::vector<float> k = random_values(size_t(n * hkv * d), 11, -40.0f, 40.0f);
  const std::vector<float> v = random_values(k.size(), 12, -1e-3f, 1e-3f);
  for (DType t : kAllTypes) {
    const std::string type_name = dtype_name(t);
    CAPTURE(type_name);
    KVCache c(make_config(t, 1, hkv, d, n + 1, 2));
    c.append(1, n, k.data(), v.data());
    std::vector<uint8_t> want(static_cast<size_t>(c.row_bytes()));
    for (int64_t p = 0; p < n; ++p)
      for (int64_t h = 0; h < hkv; ++h) {
        encode_row(t, &k[size_t((p * hkv + h) * d)], size_t(d), want.data());
        CHECK(std::memcmp(row_ptr(c, 0, 0, 1, h, p), want.data(), want.size()) == 0);
        encode_row(t, &v[size_t((p * hkv + h) * d)], size_t(d), want.data());
        CHECK(std::memcmp(row_ptr(c, 0, 1, 1, h, p), want.data(), want.size()) == 0);
      }
  }
}

TEST_CASE("store path is bit-identical to encode_row on every compiled SIMD target") {
  // Magnitudes across the whole f32 range (f16 overflow and subnormals, bf16
  // subnormals), exact ties for both 16-bit types, infinities and NaN.
  const int64_t d = 256;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> mant(-2.0f, 2.0f);
  std::uniform_int_distribution<int> expo(-150, 130);
  std::vector<float> x(size_t(3 * d));
  for (float& v : x) v = std::ldexp(mant(rng), expo(rng));
  const float specials[] = {1.00390625f, 1.01171875f, 1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65520.0f,
                            65519.0f, 0x1p-25f, 3 * 0x1p-25f, f32_from_bits(0x00018000u), -0.0f,
                            std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(), f32_from_bits(0xFFC12345u)};
  std::copy(std::begin(specials), std::end(specials), x.begin() + 3);
  // Q8_0 rows: the GGUF reference is defined only for finite values whose block
  // maximum keeps 1/scale finite, so those rows get ordinary magnitudes.
  std::vector<float> xq = random_values(size_t(3 * d), 6, -3.0f, 3.0f);
  for (int i = 0; i < 32; ++i) xq[size_t(d + 64 + i)] = 0.5f + float(i % 3);  // ties at scale 1 need max 127
  xq[size_t(d + 64)] = 127.0f;
  for (int i = 0; i < 32; ++i) xq[size_t(2 * d + 32 + i)] = 1e-30f * float(i - 7);  // tiny but defined

  testing::for_each_simd_target([&] {
    for (DType t : kAllTypes) {
      const std::string type_name = dtype_name(t);
      CAPTURE(type_name);
      const std::vector<float>& src = t == DType::Q8_0 ? xq : x;
      KVCache c(make_config(t, 1, 1, d, 4, 1));
      c.append(0, 3, src.data(), src.data());
      std::vector<uint8_t> want(size_t(c.row_bytes()));
      for (int64_t p = 0; p < 3; ++p) {
        encode_row(t, &src[size_t(p * d)], size_t(d), want.data());
        const uint8_t* got = row_ptr(c, 0, 0, 0, 0, p);
        if (t == DType::F16 || t == DType::BF16) {
          const auto* g16 = reinterpret_cast<const uint16_t*>(got);
          const auto* w16 = reinterpret_cast<const uint16_t*>(want.data());
          for (int64_t i = 0; i < d; ++i) {
            const float gv = t == DType::F16 ? f16_to_f32(g16[i]) : bf16_to_f32(g16[i]);
            if (std::isnan(src[size_t(p * d + i)])) {
              CHECK(std::isnan(gv));  // NaN payloads may differ (F16C keeps them)
            } else {
              CAPTURE(src[size_t(p * d + i)]);
              CHECK(g16[i] == w16[i]);
            }
          }
        } else {
          CHECK(std::memcmp(got, want.data(), want.size()) == 0);
        }
      }
    }
  });
}

TEST_CASE("decode attention over the cache equals the fp64 reference, every type and GQA ratio") {
  // Tolerance: the kernel and the reference read the same stored values, so the
  // only difference is arithmetic. With |q|, |k|, |v| <= 1 and d = 64, f32 score
  // sums are off by <= 64 * 2^-24 * scale*sum|q k| ~ 1e-6; softmax weights then
  // err relatively by ~2e-6 (plus the kernel's exp approximation), and the
  // output, a convex combination of |v| <= 1, by a few 1e-6. 2e-5 leaves room.
  const double tol = 2e-5;
  const int64_t hkv = 2, d = 64, cap = 300;
  const int64_t lens[] = {37, 300, 129};
  for (DType t : kAllTypes) {
    KVCache c(make_config(t, 2, hkv, d, cap, 3));
    for (int64_t s = 0; s < 3; ++s) {
      // Two appends per sequence (a prompt, then the rest), all layers.
      const int64_t first = lens[s] / 3 + 1;
      for (int64_t part = 0; part < 2; ++part) {
        const int64_t n = part == 0 ? first : lens[s] - first;
        const auto k = random_values(size_t(2 * n * hkv * d), uint32_t(100 + s * 10 + part));
        const auto v = random_values(k.size(), uint32_t(200 + s * 10 + part));
        c.append(s, n, k.data(), v.data());
      }
      REQUIRE(c.length(s) == lens[s]);
    }
    for (int64_t ratio : {1, 2, 4, 8}) {
      const std::string type_name = dtype_name(t);
    CAPTURE(type_name);
      CAPTURE(ratio);
      const int64_t hq = hkv * ratio, row = hq * d;
      const auto q = random_values(size_t(3 * row), uint32_t(300 + ratio));
      const int64_t seqs[] = {0, 1, 2};
      std::vector<float> out(q.size());
      for (int64_t layer : {0, 1}) {
        c.attend_decode(layer, seqs, lens, 3, hq, q.data(), out.data());
        for (int64_t s = 0; s < 3; ++s) {
          const std::vector<float> got(out.begin() + s * row, out.begin() + (s + 1) * row);
          CHECK(decode_diff(c, got, layer, s, lens[s], hq, q.data() + s * row) <= tol);
        }
      }
      // An explicit scale is passed through.
      c.attend_decode(1, seqs + 1, lens + 1, 1, hq, q.data(), out.data(), 0.5f);
      CHECK(decode_diff(c, std::vector<float>(out.begin(), out.begin() + row), 1, 1, lens[1], hq, q.data(), 0.5f) <=
            tol);
    }
  }
}

TEST_CASE("bf16, f16 and q8_0 caches stay within their error bound of the f32 cache") {
  // Bound. o = sum_j p_j v_j. If every stored K element errs by at most ek and
  // every V element by at most ev, each score s_j = scale*q.k_j moves by at most
  // delta = scale*|q|_1*ek, so each weight p_j changes by a factor within
  // exp(+-2 delta) and sum_j |p'_j - p_j| <= exp(2 delta) - 1. Hence
  //   |o' - o| <= ev + (exp(2 delta) - 1) * max|v|   (+ arithmetic rounding).
  // Per element: bf16 rounds to 8 significant bits, error <= 2^-9 |x|; f16 to 11,
  // error <= 2^-11 |x| (these values are normal in f16); q8_0 rounds x/s to an
  // integer (<= s/2 with s = amax/127) and stores s in f16 (relative 2^-11,
  // times |q| <= 127), so error <= amax * (0.5/127 + 2^-11). With q8_0 on VNNI
  // CPUs the query itself is also quantized per 32-value block (each element moves
  // by <= max|q_block|*scale/254), which moves a score by at most a further
  // scale * sum_blocks max|q_block| / 254 * 32 * max|k|.
  const int64_t hkv = 4, hq = 16, d = 128, len = 1000;
  const auto k = random_values(size_t(len * hkv * d), 7);
  const auto v = random_values(k.size(), 8);
  const auto q = random_values(size_t(hq * d), 9, -2.0f, 2.0f);
  const float scale = 1.0f / std::sqrt(float(d));
  const int64_t seq = 0;
  auto run = [&](DType t) {
    KVCache c(make_config(t, 1, hkv, d, len, 1));
    c.append(0, len, k.data(), v.data());
    std::vector<float> out(q.size());
    c.attend_decode(0, &seq, &len, 1, hq, q.data(), out.data());
    return out;
  };
  const std::vector<float> exact = run(DType::F32);
  const double amax = 1.0;  // |k|, |v| <= 1 by construction
  for (DType t : {DType::F16, DType::BF16, DType::Q8_0}) {
    const double rel = t == DType::BF16 ? 0x1p-9 : t == DType::F16 ? 0x1p-11 : 0.5 / 127 + 0x1p-11;
    const double e = rel * amax;
    const std::vector<float> got = run(t);
    double worst_ratio = 0, worst = 0;
    for (int64_t h = 0; h < hq; ++h) {
      double q1 = 0;
      for (int64_t i = 0; i < d; ++i) q1 += std::fabs(q[size_t(h * d + i)]);
      double q_blocks = 0;  // sum over 32-blocks of max|q|
      for (int64_t b = 0; b < d; b += 32) {
        double m = 0;
        for (int64_t i = b; i < b + 32; ++i) m = std::max(m, double(std::fabs(q[size_t(h * d + i)])));
        q_blocks += m;
      }
      const double delta = scale * q1 * e + (t == DType::Q8_0 ? scale * q_blocks / 254 * 32 * amax : 0.0);
      const double bound = e + std::expm1(2 * delta) * amax + 1e-5;
      for (int64_t i = 0; i < d; ++i) {
        const double err = std::fabs(double(got[size_t(h * d + i)]) - exact[size_t(h * d + i)]);
        CHECK(err <= bound);
        worst = std::max(worst, err);
        worst_ratio = std::max(worst_ratio, err / bound);
      }
    }
    MESSAGE(std::string(dtype_name(t)), " cache vs f32 cache: max |error| ", worst, " (", worst_ratio * 100,
            "% of the bound)");
  }
}

TEST_CASE("batched decode over sequences of different lengths equals per-sequence decode") {
  // Same kernel, same stored values; a batch may split the keys differently from
  // a single sequence, so results agree to f32 rounding of the merge (1e-5 of
  // outputs bounded by max|v| = 1).
  const double tol = 1e-5;
  const int64_t hkv = 4, hq = 16, d = 128, n_seqs = 5;
  const int64_t lens[n_seqs] = {1, 17, 700, 64, 333};
  for (DType t : {DType::F16, DType::Q8_0}) {
    const std::string type_name = dtype_name(t);
    CAPTURE(type_name);
    KVCache c(make_config(t, 1, hkv, d, 700, n_seqs));
    for (int64_t s = 0; s < n_seqs; ++s) {
      const auto k = random_values(size_t(lens[s] * hkv * d), uint32_t(40 + s));
      const auto v = random_values(k.size(), uint32_t(50 + s));
      c.append(s, lens[s], k.data(), v.data());
    }
    const int64_t row = hq * d;
    const auto q = random_values(size_t(n_seqs * row), 60);
    std::vector<std::vector<float>> single(n_seqs);
    for (int64_t s = 0; s < n_seqs; ++s) {
      single[s].resize(size_t(row));
      c.attend_decode(0, &s, &lens[s], 1, hq, q.data() + s * row, single[s].data());
      CHECK(decode_diff(c, single[s], 0, s, lens[s], hq, q.data() + s * row) <= 2e-5);
    }
    const std::vector<std::vector<int64_t>> lists = {
        {0, 1, 2, 3, 4}, {4, 2, 0}, {1, 3}, {3, 0, 1, 2}, {2, 2, 4}, {4}};
    for (const auto& list : lists) {
      CAPTURE(list.size());
      CAPTURE(list[0]);
      const int64_t n = int64_t(list.size());
      std::vector<int64_t> len(list.size());
      std::vector<float> qs(size_t(n * row)), out(qs.size());
      for (int64_t i = 0; i < n; ++i) {
        len[i] = lens[list[i]];
        std::copy(q.begin() + list[i] * row, q.begin() + (list[i] + 1) * row, qs.begin() + i * row);
      }
      c.attend_decode(0, list.data(), len.data(), n, hq, qs.data(), out.data());
      for (int64_t i = 0; i < n; ++i) {
        const std::vector<float> got(out.begin() + i * row, out.begin() + (i + 1) * row);
        CHECK(max_abs_diff(got, single[list[i]]) <= tol);
      }
    }
  }
}

TEST_CASE("the decoder's step: store the new token per layer, attend, then commit") {
  const int64_t layers = 3, hkv = 2, hq = 8, d = 64, prompt = 20;
  KVCache c(make_config(DType::BF16, layers, hkv, d, 64, 2));
  const auto pk = random_values(size_t(layers * prompt * hkv * d), 1);
  const auto pv = random_values(pk.size(), 2);
  c.append(1, prompt, pk.data(), pv.data());
  for (int step = 0; step < 3; ++step) {
    const int64_t seq = 1, len = c.length(seq) + 1;
    for (int64_t l = 0; l < layers; ++l) {
      const auto k = random_values(size_t(hkv * d), uint32_t(10 + step * 7 + l));
      const auto v = random_values(k.size(), uint32_t(20 + step * 7 + l));
      const auto q = random_values(size_t(hq * d), uint32_t(30 + step * 7 + l));
      c.store(l, seq, len - 1, 1, k.data(), v.data());
      std::vector<float> out(q.size());
      c.attend_decode(l, &seq, &len, 1, hq, q.data(), out.data());
      CHECK(max_abs_diff(out, reference_decode(c, l, seq, len, hq, q.data())) <= 2e-5);
      // The new token's own key is part of what it attends to.
      CHECK(c.stored(l, seq) == len);
    }
    CHECK(c.length(seq) == len - 1);
    c.commit(seq, len);
    CHECK(c.length(seq) == prompt + step + 1);
  }
  CHECK(c.length(0) == 0);
}

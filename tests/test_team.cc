// ctest-labels: asan kernels
// The team of threads a decode step runs in (kernels/threads/team.h): its sync orders
// every thread's writes, its block queue hands out each block exactly once call
// after call, an exception on one thread reaches the caller without leaving
// another spinning, and the kernels that share work within a team (matvec,
// matmul, attention) give bit for bit what they give from their own parallel
// regions with the same thread count.
#include <doctest/doctest.h>
#include <omp.h>

#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/dtype.h"
#include "kernels/error.h"
#include "kernels/linear.h"
#include "kernels/linear_internal.h"
#include "kernels/threads/team.h"
#include "tests/linear_fixture.h"

using namespace qkv;
using namespace qkv::testing;

namespace {

// The threads a team gets here: 2 even on a 1-core machine (OpenMP gives what
// is asked unless limited), so the sharing paths run.
constexpr int kThreads = 2;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("team: sync orders every thread's writes, round after round") {
  std::vector<int> slot(kThreads, -1);
  std::atomic<int> wrong{0}, size{0};
  run_team(kThreads, [&] {
    Team* team = current_team();
    REQUIRE(team != nullptr);
    size = team->size();
    const int t = team->thread();
    for (int round = 0; round < 2000; ++round) {
      slot[t] = round;  // plain writes: only the sync orders them
      team->sync();
      for (int u = 0; u < team->size(); ++u) wrong += slot[u] != round;
      team->sync();
    }
  });
  CHECK(size.load() >= 1);
  CHECK(wrong.load() == 0);
  CHECK(current_team() == nullptr);
}

TEST_CASE("team: every block is taken exactly once, in every call, the last thread's from the back") {
  // Up to 2^20 - 1 blocks the slot counts from both ends; above, from the front only.
  const int64_t sizes[] = {0, 1, 7, 1000, 3, 64, 1, (int64_t{1} << 20) - 1, (int64_t{1} << 20) + 3, 2};
  std::vector<std::vector<std::atomic<int>>> taken, owner;
  for (int64_t n : sizes) taken.emplace_back(static_cast<size_t>(n)), owner.emplace_back(static_cast<size_t>(n));
  std::atomic<int> bad_range{0}, size{0};
  run_team(kThreads, [&] {
    Team* team = current_team();
    size = team->size();
    for (size_t c = 0; c < std::size(sizes); ++c) {
      team->begin_call();
      int64_t b0, b1;
      while (team->take(sizes[c], 2, &b0, &b1)) {
        bad_range += !(0 <= b0 && b0 < b1 && b1 <= sizes[c]);
        for (int64_t b = b0; b < b1 && b < sizes[c]; ++b) {
          ++taken[c][static_cast<size_t>(b)];
          owner[c][static_cast<size_t>(b)] = team->thread();
        }
      }
      team->sync();
    }
  });
  CHECK(bad_range.load() == 0);
  for (size_t c = 0; c < std::size(sizes); ++c) {
    CAPTURE(sizes[c]);
    int not_once = 0;
    for (const auto& t : taken[c]) not_once += t.load() != 1;
    CHECK(not_once == 0);
    // Two threads, both ends: the first thread's blocks are a prefix, the last's the rest.
    if (size.load() == 2 && sizes[c] < (int64_t{1} << 20)) {
      int turns = 0;
      for (size_t b = 1; b < owner[c].size(); ++b) turns += owner[c][b].load() != owner[c][b - 1].load();
      CHECK(turns <= 1);
      if (!owner[c].empty()) CHECK((owner[c].front().load() == 0 || turns == 0));
    }
  }
}

TEST_CASE("team: share() splits n into contiguous parts that cover it") {
  for (int64_t n : {0, 1, 5, 1000}) {
    std::vector<std::atomic<int>> covered(static_cast<size_t>(n));
    run_team(kThreads, [&] {
      int64_t lo, hi;
      current_team()->share(n, &lo, &hi);
      for (int64_t i = lo; i < hi; ++i) ++covered[static_cast<size_t>(i)];
    });
    int not_once = 0;
    for (const auto& c : covered) not_once += c.load() != 1;
    CHECK(not_once == 0);
  }
}

TEST_CASE("team: shared_floats gives every thread the same buffer") {
  std::vector<float*> got(kThreads, nullptr);
  std::atomic<int> mismatch{0};
  run_team(kThreads, [&] {
    Team* team = current_team();
    float* p = team->shared_floats(1000);
    got[team->thread()] = p;
    p[team->thread()] = static_cast<float>(team->thread() + 1);
    team->sync();
    for (int u = 0; u < team->size(); ++u) mismatch += got[u] != p || p[u] != static_cast<float>(u + 1);
    CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);
  });
  CHECK(mismatch.load() == 0);
}

TEST_CASE("team: an error on one thread reaches the caller, none is left waiting") {
  for (int failing : {0, 1}) {
    CAPTURE(failing);
    std::atomic<int> after{0};
    auto body = [&] {
      Team* team = current_team();
      team->sync();
      if (team->thread() == failing % team->size()) fail("thread ", team->thread(), " fails on purpose");
      for (int i = 0; i < 100; ++i) team->sync();  // the others wait here until they see the failure
      ++after;
    };
    bool threw = false;
    try {
      run_team(kThreads, body);
    } catch (const Error& e) {
      threw = std::string(e.what()).find("fails on purpose") != std::string::npos;
    }
    CHECK(threw);
    CHECK(after.load() == 0);  // a team of one has no other thread; in a larger one nobody ran past the failure
    CHECK(current_team() == nullptr);
  }
  // A team of one rethrows as it is.
  CHECK_THROWS_AS(run_team(1, [] { fail("alone"); }), Error);
}

TEST_CASE("team: one thread, nesting, and leaving the team for a while") {
  int calls = 0;
  run_team(1, [&] {
    ++calls;
    CHECK(current_team() != nullptr);
    CHECK(current_team()->size() == 1);
    current_team()->sync();  // no-op
  });
  CHECK(calls == 1);
  std::atomic<int> inner{0}, outside_seen_null{0};
  run_team(kThreads, [&] {
    Team* outer = current_team();
    run_team(kThreads, [&] {  // joins the running team: no new threads
      inner += current_team() == outer;
    });
    run_outside_team([&] { outside_seen_null += current_team() == nullptr; });
    CHECK(current_team() == outer);
  });
  CHECK(inner.load() >= 1);
  CHECK(outside_seen_null.load() == inner.load());
}

TEST_CASE("kernels in a team equal the same kernels on their own, bit for bit") {
  omp_set_num_threads(kThreads);
  for (DType t : kAllTypes) {
    CAPTURE(dtype_name(t));
    // Big enough to be split between threads (>= 64 KiB of weights).
    const TestMatrix a = make_matrix(t, 700, 256, 1), b = make_matrix(t, 96, 256, 2);
    const Matrix ws[2] = {a.m, b.m};
    for (int64_t M : {1, 5, 16, 21}) {
      CAPTURE(M);
      const std::vector<float> X = random_vec(static_cast<size_t>(M * 256), 3);
      std::vector<float> ya(static_cast<size_t>(M * 700)), yb(static_cast<size_t>(M * 96));
      float* ys[2] = {ya.data(), yb.data()};
      matmul_multi(ws, ys, 2, X.data(), M);
      std::vector<float> ta(ya.size(), -1.0f), tb(yb.size(), -1.0f), tc(ya.size(), -1.0f);
      float* ts[2] = {ta.data(), tb.data()};
      run_team(kThreads, [&] {
        matmul_multi(ws, ts, 2, X.data(), M);
        matmul(a.m, X.data(), M, tc.data());
      });
      if (M > 16) {
        // Outside a team this went to oneDNN; a team slices the batch for the
        // small-batch kernel instead. Both are checked against the fp64
        // reference with that kernel's bound (tests/test_matmul_small.cc).
        const double extra =
            detail::matmul_small_precision(t) == detail::GemmPrecision::kBF16 ? 0x1p-8 + 0x1p-17 : 0.0;
        const std::vector<float> Xb = batch_inputs(t, X, M, 256);
        check_result(a, Xb, M, ta, extra);
        check_result(b, Xb, M, tb, extra);
        check_result(a, Xb, M, tc, extra);
      } else {
        CHECK(same_bits(ta, ya));
        CHECK(same_bits(tb, yb));
        CHECK(same_bits(tc, ya));
      }
    }
  }

  // Decode attention with the keys split over the threads (one KV head, long
  // rows) and a batch of sequences; f16 K/V; also with the weights requested.
  for (int64_t B : {1, 6}) {
    CAPTURE(B);
    AttentionShape s;
    s.B = B;
    s.Hq = 4;
    s.Hkv = 1;
    s.Lq = 1;
    s.Lk = 3000;
    s.d = 64;
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> q(static_cast<size_t>(B * s.Hq * s.d));
    for (auto& x : q) x = u(rng);
    std::vector<uint16_t> k(static_cast<size_t>(B * s.Lk * s.d)), v(k.size());
    for (auto& x : k) x = f32_to_f16(u(rng));
    for (auto& x : v) x = f32_to_f16(u(rng));
    const QueryView qv{q.data(), s.Hq * s.d, s.d, s.Hq * s.d};
    const KVView kv{k.data(), DType::F16, s.Lk * s.d * 2, 0, s.d * 2};
    const KVView vv{v.data(), DType::F16, s.Lk * s.d * 2, 0, s.d * 2};
    std::vector<int64_t> lens(static_cast<size_t>(B));
    for (int64_t i = 0; i < B; ++i) lens[i] = s.Lk - 37 * i;
    AttentionMask mask;
    mask.kv_len_per_batch = lens.data();
    std::vector<float> alone(q.size()), in_team(q.size(), -1.0f);
    attention(s, qv, kv, vv, mask, OutputView{alone.data(), s.Hq * s.d, s.d, s.Hq * s.d});
    run_team(kThreads, [&] { attention(s, qv, kv, vv, mask, OutputView{in_team.data(), s.Hq * s.d, s.d, s.Hq * s.d}); });
    CHECK(same_bits(alone, in_team));

    std::vector<float> w_alone(static_cast<size_t>(B * s.Hq * s.Lk)), w_team(w_alone.size(), -1.0f);
    AttentionOptions o;
    o.weights = w_alone.data();
    attention(s, qv, kv, vv, mask, OutputView{alone.data(), s.Hq * s.d, s.d, s.Hq * s.d}, o);
    o.weights = w_team.data();
    run_team(kThreads, [&] { attention(s, qv, kv, vv, mask, OutputView{in_team.data(), s.Hq * s.d, s.d, s.Hq * s.d}, o); });
    CHECK(same_bits(w_alone, w_team));
  }
  omp_set_num_threads(omp_get_num_procs());
}

// ctest-labels: asan
// F32 weights compute in f32 in the batched decode path too: qkv_step_batch
// of 2 and 4 sequences on ../shared/models/stories260K.gguf (F32 weights, F32
// KV cache) gives each sequence the logits of stepping it alone, to f32
// rounding (sums in another order), so greedy output does not depend on what
// else is in the batch.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "qkv.h"
#include "tests/shared_data.h"

namespace {

// Max |logit difference| over n_seqs sequences, 6 batched steps each, against solo runs.
double batched_vs_solo(qkv_model* m, int64_t n_seqs, int threads) {
  qkv_model_info info;
  REQUIRE(qkv_model_get_info(m, &info) == QKV_OK);
  const int64_t V = info.vocab_size;
  qkv_context_options o;
  qkv_context_options_init(&o);
  o.context = 64;
  o.threads = threads;
  o.kv_type = QKV_TYPE_F32;
  qkv_context* ctx = nullptr;
  REQUIRE(qkv_context_create(m, n_seqs, &o, &ctx) == QKV_OK);
  std::vector<qkv_session*> s(static_cast<size_t>(n_seqs));
  for (int64_t i = 0; i < n_seqs; ++i) {
    REQUIRE(qkv_context_session(ctx, i, &s[i]) == QKV_OK);
    // Different prompt lengths, so the sequences sit at different positions.
    std::vector<int32_t> p = {1};
    for (int64_t k = 0; k <= i; ++k) p.push_back(static_cast<int32_t>(100 + 7 * i + k));
    REQUIRE(qkv_session_prefill(s[i], p.data(), static_cast<int64_t>(p.size()), nullptr, 0) == QKV_OK);
  }
  std::vector<float> batched(static_cast<size_t>(n_seqs * V));
  std::vector<int32_t> toks(static_cast<size_t>(n_seqs));
  for (int step = 0; step < 6; ++step) {
    for (int64_t i = 0; i < n_seqs; ++i) toks[i] = static_cast<int32_t>(40 + 3 * step + i);
    REQUIRE(qkv_step_batch(s.data(), toks.data(), n_seqs, batched.data(), n_seqs * V) == QKV_OK);
  }
  double worst = 0;
  qkv_session* solo = nullptr;
  REQUIRE(qkv_session_create(m, &o, &solo) == QKV_OK);
  std::vector<float> l(static_cast<size_t>(V));
  for (int64_t i = 0; i < n_seqs; ++i) {
    REQUIRE(qkv_session_truncate(solo, 0) == QKV_OK);
    std::vector<int32_t> p = {1};
    for (int64_t k = 0; k <= i; ++k) p.push_back(static_cast<int32_t>(100 + 7 * i + k));
    REQUIRE(qkv_session_prefill(solo, p.data(), static_cast<int64_t>(p.size()), nullptr, 0) == QKV_OK);
    for (int step = 0; step < 6; ++step) {
      REQUIRE(qkv_session_step(solo, static_cast<int32_t>(40 + 3 * step + i), l.data(), V) == QKV_OK);
    }
    for (int64_t v = 0; v < V; ++v) worst = std::fmax(worst, std::fabs(double(l[v]) - batched[i * V + v]));
  }
  qkv_session_free(solo);
  qkv_context_free(ctx);
  return worst;
}

}  // namespace

TEST_CASE("batched decode of F32 weights equals single steps to f32 rounding") {
  if (!qkv::test::have_shared("models/stories260K.gguf")) return;
  qkv_model* m = nullptr;
  REQUIRE(qkv_model_load(qkv::test::shared_path("models/stories260K.gguf").c_str(), nullptr, &m) == QKV_OK);
  for (int threads : {1, 2}) {
    for (int64_t n : {2, 4}) {
      const double d = batched_vs_solo(m, n, threads);
      INFO("batch ", n, ", threads ", threads, ": max |diff| ", d);
      // Logits here are O(10); f32 sums of a few hundred products in another order differ by ~1e-6.
      CHECK(d < 2e-5);
    }
  }
  qkv_model_free(m);
}

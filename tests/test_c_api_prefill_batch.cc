// ctest-labels: asan
// qkv_prefill_batch (include/qkv.h): the prompts of several slots in one pass
// give the logits and the sampled tokens of one qkv_session_prefill each, the
// slots continue alike, and bad calls are refused before anything runs.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "qkv.h"
#include "runtime/model_loader.h"
#include "runtime/synthetic.h"

namespace {

constexpr int64_t kVocab = 512;  // the "tiny" preset's

// The "tiny" synthetic preset with f32 weights as a GGUF file, loaded through
// the API; the file is deleted once loaded (the model keeps its own mapping or copy).
struct TinyModel {
  qkv_model* model = nullptr;
  TinyModel() {
    const std::string path =
        std::string(QKV_BINARY_DIR) + "/test_c_api_prefill_batch." + std::to_string(::getpid()) + ".gguf";
    qkv::write_gguf_model(qkv::make_synthetic_model(qkv::synthetic_preset("tiny"), qkv::DType::F32, 5), path);
    const qkv_status st = qkv_model_load(path.c_str(), nullptr, &model);
    std::remove(path.c_str());
    INFO(qkv_last_error());
    REQUIRE(st == QKV_OK);
  }
  ~TinyModel() { qkv_model_free(model); }
};

qkv_context_options f32_options(int64_t context) {
  qkv_context_options o;
  qkv_context_options_init(&o);
  o.threads = 1;
  o.context = context;
  o.kv_type = QKV_TYPE_F32;
  return o;
}

std::vector<int32_t> prompt(int64_t n, int salt) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>(3 + (i * 53 + salt * 97) % (kVocab - 3));
  return t;
}

double rel_diff(const float* a, const float* b, int64_t n) {
  double d = 0, s = 0;
  for (int64_t i = 0; i < n; ++i) {
    d = std::max(d, std::fabs(double(a[i]) - b[i]));
    s = std::max(s, std::fabs(double(b[i])));
  }
  return d / std::max(s, 1e-30);
}

int64_t position(const qkv_session* s) {
  int64_t p = -1;
  REQUIRE(qkv_session_position(s, &p) == QKV_OK);
  return p;
}

}  // namespace

TEST_CASE("c api: qkv_prefill_batch equals a prefill of each session") {
  TinyModel tm;
  const int64_t n = 3;
  qkv_context_options o = f32_options(64);
  qkv_context* c = nullptr;
  REQUIRE(qkv_context_create(tm.model, n, &o, &c) == QKV_OK);
  std::vector<qkv_session*> slots(n), alone(n);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<const int32_t*> ptrs;
  std::vector<int64_t> counts;
  for (int64_t i = 0; i < n; ++i) {
    REQUIRE(qkv_context_session(c, i, &slots[i]) == QKV_OK);
    REQUIRE(qkv_session_create(tm.model, &o, &alone[i]) == QKV_OK);
    prompts.push_back(prompt(4 + 7 * i, static_cast<int>(i)));
    counts.push_back(static_cast<int64_t>(prompts.back().size()));
  }
  for (const auto& p : prompts) ptrs.push_back(p.data());
  // Slots in another order than the context's.
  qkv_session* order[3] = {slots[2], slots[0], slots[1]};
  const int32_t* order_ptrs[3] = {ptrs[2], ptrs[0], ptrs[1]};
  const int64_t order_counts[3] = {counts[2], counts[0], counts[1]};
  std::vector<float> batched(static_cast<size_t>(n * kVocab)), single(static_cast<size_t>(kVocab));
  REQUIRE(qkv_prefill_batch(order, order_ptrs, order_counts, n, batched.data(), n * kVocab) == QKV_OK);
  const int which[3] = {2, 0, 1};
  for (int64_t i = 0; i < n; ++i) {
    const int k = which[i];
    CAPTURE(k);
    REQUIRE(qkv_session_prefill(alone[k], ptrs[k], counts[k], single.data(), kVocab) == QKV_OK);
    // F32 weights and cache: the packed rows' GEMMs sum in another order only.
    CHECK(rel_diff(&batched[i * kVocab], single.data(), kVocab) <= 1e-5);
    CHECK(position(slots[k]) == counts[k]);
    // Each slot samples from its own logits, and both continue alike.
    int32_t ta = -1, tb = -2;
    REQUIRE(qkv_session_sample(slots[k], &ta) == QKV_OK);
    REQUIRE(qkv_session_sample(alone[k], &tb) == QKV_OK);
    CHECK(ta == tb);
    std::vector<float> sa(static_cast<size_t>(kVocab));
    REQUIRE(qkv_session_step(slots[k], ta, sa.data(), kVocab) == QKV_OK);
    REQUIRE(qkv_session_step(alone[k], tb, single.data(), kVocab) == QKV_OK);
    CHECK(rel_diff(sa.data(), single.data(), kVocab) <= 1e-5);
  }
  for (qkv_session* s : alone) qkv_session_free(s);
  qkv_context_free(c);
}

TEST_CASE("c api: qkv_prefill_batch refuses bad calls and changes nothing") {
  TinyModel tm;
  qkv_context_options o = f32_options(8);
  qkv_context *c = nullptr, *other = nullptr;
  REQUIRE(qkv_context_create(tm.model, 2, &o, &c) == QKV_OK);
  REQUIRE(qkv_context_create(tm.model, 1, &o, &other) == QKV_OK);
  qkv_session *a = nullptr, *b = nullptr, *x = nullptr;
  REQUIRE(qkv_context_session(c, 0, &a) == QKV_OK);
  REQUIRE(qkv_context_session(c, 1, &b) == QKV_OK);
  REQUIRE(qkv_context_session(other, 0, &x) == QKV_OK);
  const std::vector<int32_t> p3 = prompt(3, 1), p9 = prompt(9, 2);
  const int32_t* toks[2] = {p3.data(), p3.data()};
  const int64_t three[2] = {3, 3};
  qkv_session* both[2] = {a, b};
  std::vector<float> logits(static_cast<size_t>(2 * kVocab));

  CHECK(qkv_prefill_batch(nullptr, toks, three, 2, nullptr, 0) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_prefill_batch(both, nullptr, three, 2, nullptr, 0) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_prefill_batch(both, toks, nullptr, 2, nullptr, 0) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_prefill_batch(both, toks, three, 0, nullptr, 0) == QKV_ERR_INVALID_ARGUMENT);
  qkv_session* mixed[2] = {a, x};
  CHECK(qkv_prefill_batch(mixed, toks, three, 2, nullptr, 0) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(std::strstr(qkv_last_error(), "different contexts") != nullptr);
  qkv_session* twice[2] = {a, a};
  CHECK(qkv_prefill_batch(twice, toks, three, 2, nullptr, 0) == QKV_ERR_INVALID_ARGUMENT);
  const int64_t zero[2] = {3, 0};
  CHECK(qkv_prefill_batch(both, toks, zero, 2, nullptr, 0) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(std::strstr(qkv_last_error(), "sessions[1] needs at least one token") != nullptr);
  const int32_t* with_null[2] = {p3.data(), nullptr};
  CHECK(qkv_prefill_batch(both, with_null, three, 2, nullptr, 0) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_prefill_batch(both, toks, three, 2, logits.data(), 2 * kVocab - 1) == QKV_ERR_BUFFER_TOO_SMALL);
  const int32_t bad_token[1] = {int32_t(kVocab)};
  const int32_t* bad[2] = {p3.data(), bad_token};
  const int64_t three_one[2] = {3, 1};
  CHECK(qkv_prefill_batch(both, bad, three_one, 2, nullptr, 0) != QKV_OK);
  // One session's prompt past the context of 8 stops both.
  const int32_t* long_toks[2] = {p3.data(), p9.data()};
  const int64_t three_nine[2] = {3, 9};
  CHECK(qkv_prefill_batch(both, long_toks, three_nine, 2, nullptr, 0) == QKV_ERR_CONTEXT_OVERFLOW);
  CHECK(position(a) == 0);
  CHECK(position(b) == 0);
  int32_t t = -1;
  CHECK(qkv_session_sample(a, &t) != QKV_OK);  // no logits yet
  CHECK(qkv_prefill_batch(both, toks, three, 2, logits.data(), 2 * kVocab) == QKV_OK);
  CHECK(position(a) == 3);
  CHECK(position(b) == 3);
  // The same prompt in both slots: the same logits.
  CHECK(rel_diff(logits.data(), logits.data() + kVocab, kVocab) == 0);
  qkv_context_free(other);
  qkv_context_free(c);
}

TEST_CASE("qkv_context_prepare builds the prompt passes' kernels once and changes no result") {
  CHECK(qkv_context_prepare(nullptr, nullptr) == QKV_ERR_INVALID_ARGUMENT);
  TinyModel tiny;
  qkv_context_options o = f32_options(128);
  o.prefill_batch = 64;
  qkv_context *prepared = nullptr, *plain = nullptr;
  REQUIRE(qkv_context_create(tiny.model, 1, &o, &prepared) == QKV_OK);
  REQUIRE(qkv_context_create(tiny.model, 1, &o, &plain) == QKV_OK);
  int64_t built = -1;
  REQUIRE(qkv_context_prepare(prepared, &built) == QKV_OK);
  CHECK(built >= 0);  // 0 when an earlier case here built these shapes already
  CHECK(qkv_context_prepare(prepared, &built) == QKV_OK);
  CHECK(built == 0);  // every bucket up to 64 rows is there now
  CHECK(qkv_context_prepare(plain, nullptr) == QKV_OK);  // the count is optional
  // A prompt of 40 rows (a 48-row bucket) gives the same logits either way.
  qkv_context* fresh = nullptr;
  REQUIRE(qkv_context_create(tiny.model, 1, &o, &fresh) == QKV_OK);
  qkv_session *a = nullptr, *b = nullptr;
  REQUIRE(qkv_context_session(prepared, 0, &a) == QKV_OK);
  REQUIRE(qkv_context_session(fresh, 0, &b) == QKV_OK);
  const std::vector<int32_t> p = prompt(40, 3);
  std::vector<float> la(kVocab), lb(kVocab);
  REQUIRE(qkv_session_prefill(a, p.data(), 40, la.data(), kVocab) == QKV_OK);
  REQUIRE(qkv_session_prefill(b, p.data(), 40, lb.data(), kVocab) == QKV_OK);
  CHECK(la == lb);
  qkv_context_free(fresh);
  qkv_context_free(plain);
  qkv_context_free(prepared);
}

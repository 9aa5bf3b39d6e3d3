// ctest-labels: decoder
// The batched verify pass of the server's speculative decoding:
// Decoder::prefill_multi_all_logits against prefill_all_logits of each
// sequence alone (the same logits to GEMM rounding, across pass splits and
// sequences already holding positions), and qkv_speculate_batch over several
// sessions against plain batched greedy decoding on tinystories-3M (the same
// tokens, every draft of the true continuation kept, a wrong one rejected
// with the model's token after it, the logprobs of each handed-out token
// those of its position) and its refusals.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "qkv.h"
#include "runtime/decoder.h"
#include "runtime/model_loader.h"
#include "runtime/speculative_drafters.h"
#include "runtime/synthetic.h"
#include "tests/decoder_fixture.h"
#include "tests/shared_data.h"

using namespace qkv;
using qkv::testing::rel_diff;
using qkv::testing::small_gqa_config;

namespace {

std::vector<int32_t> some_tokens(int64_t n, int salt, int64_t vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((i * 37 + 11 + salt * 101) % vocab);
  return t;
}

// Runs of counts[i] tokens on sequences {2, 1, 3} (1 and 3 already holding
// 6 and 2 positions) through one prefill_multi_all_logits, and each alone
// through prefill_all_logits in a twin decoder.
void check_all_logits(int64_t prefill_batch, const std::vector<int64_t>& counts) {
  CAPTURE(prefill_batch);
  const Model model = make_synthetic_model(small_gqa_config(), DType::F32, 11, /*tied_output=*/false);
  const int64_t vocab = model.config.vocab_size;
  DecoderOptions o;
  o.kv_type = DType::F32;
  o.n_seqs = 4;
  o.prefill_batch = prefill_batch;
  Decoder multi(model, o), separate(model, o);
  const std::vector<int32_t> head = some_tokens(6, 9, vocab);
  for (Decoder* d : {&multi, &separate}) {
    d->prefill(1, head.data(), 6);
    d->prefill(3, head.data(), 2);
  }
  const int64_t seqs[3] = {2, 1, 3};
  const auto n = static_cast<int64_t>(counts.size());
  std::vector<std::vector<int32_t>> runs;
  std::vector<const int32_t*> ptrs;
  int64_t rows = 0;
  for (int64_t i = 0; i < n; ++i) {
    runs.push_back(some_tokens(counts[i], static_cast<int>(i), vocab));
    rows += counts[i];
  }
  for (const auto& r : runs) ptrs.push_back(r.data());
  std::vector<float> together(static_cast<size_t>(rows * vocab));
  multi.prefill_multi_all_logits(seqs, ptrs.data(), counts.data(), n, together.data());
  int64_t row = 0;
  for (int64_t i = 0; i < n; ++i) {
    CAPTURE(i);
    std::vector<float> alone(static_cast<size_t>(counts[i] * vocab));
    separate.prefill_all_logits(seqs[i], runs[i].data(), counts[i], alone.data());
    // F32 weights and cache: only the summation order of the packed GEMM differs.
    CHECK(rel_diff(&together[static_cast<size_t>(row * vocab)], alone.data(), counts[i] * vocab) <= 1e-5);
    CHECK(multi.position(seqs[i]) == separate.position(seqs[i]));
    row += counts[i];
  }
}

const char* kTarget = "models/tinystories-3M-F32.gguf";

struct Fixture {
  qkv_model* model = nullptr;
  qkv_context* context = nullptr;
  std::vector<qkv_session*> sessions;
  int64_t vocab = 0;

  explicit Fixture(int n) {
    REQUIRE(qkv_model_load(test::shared_path(kTarget).c_str(), nullptr, &model) == QKV_OK);
    qkv_model_info info;
    qkv_model_get_info(model, &info);
    vocab = info.vocab_size;
    qkv_context_options o;
    qkv_context_options_init(&o);
    o.context = 256;
    o.kv_type = QKV_TYPE_F32;
    REQUIRE(qkv_context_create(model, n, &o, &context) == QKV_OK);
    sessions.resize(static_cast<size_t>(n));
    qkv_sampler_options greedy;
    qkv_sampler_options_init(&greedy);
    greedy.temperature = 0;
    for (int i = 0; i < n; ++i) {
      REQUIRE(qkv_context_session(context, i, &sessions[i]) == QKV_OK);
      REQUIRE(qkv_session_set_sampler(sessions[i], &greedy) == QKV_OK);
    }
  }
  ~Fixture() {
    qkv_context_free(context);
    qkv_model_free(model);
  }

  std::vector<int32_t> tokenize(const char* text) const {
    int64_t n = 0;
    qkv_tokenize(model, text, 1, nullptr, 0, &n);
    std::vector<int32_t> ids(static_cast<size_t>(n));
    REQUIRE(qkv_tokenize(model, text, 1, ids.data(), n, &n) == QKV_OK);
    return ids;
  }
};

const char* kPrompts[3] = {
    "Once upon a time, there was a little girl named Lily. Once upon a time, there was",
    "Tom had a red ball. He liked to play with the ball in the park. Tom had a",
    "The sun was hot. The dog was sleepy.",
};

// Plain batched greedy decoding of the prompts: n_new tokens each.
std::vector<std::vector<int32_t>> plain_greedy(int64_t n_new) {
  Fixture f(3);
  std::vector<std::vector<int32_t>> out(3);
  for (int i = 0; i < 3; ++i) {
    const std::vector<int32_t> p = f.tokenize(kPrompts[i]);
    REQUIRE(qkv_session_prefill(f.sessions[i], p.data(), static_cast<int64_t>(p.size()), nullptr, 0) == QKV_OK);
  }
  std::vector<int32_t> next(3);
  for (int64_t t = 0; t < n_new; ++t) {
    for (int i = 0; i < 3; ++i) {
      REQUIRE(qkv_session_sample(f.sessions[i], &next[i]) == QKV_OK);
      out[i].push_back(next[i]);
    }
    REQUIRE(qkv_step_batch(f.sessions.data(), next.data(), 3, nullptr, 0) == QKV_OK);
  }
  return out;
}

}  // namespace

TEST_CASE("a multi-sequence all-logits prefill equals each sequence's prefill_all_logits") {
  check_all_logits(512, {3, 5, 2});
  check_all_logits(4, {3, 5, 2});   // runs split across passes
  check_all_logits(512, {1, 1, 1});  // one row each: the decode-shaped pass
  check_all_logits(512, {9});
}

TEST_CASE("qkv_speculate_batch over several sessions keeps greedy decoding's tokens") {
  if (!test::have_shared(kTarget)) return;
  constexpr int64_t kNew = 40;
  const std::vector<std::vector<int32_t>> reference = plain_greedy(kNew);

  Fixture f(3);
  std::vector<std::vector<int32_t>> history(3), out(3);
  for (int i = 0; i < 3; ++i) {
    history[i] = f.tokenize(kPrompts[i]);
    REQUIRE(qkv_session_prefill(f.sessions[i], history[i].data(), static_cast<int64_t>(history[i].size()), nullptr,
                                0) == QKV_OK);
  }
  std::vector<int32_t> pending(3);
  for (int i = 0; i < 3; ++i) {
    REQUIRE(qkv_session_sample(f.sessions[i], &pending[i]) == QKV_OK);
    out[i].push_back(pending[i]);
  }
  NgramDrafter ngram(3);
  int64_t rounds = 0, drafted = 0, accepted_total = 0;
  // Each round: session 0 drafts by prompt lookup, session 1 the true
  // continuation (all kept), session 2 a wrong first token (none kept).
  while (out[0].size() < kNew && out[1].size() < kNew && out[2].size() < kNew) {
    std::vector<std::vector<int32_t>> drafts(3);
    std::vector<int32_t> h0 = history[0];
    h0.insert(h0.end(), out[0].begin(), out[0].end());
    ngram.draft(h0, 4, &drafts[0]);
    if (drafts[0].empty()) drafts[0] = {pending[0]};  // a guess, right or wrong
    const size_t at1 = out[1].size();
    for (size_t j = at1; j < std::min<size_t>(at1 + 3, kNew); ++j) drafts[1].push_back(reference[1][j]);
    if (drafts[1].empty()) drafts[1] = {0};
    const size_t at2 = out[2].size();
    drafts[2] = {static_cast<int32_t>((reference[2][at2] + 1) % f.vocab)};
    const int32_t* ptrs[3] = {drafts[0].data(), drafts[1].data(), drafts[2].data()};
    const int64_t counts[3] = {static_cast<int64_t>(drafts[0].size()), static_cast<int64_t>(drafts[1].size()), 1};
    int64_t accepted[3] = {-1, -1, -1};
    std::vector<int64_t> before(3);
    for (int i = 0; i < 3; ++i) REQUIRE(qkv_session_position(f.sessions[i], &before[i]) == QKV_OK);
    REQUIRE(qkv_speculate_batch(f.sessions.data(), pending.data(), ptrs, counts, 3, accepted) == QKV_OK);
    ++rounds;
    CHECK(accepted[1] == counts[1]);
    CHECK(accepted[2] == 0);
    for (int i = 0; i < 3; ++i) {
      CAPTURE(i);
      REQUIRE(accepted[i] >= 0);
      REQUIRE(accepted[i] <= counts[i]);
      drafted += counts[i];
      accepted_total += accepted[i];
      int64_t position = 0;
      REQUIRE(qkv_session_position(f.sessions[i], &position) == QKV_OK);
      CHECK(position == before[i] + 1 + accepted[i]);  // the fed token and the kept drafts
      for (int64_t j = 0; j <= accepted[i]; ++j) {
        int32_t t = -1;
        REQUIRE(qkv_session_sample(f.sessions[i], &t) == QKV_OK);
        if (j < accepted[i]) CHECK(t == drafts[i][static_cast<size_t>(j)]);
        out[i].push_back(t);
      }
      pending[i] = out[i].back();
    }
  }
  CHECK(rounds > 0);
  CHECK(accepted_total > 0);
  CHECK(accepted_total < drafted);
  for (int i = 0; i < 3; ++i) {
    CAPTURE(i);
    const size_t n = std::min<size_t>(out[i].size(), kNew);
    CHECK(std::vector<int32_t>(out[i].begin(), out[i].begin() + static_cast<std::ptrdiff_t>(n)) ==
          std::vector<int32_t>(reference[i].begin(), reference[i].begin() + static_cast<std::ptrdiff_t>(n)));
  }
}

TEST_CASE("the tokens a verify pass hands out carry their own position's logprobs") {
  if (!test::have_shared(kTarget)) return;
  Fixture plain(1), spec(1);
  const std::vector<int32_t> prompt = plain.tokenize(kPrompts[0]);
  const auto np = static_cast<int64_t>(prompt.size());
  REQUIRE(qkv_session_prefill(plain.sessions[0], prompt.data(), np, nullptr, 0) == QKV_OK);
  REQUIRE(qkv_session_prefill(spec.sessions[0], prompt.data(), np, nullptr, 0) == QKV_OK);
  // Plain: four greedy tokens and the logprob of each.
  std::vector<int32_t> tokens;
  std::vector<float> lps;
  for (int j = 0; j < 4; ++j) {
    int32_t t = -1;
    float lp = 0;
    REQUIRE(qkv_session_sample(plain.sessions[0], &t) == QKV_OK);
    REQUIRE(qkv_session_logprobs(plain.sessions[0], t, &lp, 0, nullptr, nullptr, nullptr) == QKV_OK);
    tokens.push_back(t);
    lps.push_back(lp);
    REQUIRE(qkv_session_step(plain.sessions[0], t, nullptr, 0) == QKV_OK);
  }
  int32_t first = -1;
  REQUIRE(qkv_session_sample(spec.sessions[0], &first) == QKV_OK);
  CHECK(first == tokens[0]);
  const int32_t* drafts = tokens.data() + 1;
  const int64_t k = 2;
  int64_t accepted = -1;
  REQUIRE(qkv_speculate_batch(spec.sessions.data(), &first, &drafts, &k, 1, &accepted) == QKV_OK);
  REQUIRE(accepted == 2);
  for (int j = 1; j < 4; ++j) {
    CAPTURE(j);
    int32_t t = -1;
    float lp = 0;
    REQUIRE(qkv_session_sample(spec.sessions[0], &t) == QKV_OK);
    REQUIRE(qkv_session_logprobs(spec.sessions[0], t, &lp, 0, nullptr, nullptr, nullptr) == QKV_OK);
    CHECK(t == tokens[static_cast<size_t>(j)]);
    CHECK(std::fabs(lp - lps[static_cast<size_t>(j)]) <= 1e-4f);
  }
}

TEST_CASE("qkv_speculate_batch refuses grammars, empty drafts, repeated sessions and undelivered tokens") {
  if (!test::have_shared(kTarget)) return;
  Fixture f(2);
  const std::vector<int32_t> prompt = f.tokenize(kPrompts[2]);
  for (qkv_session* s : f.sessions) {
    REQUIRE(qkv_session_prefill(s, prompt.data(), static_cast<int64_t>(prompt.size()), nullptr, 0) == QKV_OK);
  }
  const int32_t fed[2] = {prompt[1], prompt[2]};
  const int32_t draft[2] = {prompt[3], prompt[4]};
  const int32_t* ptrs[2] = {draft, draft};
  const int64_t counts[2] = {2, 2};
  int64_t accepted[2] = {0, 0};
  int64_t pos0 = 0;
  REQUIRE(qkv_session_position(f.sessions[0], &pos0) == QKV_OK);

  const int64_t none[2] = {0, 2};
  CHECK(qkv_speculate_batch(f.sessions.data(), fed, ptrs, none, 2, accepted) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(std::string(qkv_last_error()).find("drafted tokens") != std::string::npos);
  qkv_session* twice[2] = {f.sessions[0], f.sessions[0]};
  CHECK(qkv_speculate_batch(twice, fed, ptrs, counts, 2, accepted) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(std::string(qkv_last_error()).find("twice") != std::string::npos);
  const int32_t bad[2] = {static_cast<int32_t>(f.vocab), 0};
  const int32_t* bad_ptrs[2] = {bad, draft};
  CHECK(qkv_speculate_batch(f.sessions.data(), fed, bad_ptrs, counts, 2, accepted) == QKV_ERR_INVALID_ARGUMENT);

  qkv_grammar* g = nullptr;
  REQUIRE(qkv_grammar_create(f.model, QKV_GRAMMAR_GBNF, "root ::= \"a\"", &g) == QKV_OK);
  REQUIRE(qkv_session_set_grammar(f.sessions[1], g) == QKV_OK);
  CHECK(qkv_speculate_batch(f.sessions.data(), fed, ptrs, counts, 2, accepted) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(std::string(qkv_last_error()).find("grammar") != std::string::npos);
  REQUIRE(qkv_session_set_grammar(f.sessions[1], nullptr) == QKV_OK);
  qkv_grammar_free(g);
  int64_t pos = 0;
  REQUIRE(qkv_session_position(f.sessions[0], &pos) == QKV_OK);
  CHECK(pos == pos0);  // every refusal left the sessions as they were

  REQUIRE(qkv_speculate_batch(f.sessions.data(), fed, ptrs, counts, 2, accepted) == QKV_OK);
  CHECK(qkv_speculate_batch(f.sessions.data(), fed, ptrs, counts, 2, accepted) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(std::string(qkv_last_error()).find("hand out") != std::string::npos);
  // A truncate drops the tokens not handed out.
  REQUIRE(qkv_session_truncate(f.sessions[0], pos0) == QKV_OK);
  REQUIRE(qkv_session_truncate(f.sessions[1], pos0) == QKV_OK);
  CHECK(qkv_speculate_batch(f.sessions.data(), fed, ptrs, counts, 2, accepted) == QKV_OK);
}

TEST_CASE("qkv_model_check_draft accepts a model of the same vocabulary and refuses another") {
  if (!test::have_shared(kTarget) || !test::have_shared("models/stories260K.gguf")) return;
  qkv_model *target = nullptr, *draft = nullptr, *other = nullptr;
  REQUIRE(qkv_model_load(test::shared_path(kTarget).c_str(), nullptr, &target) == QKV_OK);
  REQUIRE(qkv_model_load(test::shared_path("models/stories260K.gguf").c_str(), nullptr, &draft) == QKV_OK);
  // The "tiny" synthetic preset: a byte-level vocabulary of its own.
  const std::string path = std::string(QKV_BINARY_DIR) + "/test_verify_batch." + std::to_string(::getpid()) + ".gguf";
  write_gguf_model(make_synthetic_model(synthetic_preset("tiny"), DType::F32, 5), path);
  const qkv_status loaded = qkv_model_load(path.c_str(), nullptr, &other);
  std::remove(path.c_str());
  REQUIRE(loaded == QKV_OK);
  CHECK(qkv_model_check_draft(target, draft) == QKV_OK);
  CHECK(qkv_model_check_draft(target, other) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(std::string(qkv_last_error()).find("must share the target's vocabulary") != std::string::npos);
  qkv_model* encoder = nullptr;
  if (test::have_shared("models/arch-bert-a.gguf")) {
    REQUIRE(qkv_model_load(test::shared_path("models/arch-bert-a.gguf").c_str(), nullptr, &encoder) == QKV_OK);
    CHECK(qkv_model_check_draft(target, encoder) == QKV_ERR_INVALID_ARGUMENT);
    CHECK(std::string(qkv_last_error()).find("encoder") != std::string::npos);
    qkv_model_free(encoder);
  }
  qkv_model_free(other);
  qkv_model_free(draft);
  qkv_model_free(target);
}

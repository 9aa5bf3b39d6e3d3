// ctest-labels: asan
// The C API's sampling additions on ../shared/models/stories260K.gguf: the
// penalties follow the tokens a session was fed (and truncate), logit bias
// bans and forces tokens, logprobs agree with the logits, token pieces join to
// the generated text, and qkv_generate's stop strings cut the text before them.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "qkv.h"
#include "tests/shared_data.h"

namespace {

struct Fixture {
  qkv_model* model = nullptr;
  qkv_session* s = nullptr;
  Fixture() {
    REQUIRE(qkv_model_load(qkv::test::shared_path("models/stories260K.gguf").c_str(), nullptr, &model) == QKV_OK);
    qkv_context_options o;
    qkv_context_options_init(&o);
    o.threads = 1;
    o.context = 128;
    REQUIRE(qkv_session_create(model, &o, &s) == QKV_OK);
  }
  ~Fixture() {
    qkv_session_free(s);
    qkv_model_free(model);
  }
  std::vector<int32_t> tokenize(const char* text) {
    int64_t n = 0;
    qkv_tokenize(model, text, 1, nullptr, 0, &n);
    std::vector<int32_t> t(static_cast<size_t>(n));
    REQUIRE(qkv_tokenize(model, text, 1, t.data(), n, &n) == QKV_OK);
    return t;
  }
  int32_t greedy(const qkv_sampler_options& so) {
    REQUIRE(qkv_session_set_sampler(s, &so) == QKV_OK);
    int32_t t = -1;
    REQUIRE(qkv_session_sample(s, &t) == QKV_OK);
    return t;
  }
};

struct Text {
  std::string s;
};
int append(const char* piece, size_t n, void* user) {
  static_cast<Text*>(user)->s.append(piece, n);
  return 0;
}

}  // namespace

TEST_CASE("c api: penalties, logit bias and logprobs on a real model") {
  if (!qkv::test::have_shared("models/stories260K.gguf")) return;
  Fixture f;
  const std::vector<int32_t> p = f.tokenize("Once upon a time");
  std::vector<float> logits(512);
  REQUIRE(qkv_session_prefill(f.s, p.data(), static_cast<int64_t>(p.size()), logits.data(), 512) == QKV_OK);
  qkv_sampler_options so;
  qkv_sampler_options_init(&so);
  CHECK(so.repeat_penalty == 1.0f);
  CHECK(so.repeat_last_n == 64);
  so.temperature = 0;
  const int32_t plain = f.greedy(so);

  // A huge frequency penalty on the prompt's tokens: the pick is not one of them
  // when the plain pick was; with repeat_last_n 0 it changes nothing.
  so.frequency_penalty = 1000;
  const int32_t penalized = f.greedy(so);
  for (int32_t t : p) CHECK(penalized != t);
  so.repeat_last_n = 0;
  CHECK(f.greedy(so) == plain);
  so.repeat_last_n = 64;
  // Truncating to BOS drops the prompt from the window.
  REQUIRE(qkv_session_truncate(f.s, 1) == QKV_OK);
  REQUIRE(qkv_session_prefill(f.s, p.data() + 1, static_cast<int64_t>(p.size()) - 1, nullptr, 0) == QKV_OK);
  CHECK(f.greedy(so) == penalized);
  so.frequency_penalty = 0;

  // Logit bias: ban the plain pick, then force another token.
  const float ban = -INFINITY, force = 100.0f;
  REQUIRE(qkv_session_set_logit_bias(f.s, &plain, &ban, 1) == QKV_OK);
  CHECK(f.greedy(so) != plain);
  const int32_t forced_id = 77;
  REQUIRE(qkv_session_set_logit_bias(f.s, &forced_id, &force, 1) == QKV_OK);
  CHECK(f.greedy(so) == 77);
  const int32_t bad_id = 512;
  CHECK(qkv_session_set_logit_bias(f.s, &bad_id, &force, 1) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(std::strstr(qkv_last_error(), "outside the vocabulary") != nullptr);
  CHECK(f.greedy(so) == 77);  // the previous biases stay
  REQUIRE(qkv_session_set_logit_bias(f.s, nullptr, nullptr, 0) == QKV_OK);
  CHECK(f.greedy(so) == plain);

  // Logprobs: the top token is the greedy pick, probabilities sum below 1.
  float lp = 0;
  int32_t top[5];
  float top_lp[5];
  int64_t written = 0;
  REQUIRE(qkv_session_logprobs(f.s, plain, &lp, 5, top, top_lp, &written) == QKV_OK);
  CHECK(written == 5);
  CHECK(top[0] == plain);
  CHECK(top_lp[0] == doctest::Approx(lp));
  double mass = 0;
  for (int i = 0; i < 5; ++i) {
    mass += std::exp(top_lp[i]);
    if (i > 0) CHECK(top_lp[i] <= top_lp[i - 1]);
  }
  CHECK(mass <= 1.0 + 1e-6);
  CHECK(lp < 0);
  CHECK(qkv_session_logprobs(f.s, 600, &lp, 0, nullptr, nullptr, nullptr) == QKV_ERR_INVALID_ARGUMENT);
}

TEST_CASE("c api: token pieces and stop strings of generate") {
  if (!qkv::test::have_shared("models/stories260K.gguf")) return;
  Fixture f;
  qkv_generate_options g;
  qkv_generate_options_init(&g);
  g.sampler.temperature = 0;
  g.n_predict = 40;
  Text full;
  REQUIRE(qkv_generate(f.s, "Once upon a time", &g, append, &full, nullptr) == QKV_OK);
  const std::string gen = full.s.substr(std::strlen("Once upon a time"));
  REQUIRE(gen.size() > 20);

  // Stop at a string that starts inside the generated text: the text ends right before it.
  const std::string stop = gen.substr(10, 6);
  const char* stops[] = {stop.c_str()};
  g.stop = stops;
  g.n_stop = 1;
  REQUIRE(qkv_session_truncate(f.s, 0) == QKV_OK);
  Text cut;
  qkv_generate_stats st;
  REQUIRE(qkv_generate(f.s, "Once upon a time", &g, append, &cut, &st) == QKV_OK);
  CHECK(std::string(st.stop_reason) == "stop");
  CHECK(cut.s == "Once upon a time" + gen.substr(0, gen.find(stop)));
  g.n_stop = 2;  // but only one string
  const char* short_list[] = {stop.c_str(), nullptr};
  g.stop = short_list;
  CHECK(qkv_generate(f.s, "x", &g, nullptr, nullptr, nullptr) == QKV_ERR_INVALID_ARGUMENT);

  // Pieces: BOS then the prompt's tokens give the prompt's text.
  const std::vector<int32_t> p = f.tokenize("Once upon a time");
  std::string joined;
  char buf[64];
  for (size_t i = 1; i < p.size(); ++i) {
    int64_t n = 0;
    REQUIRE(qkv_token_piece(f.model, p[i - 1], p[i], 0, buf, sizeof buf, &n) == QKV_OK);
    joined.append(buf, static_cast<size_t>(n));
  }
  CHECK(joined == "Once upon a time");
  int64_t n = 0;
  CHECK(qkv_token_piece(f.model, 1, p[1], 0, nullptr, 0, &n) == QKV_ERR_BUFFER_TOO_SMALL);
  CHECK(n > 0);
  CHECK(qkv_token_piece(f.model, 1, 100000, 0, buf, sizeof buf, &n) == QKV_ERR_INVALID_ARGUMENT);
}

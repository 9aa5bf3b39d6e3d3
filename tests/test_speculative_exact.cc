// ctest-labels: decoder
// Speculative decoding against plain decoding on the trained pair
// (stories260K drafting for tinystories-3M, one 512-token vocabulary) and on
// a copying prompt with prompt lookup: greedy output token for token; with
// temperature, the distribution of the first tokens over many seeds (a
// chi-square goodness of fit to the target's exact distribution); the C
// API's options and errors.
#include <doctest/doctest.h>
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "qkv.h"
#include "runtime/decoder.h"
#include "runtime/gguf.h"
#include "runtime/model_loader.h"
#include "runtime/speculative.h"
#include "runtime/speculative_drafters.h"
#include "runtime/synthetic.h"
#include "runtime/tokenizer.h"
#include "tests/shared_data.h"
#include "tests/speculative_fixture.h"

using namespace qkv;

namespace {

const char* kTarget = "models/tinystories-3M-F32.gguf";
const char* kDraft = "models/stories260K.gguf";
const char* kText = "reference/ppl-text.txt";

Tokenizer gguf_vocab(const std::string& rel) { return Tokenizer::from_gguf(GGUFFile::open(test::shared_path(rel))); }

// A copying task: a passage of the reference text (whole lines, 300 bytes
// or more), then its first line again, so that the model continues copying.
std::string copying_prompt() {
  std::ifstream in(test::shared_path(kText));
  std::string line, passage;
  while (std::getline(in, line) && passage.size() < 300) passage += line + "\n";
  const std::string first = passage.substr(0, passage.find('\n') + 1);
  return passage + "\n" + first.substr(0, first.size() / 3);
}

double rate(const SpeculativeStats& s) { return s.drafted ? double(s.accepted) / double(s.drafted) : 0.0; }

// Q(a, x), the regularized upper incomplete gamma function (series below
// a + 1, Lentz's continued fraction above): a chi-square statistic's p-value
// is Q(df / 2, x / 2).
double gamma_q(double a, double x) {
  if (x <= 0) return 1.0;
  const double log_prefix = a * std::log(x) - x - std::lgamma(a);
  if (x < a + 1) {
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 1000 && std::fabs(term) > 1e-15 * std::fabs(sum); ++n) sum += term *= x / (a + n);
    return 1.0 - sum * std::exp(log_prefix);
  }
  double b = x + 1 - a, c = 1e300, d = 1 / b, h = d;
  for (int i = 1; i < 1000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < 1e-300) d = 1e-300;
    c = b + an / c;
    if (std::fabs(c) < 1e-300) c = 1e-300;
    d = 1 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1) < 1e-15) break;
  }
  return std::exp(log_prefix) * h;
}

using Outcomes = std::map<std::vector<int32_t>, int>;

// Chi-square goodness of fit of n sampled outcomes to probabilities `exact`:
// sum (observed - expected)^2 / expected over the outcomes expected at least
// 5 times, the rest pooled into one cell; degrees of freedom: the cells less
// one. Returns the p-value.
double goodness_of_fit_p(const Outcomes& observed, const std::map<std::vector<int32_t>, double>& exact, int n,
                         int* df) {
  double chi2 = 0, pool_observed = 0, pool_expected = 0;
  int cells = 0;
  for (const auto& kv : exact) {
    const double e = kv.second * n;
    const auto it = observed.find(kv.first);
    const double o = it == observed.end() ? 0 : it->second;
    if (e < 5) {
      pool_observed += o;
      pool_expected += e;
      continue;
    }
    chi2 += (o - e) * (o - e) / e;
    ++cells;
  }
  if (pool_expected > 0) {
    chi2 += (pool_observed - pool_expected) * (pool_observed - pool_expected) / pool_expected;
    ++cells;
  }
  *df = cells - 1;
  return gamma_q(*df / 2.0, chi2 / 2.0);
}

}  // namespace

TEST_CASE("the trained pair: a draft model's speculative greedy output is the target's token for token") {
  if (!test::have_shared(kTarget) || !test::have_shared(kDraft)) return;
  const Model target = load_model(test::shared_path(kTarget));
  const Model draft = load_model(test::shared_path(kDraft));
  const Tokenizer vocab = gguf_vocab(kTarget);
  CHECK_NOTHROW(check_same_vocabulary(target, vocab, draft, gguf_vocab(kDraft)));
  SamplerOptions greedy;
  greedy.temperature = 0;
  for (const std::string text : {"Once upon a time", "Tom and Lily went to the park. They saw", "The little dog was sad"}) {
    CAPTURE(text);
    const std::vector<int32_t> prompt = vocab.encode(text, true, false);
    Decoder plain(target, DecoderOptions{});
    const std::vector<int32_t> want = test::plain_greedy(plain, prompt, 120);
    for (float p_min : {0.75f, 0.0f}) {
      Decoder dec(target, DecoderOptions{});
      DraftModelDrafter drafter(draft, p_min, dec.context());
      SpeculativeStats st;
      CHECK(test::speculative_tokens(dec, drafter, prompt, 120, greedy, 16, &st) == want);
      CHECK(dec.position(0) == plain.position(0));
      CHECK(st.verify_passes > 0);
      MESSAGE("p_min ", p_min, ": ", st.accepted, " of ", st.drafted, " drafts accepted (", rate(st) * 100,
              "%) in ", st.verify_passes, " verify passes");
    }
  }
}

TEST_CASE("prompt lookup on a copying prompt: greedy output equals plain decoding's") {
  if (!test::have_shared(kTarget) || !test::have_shared(kText)) return;
  const Model target = load_model(test::shared_path(kTarget));
  const Tokenizer vocab = gguf_vocab(kTarget);
  SamplerOptions greedy;
  greedy.temperature = 0;
  const std::vector<int32_t> prompt = vocab.encode(copying_prompt(), true, false);
  Decoder plain(target, DecoderOptions{});
  const std::vector<int32_t> want = test::plain_greedy(plain, prompt, 120);
  for (int64_t n : {1, 3}) {
    CAPTURE(n);
    Decoder dec(target, DecoderOptions{});
    NgramDrafter drafter(n);
    SpeculativeStats st;
    CHECK(test::speculative_tokens(dec, drafter, prompt, 120, greedy, 16, &st) == want);
    CHECK(dec.position(0) == plain.position(0));
    CHECK(st.accepted > 0);
    MESSAGE("n-gram ", n, ": ", st.accepted, " of ", st.drafted, " drafts accepted (", rate(st) * 100, "%) in ",
            st.verify_passes, " verify passes for 120 tokens");
  }
}

TEST_CASE("with temperature the first tokens have the target's distribution (chi-square, p > 1e-4)") {
  // 4 tokens, so the first three sampled tokens fall in 64 outcomes, whose
  // exact probabilities come from Sampler::probabilities over decode steps.
  // Plain sample() is held to them as well (it and probabilities() must
  // agree for the acceptance test to be right). Seeds are fixed, so every run
  // gives the same statistics.
  ModelConfig c = synthetic_preset("tiny");
  c.vocab_size = 4;
  const Model target = make_synthetic_model(c, DType::F32, 21);
  const Model other = make_synthetic_model(c, DType::F32, 22);
  const std::vector<int32_t> prompt = {1, 2, 3, 1, 2};
  const int kSamples = 8000;
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);  // many tiny passes: one thread avoids the team's syncs
  Decoder dec(target, DecoderOptions{});

  auto exact_distribution = [&](const SamplerOptions& o) {
    std::map<std::vector<int32_t>, double> exact;
    Sampler s(o);
    std::vector<double> p1, p2, p3;
    std::vector<int32_t> history = prompt;
    auto probabilities = [&](const float* logits, std::vector<double>* p) {
      std::vector<float> l(logits, logits + 4);
      s.probabilities(l.data(), 4, history.data(), int64_t(history.size()), p);
    };
    dec.cache().truncate(0, 0);
    probabilities(dec.prefill(0, prompt.data(), int64_t(prompt.size())), &p1);
    for (int32_t a = 0; a < 4; ++a) {
      dec.cache().truncate(0, int64_t(prompt.size()));
      history.resize(prompt.size());
      history.push_back(a);
      probabilities(dec.step(0, a), &p2);
      for (int32_t b = 0; b < 4; ++b) {
        dec.cache().truncate(0, int64_t(prompt.size()) + 1);
        history.resize(prompt.size() + 1);
        history.push_back(b);
        probabilities(dec.step(0, b), &p3);
        for (int32_t t = 0; t < 4; ++t) exact[{a, b, t}] = p1[size_t(a)] * p2[size_t(b)] * p3[size_t(t)];
      }
    }
    return exact;
  };
  auto plain_outcomes = [&](const SamplerOptions& base, uint64_t seed0) {
    Outcomes counts;
    for (int s = 0; s < kSamples; ++s) {
      SamplerOptions o = base;
      o.seed = seed0 + uint64_t(s);
      Sampler sampler(o);
      dec.cache().truncate(0, 0);
      const float* logits = dec.prefill(0, prompt.data(), int64_t(prompt.size()));
      std::vector<int32_t> history = prompt, out;
      for (int i = 0; i < 3; ++i) {
        std::vector<float> l(logits, logits + 4);
        out.push_back(sampler.sample(l.data(), 4, history.data(), int64_t(history.size())));
        history.push_back(out.back());
        if (i < 2) logits = dec.step(0, out.back());
      }
      ++counts[out];
    }
    return counts;
  };
  auto speculative_outcomes = [&](const SamplerOptions& base, uint64_t seed0, Drafter& drafter) {
    Outcomes counts;
    SpeculativeStats total;
    for (int s = 0; s < kSamples; ++s) {
      SamplerOptions o = base;
      o.seed = seed0 + uint64_t(s);
      dec.cache().truncate(0, 0);
      SpeculativeStats st;
      ++counts[test::speculative_tokens(dec, drafter, prompt, 3, o, 4, &st)];
      total.drafted += st.drafted;
      total.accepted += st.accepted;
    }
    MESSAGE(total.accepted, " of ", total.drafted, " drafts accepted");
    CHECK(total.accepted > 0);
    CHECK(total.accepted < total.drafted);  // both branches of the acceptance test ran
    return counts;
  };

  SamplerOptions free_sampling;  // sample_unordered: temperature 1, no filters, a repeat penalty
  free_sampling.temperature = 1.0f;
  free_sampling.top_k = 0;
  free_sampling.top_p = 1.0f;
  free_sampling.min_p = 0.0f;
  free_sampling.repeat_penalty = 1.3f;
  SamplerOptions filtered;  // sample()'s sorted path: top-k, min-p and top-p at temperature 1.5
  filtered.temperature = 1.5f;
  filtered.top_k = 3;
  filtered.top_p = 0.9f;
  filtered.min_p = 0.05f;

  for (const SamplerOptions* o : {&free_sampling, &filtered}) {
    CAPTURE(o->temperature);
    const std::map<std::vector<int32_t>, double> exact = exact_distribution(*o);
    int df = 0;
    double p = goodness_of_fit_p(plain_outcomes(*o, 1), exact, kSamples, &df);
    MESSAGE("plain sampling: ", df, " degrees of freedom, p = ", p);
    CHECK(df >= 10);
    CHECK(p > 1e-4);
    NgramDrafter ngram(2);
    DraftModelDrafter draft_model(other, 0.0f, 64);
    uint64_t seed0 = 1000001;
    for (Drafter* d : {static_cast<Drafter*>(&ngram), static_cast<Drafter*>(&draft_model)}) {
      p = goodness_of_fit_p(speculative_outcomes(*o, seed0, *d), exact, kSamples, &df);
      seed0 += 1000000;
      MESSAGE("speculative sampling: ", df, " degrees of freedom, p = ", p);
      CHECK(df >= 10);
      CHECK(p > 1e-4);
    }
  }
  // The test has the power to see a change of temperature.
  SamplerOptions cooler = free_sampling;
  cooler.temperature = 0.8f;
  int df = 0;
  const double p = goodness_of_fit_p(plain_outcomes(cooler, 1), exact_distribution(free_sampling), kSamples, &df);
  MESSAGE("temperature 0.8 against the distribution at 1: ", df, " degrees of freedom, p = ", p);
  CHECK(p < 1e-4);
  omp_set_num_threads(threads);
}

namespace {

struct Run {
  qkv_status status = QKV_OK;
  std::string text, error;
  qkv_generate_stats stats{};
};

int append(const char* piece, size_t n, void* user) {
  static_cast<std::string*>(user)->append(piece, n);
  return 0;
}

Run generate_with(qkv_model* model, const qkv_generate_options& o) {
  Run r;
  qkv_session* s = nullptr;
  REQUIRE(qkv_session_create(model, nullptr, &s) == QKV_OK);
  r.status = qkv_generate(s, "Once upon a time", &o, append, &r.text, &r.stats);
  if (r.status != QKV_OK) r.error = qkv_last_error();
  qkv_session_free(s);
  return r;
}

}  // namespace

TEST_CASE("qkv_generate speculates with a draft model or prompt lookup, and refuses bad options") {
  if (!test::have_shared(kTarget) || !test::have_shared(kDraft)) return;
  qkv_model *target = nullptr, *draft = nullptr;
  REQUIRE(qkv_model_load(test::shared_path(kTarget).c_str(), nullptr, &target) == QKV_OK);
  REQUIRE(qkv_model_load(test::shared_path(kDraft).c_str(), nullptr, &draft) == QKV_OK);
  qkv_generate_options o;
  qkv_generate_options_init(&o);
  CHECK(o.draft_model == nullptr);
  CHECK(o.spec_ngram == 0);
  CHECK(o.draft_max == 16);
  CHECK(o.draft_min == 0);
  CHECK(o.draft_p_min == doctest::Approx(0.75));
  CHECK(o.spec_ngram_size == 3);
  o.sampler.temperature = 0;
  o.n_predict = 100;
  const Run plain = generate_with(target, o);
  REQUIRE(plain.status == QKV_OK);
  CHECK(plain.stats.drafted_tokens == 0);

  o.draft_model = draft;
  const Run drafted = generate_with(target, o);
  REQUIRE(drafted.status == QKV_OK);
  CHECK(drafted.text == plain.text);
  CHECK(drafted.stats.generated_tokens == plain.stats.generated_tokens);
  CHECK(drafted.stats.forward_passes == plain.stats.forward_passes);
  CHECK(drafted.stats.drafted_tokens > 0);
  CHECK(drafted.stats.accepted_tokens <= drafted.stats.drafted_tokens);
  CHECK(drafted.stats.verify_passes > 0);

  o.draft_model = nullptr;
  o.spec_ngram = 1;
  const Run looked_up = generate_with(target, o);
  REQUIRE(looked_up.status == QKV_OK);
  CHECK(looked_up.text == plain.text);

  o.draft_max = 0;
  Run bad = generate_with(target, o);
  CHECK(bad.status == QKV_ERR_INVALID_ARGUMENT);
  CHECK(bad.error.find("--draft-max") != std::string::npos);
  o.draft_max = 16;
  o.spec_ngram_size = 0;
  bad = generate_with(target, o);
  CHECK(bad.status == QKV_ERR_INVALID_ARGUMENT);
  CHECK(bad.error.find("n-gram size") != std::string::npos);
  o.spec_ngram_size = 3;
  o.draft_model = draft;
  bad = generate_with(target, o);
  CHECK(bad.status == QKV_ERR_INVALID_ARGUMENT);
  CHECK(bad.error.find("not both") != std::string::npos);

  // Drafts of other vocabularies: the byte-level one a synthetic model is
  // written with (512 tokens, other texts), and one of 600 tokens.
  o.spec_ngram = 0;
  for (int64_t vocab_size : {512, 600}) {
    CAPTURE(vocab_size);
    ModelConfig c = synthetic_preset("tiny");
    c.vocab_size = vocab_size;
    const std::string path = "/tmp/qkv_test_speculative_draft_" + std::to_string(vocab_size) + ".gguf";
    write_gguf_model(make_synthetic_model(c, DType::F32, 3), path);
    qkv_model* other = nullptr;
    REQUIRE(qkv_model_load(path.c_str(), nullptr, &other) == QKV_OK);
    std::remove(path.c_str());
    o.draft_model = other;
    bad = generate_with(target, o);
    CHECK(bad.status == QKV_ERR_INVALID_ARGUMENT);
    CHECK(bad.error.find("must share the target's vocabulary") != std::string::npos);
    CHECK(bad.error.find(vocab_size == 512 ? "differs from the target's at token" : "has 600 tokens") !=
          std::string::npos);
    qkv_model_free(other);
  }
  // A missing draft file fails at its load, naming the path.
  qkv_model* missing = nullptr;
  CHECK(qkv_model_load("/nonexistent/draft.gguf", nullptr, &missing) != QKV_OK);
  CHECK(std::strstr(qkv_last_error(), "/nonexistent/draft.gguf") != nullptr);
  qkv_model_free(draft);
  qkv_model_free(target);
}

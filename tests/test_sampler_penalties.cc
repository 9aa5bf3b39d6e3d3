// ctest-labels: asan
// The sampler's logit edits (logit bias, repeat / presence / frequency
// penalties, checked against llama.cpp's formulas written out by hand here),
// logprobs against a direct fp64 log-softmax, and stop strings over streamed
// pieces (a stop string split across pieces is caught and none of it shown).
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "runtime/sampler.h"
#include "runtime/stop_strings.h"

using namespace qkv;

TEST_CASE("repeat penalty divides positive and multiplies negative logits of recent tokens only") {
  SamplerOptions o;
  o.temperature = 0;
  o.repeat_penalty = 2.0f;
  o.repeat_last_n = 3;
  Sampler s(o);
  std::vector<float> l = {4.0f, -1.0f, 3.0f, 2.0f, 1.0f};
  const std::vector<int32_t> recent = {2, 0, 1, 1};  // the window is the last 3: {0, 1, 1}
  s.apply_penalties(l.data(), 5, recent.data(), 4);
  CHECK(l[0] == 2.0f);   // 4 / 2
  CHECK(l[1] == -2.0f);  // -1 * 2, once although it appears twice
  CHECK(l[2] == 3.0f);   // outside the window
  CHECK(l[3] == 2.0f);
  // Greedy now picks id 2 (3.0) over the penalized id 0.
  std::vector<float> l2 = {4.0f, -1.0f, 3.0f, 2.0f, 1.0f};
  CHECK(s.sample(l2.data(), 5, recent.data(), 4) == 2);
}

TEST_CASE("presence and frequency penalties subtract once and per occurrence; -1 looks at everything") {
  SamplerOptions o;
  o.temperature = 0;
  o.repeat_last_n = -1;
  o.presence_penalty = 0.5f;
  o.frequency_penalty = 0.25f;
  Sampler s(o);
  std::vector<float> l = {1.0f, 1.0f, 1.0f};
  const std::vector<int32_t> recent = {0, 0, 0, 2, 7, -3};  // ids outside the vocabulary are ignored
  s.apply_penalties(l.data(), 3, recent.data(), 6);
  CHECK(l[0] == doctest::Approx(1.0f - 0.5f - 3 * 0.25f));
  CHECK(l[1] == 1.0f);
  CHECK(l[2] == doctest::Approx(1.0f - 0.5f - 0.25f));
  SamplerOptions off = o;
  off.repeat_last_n = 0;
  Sampler none(off);
  std::vector<float> l3 = {1.0f, 1.0f, 1.0f};
  none.apply_penalties(l3.data(), 3, recent.data(), 6);
  CHECK(l3 == std::vector<float>{1.0f, 1.0f, 1.0f});
}

TEST_CASE("logit bias moves and bans tokens; bad biases are errors") {
  SamplerOptions o;
  o.temperature = 0;
  o.logit_bias = {{0, -INFINITY}, {3, 10.0f}};
  Sampler s(o);
  std::vector<float> l = {5.0f, 1.0f, 2.0f, -4.0f};
  CHECK(s.sample(l.data(), 4) == 3);
  o.logit_bias = {{3, -INFINITY}, {0, -INFINITY}};
  Sampler ban(o);
  o.temperature = 1.0f;
  Sampler ban_t(o);
  for (int i = 0; i < 100; ++i) {
    std::vector<float> x = {5.0f, 1.0f, 2.0f, 6.0f};
    const int32_t t = ban_t.sample(x.data(), 4);
    CHECK((t == 1 || t == 2));
  }
  std::vector<float> y = {5.0f, 1.0f, 2.0f, 6.0f};
  CHECK(ban.sample(y.data(), 4) == 2);
  o.logit_bias = {{9, 1.0f}};
  Sampler out_of_range(o);
  CHECK_THROWS_WITH(out_of_range.sample(y.data(), 4), doctest::Contains("vocabulary has 4"));
  o.logit_bias = {{1, NAN}};
  CHECK_THROWS_WITH(Sampler{o}, doctest::Contains("logit bias"));
  SamplerOptions bad;
  bad.repeat_last_n = -2;
  CHECK_THROWS_WITH(Sampler{bad}, doctest::Contains("repeat-last-n"));
}

TEST_CASE("logprobs are an fp64 log-softmax; the top list is ordered, ties by id") {
  const std::vector<float> l = {0.5f, 2.0f, -1.0f, 2.0f, 1.5f};
  double z = 0;
  for (float x : l) z += std::exp(double(x));
  const TokenLogprobs lp = token_logprobs(l.data(), 5, 4, 3);
  CHECK(lp.logprob == doctest::Approx(1.5 - std::log(z)).epsilon(1e-6));
  REQUIRE(lp.top.size() == 3);
  CHECK(lp.top[0].first == 1);
  CHECK(lp.top[1].first == 3);
  CHECK(lp.top[2].first == 4);
  CHECK(lp.top[0].second == doctest::Approx(2.0 - std::log(z)).epsilon(1e-6));
  CHECK(token_logprobs(l.data(), 5, 0, 99).top.size() == 5);
  CHECK_THROWS(token_logprobs(l.data(), 5, 5, 0));
}

namespace {
// Streams pieces through a matcher; returns everything shown.
std::string stream(StopMatcher& m, const std::vector<std::string>& pieces) {
  std::string shown;
  for (const std::string& p : pieces) {
    shown += m.feed(p);
    if (m.stopped()) return shown;
  }
  return shown + m.flush();
}
}  // namespace

TEST_CASE("stop strings: split across pieces, never shown, earliest wins, partial prefixes released") {
  StopMatcher a({"END"});
  CHECK(stream(a, {"The ", "story E", "N", "D here"}) == "The story ");
  CHECK(a.stopped());
  CHECK(a.matched() == "END");

  // A prefix that does not complete is shown once it is decided.
  StopMatcher b({"END"});
  std::string shown = b.feed("an EN");
  CHECK(shown == "an ");  // "EN" is held back
  shown += b.feed("Ding");
  CHECK(shown == "an ");  // "ENDing" contains END: stops before it
  CHECK(b.stopped());

  StopMatcher c({"\n\n", "xyz"});
  CHECK(stream(c, {"one\n", "two x", "y", "\n", "\nthree"}) == "one\ntwo xy");
  CHECK(c.matched() == "\n\n");

  StopMatcher d({"abc"});
  CHECK(stream(d, {"a", "b", "x", "ab"}) == "abxab");  // held back "ab" flushed at the end
  CHECK(!d.stopped());

  StopMatcher none;
  CHECK(stream(none, {"a", "b"}) == "ab");
  StopMatcher empty_stop({""});  // empty strings are ignored
  CHECK(stream(empty_stop, {"a"}) == "a");
  StopMatcher after({"x"});
  CHECK(stream(after, {"ax", "more"}) == "a");
  CHECK(after.feed("more").empty());  // nothing after a stop
}

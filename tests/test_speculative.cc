// ctest-labels: asan
// Speculative decoding on random-weight models: the n-gram drafter's rule,
// greedy output equal to plain greedy decoding token for token (n-gram
// drafting, and a draft model of other weights that the target mostly
// rejects), the KV cache left as plain decoding leaves it, and the errors for
// bad options and mismatched vocabularies.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "runtime/grammar/gbnf.h"
#include "runtime/grammar/matcher.h"
#include "runtime/decoder.h"
#include "runtime/generate.h"
#include "runtime/speculative.h"
#include "runtime/speculative_drafters.h"
#include "runtime/synthetic.h"
#include "runtime/tokenizer.h"
#include "tests/speculative_fixture.h"

using namespace qkv;

namespace {

std::vector<int32_t> drafted(Drafter& d, const std::vector<int32_t>& history, int64_t max_tokens) {
  std::vector<int32_t> out{99};  // cleared by draft()
  d.draft(history, max_tokens, &out);
  return out;
}

DecoderOptions f32_cache() {
  DecoderOptions o;
  o.kv_type = DType::F32;
  return o;
}

// A prompt that repeats itself, so that the n-gram drafter finds matches.
std::vector<int32_t> repeating_prompt(int32_t vocab, int n, int period, uint32_t seed) {
  std::vector<int32_t> base;
  for (int i = 0; i < period; ++i) base.push_back(static_cast<int32_t>((seed * 2654435761u + i * 40503u) % vocab));
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(base[static_cast<size_t>(i % period)]);
  return p;
}

}  // namespace

TEST_CASE("the n-gram drafter continues the most recent longest match") {
  NgramDrafter d3(3);
  // Last 3 tokens (1 2 3) occur at 0 and at 5; the later one (followed by 9 8) wins.
  const std::vector<int32_t> h = {1, 2, 3, 4, 5, 1, 2, 3, 9, 8, 1, 2, 3};
  CHECK(drafted(d3, h, 16) == std::vector<int32_t>{9, 8, 1, 2, 3});
  CHECK(drafted(d3, h, 2) == std::vector<int32_t>{9, 8});
  // Neither "7 2 3" nor "2 3" occurs earlier; the 1-gram "3" does, most recently at 7.
  const std::vector<int32_t> h2 = {5, 3, 6, 6, 6, 6, 6, 3, 4, 7, 2, 3};
  CHECK(drafted(d3, h2, 3) == std::vector<int32_t>{4, 7, 2});
  // A longer match beats a more recent shorter one: "2 3" at 0 vs "3" at 4.
  const std::vector<int32_t> h3 = {2, 3, 8, 9, 3, 5, 2, 3};
  CHECK(drafted(d3, h3, 4) == std::vector<int32_t>{8, 9, 3, 5});
  // No earlier occurrence of the last token: no draft; nor from one token or none.
  CHECK(drafted(d3, {1, 2, 3, 4}, 4).empty());
  CHECK(drafted(d3, {7}, 4).empty());
  CHECK(drafted(d3, {}, 4).empty());
  CHECK(drafted(d3, h, 0).empty());
  // A run of one token: the match overlaps the key and proposes the run's tail.
  CHECK(drafted(d3, {4, 4, 4, 4, 4}, 8) == std::vector<int32_t>{4});
}

TEST_CASE("speculative greedy decoding equals plain greedy decoding on random-weight models") {
  const Model target = make_synthetic_model(synthetic_preset("tiny"), DType::F32, 11);
  const Model other = make_synthetic_model(synthetic_preset("tiny"), DType::F32, 12);
  SamplerOptions greedy;
  greedy.temperature = 0;
  for (uint32_t seed : {1u, 2u}) {
    CAPTURE(seed);
    const std::vector<int32_t> prompt = repeating_prompt(512, 40, 7 + static_cast<int>(seed), seed);
    Decoder plain_dec(target, f32_cache());
    const std::vector<int32_t> want = test::plain_greedy(plain_dec, prompt, 100);

    for (int64_t draft_max : {1, 5}) {
      CAPTURE(draft_max);
      Decoder dec(target, f32_cache());
      NgramDrafter ngram(3);
      SpeculativeStats st;
      CHECK(test::speculative_tokens(dec, ngram, prompt, 100, greedy, draft_max, &st) == want);
      CHECK(st.drafted >= st.accepted);
      CHECK(st.verify_passes >= 1);  // the repeating prompt gives the drafter matches
      CHECK(dec.position(0) == plain_dec.position(0));

      Decoder dec2(target, f32_cache());
      DraftModelDrafter draft_model(other, 0.0f, dec2.context());
      CHECK(test::speculative_tokens(dec2, draft_model, prompt, 100, greedy, draft_max, &st) == want);
      CHECK(st.drafted > 0);
      CHECK(dec2.position(0) == plain_dec.position(0));
    }
    // The same model drafting for itself: every draft accepted.
    Decoder dec3(target, f32_cache());
    DraftModelDrafter self(target, 0.0f, dec3.context(), DType::F32);
    SpeculativeStats st;
    CHECK(test::speculative_tokens(dec3, self, prompt, 100, greedy, 8, &st) == want);
    CHECK(st.accepted == st.drafted);
    CHECK(st.verify_passes <= 100 / 8 + 2);
  }
}

// Drafts a token greedy decoding never emits: every round is rejected.
class WrongDrafter : public Drafter {
 public:
  explicit WrongDrafter(int32_t token) : token_(token) {}
  void draft(const std::vector<int32_t>&, int64_t max_tokens, std::vector<int32_t>* out) override {
    out->assign(static_cast<size_t>(max_tokens), token_);
  }

 private:
  int32_t token_;
};

TEST_CASE("the adaptive draft length backs off from a drafter that is never right and grows for one that is") {
  const Model target = make_synthetic_model(synthetic_preset("tiny"), DType::F32, 11);
  SamplerOptions greedy;
  greedy.temperature = 0;
  const std::vector<int32_t> prompt = repeating_prompt(512, 40, 9, 3);
  Decoder plain_dec(target, f32_cache());
  const std::vector<int32_t> want = test::plain_greedy(plain_dec, prompt, 200);
  int32_t never = 0;
  while (std::find(want.begin(), want.end(), never) != want.end()) ++never;

  WrongDrafter wrong(never);
  Decoder fixed_dec(target, f32_cache());
  SpeculativeStats fixed;
  CHECK(test::speculative_tokens(fixed_dec, wrong, prompt, 200, greedy, 8, &fixed, false) == want);
  CHECK(fixed.accepted == 0);
  // A round per token after the first but the last (no room left to draft),
  // the last 7 rounds drafting 7, 6, ..., 1 (the room left).
  CHECK(fixed.verify_passes == 198);
  CHECK(fixed.drafted == 191 * 8 + 28);

  Decoder adaptive_dec(target, f32_cache());
  SpeculativeStats adaptive;
  CHECK(test::speculative_tokens(adaptive_dec, wrong, prompt, 200, greedy, 8, &adaptive) == want);
  CHECK(adaptive.accepted == 0);
  // 8 tokens, then single ones with 0, 1, 2, 4, 8, 16, 32, 32 ... plain steps
  // before them: rounds at steps 1, 2, 4, 7, 12, 21, 38, 71, 104, 137, 170.
  CHECK(adaptive.verify_passes == 11);
  CHECK(adaptive.drafted == adaptive.verify_passes - 1 + 8);
  CHECK(adaptive.verify_passes + adaptive.plain_steps == 199);

  // The target drafting for itself: every round accepted, the draft length
  // grows back to draft_max.
  Decoder self_dec(target, f32_cache());
  DraftModelDrafter self(target, 0.0f, self_dec.context(), DType::F32);
  SpeculativeStats all;
  CHECK(test::speculative_tokens(self_dec, self, prompt, 200, greedy, 8, &all) == want);
  CHECK(all.accepted == all.drafted);
  CHECK(all.verify_passes <= 200 / 8 + 2);
}

TEST_CASE("after speculative generation the cache continues like plain decoding's") {
  const Model target = make_synthetic_model(synthetic_preset("tiny"), DType::F32, 5);
  const Tokenizer tok = Tokenizer::byte_level(512);
  GenerateOptions g;
  g.sampler.temperature = 0;
  g.n_predict = 60;
  g.add_bos = true;
  const std::string prompt = "abcabcabcabcabc";
  Decoder plain(target, f32_cache()), spec(target, f32_cache());
  std::string plain_text, spec_text;
  const GenerateStats ps = generate(plain, tok, prompt, g, [&](const std::string& p) { plain_text += p; return true; });
  NgramDrafter ngram(3);
  g.speculative.drafter = &ngram;
  g.speculative.draft_max = 5;
  const GenerateStats ss = generate(spec, tok, prompt, g, [&](const std::string& p) { spec_text += p; return true; });
  CHECK(spec_text == plain_text);
  CHECK(ss.generated_tokens == ps.generated_tokens);
  CHECK(ss.forward_passes == ps.forward_passes);
  CHECK(ss.stop_reason == ps.stop_reason);
  CHECK(ss.drafted_tokens > 0);
  CHECK(ss.verify_passes > 0);
  CHECK(spec.position(0) == plain.position(0));
  // The same next logits from both caches (the same tokens in them).
  const float* a = plain.step(0, 300);
  const std::vector<float> av(a, a + 512);
  const float* b = spec.step(0, 300);
  CHECK(argmax(av.data(), 512) == argmax(b, 512));
}

TEST_CASE("speculative decoding refuses bad options and mismatched vocabularies") {
  SpeculativeOptions o;
  o.draft_max = 0;
  CHECK_THROWS_WITH(check_speculative_options(o), doctest::Contains("(--draft-max) must be 1 .. 256 (got 0)"));
  o.draft_max = 257;
  CHECK_THROWS_WITH(check_speculative_options(o), doctest::Contains("--draft-max"));
  o.draft_max = 4;
  o.draft_min = 5;
  CHECK_THROWS_WITH(check_speculative_options(o), doctest::Contains("--draft-min"));
  CHECK_THROWS_WITH(NgramDrafter(0), doctest::Contains("n-gram size must be 1 .. 64"));
  CHECK_THROWS_WITH(NgramDrafter(65), doctest::Contains("n-gram size"));

  const Model tiny = make_synthetic_model(synthetic_preset("tiny"), DType::F32, 1);
  CHECK_THROWS_WITH(DraftModelDrafter(tiny, 1.5f, 64), doctest::Contains("--draft-p-min"));
  Decoder dec(tiny, f32_cache());
  NgramDrafter ngram(3);
  SamplerOptions greedy;
  greedy.temperature = 0;
  SpeculativeOptions no_drafter;
  CHECK_THROWS_WITH(Speculator(dec, 0, no_drafter, greedy), doctest::Contains("needs a drafter"));

  // Vocabularies: sizes, then the text of each token.
  ModelConfig wide = synthetic_preset("tiny");
  wide.vocab_size = 600;
  const Model tiny600 = make_synthetic_model(wide, DType::F32, 1);
  const Tokenizer v512 = Tokenizer::byte_level(512), v600 = Tokenizer::byte_level(600);
  CHECK_NOTHROW(check_same_vocabulary(tiny, v512, tiny, v512));
  CHECK_THROWS_WITH(check_same_vocabulary(tiny, v512, tiny600, v600),
                    doctest::Contains("the draft model's vocabulary has 600 tokens but the target model's has 512"));
  CHECK_THROWS_WITH(check_same_vocabulary(tiny, v512, tiny, v600), doctest::Contains("tokenizer has 600 tokens"));
  std::vector<std::string> pieces;
  std::vector<float> scores;
  std::vector<int32_t> types;
  for (int32_t id = 0; id < 512; ++id) {
    pieces.push_back(v512.piece(id));
    scores.push_back(v512.score(id));
    types.push_back(v512.token_type(id));
  }
  pieces[400] = "\xe2\x96\x81once";
  types[400] = 1;  // normal
  const Tokenizer changed = Tokenizer::from_pieces(pieces, scores, types, 1, 2, 0);
  CHECK_THROWS_WITH(check_same_vocabulary(tiny, v512, tiny, changed),
                    doctest::Contains("differs from the target's at token 400"));

  // A grammar with speculation is refused before anything runs.
  GenerateOptions g;
  g.sampler.temperature = 0;
  g.speculative.drafter = &ngram;
  std::vector<std::string> texts(512, "x");
  auto trie = std::make_shared<const grammar::TokenTrie>(texts, std::vector<int32_t>{2});
  g.grammar = std::make_shared<const grammar::CompiledGrammar>(grammar::parse_gbnf("root ::= \"x\""), trie);
  CHECK_THROWS_WITH(generate(dec, v512, "ab", g, [](const std::string&) { return true; }),
                    doctest::Contains("does not combine with a grammar"));
}

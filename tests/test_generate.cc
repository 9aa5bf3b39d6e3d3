// ctest-labels: decoder
// Generation's counting rules (llama2.c's --steps, llama.cpp's -n), stop
// reasons, streaming and context limits.
#include <doctest/doctest.h>

#include <string>

#include "kernels/error.h"
#include "runtime/decoder.h"
#include "runtime/generate.h"
#include "runtime/model_loader.h"
#include "runtime/synthetic.h"
#include "runtime/tokenizer.h"
#include "tests/shared_data.h"

using namespace qkv;

namespace {
struct Collected {
  std::string text;
  int pieces = 0;
};
std::function<bool(const std::string&)> collect(Collected& c) {
  return [&c](const std::string& p) {
    c.text += p;
    ++c.pieces;
    return true;
  };
}
}  // namespace

TEST_CASE("--steps counts positions like llama2.c; -n counts new tokens like llama.cpp") {
  if (!test::have_shared("models/stories260K.bin")) return;
  const Model m = load_model(test::shared_path("models/stories260K.bin"));
  const Tokenizer tok = Tokenizer::load(test::shared_path("models/tok512.bin"), m.config.vocab_size);
  GenerateOptions g;
  g.sampler.temperature = 0;

  {
    Decoder dec(m, DecoderOptions{});
    g.steps = 40;
    Collected c;
    const GenerateStats s = generate(dec, tok, "Once upon a time", g, collect(c));
    CHECK(s.prompt_tokens == 5);  // BOS + 4
    CHECK(s.forward_passes == 40);
    CHECK(s.generated_tokens == 40 - 5 + 1);
    CHECK(s.stop_reason == "steps");
    CHECK(c.text.rfind("Once upon a time", 0) == 0);  // the prompt is echoed first
    CHECK(dec.position(0) == 40);
  }
  {
    Decoder dec(m, DecoderOptions{});
    g.steps = 0;
    g.n_predict = 7;
    Collected c;
    const GenerateStats s = generate(dec, tok, "Once upon a time", g, collect(c));
    CHECK(s.generated_tokens == 7);
    CHECK(s.forward_passes == 5 + 6);  // the last sampled token needs no forward pass
    CHECK(s.stop_reason == "n_predict");
  }
  {
    Decoder dec(m, DecoderOptions{});
    g.n_predict = 0;
    Collected c;
    const GenerateStats s = generate(dec, tok, "Once upon a time", g, collect(c));
    CHECK(s.generated_tokens == 0);
    CHECK(c.text == "Once upon a time");
  }
  {
    // Fewer steps than prompt tokens: only part of the prompt is run and echoed.
    Decoder dec(m, DecoderOptions{});
    g.n_predict = -1;
    g.steps = 3;
    Collected c;
    const GenerateStats s = generate(dec, tok, "Once upon a time", g, collect(c));
    CHECK(s.forward_passes == 3);
    CHECK(s.generated_tokens == 0);
    CHECK(c.text == "Once upon a");
  }
  {
    // A full context stops generation with its reason; a callback can stop it too.
    DecoderOptions o;
    o.context = 12;
    Decoder dec(m, o);
    g.steps = 0;
    g.n_predict = -1;
    Collected c;
    GenerateStats s = generate(dec, tok, "Once upon a time", g, collect(c));
    CHECK(s.stop_reason == "context");
    CHECK(s.forward_passes == 12);
    Decoder dec2(m, o);
    int calls = 0;
    s = generate(dec2, tok, "Once upon a time", g, [&](const std::string&) { return ++calls < 6; });
    CHECK(s.stop_reason == "stopped");
    CHECK(calls == 6);
  }
}

TEST_CASE("a prompt longer than the context is a context-overflow error") {
  const Model m = make_synthetic_model(synthetic_preset("tiny"), DType::F32);
  const Tokenizer tok = Tokenizer::byte_level(m.config.vocab_size);
  DecoderOptions o;
  o.context = 4;
  Decoder dec(m, o);
  GenerateOptions g;
  try {
    generate(dec, tok, "a prompt of many more than four tokens", g, [](const std::string&) { return true; });
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kContextOverflow);
    CHECK(std::string(e.what()).find("context") != std::string::npos);
  }
}

TEST_CASE("sampling with a seed is reproducible end to end") {
  const Model m = make_synthetic_model(synthetic_preset("tiny"), DType::F16);
  const Tokenizer tok = Tokenizer::byte_level(m.config.vocab_size);
  auto run = [&](uint64_t seed) {
    Decoder dec(m, DecoderOptions{});
    GenerateOptions g;
    g.n_predict = 24;
    g.sampler.temperature = 1.0f;
    g.sampler.seed = seed;
    Collected c;
    generate(dec, tok, "hello", g, collect(c));
    return c.text;
  };
  CHECK(run(1) == run(1));
  CHECK(run(1) != run(2));
}

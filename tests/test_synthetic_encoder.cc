// ctest-labels: asan
// Synthetic encoders (runtime/synthetic_encoder.h): a small bert and a small
// nomic-bert written with write_gguf_model and loaded back embed exactly as
// the models in memory do (same bits, in F16 and Q8_0); the same seed gives the
// same weights; the generated WordPiece vocabulary tokenizes real text between
// [CLS] 101 and [SEP] 102 without [UNK] and survives the file; the presets have
// the published shapes; bad presets and family mismatches fail naming the problem.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "runtime/arch.h"
#include "runtime/embed.h"
#include "runtime/gguf.h"
#include "runtime/model_loader.h"
#include "runtime/synthetic.h"
#include "runtime/synthetic_encoder.h"
#include "runtime/tokenizer.h"
#include "tests/error_matchers.h"

namespace {

using qkv::test::throws_with;

std::string temp_path(const std::string& name) {
  struct stat st;
  const std::string base = ::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
  return base + "/test_synthetic_encoder." + std::to_string(::getpid()) + "." + name;
}

// A nomic-bert of tiny-bert's size (no such preset: the family's test shape).
qkv::ModelConfig tiny_nomic() {
  qkv::ModelConfig c = qkv::synthetic_encoder_preset("nomic-embed");
  c.dim = 64;
  c.n_layers = 2;
  c.n_heads = c.n_kv_heads = 2;
  c.head_dim = c.rope_dim = 32;
  c.hidden_dim = 128;
  c.vocab_size = 2048;
  c.context_length = 128;
  return c;
}

std::vector<float> embed_texts(const qkv::Model& m, const qkv::Tokenizer& tok, const std::vector<std::string>& texts,
                               qkv::Pooling pooling) {
  std::vector<std::vector<int32_t>> ids;
  std::vector<qkv::EmbedInput> inputs;
  for (const std::string& t : texts) ids.push_back(tok.encode(t, true, true));
  for (const auto& v : ids) inputs.push_back({v.data(), static_cast<int64_t>(v.size())});
  qkv::EmbedOptions o;
  o.pooling = pooling;
  o.normalize = -1;
  std::vector<float> out(static_cast<size_t>(qkv::embed_vector_count(inputs, pooling) * m.config.dim));
  qkv::embed(m, nullptr, inputs, o, out.data());
  return out;
}

// Parameters of a configuration, counted from the family's tensor list.
double preset_parameters(const qkv::ModelConfig& c) {
  double n = double(c.vocab_size) * double(c.dim) + 2.0 * double(c.dim) + 4.0 * double(c.dim);
  if (c.learned_positions) n += double(c.context_length) * double(c.dim);
  for (const qkv::LayerTensor& t : qkv::layer_tensors(qkv::arch_spec(c.architecture), c)) {
    n += double(c.n_layers) * double(qkv::extent(c, t.rows)) * double(qkv::extent(c, t.cols));
  }
  return n;
}

}  // namespace

TEST_CASE("a written synthetic encoder loads back and embeds exactly as the one in memory") {
  const std::vector<std::string> texts = {"Hello world!", "The quick brown fox jumps over the lazy dog.",
                                          "search_query: what is an embedding vector?"};
  struct Case {
    const char* name;
    qkv::ModelConfig config;
    qkv::DType type;
  };
  const Case cases[] = {{"tiny-bert f16", qkv::synthetic_encoder_preset("tiny-bert"), qkv::DType::F16},
                        {"tiny-bert q8_0", qkv::synthetic_encoder_preset("tiny-bert", "bert"), qkv::DType::Q8_0},
                        {"tiny nomic-bert f16", tiny_nomic(), qkv::DType::F16},
                        {"tiny nomic-bert q8_0", tiny_nomic(), qkv::DType::Q8_0}};
  for (const Case& k : cases) {
    CAPTURE(k.name);
    const qkv::Model made = qkv::make_synthetic_encoder(k.config, qkv::WeightFormat{k.type, nullptr}, 7);
    CHECK(made.layers[1].ffn_down.type == k.type);
    const std::string path = temp_path("roundtrip.gguf");
    qkv::write_gguf_model(made, path);
    const qkv::GGUFFile file = qkv::GGUFFile::open(path);
    const qkv::Model loaded = qkv::load_gguf_model(file);
    const qkv::Tokenizer tok = qkv::Tokenizer::from_gguf(file);
    CHECK(loaded.config.architecture == k.config.architecture);
    CHECK(loaded.config.pooling_type == k.config.pooling_type);
    CHECK(loaded.config.norm_eps == k.config.norm_eps);
    CHECK(loaded.config.rope_theta == k.config.rope_theta);
    CHECK(loaded.parameter_count() == made.parameter_count());
    CHECK(tok.is_wordpiece());
    CHECK(tok.vocab_size() == k.config.vocab_size);
    for (const qkv::Pooling p : {qkv::Pooling::Mean, qkv::Pooling::Cls, qkv::Pooling::None}) {
      const std::vector<float> a = embed_texts(made, tok, texts, p);
      const std::vector<float> b = embed_texts(loaded, tok, texts, p);
      REQUIRE(a.size() == b.size());
      CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
      bool finite = true;
      for (float v : a) finite = finite && std::isfinite(v);
      CHECK(finite);
    }
    std::remove(path.c_str());
  }
}

TEST_CASE("the same seed gives the same encoder weights, another seed others") {
  const qkv::ModelConfig c = qkv::synthetic_encoder_preset("tiny-bert");
  const qkv::WeightFormat f{qkv::DType::F16, nullptr};
  const qkv::Model a = qkv::make_synthetic_encoder(c, f, 5), b = qkv::make_synthetic_encoder(c, f, 5);
  const qkv::Model other = qkv::make_synthetic_encoder(c, f, 6);
  const size_t bytes = size_t(c.vocab_size) * size_t(c.dim) * 2;
  CHECK(std::memcmp(a.token_embd.data, b.token_embd.data, bytes) == 0);
  CHECK(std::memcmp(a.layers[1].ffn_up_b.data, b.layers[1].ffn_up_b.data, size_t(c.hidden_dim) * 4) == 0);
  CHECK(std::memcmp(a.token_embd.data, other.token_embd.data, bytes) != 0);
  // Biases in [-0.1, 0.1], norm weights in [0.9, 1.1].
  const auto* bias = static_cast<const float*>(a.layers[0].bq.data);
  const auto* norm = static_cast<const float*>(a.layers[0].attn_out_norm.data);
  for (int64_t i = 0; i < c.dim; ++i) {
    CHECK(std::fabs(bias[i]) <= 0.1f);
    CHECK(std::fabs(norm[i] - 1.0f) <= 0.1f);
  }
}

TEST_CASE("the synthetic WordPiece vocabulary") {
  const qkv::Tokenizer tok = qkv::synthetic_wordpiece(30522);
  REQUIRE(tok.vocab_size() == 30522);
  CHECK(tok.piece(0) == "[PAD]");
  CHECK(tok.piece(100) == "[UNK]");
  CHECK(tok.piece(101) == "[CLS]");
  CHECK(tok.piece(102) == "[SEP]");
  CHECK(tok.piece(103) == "[MASK]");
  int control = 0;
  for (int32_t i = 0; i < tok.vocab_size(); ++i) control += tok.token_type(i) == qkv::Tokenizer::kControl;
  CHECK(control == 5);
  for (int32_t id : {0, 100, 101, 102, 103}) CHECK(tok.token_type(id) == qkv::Tokenizer::kControl);
  const std::vector<std::string> texts = {"Hello world!", "Le café était naïve, 42 crèmes brûlées.",
                                          "Straße, αβγ, привет, ひらがな and 一二三上下 text: x+y=z?"};
  for (const std::string& t : texts) {
    CAPTURE(t);
    const std::vector<int32_t> ids = tok.encode(t, true, true);
    REQUIRE(ids.size() >= 3);
    CHECK(ids.front() == 101);
    CHECK(ids.back() == 102);
    for (size_t i = 1; i + 1 < ids.size(); ++i) CHECK(ids[i] != 100);
  }
  // Words of the list are one token; a made-up word splits into pieces.
  CHECK(tok.encode("hello", false, false).size() == 1);
  CHECK(tok.encode("xqzvk", false, false).size() >= 2);
  // Deterministic: the same size gives the same vocabulary.
  const qkv::Tokenizer again = qkv::synthetic_wordpiece(30522);
  bool same = true;
  for (int32_t i = 0; i < tok.vocab_size(); ++i) same = same && tok.piece(i) == again.piece(i);
  CHECK(same);
}

TEST_CASE("the encoder presets have the published shapes") {
  struct Shape {
    const char* name;
    const char* arch;
    int64_t dim, ffn, ctx;
    double params_lo, params_hi;
  };
  const Shape shapes[] = {{"bge-small", "bert", 384, 1536, 512, 33.0e6, 33.6e6},
                          {"bge-base", "bert", 768, 3072, 512, 108.5e6, 109.5e6},
                          {"nomic-embed", "nomic-bert", 768, 3072, 2048, 136.5e6, 137.0e6}};
  for (const Shape& s : shapes) {
    CAPTURE(s.name);
    const qkv::ModelConfig c = qkv::synthetic_encoder_preset(s.name);
    CHECK(c.architecture == s.arch);
    CHECK(c.dim == s.dim);
    CHECK(c.hidden_dim == s.ffn);
    CHECK(c.context_length == s.ctx);
    CHECK(c.n_layers == 12);
    CHECK(c.n_heads == 12);
    CHECK_FALSE(c.causal);
    const double n = preset_parameters(c);
    CHECK(n >= s.params_lo);
    CHECK(n <= s.params_hi);
  }
  CHECK(qkv::synthetic_encoder_preset("nomic-embed").rope_theta == 1000.0f);
  CHECK(qkv::synthetic_encoder_preset("bge-small").pooling_type == 2);
  CHECK(qkv::synthetic_encoder_preset("nomic-embed").pooling_type == 1);
  CHECK(qkv::is_synthetic_encoder("bge-base"));
  CHECK_FALSE(qkv::is_synthetic_encoder("143M"));
}

TEST_CASE("bad encoder presets, family mismatches and vocabularies fail naming the problem") {
  CHECK(throws_with([] { qkv::synthetic_encoder_preset("bge-huge"); }, "unknown synthetic encoder preset 'bge-huge'"));
  CHECK(throws_with([] { qkv::synthetic_encoder_preset("bge-huge"); }, "tiny-bert, bge-small, bge-base, nomic-embed"));
  CHECK(throws_with([] { qkv::synthetic_encoder_preset("bge-small", "nomic-bert"); },
                    "'bge-small' is a 'bert' encoder; --arch nomic-bert does not match"));
  CHECK(throws_with([] { qkv::synthetic_encoder_preset("nomic-embed", "llama"); }, "does not match"));
  CHECK(throws_with([] { qkv::with_arch(qkv::synthetic_preset("tiny"), "bert"); }, "'bert' is an encoder family"));
  CHECK(throws_with([] { qkv::synthetic_preset("bge-smal"); }, "encoders: tiny-bert"));
  CHECK(throws_with([] { qkv::synthetic_wordpiece(512); }, "needs 1024.."));
  CHECK(throws_with(
      [] {
        qkv::ModelConfig c = qkv::synthetic_encoder_preset("tiny-bert");
        c.vocab_size = 4096;
        const qkv::Model m = qkv::make_synthetic_encoder(c, qkv::WeightFormat{qkv::DType::F16, nullptr});
        const qkv::Tokenizer small = qkv::synthetic_wordpiece(2048);
        qkv::write_gguf_encoder(m, temp_path("never.gguf"), small);
      },
      "the tokenizer has 2048 tokens but the model's vocabulary is 4096"));
  std::remove(temp_path("never.gguf").c_str());
  CHECK(throws_with(
      [] {
        const qkv::Model m = qkv::make_synthetic_encoder(qkv::synthetic_encoder_preset("tiny-bert"),
                                                         qkv::WeightFormat{qkv::DType::F16, nullptr});
        qkv::write_gguf_encoder(m, temp_path("never.gguf"), qkv::Tokenizer::byte_level(2048));
      },
      "needs a WordPiece vocabulary"));
  CHECK(throws_with(
      [] {
        qkv::make_synthetic_encoder(qkv::with_arch(qkv::synthetic_preset("tiny"), "llama"),
                                    qkv::WeightFormat{qkv::DType::F16, nullptr});
      },
      "is a decoder family"));
}

// ctest-labels: asan
// The C API's special-token surface: qkv_tokenize_text (a length, so NUL
// bytes are text; the ADD_SPECIAL and PARSE_SPECIAL flags),
// qkv_detokenize_text, qkv_token_piece, qkv_eog_tokens / qkv_is_eog, and
// generation stopping at an end-of-generation token. The model is the "tiny"
// synthetic preset written with a small byte-level BPE vocabulary (no shared
// data needed).
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "qkv.h"
#include "runtime/synthetic.h"
#include "runtime/tokenizer.h"
#include "runtime/tokenizer/bpe.h"

namespace {

constexpr int32_t kVocab = 512;  // the tiny preset's
constexpr int32_t kImStart = 300, kImEnd = 301, kEndOfText = 302, kThink = 303;

// 256 byte characters, a few merges, <|im_start|> / <|im_end|> /
// <|endoftext|> (control), <think> (user-defined), reserved control tokens.
// rename: token ids whose text trades places with <|im_end|>'s.
qkv::Tokenizer small_bpe(int32_t swap_with_im_end = -1) {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(qkv::bpe_byte_char(static_cast<unsigned char>(b)));
    types.push_back(qkv::Tokenizer::kNormal);
  }
  const std::vector<std::string> merges = {"h e", "l l", "\xC4\xA0 w", "he ll", "hell o"};
  for (const char* t : {"he", "ll", "\xC4\xA0w", "hell", "hello"}) {
    tokens.push_back(t);
    types.push_back(qkv::Tokenizer::kNormal);
  }
  while (tokens.size() < size_t(kImStart)) {
    tokens.push_back("<|filler_" + std::to_string(tokens.size()) + "|>");
    types.push_back(qkv::Tokenizer::kControl);
  }
  for (const char* t : {"<|im_start|>", "<|im_end|>", "<|endoftext|>"}) {
    tokens.push_back(t);
    types.push_back(qkv::Tokenizer::kControl);
  }
  tokens.push_back("<think>");
  types.push_back(qkv::Tokenizer::kUserDefined);
  while (tokens.size() < size_t(kVocab)) {
    tokens.push_back("<|reserved_" + std::to_string(tokens.size()) + "|>");
    types.push_back(qkv::Tokenizer::kControl);
  }
  if (swap_with_im_end >= 0) {
    std::swap(tokens[size_t(swap_with_im_end)], tokens[kImEnd]);
    std::swap(types[size_t(swap_with_im_end)], types[kImEnd]);
  }
  return qkv::Tokenizer::from_bpe(tokens, types, merges, "qwen2", -1, kEndOfText, "small-bpe");
}

struct ModelFile {
  std::string path;
  qkv_model* model = nullptr;
  explicit ModelFile(const qkv::Tokenizer& tok, const char* name) {
    path = std::string(QKV_BINARY_DIR) + "/test_c_api_tokens." + std::to_string(::getpid()) + "." + name + ".gguf";
    const qkv::Model m = qkv::make_synthetic_model(qkv::synthetic_preset("tiny"), qkv::DType::F32, 7);
    qkv::write_gguf_model(m, path, &tok);
    REQUIRE(qkv_model_load(path.c_str(), nullptr, &model) == QKV_OK);
  }
  ~ModelFile() {
    qkv_model_free(model);
    std::remove(path.c_str());
  }
};

std::vector<int32_t> tokenize(const qkv_model* m, const std::string& text, int flags) {
  int64_t n = 0;
  std::vector<int32_t> ids(text.size() + 4);
  REQUIRE(qkv_tokenize_text(m, text.data(), int64_t(text.size()), flags, ids.data(), int64_t(ids.size()), &n) ==
          QKV_OK);
  ids.resize(size_t(n));
  return ids;
}

std::string detokenize(const qkv_model* m, const std::vector<int32_t>& ids, int flags) {
  int64_t n = 0;
  REQUIRE(qkv_detokenize_text(m, ids.data(), int64_t(ids.size()), flags, nullptr, 0, &n) ==
          QKV_ERR_BUFFER_TOO_SMALL);
  std::string text(size_t(n) + 1, '\0');
  REQUIRE(qkv_detokenize_text(m, ids.data(), int64_t(ids.size()), flags, text.data(), n + 1, &n) == QKV_OK);
  text.resize(size_t(n));
  return text;
}

}  // namespace

TEST_CASE("qkv_tokenize_text: lengths, NUL bytes, special tokens on and off") {
  const ModelFile f(small_bpe(), "bpe");
  const qkv_model* m = f.model;
  const std::string nul("he\0llo", 6);
  const std::vector<int32_t> ids = tokenize(m, nul, 0);
  CHECK(ids == std::vector<int32_t>{256, 0, 257, 'o' - 0});  // "he", NUL's byte token, "ll", "o"
  CHECK(detokenize(m, ids, 0) == nul);
  CHECK(tokenize(m, "hello world", 0) == std::vector<int32_t>{260, 258, 'o', 'r', 'l', 'd'});

  // Control tokens: text unless PARSE_SPECIAL; user-defined always whole.
  const std::string turn = "<|im_start|>hello<think><|im_end|>";
  const std::vector<int32_t> on = tokenize(m, turn, QKV_TOKENIZE_PARSE_SPECIAL);
  CHECK(on == std::vector<int32_t>{kImStart, 260, kThink, kImEnd});
  const std::vector<int32_t> off = tokenize(m, turn, 0);
  CHECK(std::find(off.begin(), off.end(), kImStart) == off.end());
  CHECK(std::find(off.begin(), off.end(), kThink) != off.end());
  CHECK(detokenize(m, off, 0) == turn);
  CHECK(detokenize(m, on, 0) == "hello<think>");
  CHECK(detokenize(m, on, QKV_TOKENIZE_PARSE_SPECIAL) == turn);
  // qwen2 vocabularies add no BOS; this one has none.
  CHECK(tokenize(m, "hello", QKV_TOKENIZE_ADD_SPECIAL) == std::vector<int32_t>{260});

  // Pieces for streaming.
  char piece[32];
  int64_t len = 0;
  REQUIRE(qkv_token_piece(m, -1, kImEnd, 0, piece, sizeof(piece), &len) == QKV_OK);
  CHECK(len == 0);
  REQUIRE(qkv_token_piece(m, -1, kImEnd, QKV_TOKENIZE_PARSE_SPECIAL, piece, sizeof(piece), &len) == QKV_OK);
  CHECK(std::string(piece, size_t(len)) == "<|im_end|>");
  REQUIRE(qkv_token_piece(m, 260, 258, 0, piece, sizeof(piece), &len) == QKV_OK);
  CHECK(std::string(piece, size_t(len)) == " w");
  CHECK(qkv_token_piece(m, -1, kVocab, 0, piece, sizeof(piece), &len) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_token_piece(m, -1, 5, 0, piece, 1, &len) == QKV_ERR_BUFFER_TOO_SMALL);

  // Bad arguments.
  int64_t n = 0;
  int32_t t[4];
  CHECK(qkv_tokenize_text(m, nullptr, 0, 0, nullptr, 0, &n) == QKV_OK);
  CHECK(n == 0);
  CHECK(qkv_tokenize_text(m, nullptr, 3, 0, t, 4, &n) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_tokenize_text(m, "abc", -1, 0, t, 4, &n) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_tokenize_text(m, "abc", 3, 8, t, 4, &n) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(qkv_tokenize_text(m, "abc", 3, 0, t, 2, &n) == QKV_ERR_BUFFER_TOO_SMALL);
  CHECK(n == 3);
  CHECK(qkv_tokenize_text(nullptr, "abc", 3, 0, t, 4, &n) == QKV_ERR_INVALID_ARGUMENT);
}

TEST_CASE("end-of-generation tokens, and generation stops at one") {
  const ModelFile f(small_bpe(), "eog");
  int64_t n = 0;
  CHECK(qkv_eog_tokens(f.model, nullptr, 0, &n) == QKV_ERR_BUFFER_TOO_SMALL);
  std::vector<int32_t> eog(static_cast<size_t>(n), 0);
  REQUIRE(qkv_eog_tokens(f.model, eog.data(), n, &n) == QKV_OK);
  CHECK(eog == std::vector<int32_t>{kImEnd, kEndOfText});  // <|im_end|> by text, <|endoftext|> as EOS
  CHECK(qkv_is_eog(f.model, kImEnd));
  CHECK(!qkv_is_eog(f.model, kImStart));
  CHECK(!qkv_is_eog(f.model, -1));
  CHECK(!qkv_is_eog(nullptr, kImEnd));

  // The token greedy decoding picks first after a prompt whose ids do not
  // hold it; a vocabulary where that token is <|im_end|> must stop there.
  qkv_generate_options o;
  qkv_generate_options_init(&o);
  o.sampler.temperature = 0;
  o.n_predict = 1;
  for (const char* prompt : {"hello", "hello world", "the sky", "abc", "xyz 123"}) {
    qkv_session* s = nullptr;
    REQUIRE(qkv_session_create(f.model, nullptr, &s) == QKV_OK);
    const std::vector<int32_t> ids = tokenize(f.model, prompt, 0);
    REQUIRE(qkv_session_prefill(s, ids.data(), int64_t(ids.size()), nullptr, 0) == QKV_OK);
    qkv_sampler_options so;
    qkv_sampler_options_init(&so);
    so.temperature = 0;
    REQUIRE(qkv_session_set_sampler(s, &so) == QKV_OK);
    int32_t first = -1;
    REQUIRE(qkv_session_sample(s, &first) == QKV_OK);
    qkv_session_free(s);
    if (std::find(ids.begin(), ids.end(), first) != ids.end() || first == kImEnd || first == kEndOfText) continue;

    const ModelFile g(small_bpe(first), "eog2");
    REQUIRE(qkv_is_eog(g.model, first));
    REQUIRE(tokenize(g.model, prompt, 0) == ids);
    qkv_session* s2 = nullptr;
    REQUIRE(qkv_session_create(g.model, nullptr, &s2) == QKV_OK);
    qkv_generate_options o2 = o;
    o2.n_predict = 8;
    qkv_generate_stats st;
    REQUIRE(qkv_generate(s2, prompt, &o2, nullptr, nullptr, &st) == QKV_OK);
    CHECK(std::string(st.stop_reason) == "eos");
    CHECK(st.generated_tokens == 1);
    qkv_session_free(s2);
    return;
  }
  FAIL("every prompt's greedy token was in its own ids");
}

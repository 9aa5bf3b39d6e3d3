// ctest-labels: asan
// The SentencePiece BPE tokenizer against SentencePiece's own ids for the Llama 2
// vocabulary (from both the llama2.c and the GGUF file), round trips, run.c's
// streaming decode, and malformed tokenizer files.
#include <doctest/doctest.h>

#include "tests/error_matchers.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <unistd.h>
#include <random>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "runtime/gguf.h"
#include "runtime/tokenizer.h"
#include "tests/shared_data.h"

using namespace qkv;
using qkv::test::have_shared;
using qkv::test::shared_path;

namespace {

struct Example {
  const char* text;
  std::vector<int32_t> ids;  // without BOS
};

// SentencePiece's ids for the Llama 2 vocabulary (from the issue).
const Example kLlamaExamples[] = {
    {"Hello world", {15043, 3186}},
    {" Hello world", {29871, 15043, 3186}},
    {"Hello, world!", {15043, 29892, 3186, 29991}},
    {"  two spaces", {259, 1023, 8162}},
    {"tab\there", {4434, 12, 4150}},
    {"line1\nline2", {1196, 29896, 13, 1220, 29906}},
    {"caf\xC3\xA9", {274, 28059}},
    {"\xE6\x97\xA5\xE6\x9C\xAC", {29871, 30325, 30346}},  // 日本
    {"\xF0\x9F\xA6\x99", {29871, 243, 162, 169, 156}},     // 🦙 (byte fallback)
    {"1234", {29871, 29896, 29906, 29941, 29946}},
};

// Texts for round trips: whitespace runs, accents, CJK, emoji, RTL scripts,
// control characters, invalid UTF-8, long repeated runs.
std::vector<std::string> round_trip_texts() {
  std::vector<std::string> t = {
      "",
      " ",
      "  ",
      "     five",
      "trailing   ",
      "\n",
      "\n\n\nnewlines\n",
      "\t\ttabs\t",
      "Hello world",
      "The quick brown fox jumps over the lazy dog.",
      "na\xC3\xAFve r\xC3\xA9sum\xC3\xA9 \xC3\xA0 la fa\xC3\xA7on",   // naïve résumé à la façon
      "Stra\xC3\x9F" "e \xC3\x9C" "ber",                              // Straße Über
      "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xA7\xE3\x81\x99",  // 日本語です
      "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C",  // 你好，世界
      "\xF0\x9F\x98\x80\xF0\x9F\xA6\x99 \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD",  // 😀🦙 👍🏽
      "\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7 \xD8\xA8\xD8\xA7\xD9\x84\xD8\xB9\xD8\xA7\xD9\x84\xD9\x85",  // مرحبا بالعالم
      "\xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D \xD7\xA2\xD7\x95\xD7\x9C\xD7\x9D",  // שלום עולם
      "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82, \xD0\xBC\xD0\xB8\xD1\x80",  // Привет, мир
      "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87",  // नमस्ते
      "<s> not a control token </s> <0x41> <unk>",
      "a\x01" "b\x7F" "c",
      "\xFF\xFE invalid \xC3 utf8 \xE2\x82",
      std::string("nul\0byte", 8),
      std::string(300, 'a'),
      std::string(257, ' '),
      "ab" + std::string(100, 'b') + "ba",
  };
  std::string many;
  for (int i = 0; i < 200; ++i) many += "lorem ipsum dolor sit amet ";
  t.push_back(many);
  return t;
}

std::string join(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

void check_llama_examples(const Tokenizer& tok) {
  REQUIRE(tok.vocab_size() == 32000);
  CHECK(tok.bos_id() == 1);
  CHECK(tok.eos_id() == 2);
  CHECK(tok.unk_id() == 0);
  for (const Example& e : kLlamaExamples) {
    INFO("text: ", e.text);
    const std::vector<int32_t> ids = tok.encode(e.text, false, false);
    CHECK(join(ids) == join(e.ids));
    CHECK(tok.decode(ids) == e.text);
    // With BOS and EOS: the same ids framed by 1 and 2; decoding skips both.
    std::vector<int32_t> framed = {1};
    framed.insert(framed.end(), e.ids.begin(), e.ids.end());
    framed.push_back(2);
    CHECK(join(tok.encode(e.text, true, true)) == join(framed));
    CHECK(tok.decode(framed) == e.text);
  }
  CHECK(tok.encode("", true, false) == std::vector<int32_t>{1});
  CHECK(tok.encode("", false, false).empty());
  CHECK(tok.decode(std::vector<int32_t>{}).empty());
  for (const std::string& s : round_trip_texts()) {
    INFO("text: ", s);
    const std::vector<int32_t> ids = tok.encode(s, true, false);
    for (int32_t id : ids) CHECK((id >= 0 && id < 32000));
    CHECK(tok.decode(ids) == s);
  }
}

// Encodes `s` and decodes it token by token with run.c's decode(prev, token).
std::string stream_decode(const Tokenizer& tok, const std::string& s) {
  const std::vector<int32_t> ids = tok.encode(s, true, false);
  std::string out;
  for (size_t i = 1; i < ids.size(); ++i) out += tok.decode(ids[i - 1], ids[i]);
  return out;
}

std::string temp_file(const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("qkv_test_tok_" + std::to_string(::getpid()) + "_" + name)).string();
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return path;
}

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

void put_token(std::vector<uint8_t>& out, float score, const std::string& piece) {
  put<float>(out, score);
  put<int32_t>(out, static_cast<int32_t>(piece.size()));
  out.insert(out.end(), piece.begin(), piece.end());
}

// A small llama2.c tokenizer.bin: <unk> <s> </s>, 256 bytes, then pieces.
std::vector<uint8_t> small_tokenizer_bin(const std::vector<std::pair<std::string, float>>& extra) {
  std::vector<uint8_t> out;
  put<int32_t>(out, 16);
  put_token(out, 0, "<unk>");
  put_token(out, 0, "\n<s>\n");
  put_token(out, 0, "\n</s>\n");
  char buf[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    put_token(out, 0, buf);
  }
  for (const auto& p : extra) put_token(out, p.second, p.first);
  return out;
}

using test::throws_with;

}  // namespace

TEST_CASE("Llama 2 vocabulary from llama2.c tokenizer.bin gives SentencePiece's ids") {
  if (!have_shared("models/llama2-tokenizer.bin")) return;
  const Tokenizer tok = Tokenizer::from_llama2c(shared_path("models/llama2-tokenizer.bin"), 32000);
  check_llama_examples(tok);
  CHECK(tok.piece(15043) == "\xE2\x96\x81Hello");
  CHECK(tok.token_type(1) == Tokenizer::kControl);
  CHECK(tok.token_type(3 + 0x41) == Tokenizer::kByte);
}

TEST_CASE("Llama 2 vocabulary from GGUF gives SentencePiece's ids") {
  if (!have_shared("models/llama-spm-vocab.gguf")) return;
  const Tokenizer tok = Tokenizer::load(shared_path("models/llama-spm-vocab.gguf"));
  check_llama_examples(tok);
  CHECK(tok.add_bos());
}

TEST_CASE("both Llama 2 files hold the same vocabulary") {
  if (!have_shared("models/llama2-tokenizer.bin") || !have_shared("models/llama-spm-vocab.gguf")) return;
  const Tokenizer a = Tokenizer::load(shared_path("models/llama2-tokenizer.bin"));  // vocab from file length
  const Tokenizer b = Tokenizer::load(shared_path("models/llama-spm-vocab.gguf"));
  REQUIRE(a.vocab_size() == b.vocab_size());
  int differing = 0;
  for (int32_t id = 3; id < a.vocab_size(); ++id) {
    if (a.piece(id) != b.piece(id) || a.score(id) != b.score(id) || a.token_type(id) != b.token_type(id)) ++differing;
  }
  CHECK(differing == 0);
}

TEST_CASE("streaming decode follows run.c: no space after BOS, bytes reassemble") {
  if (!have_shared("models/llama2-tokenizer.bin")) return;
  const Tokenizer tok = Tokenizer::load(shared_path("models/llama2-tokenizer.bin"), 32000);
  CHECK(tok.decode(1, 15043) == "Hello");        // after BOS: "▁Hello" loses its space
  CHECK(tok.decode(15043, 3186) == " world");    // elsewhere the space stays
  CHECK(tok.decode(15043, 13) == "\n");          // <0x0A> -> raw byte
  CHECK(tok.decode(15043, 2) == "");             // EOS decodes to nothing
  CHECK(tok.decode(1, 3 + ' ') == " ");          // a byte-token space is text, never dropped
  for (const std::string& s : round_trip_texts()) {
    INFO("text: ", s);
    CHECK(stream_decode(tok, s) == s);
  }
  // A literal "▁" in the text is indistinguishable from a space after
  // normalization, in SentencePiece too: it decodes as a space.
  CHECK(tok.decode(tok.encode("a\xE2\x96\x81" "b", false, false)) == "a b");
  CHECK_THROWS_AS(tok.decode(1, 32000), Error);
  CHECK_THROWS_AS(tok.decode(1, -1), Error);
  CHECK_THROWS_AS(tok.decode(std::vector<int32_t>{5, 40000}), Error);
}

TEST_CASE("stories260K tok512 vocabulary") {
  if (!have_shared("models/tok512.bin")) return;
  const Tokenizer tok = Tokenizer::from_llama2c(shared_path("models/tok512.bin"), 512);
  REQUIRE(tok.vocab_size() == 512);
  // Hand-checked against the vocabulary: "▁t" (259) and "he" (260) are its two
  // best merges, and "▁the" is piece 265 via ("▁t","he").
  CHECK(tok.piece(259) == "\xE2\x96\x81t");
  CHECK(tok.piece(260) == "he");
  CHECK(join(tok.encode("the", false, false)) == join({265}));
  const std::vector<int32_t> once_ids = tok.encode("Once upon a time", true, false);
  CHECK(once_ids.front() == 1);
  CHECK(tok.decode(once_ids) == "Once upon a time");
  for (const std::string& s : round_trip_texts()) {
    INFO("text: ", s);
    CHECK(tok.decode(tok.encode(s, true, true)) == s);
  }
  // Reading by file length finds the same 512 tokens.
  CHECK(Tokenizer::load(shared_path("models/tok512.bin")).vocab_size() == 512);
}

TEST_CASE("merge order: highest score first, leftmost on ties, bytes as fallback") {
  // Pieces: "a", "b", "ab" (score -1), "bb" (score -1), "abb" (score -0.5).
  // "abb": candidate pairs "ab" (-1, left) and "bb" (-1, right) tie: the
  // leftmost "ab" merges, then "ab"+"b" = "abb".
  const std::string sp = "\xE2\x96\x81";
  const auto bytes = small_tokenizer_bin(
      {{" ", -5}, {"a", -2}, {"b", -2}, {"ab", -1}, {"bb", -1}, {"abb", -0.5f}, {"x", -3}});
  const std::string path = temp_file("merge.bin", bytes);
  const Tokenizer tok = Tokenizer::from_llama2c(path, -1);
  std::remove(path.c_str());
  REQUIRE(tok.vocab_size() == 259 + 7);
  const int32_t space = 259, a = 260, b = 261, ab = 262, bb = 263, abb = 264, x = 265;
  CHECK(join(tok.encode("abb", false, false)) == join({space, abb}));
  CHECK(join(tok.encode("bbb", false, false)) == join({space, bb, b}));   // leftmost "bb" first
  CHECK(join(tok.encode("xab", false, false)) == join({space, x, ab}));
  CHECK(join(tok.encode("a b", false, false)) == join({space, a, space, b}));
  CHECK(join(tok.encode("z", false, false)) == join({space, 3 + 'z'}));  // not a piece: its byte
  CHECK(join(tok.encode("\xC3\xA9", false, false)) == join({space, 3 + 0xC3, 3 + 0xA9}));
  CHECK(tok.decode(tok.encode("zab\xC3\xA9", true, false)) == "zab\xC3\xA9");

  // A vocabulary with a piece that spans a word boundary ("a▁b"): encode must
  // not split the text into words, or the merge across the space is missed.
  const std::string path2 = temp_file("span.bin", small_tokenizer_bin({{" ", -5}, {"a", -2}, {"b", -2},
                                                                       {"a ", -1}, {"a b", 0}}));
  const Tokenizer span = Tokenizer::from_llama2c(path2, -1);
  std::remove(path2.c_str());
  CHECK(join(span.encode("a b", false, false)) == join({259, 263}));
  CHECK(join(span.encode("b a b", false, false)) == join({259, 261, 259, 263}));
  CHECK(span.decode(span.encode("b a b", true, false)) == "b a b");
  (void)sp;
}

TEST_CASE("byte-level synthetic vocabulary round-trips anything") {
  const Tokenizer tok = Tokenizer::byte_level(512);
  CHECK(tok.vocab_size() == 512);
  for (const std::string& s : round_trip_texts()) {
    INFO("text: ", s);
    CHECK(tok.decode(tok.encode(s, true, false)) == s);
  }
  CHECK_THROWS_AS(Tokenizer::byte_level(100), Error);
}

TEST_CASE("malformed tokenizer files are clear errors") {
  std::vector<uint8_t> good = small_tokenizer_bin({{"a", -1}});
  SUBCASE("negative token length") {
    std::vector<uint8_t> bad = small_tokenizer_bin({});
    put<float>(bad, 0);
    put<int32_t>(bad, -5);
    const std::string path = temp_file("neg.bin", bad);
    CHECK(throws_with([&] { Tokenizer::from_llama2c(path); }, "negative length"));
    CHECK(throws_with([&] { Tokenizer::from_llama2c(path); }, path));
    std::remove(path.c_str());
  }
  SUBCASE("huge token length") {
    std::vector<uint8_t> bad = small_tokenizer_bin({});
    put<float>(bad, 0);
    put<int32_t>(bad, 0x7fffffff);
    const std::string path = temp_file("huge.bin", bad);
    CHECK(throws_with([&] { Tokenizer::from_llama2c(path); }, "past the end"));
    std::remove(path.c_str());
  }
  SUBCASE("truncated at every offset") {
    // Every cut either fails with an error naming the file, or (at a token
    // boundary, when reading by file length) yields a shorter vocabulary.
    for (size_t cut = 0; cut < good.size(); cut += (cut < 64 ? 1 : 7)) {
      const std::vector<uint8_t> part(good.begin(), good.begin() + cut);
      const std::string path = temp_file("cut.bin", part);
      CHECK_THROWS_AS(Tokenizer::from_llama2c(path, 260), Error);
      try {
        const Tokenizer t = Tokenizer::from_llama2c(path, -1);
        CHECK(t.vocab_size() < 260);
      } catch (const Error& e) {
        CHECK(std::string(e.what()).find(path) != std::string::npos);
      }
      std::remove(path.c_str());
    }
  }
  SUBCASE("more tokens requested than the file holds") {
    const std::string path = temp_file("short.bin", good);
    CHECK(throws_with([&] { Tokenizer::from_llama2c(path, 300); }, "truncated"));
    CHECK(Tokenizer::from_llama2c(path, 260).vocab_size() == 260);
    std::remove(path.c_str());
  }
  SUBCASE("missing file") {
    CHECK(throws_with([] { Tokenizer::load("/nonexistent/qkv/tokenizer.bin"); }, "cannot open"));
  }
  SUBCASE("GGUF with another tokenizer model") {
    GGUFWriter w;
    w.set("tokenizer.ggml.model", GGUFValue::string("t5"));
    w.set("tokenizer.ggml.tokens", GGUFValue::string_array({"a", "b", "c"}));
    std::string path = temp_file("t5.gguf", w.serialize());
    CHECK(throws_with([&] { Tokenizer::load(path); }, "'t5' is not supported"));
    std::remove(path.c_str());
    w.set("tokenizer.ggml.model", GGUFValue::string("gpt2"));
    path = temp_file("gpt2.gguf", w.serialize());
    CHECK(throws_with([&] { Tokenizer::load(path); }, "needs tokenizer.ggml.merges"));
    std::remove(path.c_str());
  }
  SUBCASE("GGUF with mismatched scores or out-of-range ids") {
    GGUFWriter w;
    w.set("tokenizer.ggml.model", GGUFValue::string("llama"));
    w.set("tokenizer.ggml.tokens", GGUFValue::string_array({"<unk>", "<s>", "</s>", "a"}));
    w.set("tokenizer.ggml.scores", GGUFValue::f32_array({0, 0, 0}));
    std::string path = temp_file("scores.gguf", w.serialize());
    CHECK(throws_with([&] { Tokenizer::load(path); }, "3 scores for 4 tokens"));
    w.set("tokenizer.ggml.scores", GGUFValue::f32_array({0, 0, 0, -1}));
    w.set("tokenizer.ggml.bos_token_id", GGUFValue::u32(7));
    path = temp_file("scores.gguf", w.serialize());
    CHECK(throws_with([&] { Tokenizer::load(path); }, "bos_token_id = 7"));
    w.set("tokenizer.ggml.bos_token_id", GGUFValue::u32(1));
    w.set("tokenizer.ggml.token_type", GGUFValue::i32_array({2, 3, 3, 9}));
    path = temp_file("scores.gguf", w.serialize());
    CHECK(throws_with([&] { Tokenizer::load(path); }, "unknown type 9"));
    w.set("tokenizer.ggml.token_type", GGUFValue::i32_array({2, 3, 3, 1}));
    path = temp_file("scores.gguf", w.serialize());
    const Tokenizer t = Tokenizer::load(path);
    CHECK(t.vocab_size() == 4);
    std::remove(path.c_str());
  }
}

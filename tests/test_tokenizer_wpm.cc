// ctest-labels: asan
// WordPiece (GGUF "bert") against its oracles in ../shared: llama.cpp's own
// 46 test strings with Hugging Face's ids (vocab/ggml-vocab-bert-bge.gguf.inp
// / .out), the llama-tokenize ids of vocab/bert-bge-shared.jsonl (with and
// without [CLS]/[SEP] and special parsing), and the ids llama-embedding fed
// the embedding and rerank references. Token ids are exact: no tolerance.
// Also the normalization rules one by one, greedy matching and [UNK] on a
// small vocabulary, decoding, and malformed vocabularies.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/gguf.h"
#include "runtime/tokenizer.h"
#include "runtime/tokenizer/wpm.h"
#include "tests/error_matchers.h"
#include "tests/shared_data.h"

using namespace qkv;
using qkv::test::have_shared;
using qkv::test::shared_path;
using qkv::test::throws_with;

namespace {

const char* const kVocab = "vocab/ggml-vocab-bert-bge.gguf";

const Tokenizer& bge() {
  static const Tokenizer t = Tokenizer::from_gguf(GGUFFile::open(shared_path(kVocab)));
  return t;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string join(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? " " : "") + std::to_string(ids[i]);
  return s;
}

std::string dump(const std::string& s) { return nlohmann::json(s).dump(); }

const std::string kMark = "\xE2\x96\x81";  // "▁"

}  // namespace

TEST_CASE("WordPiece: llama.cpp's 46 test strings give Hugging Face's ids") {
  if (!have_shared(kVocab) || !have_shared(std::string(kVocab) + ".inp")) return;
  const std::string inp = read_file(shared_path(std::string(kVocab) + ".inp"));
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0;;) {
    const size_t next = inp.find(sep, pos);
    if (next == std::string::npos) break;
    texts.push_back(inp.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::vector<std::string> expected;
  std::ifstream out(shared_path(std::string(kVocab) + ".out"));
  for (std::string line; std::getline(out, line);) expected.push_back(line);
  REQUIRE(texts.size() == 46);
  REQUIRE(expected.size() == texts.size());
  int same = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    std::istringstream ids_text(expected[i]);
    std::vector<int32_t> want;
    for (int32_t id; ids_text >> id;) want.push_back(id);
    const std::vector<int32_t> got = bge().encode(texts[i], false, false, false);
    INFO("text ", i, ": ", dump(texts[i]));
    CHECK(join(got) == join(want));
    same += got == want;
  }
  std::printf("bert-bge .inp/.out: %d/%zu identical\n", same, texts.size());
}

TEST_CASE("WordPiece: every line of bert-bge-shared.jsonl") {
  if (!have_shared("vocab/bert-bge-shared.jsonl") || !have_shared(kVocab)) return;
  std::ifstream in(shared_path("vocab/bert-bge-shared.jsonl"));
  int lines = 0, same = 0, differ_from_hf = 0;
  for (std::string row; std::getline(in, row);) {
    if (row.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(row);
    REQUIRE(j.at("vocab").get<std::string>() == "ggml-vocab-bert-bge.gguf");
    const std::string text = j.at("text").get<std::string>();
    const auto ids = j.at("ids").get<std::vector<int32_t>>();
    const auto embedding_ids = j.at("ids_llama_embedding").get<std::vector<int32_t>>();
    INFO("text: ", dump(text));
    // llama-tokenize --no-bos --no-parse-special
    const std::vector<int32_t> plain = bge().encode(text, false, false, false);
    CHECK(join(plain) == join(ids));
    // llama-embedding: [CLS] ... [SEP], special tokens parsed
    const std::vector<int32_t> full = bge().encode(text, true, true, true);
    CHECK(join(full) == join(embedding_ids));
    same += plain == ids && full == embedding_ids;
    ++lines;
    if (j.contains("hf_ids")) {
      // A known llama.cpp-vs-Hugging Face difference: qkv follows llama.cpp,
      // and the file's claim that the two differ holds.
      CHECK(j.contains("note"));
      CHECK(j.at("hf_ids").get<std::vector<int32_t>>() != ids);
      ++differ_from_hf;
    }
  }
  CHECK(lines == 26);
  CHECK(differ_from_hf == 4);
  std::printf("bert-bge-shared.jsonl: %d/%d identical (%d marked as differing from Hugging Face)\n", same, lines,
              differ_from_hf);
}

TEST_CASE("WordPiece: the ids of the embedding and rerank references") {
  for (const char* name : {"arch-bert-a", "arch-bert-rank-a"}) {
    const std::string json = std::string("reference/") + name + ".embed.json";
    const std::string model = std::string("models/") + name + ".gguf";
    if (!have_shared(json) || !have_shared(model)) continue;
    // The tokenizer the model file itself carries.
    const Tokenizer tok = Tokenizer::from_gguf(GGUFFile::open(shared_path(model)));
    CHECK(tok.is_wordpiece());
    const nlohmann::json j = nlohmann::json::parse(read_file(shared_path(json)));
    const bool rank = j.contains("pairs");
    const nlohmann::json& items = rank ? j.at("pairs") : j.at("texts");
    CHECK(items.size() == (rank ? 3u : 8u));
    for (const nlohmann::json& item : items) {
      const std::string text = item.at(rank ? "input_text" : "text").get<std::string>();
      const auto want = item.at("ids").get<std::vector<int32_t>>();
      INFO(name, ": ", dump(text));
      const std::vector<int32_t> got = tok.encode(text, true, true, true);
      CHECK(join(got) == join(want));
      CHECK(int64_t(got.size()) == item.at("n_tokens").get<int64_t>());
    }
  }
}

TEST_CASE("WordPiece: special ids, [CLS]/[SEP], special-token parsing") {
  if (!have_shared(kVocab)) return;
  const Tokenizer& t = bge();
  CHECK(t.is_wordpiece());
  CHECK(!t.is_bpe());
  CHECK(t.vocab_size() == 30522);
  CHECK(t.bos_id() == 101);
  CHECK(t.sep_id() == 102);
  CHECK(t.unk_id() == 100);
  CHECK(t.pad_id() == 0);
  CHECK(t.mask_id() == 103);
  CHECK(t.eos_id() == -1);  // the file has no EOS key
  CHECK(t.add_bos());
  CHECK(!t.add_eos());
  CHECK(t.eog_ids().empty());
  CHECK(t.piece(1037) == kMark + "a");
  CHECK(t.piece_id(kMark + "a") == 1037);
  CHECK(t.piece_id("[CLS]") == -1);  // a control token, not a normal piece

  const std::vector<int32_t> hello = t.encode("Hello world!", false, false);
  CHECK(join(hello) == "7592 2088 999");
  CHECK(join(t.encode("Hello world!", true, false)) == "101 7592 2088 999");
  CHECK(join(t.encode("Hello world!", false, true)) == "7592 2088 999 102");
  // Only the control tokens' literal text is special, and only with parse_special.
  CHECK(join(t.encode("[CLS]x[SEP]", false, false, true)) == "101 1060 102");
  const std::vector<int32_t> literal = t.encode("[CLS]", false, false, false);  // "[", "cl", "s", "]"
  CHECK(join(literal) == "1031 18856 2015 1033");
  CHECK(join(t.encode("[MASK] [PAD] [UNK]", false, false, true)) == "103 0 100");
  CHECK(t.encode("[mask]", false, false, true).size() == 3);
  CHECK(t.encode("", true, true).size() == 2);
  CHECK(t.encode(" \t\n ", false, false).empty());
}

TEST_CASE("WordPiece: decoding") {
  if (!have_shared(kVocab)) return;
  const Tokenizer& t = bge();
  for (const char* s : {"hello world", "the quick brown fox jumps over the lazy dog, twice.",
                        "is it true? yes! it's fine, we're sure they've gone and don't know",
                        "unbelievably antidisestablishmentarianism", "a", "tokenization of 1234567 numbers"}) {
    INFO(s);
    const std::vector<int32_t> ids = t.encode(s, true, true);
    CHECK(t.decode(ids) == s);
  }
  // Normalized text comes back: lowercase, accents cut to their base letter.
  CHECK(t.decode(t.encode("Le Café DÉJÀ", true, true)) == "le cafe deja");
  const std::vector<int32_t> ids = t.encode("Hello tokenization", true, true);
  CHECK(t.decode(ids, true) == "[CLS] hello tokenization[SEP]");
  // Token by token: the word-initial piece after [CLS] loses its space,
  // later ones keep it, continuation pieces have none.
  std::string streamed;
  int32_t prev = t.bos_id();
  for (size_t i = 1; i + 1 < ids.size(); ++i) streamed += t.decode(prev, ids[i]), prev = ids[i];
  CHECK(streamed == "hello tokenization");
  CHECK(t.decode(7592, 2088) == " world");
  CHECK(t.decode(102, 102) == "");
  CHECK(t.decode(102, 102, true) == "[SEP]");
  CHECK(throws_with([&] { t.decode(std::vector<int32_t>{30522}); }, "outside the vocabulary"));
}

TEST_CASE("WordPiece: normalization and word splitting") {
  using W = std::vector<std::string>;
  auto words = [](const std::string& s) {
    W w = WpmModel::words(s);
    for (std::string& x : w) x = x.substr(kMark.size());  // drop the phantom space
    return w;
  };
  CHECK(words("Hello, WORLD!") == W{"hello", ",", "world", "!"});
  CHECK(words("  a\tb\nc\xC2\xA0" "d\xE3\x80\x80" "e ") == W{"a", "b", "c", "d", "e"});  // NBSP, U+3000 split
  CHECK(words("$5+3=8|x") == W{"$", "5", "+", "3", "=", "8", "|", "x"});               // ASCII symbols
  CHECK(words("\xC2\xA9" "2024 50\xC2\xB0") == W{"\xC2\xA9" "2024", "50\xC2\xB0"});     // © and ° stay inside
  CHECK(words("\xE6\x97\xA5\xE6\x9C\xAC" "abc") == W{"\xE6\x97\xA5", "\xE6\x9C\xAC", "abc"});  // 日本: one word each
  CHECK(words("\xE3\x81\xA7\xE3\x81\x99") == W{"\xE3\x81\xA6\xE3\x81\x99"});           // で -> て, kana stay together
  CHECK(words("caf\xC3\xA9 \xC3\x9C" "ber") == W{"cafe", "uber"});                     // é -> e, Ü -> u
  CHECK(words("cafe\xCC\x81") == W{"cafe\xCC\x81"});  // a combining mark stays (llama.cpp; HF drops it)
  CHECK(words("\xED\x95\x9C") == W{"\xE1\x84\x92"});  // 한 -> its leading jamo ᄒ
  CHECK(words("\xCE\xA3\xCE\x9F\xCE\xA3") == W{"\xCF\x83\xCE\xBF\xCF\x83"});  // ΣΟΣ -> σοσ, no final sigma
  CHECK(words("\xE2\x80\x9Cq\xE2\x80\x9D") == W{"\xE2\x80\x9C", "q", "\xE2\x80\x9D"});  // curly quotes
  // NUL, control, format (ZWJ), U+FFFD and invalid bytes vanish without splitting.
  CHECK(words(std::string("a\0b", 3) + "\x07" "c\xE2\x80\x8D" "d\xEF\xBF\xBD" "e\xFF" "f\xC3") == W{"abcdef"});
  CHECK(words("\xED\xA0\x80x") == W{"x"});          // a UTF-8-encoded surrogate is a control character
  CHECK(words("x\xF5\x80\x80\x80y") == W{"xy"});    // past U+10FFFF: dropped
  CHECK(words("").empty());
  CHECK(words(" \xE2\x80\x83 ").empty());  // only white space (em space)
}

TEST_CASE("WordPiece: greedy longest match, [UNK] for a word with an unmatched part") {
  const std::vector<std::string> tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", kMark + "un", kMark + "unaff",
                                           "able",  "aff",   kMark + "x", "x",  kMark + ",", "[MASK]"};
  const std::vector<int32_t> types = {3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 3};
  Tokenizer::WordPieceIds ids;
  ids.pad = 0, ids.unk = 1, ids.cls = 2, ids.sep = 3, ids.mask = 11;
  const Tokenizer t = Tokenizer::from_wordpiece(tokens, types, ids, "small");
  CHECK(join(t.encode("unaffable", false, false)) == "5 6");   // "▁unaff" (longest) then "able"
  CHECK(join(t.encode("UNAFF, un", true, true)) == "2 5 10 4 3");
  CHECK(join(t.encode("unable", false, false)) == "4 6");      // "▁un", then "able"
  CHECK(join(t.encode("unaffx unq x", false, false)) == "5 9 1 8");  // "q" has no piece: the word is [UNK]
  // No length limit: a 1000-letter word is 1000 pieces.
  const std::vector<int32_t> long_word = t.encode(std::string(1000, 'x'), false, false);
  CHECK(long_word.size() == 1000);
  CHECK(long_word.front() == 8);
  CHECK(long_word.back() == 9);
  CHECK(t.decode(t.encode("unaffable, x", false, false)) == "unaffable, x");
}

TEST_CASE("WordPiece: arbitrary bytes give ids in the vocabulary and decode") {
  if (!have_shared(kVocab)) return;
  const Tokenizer& t = bge();
  std::mt19937 gen(11);
  int checked = 0;
  const char* const pieces[] = {" ", "\xE2\x96\x81", "[SEP]", "\xC3\xA9", "\xE4\xB8\xAD", "'", "\xF0\x9F\x8D\x95"};
  for (int n = 0; n < 600; ++n) {
    std::string s;
    const size_t len = gen() % 80;
    while (s.size() < len) {
      if (gen() % 3 == 0) {
        s += pieces[gen() % 7];
      } else {
        s += static_cast<char>(gen() % 4 ? 'a' + gen() % 26 : gen() % 256);
      }
    }
    const std::vector<int32_t> full = t.encode(s, n % 2 == 0, n % 3 == 0, n % 4 == 0);
    for (int32_t id : full) REQUIRE((id >= 0 && id < t.vocab_size()));
    (void)t.decode(full, n % 5 == 0);
    // Decoded text is normalized text: it encodes to the same ids again
    // (unless a word became [UNK], which decodes to nothing).
    const std::vector<int32_t> ids = t.encode(s, false, false, false);
    if (std::find(ids.begin(), ids.end(), t.unk_id()) != ids.end()) continue;
    const std::string back = t.decode(ids);
    INFO("text: ", dump(s), " decoded: ", dump(back));
    CHECK(join(t.encode(back, false, false, false)) == join(ids));
    ++checked;
  }
  CHECK(checked > 80);  // most of the rest hold an emoji or stray byte: [UNK]
}

TEST_CASE("WordPiece: llama.cpp's space clean-up after decoding") {
  CHECK(WpmModel::clean_spaces("") == "");
  CHECK(WpmModel::clean_spaces("a , b . c ? d !") == "a, b. c? d!");
  CHECK(WpmModel::clean_spaces("don ' t") == "don't");
  // The space a pair consumed does not count before the next quote (llama.cpp overwrites it).
  CHECK(WpmModel::clean_spaces("a ' ' b") == "a'' b");
  CHECK(WpmModel::clean_spaces("it 's we 're they 've i 'm") == "it's we're they've i'm");
  CHECK(WpmModel::clean_spaces("we 'll i 'd a 't") == "we 'll i 'd a 't");  // kept, as llama.cpp does
  CHECK(WpmModel::clean_spaces(" .") == ".");
}

TEST_CASE("WordPiece: malformed vocabularies are clear errors") {
  const std::vector<std::string> tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", kMark + "a"};
  const std::vector<int32_t> types = {3, 3, 3, 3, 1};
  Tokenizer::WordPieceIds ids;
  ids.pad = 0, ids.unk = 1, ids.cls = 2, ids.sep = 3, ids.mask = -1;
  CHECK(Tokenizer::from_wordpiece(tokens, types, ids, "ok").vocab_size() == 5);
  Tokenizer::WordPieceIds bad = ids;
  bad.unk = -1;
  CHECK(throws_with([&] { Tokenizer::from_wordpiece(tokens, types, bad, "v"); }, "[UNK] (unknown token) id -1"));
  bad = ids;
  bad.sep = 5;
  CHECK(throws_with([&] { Tokenizer::from_wordpiece(tokens, types, bad, "v"); }, "[SEP] (separator) id 5"));
  CHECK(throws_with([&] { Tokenizer::from_wordpiece(tokens, {3, 3}, ids, "v"); }, "2 token types for 5 tokens"));
  std::vector<std::string> twice = tokens;
  twice[4] = "[SEP]";
  CHECK(throws_with([&] { Tokenizer::from_wordpiece(twice, types, ids, "v"); }, "repeats the text of token 3"));

  // A GGUF "bert" vocabulary without [UNK]: no unknown_token_id key and no token 100.
  GGUFWriter w;
  w.set("tokenizer.ggml.model", GGUFValue::string("bert"));
  w.set("tokenizer.ggml.tokens", GGUFValue::string_array(tokens));
  w.set("tokenizer.ggml.token_type", GGUFValue::i32_array(types));
  w.set("tokenizer.ggml.bos_token_id", GGUFValue::u32(2));
  w.set("tokenizer.ggml.seperator_token_id", GGUFValue::u32(3));
  const std::string path = std::string(QKV_BINARY_DIR) + "/test_tokenizer_wpm_vocab.gguf";
  w.write(path);
  CHECK(throws_with([&] { Tokenizer::load(path); }, "[UNK] (unknown token) id 100 is outside the vocabulary of 5"));
  w.set("tokenizer.ggml.unknown_token_id", GGUFValue::u32(9));
  w.write(path);
  CHECK(throws_with([&] { Tokenizer::load(path); }, "unknown_token_id = 9 is outside the vocabulary"));
  w.set("tokenizer.ggml.unknown_token_id", GGUFValue::u32(1));
  w.write(path);
  const Tokenizer t = Tokenizer::load(path);  // pad 0 by default, no [MASK] (103 is past the end)
  CHECK(t.pad_id() == 0);
  CHECK(t.mask_id() == -1);
  CHECK(join(t.encode("a b", true, true)) == "2 4 1 3");
  std::remove(path.c_str());
}

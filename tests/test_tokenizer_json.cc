// ctest-labels: asan
// Hugging Face tokenizer.json files: small hand-made byte-level and
// SentencePiece-style BPE files with ids worked out by hand (merge ranks,
// ignore_merges, byte fallback, fused unknowns, added tokens, the config file
// beside it), split behaviours, and malformed files (each a clear error).
// The real Llama 3 / Qwen 3 / Gemma 3 files are compared with Hugging Face's
// own ids in tests/tokenizer_hf.sh.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "kernels/error.h"
#include "runtime/tokenizer.h"
#include "runtime/tokenizer/pretokenizer.h"
#include "tests/error_matchers.h"

using namespace qkv;
using qkv::test::throws_with;

namespace {

// A directory of its own per test, removed at the end.
struct TempDir {
  std::filesystem::path dir;
  TempDir() {
    dir = std::filesystem::temp_directory_path() / ("qkv_tokjson_" + std::to_string(getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  ~TempDir() { std::filesystem::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text) const {
    const std::string path = (dir / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
};

// "abc abc": a b c -> ab c (rank 0) -> abc (rank 1); " abc": Ġ a b c -> Ġ ab c ->
// Ġ abc (Ġ a, rank 2, loses to the lower ranks). "bc" is a token but no merge.
const char* const kByteLevel = R"({
  "version": "1.0",
  "normalizer": null,
  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": " ?\\p{L}+"}, "behavior": "Isolated", "invert": false},
    {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]},
  "post_processor": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
  "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
  "added_tokens": [
    {"id": 8, "content": "<|end|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
    {"id": 9, "content": "<x>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": false}],
  "model": {"type": "BPE", "dropout": null, "unk_token": null, "byte_fallback": false, "ignore_merges": IGNORE,
            "vocab": {"a": 0, "b": 1, "c": 2, "\u0120": 3, "ab": 4, "abc": 5, "\u0120a": 6, "bc": 7},
            "merges": ["a b", ["ab", "c"], "\u0120 a"]}
})";

std::string byte_level(bool ignore_merges) {
  std::string s = kByteLevel;
  s.replace(s.find("IGNORE"), 6, ignore_merges ? "true" : "false");
  return s;
}

// Gemma / Llama 2 style: "▁" for spaces and a "▁" prefix, merges by rank
// ("h i" first, then "▁ hi"; "▁ h" never gets its turn), "!" through its byte
// token, "é" (no byte tokens for it) as one fused <unk>.
const char* const kSentencePiece = R"({
  "normalizer": {"type": "Sequence", "normalizers": [
    {"type": "Prepend", "prepend": "\u2581"}, {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
  "pre_tokenizer": null,
  "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}}], "pair": [], "special_tokens": {}},
  "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
              {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
  "added_tokens": [{"id": 8, "content": "<s>", "special": true}],
  "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true,
            "vocab": {"<unk>": 0, "\u2581": 1, "h": 2, "i": 3, "\u2581h": 4, "hi": 5, "\u2581hi": 6, "<0x21>": 7},
            "merges": [["h", "i"], ["\u2581", "hi"], ["\u2581", "h"]]}
})";

std::vector<std::string> pieces(const std::string& text, const std::vector<std::pair<size_t, size_t>>& split) {
  std::vector<std::string> out;
  for (const auto& [off, len] : split) out.push_back(text.substr(off, len));
  return out;
}

}  // namespace

TEST_CASE("tokenizer.json: byte-level BPE by merge rank, ignore_merges, added tokens, tokenizer_config.json") {
  TempDir tmp;
  const Tokenizer t = Tokenizer::load(tmp.write("tokenizer.json", byte_level(false)));
  CHECK(t.is_bpe());
  CHECK(t.vocab_size() == 10);
  CHECK(t.encode("abc abc", false, false) == std::vector<int32_t>{5, 3, 5});
  CHECK(t.encode("bc", false, false) == std::vector<int32_t>{1, 2});
  CHECK(t.decode(std::vector<int32_t>{5, 3, 5}) == "abc abc");
  // Special ("<|end|>") only with parse_special; non-special ("<x>") always.
  CHECK(t.encode("a<|end|>b<x>", false, false, true) == std::vector<int32_t>{0, 8, 1, 9});
  CHECK(t.encode("b<x>", false, false) == std::vector<int32_t>{1, 9});
  CHECK(t.bos_id() == -1);
  CHECK_FALSE(t.add_bos());  // the post-processor adds nothing and there is no config
  CHECK(t.chat_template().empty());

  const Tokenizer ig = Tokenizer::load(tmp.write("tokenizer.json", byte_level(true)));
  CHECK(ig.encode("bc", false, false) == std::vector<int32_t>{7});  // a whole pre-token in the vocabulary
  CHECK(ig.encode("abc abc", false, false) == std::vector<int32_t>{5, 3, 5});

  tmp.write("tokenizer_config.json", R"({"add_bos_token": false, "bos_token": null,
      "eos_token": {"content": "<|end|>", "special": true}, "chat_template": "{{ messages }}"})");
  const Tokenizer c = Tokenizer::load((tmp.dir / "tokenizer.json").string());
  CHECK(c.eos_id() == 8);
  CHECK(c.is_eog(8));
  CHECK(c.chat_template() == "{{ messages }}");
  tmp.write("tokenizer_config.json", R"({"eos_token": "<nope>"})");
  CHECK(throws_with([&] { Tokenizer::load((tmp.dir / "tokenizer.json").string()); }, "eos_token '<nope>' is not a token"));
  tmp.write("tokenizer_config.json", R"({"add_bos_token": true})");
  CHECK(throws_with([&] { Tokenizer::load((tmp.dir / "tokenizer.json").string()); }, "no bos_token"));
}

TEST_CASE("tokenizer.json: the model's vocabulary size pads the file's ids") {
  TempDir tmp;
  const std::string path = tmp.write("tok.json", byte_level(false));
  const Tokenizer t = Tokenizer::load(path, 16);
  CHECK(t.vocab_size() == 16);
  CHECK(t.token_type(15) == Tokenizer::kUnused);
  CHECK(t.decode(std::vector<int32_t>{15}).empty());
  CHECK(t.encode("abc", false, false) == std::vector<int32_t>{5});
  CHECK(throws_with([&] { Tokenizer::load(path, 5); }, "more than the model's vocabulary of 5"));
  // ByteLevel with use_regex: GPT-2's split ("abc", " ", " abc").
  std::string gpt2 = byte_level(false);
  const std::string split = R"({"type": "Split", "pattern": {"Regex": " ?\\p{L}+"}, "behavior": "Isolated", "invert": false},)";
  REQUIRE(gpt2.find(split) != std::string::npos);
  gpt2.erase(gpt2.find(split), split.size());
  gpt2.replace(gpt2.find(R"("use_regex": false)"), 18, R"("use_regex": true)");
  CHECK(Tokenizer::load(tmp.write("gpt2.json", gpt2)).encode("abc  abc", false, false) == std::vector<int32_t>{5, 3, 3, 5});
  // Recognized by its first bytes without the .json suffix.
  CHECK(Tokenizer::load(tmp.write("tokenizer-file", byte_level(false))).vocab_size() == 10);
}

TEST_CASE("tokenizer.json: SentencePiece-style BPE with prefix, byte fallback and fused unknowns") {
  TempDir tmp;
  const Tokenizer t = Tokenizer::load(tmp.write("tokenizer.json", kSentencePiece));
  CHECK(t.encode("hi hi!", false, false) == std::vector<int32_t>{6, 6, 7});
  CHECK(t.encode("\xC3\xA9\xC3\xA9", false, false) == std::vector<int32_t>{1, 0});
  CHECK(t.add_bos());  // TemplateProcessing starts with <s>
  CHECK(t.bos_id() == 8);
  CHECK(t.encode("hi", t.add_bos(), false) == std::vector<int32_t>{8, 6});
  CHECK(t.decode(std::vector<int32_t>{8, 6, 6, 7}) == "hi hi!");
  CHECK(t.token_type(7) == Tokenizer::kByte);
  CHECK(t.token_type(0) == Tokenizer::kUnknown);
}

TEST_CASE("tokenizer.json: Metaspace pre-tokenizer (prepend_scheme first, split)") {
  TempDir tmp;
  std::string json = kSentencePiece;
  const std::string normalizer = json.substr(json.find("\"normalizer\""), json.find("\"pre_tokenizer\"") - json.find("\"normalizer\""));
  json.erase(json.find(normalizer), normalizer.size());
  const std::string none = R"("pre_tokenizer": null)";
  auto with = [&](const std::string& pre) {
    std::string s = json;
    return s.replace(s.find(none), none.size(), R"("pre_tokenizer": )" + pre);
  };
  const Tokenizer t = Tokenizer::load(tmp.write("tokenizer.json", with(
      R"({"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": true})")));
  CHECK(t.encode("hi hi!", false, false) == std::vector<int32_t>{6, 6, 7});
  CHECK(t.encode("hi  hi", false, false) == std::vector<int32_t>{6, 1, 6});  // "▁hi", "▁▁hi" ("▁ ▁hi")
  CHECK(t.encode(" hi", false, false) == std::vector<int32_t>{6});  // no second "▁" before one already there
  CHECK(t.encode("<s>hi", false, false, true) == std::vector<int32_t>{8, 5});  // "first": not after a special token
  CHECK(t.decode(std::vector<int32_t>{6, 6, 7}) == "hi hi!");
  const std::string path = (tmp.dir / "tokenizer.json").string();
  tmp.write("tokenizer.json", with(R"({"type": "Metaspace", "replacement": "_", "prepend_scheme": "first"})"));
  CHECK(throws_with([&] { Tokenizer::load(path); }, "Metaspace replacement '_' is not supported"));
  tmp.write("tokenizer.json", with(R"({"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "odd"})"));
  CHECK(throws_with([&] { Tokenizer::load(path); }, "Metaspace prepend_scheme 'odd' is not supported"));
}

TEST_CASE("pre-tokenizer split behaviours and literal patterns") {
  PreTokenizerSpec spec;
  spec.names = {"test"};
  spec.patterns = {literal_pattern(" ")};
  const std::string text = "a b c";
  spec.behaviors = {SplitBehavior::kMergedWithPrevious};
  CHECK(pieces(text, PreTokenizer(spec).split(text)) == std::vector<std::string>{"a ", "b ", "c"});
  spec.behaviors = {SplitBehavior::kMergedWithNext};
  CHECK(pieces(text, PreTokenizer(spec).split(text)) == std::vector<std::string>{"a", " b", " c"});
  const std::string runs = "  a  b ";  // a run of matches stays together
  CHECK(pieces(runs, PreTokenizer(spec).split(runs)) == std::vector<std::string>{"  a", "  b", " "});
  spec.behaviors = {SplitBehavior::kMergedWithPrevious};
  CHECK(pieces(runs, PreTokenizer(spec).split(runs)) == std::vector<std::string>{" ", " ", "a ", " ", "b "});
  spec.behaviors = {SplitBehavior::kIsolated};
  CHECK(pieces(text, PreTokenizer(spec).split(text)) == std::vector<std::string>{"a", " ", "b", " ", "c"});
  spec.patterns = {literal_pattern("a.b(+)")};
  const std::string dots = "axb(+) a.b(+)";
  CHECK(pieces(dots, PreTokenizer(spec).split(dots)) == std::vector<std::string>{"axb(+) ", "a.b(+)"});
}

TEST_CASE("tokenizer.json: malformed files give clear errors") {
  TempDir tmp;
  auto fails = [&](const std::string& json, const std::string& needle) {
    const std::string path = tmp.write("bad.json", json);
    return throws_with([&] { Tokenizer::load(path); }, needle);
  };
  const std::string good = byte_level(false);
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const size_t at = s.find(from);
    REQUIRE(at != std::string::npos);
    return s.replace(at, from.size(), to);
  };
  CHECK(fails(good.substr(0, good.size() / 2), "is not valid JSON"));  // truncated
  CHECK(fails("", "is not valid JSON"));
  CHECK(fails("{}", "has no 'model'"));
  CHECK(fails("[1, 2]", "is not a JSON object"));
  CHECK(fails(R"({"model": 3})", "model is not an object"));
  CHECK(fails(std::string(100000, '[') + std::string(100000, ']'), "nests JSON more than"));
  CHECK(fails(R"({"model": {"type": "WordPiece", "vocab": {}}})", "model type 'WordPiece' is not supported"));
  CHECK(fails(R"({"model": {"type": "Unigram", "vocab": []}})", "model type 'Unigram' is not supported"));
  CHECK(fails(R"({"model": {"type": 7}})", "model.type is not a string"));
  CHECK(fails(R"({"model": {"type": "BPE", "vocab": [1], "merges": []}})", "model.vocab is not an object"));
  CHECK(fails(R"({"model": {"type": "BPE", "vocab": {}, "merges": []}})", "has no tokens"));
  CHECK(fails(R"({"model": {"type": "BPE", "vocab": {"a": "0"}, "merges": []}})", "is not an integer"));
  CHECK(fails(R"({"model": {"type": "BPE", "vocab": {"a": -1}, "merges": []}})", "is outside"));
  CHECK(fails(R"({"model": {"type": "BPE", "vocab": {"a": 1e12}, "merges": []}})", "is not an integer"));
  CHECK(fails(R"({"model": {"type": "BPE", "vocab": {"a": 99999999999}, "merges": []}})", "is outside"));
  CHECK(fails(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 2}, "merges": []}})", "is past the 2 tokens"));
  CHECK(fails(R"({"model": {"type": "BPE", "vocab": {"a": 16777215}, "merges": []}})", "is past the 1 tokens"));
  CHECK(fails(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 2}, "merges": []},
                  "added_tokens": [{"id": 2, "content": "b"}]})", "id 1 has no token"));
  CHECK(fails(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 0}, "merges": []}})", "given to two tokens"));
  CHECK(fails(R"({"model": {"type": "BPE", "vocab": {"a": 0}}})", "has no 'merges'"));
  CHECK(fails(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": {}}})", "model.merges is not an array"));
  CHECK(fails(with(R"(["ab", "c"])", "3"), "merge 1 is not a string"));
  CHECK(fails(with(R"(["ab", "c"])", R"(["a", "b", "c"])"), "merge 1 is not a pair"));
  CHECK(fails(with(R"(["ab", "c"])", R"(["a b", "c"])"), "space inside a symbol"));
  CHECK(fails(with(R"("a b")", R"("ab")"), "is not two symbols"));
  CHECK(fails(with(R"("dropout": null)", R"("dropout": 0.1)"), "BPE dropout"));
  CHECK(fails(with(R"("unk_token": null)", R"("unk_token": "<zz>")"), "unk_token '<zz>' is not a token"));
  CHECK(fails(with(R"("normalizer": null)", R"("normalizer": {"type": "NFKC"})"), "normalizer 'NFKC' is not supported"));
  CHECK(fails(with(R"("normalizer": null)", R"("normalizer": {"type": "Sequence", "normalizers": 5})"),
              "normalizer.normalizers is not an array"));
  CHECK(fails(with(R"("normalizer": null)", R"("normalizer": {"type": "Replace", "pattern": {"Regex": "x"}, "content": ""})"),
              "normalizer Replace pattern"));
  CHECK(fails(with(R"({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true)",
                   R"({"type": "Metaspace", "add_prefix_space": false, "trim_offsets": true)"),
              "pre-tokenizer 'Metaspace inside a Sequence' is not supported"));
  CHECK(fails(with(R"("behavior": "Isolated")", R"("behavior": "Contiguous")"), "Split behavior 'Contiguous'"));
  CHECK(fails(with(R"("behavior": "Isolated")", R"("behavior": 1)"), "Split.behavior is not a string"));
  CHECK(fails(with(R"("invert": false)", R"("invert": true)"), "invert true is not supported"));
  CHECK(fails(with(R"({"Regex": " ?\\p{L}+"})", R"({"Regex": "(unclosed"})"), "does not compile"));
  CHECK(fails(with(R"({"Regex": " ?\\p{L}+"})", R"({"Glob": "*"})"), "neither"));
  CHECK(fails(with(R"("decoder": {"type": "ByteLevel")", R"("decoder": {"type": "WordPiece")"),
              "decoder 'WordPiece' is not supported"));
  CHECK(fails(with(R"("post_processor": {"type": "ByteLevel")", R"("post_processor": {"type": "BertProcessing")"),
              "post-processor 'BertProcessing' is not supported"));
  CHECK(fails(with(R"("id": 9, "content": "<x>")", R"("id": 0, "content": "<x>")"), "id 0 is both 'a' and '<x>'"));
  CHECK(fails(with(R"("id": 9, "content": "<x>")", R"("id": "9", "content": "<x>")"), "added_tokens[].id is not an integer"));
  CHECK(fails(with(R"("added_tokens": [)", R"("added_tokens": 1, "x": [)"), "added_tokens is not an array"));
  CHECK(fails(with(R"("special": false)", R"("special": "no")"), "special is not a bool"));
  CHECK(throws_with([&] { Tokenizer::from_hf_json((tmp.dir / "missing.json").string()); }, "cannot open"));
}

TEST_CASE("tokenizer.json: every truncation and random byte changes load or fail with qkv::Error") {
  TempDir tmp;
  const std::string good = byte_level(true);
  const std::string path = (tmp.dir / "mut.json").string();
  int other = 0, loaded = 0;
  auto attempt = [&](const std::string& text) {
    tmp.write("mut.json", text);
    try {
      const Tokenizer t = Tokenizer::load(path);
      t.encode("abc abc <x>", false, false, true);
      ++loaded;
    } catch (const Error&) {
    } catch (const std::exception& e) {
      if (other++ < 5) MESSAGE("not a qkv::Error: ", e.what(), " for ", text);
    }
  };
  for (size_t n = 0; n < good.size(); n += 7) attempt(good.substr(0, n));
  uint32_t seed = 20261202;
  auto next = [&] { return seed = seed * 1664525u + 1013904223u; };
  const std::string alphabet = "{}[]\":,0123456789-.e truefalsnul\\\x80\xFF";
  for (int i = 0; i < 400; ++i) {
    std::string s = good;
    for (int k = 0; k < 1 + int(next() % 3); ++k) s[next() % s.size()] = alphabet[next() % alphabet.size()];
    attempt(s);
  }
  CHECK(other == 0);
  CHECK(loaded > 0);  // some changes (inside strings) leave a valid file
}

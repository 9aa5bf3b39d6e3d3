// ctest-labels: asan
// The grammar engine: GBNF parsing (llama.cpp's syntax, errors with line and
// column), the pushdown matcher on whole texts, and the per-step token masks,
// checked token by token against stepping the matcher with each token alone.
#include <doctest/doctest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/grammar/gbnf.h"
#include "runtime/grammar/matcher.h"
#include "tests/error_matchers.h"

using namespace qkv;
using namespace qkv::grammar;

namespace {

// JSON in GBNF, written for these tests (texts it gives are checked with an
// independent JSON parser below).
const char* kJsonGbnf = R"(# any JSON value
root   ::= value
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ws ( member ( "," ws member )* )? "}"
member ::= string ws ":" ws value ws
array  ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string ::= "\"" ( [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws     ::= [ \t\n]{0,4}
)";

std::shared_ptr<const CompiledGrammar> compile(const std::string& gbnf, const std::vector<std::string>& texts,
                                               std::vector<int32_t> eog = {}) {
  auto trie = std::make_shared<const TokenTrie>(texts, std::move(eog));
  return std::make_shared<const CompiledGrammar>(parse_gbnf(gbnf), trie);
}

// Whether the grammar matches text completely.
bool matches(const std::string& gbnf, const std::string& text) {
  auto g = compile(gbnf, {"x"});
  Matcher m(g);
  return m.accept_text(text) && m.can_end();
}

// A vocabulary of every byte, some multi-byte pieces, and two end tokens.
std::vector<std::string> test_vocab() {
  std::vector<std::string> v;
  for (int b = 0; b < 256; ++b) v.push_back(std::string(1, static_cast<char>(b)));
  for (const char* p : {"{\"", "\":", "\": ", "\",", "\"}", "}}", "]}", "[1", ", ", "true", "tr", "null", "12", "0.",
                        "e-", "\\u00", "ab", "abc\"", "abc\":", "\u00e9", "\u00e9\"", "\xc3", " {", "{}", "[]", "1,2",
                        "\"a\"", "\":\"", "\"\"", "\n  ", "  "}) {
    v.emplace_back(p);
  }
  v.emplace_back("");  // an end-of-generation token (id below)
  v.emplace_back("");  // a control token: no text, never allowed
  return v;
}

}  // namespace

TEST_CASE("GBNF errors name the line and column") {
  using test::throws_with;
  CHECK(throws_with([] { parse_gbnf("root ::= foo\n"); }, "undefined rule 'foo' at line 1, column 10"));
  CHECK(throws_with([] { parse_gbnf("root ::= \"a\"\nx ::= \"b\n"); }, "unterminated literal at line 2, column 9"));
  CHECK(throws_with([] { parse_gbnf("root = \"a\""); }, "expected '::=' after the rule name 'root' at line 1, column 6"));
  CHECK(throws_with([] { parse_gbnf("root ::= [a-\n"); }, "line 1"));
  CHECK(throws_with([] { parse_gbnf("root ::= \"\\q\""); }, "unknown escape '\\q' at line 1, column 11"));
  CHECK(throws_with([] { parse_gbnf("root ::= (\"a\""); }, "expected ')'"));
  CHECK(throws_with([] { parse_gbnf("root ::= * \"a\""); }, "'*' with nothing before it to repeat at line 1, column 10"));
  CHECK(throws_with([] { parse_gbnf("root ::= \"a\"{3,1}"); }, "n < m"));
  CHECK(throws_with([] { parse_gbnf("root ::= \"a\"{100000}"); }, "above the limit"));
  CHECK(throws_with([] { parse_gbnf("x ::= \"a\"\n"); }, "no 'root' rule"));
  CHECK(throws_with([] { parse_gbnf("root ::= \"a\"\nroot ::= \"b\"\n"); }, "defined twice at line 2, column 1"));
  CHECK(throws_with([] { parse_gbnf("root ::= root \"a\" | \"b\""); }, "'root' is left-recursive"));
  CHECK(throws_with([] { parse_gbnf("root ::= x \"a\"\nx ::= \"\" | root"); }, "left-recursive"));
  CHECK(throws_with([] { parse_gbnf("root ::= [^\\x00-\\U0010FFFF]"); }, "matches nothing"));
  CHECK(throws_with([] { parse_gbnf("root ::= \"a\" ]"); }, "expected the end of the rule at line 1, column 14"));
}

TEST_CASE("GBNF syntax: literals, classes, groups, repetition, comments, continuation lines") {
  CHECK(matches("root ::= \"ab\" [0-9]+ # digits\n", "ab123"));
  CHECK_FALSE(matches("root ::= \"ab\" [0-9]+\n", "ab"));
  CHECK(matches("root ::= (\n  \"a\" |\n  \"b\"\n)* \"c\"", "abbac"));
  CHECK(matches("root ::= \"x\"{2,3}", "xxx"));
  CHECK_FALSE(matches("root ::= \"x\"{2,3}", "xxxx"));
  CHECK_FALSE(matches("root ::= \"x\"{2,3}", "x"));
  CHECK(matches("root ::= (\"ab\"){2,}", "ababab"));
  CHECK(matches("root ::= \"a\" | ", ""));
  CHECK(matches("root ::= [^a-z]", "\xe2\x82\xac"));  // one code point, three bytes
  CHECK_FALSE(matches("root ::= [^a-z]", "q"));
  CHECK(matches("root ::= . .", "\xf0\x9f\x98\x80z"));
  CHECK(matches("root ::= \"\\u00e9\\x41\\n\"", "\xc3\xa9" "A\n"));
  CHECK(matches("root ::= [\\]\\[-]+", "][-"));
  CHECK(matches("root   ::= a-b_c\na-b_c ::= \"q\"", "q"));
  CHECK_FALSE(matches("root ::= \"\\u00e9\"", "\xc3"));  // half a character is not the end
  CHECK(matches(kJsonGbnf, R"({"a": [1, 2.5e-3, "x\u00e9\n", {}], "b" : null})"));
  CHECK_FALSE(matches(kJsonGbnf, R"({"a" 1})"));
  CHECK_FALSE(matches(kJsonGbnf, R"([01])"));
}

TEST_CASE("deep repetition keeps the parse stack shallow") {
  auto g = compile("root ::= (\"[\" \"a\"? \"]\")* \"x\"", {"x"});
  Matcher m(g);
  std::string text;
  for (int i = 0; i < 5000; ++i) text += i % 2 ? "[a]" : "[]";
  CHECK(m.accept_text(text));
  CHECK(m.accept_text("x"));
  CHECK(m.can_end());
}

TEST_CASE("token masks agree with stepping every token alone") {
  const std::vector<std::string> vocab = test_vocab();
  const auto eog = static_cast<int32_t>(vocab.size() - 2);
  const auto control = static_cast<int32_t>(vocab.size() - 1);
  auto g = compile(kJsonGbnf, vocab, {eog});
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    Matcher m(g);
    std::vector<uint64_t> bits(static_cast<size_t>(g->words()));
    for (int step = 0; step < 60; ++step) {
      m.fill_mask(bits.data());
      std::vector<int32_t> allowed;
      for (int32_t t = 0; t < static_cast<int32_t>(vocab.size()); ++t) {
        const bool bit = (bits[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1;
        Matcher copy = m;
        const bool fits = copy.accept_token(t);
        if (bit != fits) FAIL_CHECK("token ", t, " '", vocab[static_cast<size_t>(t)], "': mask ", bit, ", step ", fits);
        if (fits) allowed.push_back(t);
      }
      CHECK_FALSE(((bits[static_cast<size_t>(control) >> 6] >> (control & 63)) & 1));
      REQUIRE_FALSE(allowed.empty());
      const int32_t pick = allowed[rng() % allowed.size()];
      REQUIRE(m.accept_token(pick));
      if (pick == eog) break;
    }
  }
  CHECK(g->cached_stacks() > 0);
}

TEST_CASE("a token split inside a UTF-8 character continues it") {
  std::vector<std::string> vocab = {"\xc3", "\xa9", "\"", "x"};
  auto g = compile("root ::= \"\\\"\" [^\"]* \"\\\"\"", vocab);
  Matcher m(g);
  CHECK(m.accept_token(2));
  CHECK(m.accept_token(0));
  CHECK_FALSE(m.accept_token(2));  // a quote cannot finish half a character
  CHECK(m.accept_token(1));
  CHECK(m.accept_token(2));
  CHECK(m.must_end());
}

TEST_CASE("texts drawn from the JSON grammar are JSON to an independent parser") {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
  bytes.emplace_back("");  // end of generation
  auto g = compile(kJsonGbnf, bytes, {256});
  int finished = 0;
  for (uint32_t seed = 0; seed < 200; ++seed) {
    Matcher m(g);
    std::mt19937 rng(seed);
    std::vector<uint64_t> bits(static_cast<size_t>(g->words()));
    std::string text;
    bool ended = false;
    for (int step = 0; step < 400 && !ended; ++step) {
      m.fill_mask(bits.data());
      std::vector<int32_t> allowed;
      for (int32_t t = 0; t <= 256; ++t) {
        if ((bits[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1) allowed.push_back(t);
      }
      REQUIRE_FALSE(allowed.empty());
      const int32_t pick = allowed.back() == 256 && rng() % 2 ? 256 : allowed[rng() % allowed.size()];
      ended = pick == 256;
      if (!ended) {
        REQUIRE(m.accept_token(pick));
        text += static_cast<char>(pick);
      }
    }
    if (!ended) continue;
    ++finished;
    CHECK_MESSAGE(nlohmann::json::accept(text), text);
  }
  CHECK(finished > 50);
}

// ctest-labels: asan
// Tool-call grammars against the tool-call parsers: for every family, texts
// drawn at random from its forced-call grammar (a byte vocabulary, seeded
// walks) parse back into calls of the allowed tools whose arguments are JSON
// objects; lazy grammars do the same after their trigger; bad parameter
// schemas name the tool; rule renaming leaves literals and classes alone.
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/grammar/gbnf.h"
#include "runtime/grammar/matcher.h"
#include "runtime/tool_calls/call_grammar.h"
#include "tests/error_matchers.h"

using namespace qkv;
using namespace qkv::toolcall;

namespace {

std::vector<ToolSchema> test_tools() {
  return {{"get_weather", nlohmann::ordered_json::parse(R"({"type": "object", "properties": {
             "city": {"type": "string", "maxLength": 6}, "unit": {"enum": ["c", "f"]}}, "required": ["city"]})")},
          {"add", nlohmann::ordered_json::parse(R"({"type": "object", "properties": {
             "a": {"type": "integer", "minimum": 0, "maximum": 99}, "b": {"type": "integer"}},
             "required": ["a", "b"], "additionalProperties": false})")}};
}

// A text the grammar accepts, drawn byte by byte (seeded), or "" when the walk ran long.
std::string draw(const std::string& gbnf, uint32_t seed) {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
  bytes.emplace_back("");  // end of generation
  auto trie = std::make_shared<const grammar::TokenTrie>(bytes, std::vector<int32_t>{256});
  auto g = std::make_shared<const grammar::CompiledGrammar>(grammar::parse_gbnf(gbnf), trie);
  grammar::Matcher m(g);
  std::mt19937 rng(seed);
  std::vector<uint64_t> bits(static_cast<size_t>(g->words()));
  std::string text;
  for (int step = 0; step < 4000; ++step) {
    m.fill_mask(bits.data());
    std::vector<int32_t> allowed;
    for (int32_t t = 0; t <= 256; ++t) {
      if ((bits[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1) allowed.push_back(t);
    }
    REQUIRE_FALSE(allowed.empty());
    // Ending is preferred once allowed, so walks stay short.
    const int32_t pick = allowed.back() == 256 && rng() % 3 ? 256 : allowed[rng() % allowed.size()];
    if (pick == 256) return text;
    REQUIRE(m.accept_token(pick));
    text += static_cast<char>(pick);
  }
  return "";
}

void check_calls(Family f, const std::string& text, bool parallel) {
  ParseOptions o;
  const ParsedMessage msg = parse_message(f, text, o);
  const std::string what = std::string(family_name(f)) + ": " + text;
  INFO(what);
  REQUIRE_FALSE(msg.calls.empty());
  if (!parallel) CHECK(msg.calls.size() == 1);
  for (const ToolCall& c : msg.calls) {
    CHECK((c.name == "get_weather" || c.name == "add"));
    const auto args = nlohmann::json::parse(c.arguments);
    CHECK(args.is_object());
    if (c.name == "add") CHECK(args.contains("a"));
    if (c.name == "get_weather") CHECK(args.contains("city"));
  }
}

}  // namespace

TEST_CASE("forced tool-call grammars give texts the family's parser reads as calls") {
  const Family families[] = {Family::kHermes, Family::kLlama3, Family::kMistral, Family::kFunctionaryV31,
                             Family::kFirefunctionV2, Family::kCommandR7B, Family::kCommandRPlus, Family::kDeepSeekR1,
                             Family::kDeepSeekV31, Family::kGptOss, Family::kGeneric};
  for (Family f : families) {
    for (bool parallel : {false, true}) {
      const CallGrammar g = tool_call_grammar(f, test_tools(), parallel, false);
      CHECK(g.triggers.empty());
      for (uint32_t seed = 1; seed <= 6; ++seed) {
        const std::string text = draw(g.gbnf, seed * 7 + parallel);
        if (text.empty()) continue;
        check_calls(f, text, parallel);
      }
    }
  }
}

TEST_CASE("lazy grammars start at the family's trigger") {
  for (Family f : {Family::kHermes, Family::kMistral, Family::kDeepSeekV31, Family::kFunctionaryV31}) {
    const CallGrammar g = tool_call_grammar(f, test_tools(), true, true);
    REQUIRE(g.triggers.size() == 1);
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      const std::string rest = draw(g.gbnf, seed);
      if (rest.empty()) continue;
      check_calls(f, "Let me check. " + g.triggers[0] + rest, true);
    }
  }
  // The generic format has no opener: its lazy form allows a plain answer instead.
  const CallGrammar generic = tool_call_grammar(Family::kGeneric, test_tools(), true, true);
  CHECK(generic.triggers.empty());
  CHECK(generic.gbnf.find("response") != std::string::npos);
}

TEST_CASE("tool-call grammar errors and rule renaming") {
  std::vector<ToolSchema> bad = test_tools();
  bad[1].parameters = nlohmann::ordered_json::parse(R"({"type": "object", "properties": {"x": {"not": {}}}})");
  CHECK(test::throws_with([&] { tool_call_grammar(Family::kHermes, bad, true, false); },
                          "tools[1] (add): parameters: unsupported JSON Schema keyword 'not' at #/properties/x"));
  CHECK(prefix_rule_names("root ::= a \"b c\" [d-e] # f g\na ::= \"\\\"x\" y{2,3}\n", "p-") ==
        "p-root ::= p-a \"b c\" [d-e] # f g\np-a ::= \"\\\"x\" p-y{2,3}\n");
}

// fuzz_grammar: the grammar engine's parsers. Byte 0 picks the input's kind:
// even, GBNF text (parsed; when valid, a matcher walks a fixed text and a
// small vocabulary's masks); odd, a JSON Schema (compiled to GBNF, which must
// then parse: the compiler's output is never bad grammar). A qkv::Error is
// the right answer to bad input; anything else is a finding.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/grammar/gbnf.h"
#include "runtime/grammar/json_schema.h"
#include "runtime/grammar/matcher.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

std::shared_ptr<const qkv::grammar::TokenTrie> small_vocab() {
  static const auto trie = [] {
    std::vector<std::string> v;
    for (int b = 0; b < 256; ++b) v.push_back(std::string(1, static_cast<char>(b)));
    for (const char* p : {"{\"", "\":", "\",", "ab", "true", "12", " ", "\xc3\xa9", "\\u"}) v.emplace_back(p);
    v.emplace_back("");  // end of generation
    return std::make_shared<const qkv::grammar::TokenTrie>(v, std::vector<int32_t>{static_cast<int32_t>(v.size() - 1)});
  }();
  return trie;
}

void exercise(const qkv::grammar::Grammar& parsed) {
  using namespace qkv::grammar;
  auto g = std::make_shared<const CompiledGrammar>(parsed, small_vocab());
  Matcher m(g);
  std::vector<uint64_t> bits(static_cast<size_t>(g->words()));
  // Follow the lowest allowed token a few steps: masks and steps agree or the harness aborts.
  for (int step = 0; step < 16 && !m.must_end(); ++step) {
    m.fill_mask(bits.data());
    int32_t pick = -1;
    for (int32_t t = 0; t < g->trie().vocab_size() && pick < 0; ++t) {
      if ((bits[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1) pick = t;
    }
    if (pick < 0) break;
    if (!m.accept_token(pick)) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace qkv;
  if (size == 0 || size > 4096) return 0;  // larger inputs only slow the search
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    fuzz::expect_clean([&] { exercise(grammar::parse_gbnf(text)); });
    return 0;
  }
  nlohmann::json schema;
  try {
    schema = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    return 0;
  }
  std::string gbnf;
  fuzz::expect_clean([&] { gbnf = grammar::json_schema_to_gbnf(schema); });
  if (!gbnf.empty()) exercise(grammar::parse_gbnf(gbnf));  // throws (a finding) when the output does not parse
  return 0;
}

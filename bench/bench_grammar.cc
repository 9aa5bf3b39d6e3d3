// Constrained decoding on real vocabularies (Llama 3: 128,256 tokens, Qwen 2:
// 151,669) from ../shared/vocab: compiling a grammar (JSON Schema -> GBNF ->
// matcher tables) and the per-token mask, over random walks through the
// grammar (each step picks one allowed token, seeded). Mask time is timed per
// step; counters give its median and 99th percentile in microseconds, with
// the grammar's stack masks warm (the same grammar as in earlier requests)
// and cold (a freshly compiled grammar each walk). Skips when the vocabulary
// files are absent.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/grammar/gbnf.h"
#include "runtime/grammar/json_schema.h"
#include "runtime/grammar/matcher.h"
#include "runtime/tokenizer.h"

namespace {

using namespace qkv;
using namespace qkv::grammar;

const char* kFlatObject = R"({"type": "object", "properties": {
  "name": {"type": "string"}, "age": {"type": "integer"}, "email": {"type": "string"},
  "active": {"type": "boolean"}, "score": {"type": "number"}},
  "required": ["name", "age", "email", "active", "score"], "additionalProperties": false})";

const char* kNestedArrays = R"({"type": "object", "properties": {"orders": {"type": "array", "items": {
  "type": "object", "properties": {"id": {"type": "integer"}, "lines": {"type": "array", "items": {
    "type": "object", "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}},
    "required": ["sku", "qty"], "additionalProperties": false}}},
  "required": ["id", "lines"], "additionalProperties": false}}}, "required": ["orders"], "additionalProperties": false})";

const char* kAnyOfThree = R"({"anyOf": [
  {"type": "object", "properties": {"kind": {"const": "circle"}, "radius": {"type": "number"}},
   "required": ["kind", "radius"], "additionalProperties": false},
  {"type": "object", "properties": {"kind": {"const": "rect"}, "w": {"type": "number"}, "h": {"type": "number"}},
   "required": ["kind", "w", "h"], "additionalProperties": false},
  {"type": "object", "properties": {"kind": {"const": "label"}, "text": {"type": "string"}, "size": {"type": "integer"}},
   "required": ["kind", "text"], "additionalProperties": false}]})";

// Any JSON value, in GBNF (the shape of llama.cpp's grammars/json.gbnf).
const char* kJsonGbnf = R"(root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
)";

std::string grammar_text(int which) {
  switch (which) {
    case 0: return json_schema_to_gbnf(nlohmann::ordered_json::parse(kFlatObject));
    case 1: return json_schema_to_gbnf(nlohmann::ordered_json::parse(kNestedArrays));
    case 2: return json_schema_to_gbnf(nlohmann::ordered_json::parse(kAnyOfThree));
    default: return kJsonGbnf;
  }
}
const char* kGrammarNames[] = {"flat_object", "nested_arrays", "anyof_three", "gbnf_json"};
const char* kVocabNames[] = {"llama3", "qwen2"};

std::shared_ptr<const TokenTrie> trie_of(int vocab) {
  static std::shared_ptr<const TokenTrie> tries[2];
  if (!tries[vocab]) {
    const std::string path = std::string(QKV_SHARED_DIR) + "/vocab/vocab-" + kVocabNames[vocab] + ".gguf";
    if (!std::ifstream(path)) return nullptr;
    tries[vocab] = std::make_shared<const TokenTrie>(Tokenizer::load(path));
  }
  return tries[vocab];
}

// One walk: masks until the grammar ends or max_steps; appends each mask's microseconds.
void walk(const std::shared_ptr<const CompiledGrammar>& g, uint32_t seed, int max_steps, std::vector<double>& us) {
  std::mt19937 rng(seed);
  Matcher m(g);
  std::vector<uint64_t> bits(static_cast<size_t>(g->words()));
  std::vector<int32_t> allowed;
  const int64_t vocab = g->trie().vocab_size();
  for (int step = 0; step < max_steps && !m.must_end(); ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    m.fill_mask(bits.data());
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    allowed.clear();
    for (int64_t t = 0; t < vocab; ++t) {
      if ((bits[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1) allowed.push_back(static_cast<int32_t>(t));
    }
    const auto& eog = g->trie().eog();
    if (allowed.empty() || std::binary_search(eog.begin(), eog.end(), allowed[rng() % allowed.size()])) break;
    int32_t pick;
    do {
      pick = allowed[rng() % allowed.size()];
    } while (std::binary_search(eog.begin(), eog.end(), pick));
    m.accept_token(pick);
  }
}

void percentiles(benchmark::State& state, std::vector<double>& us) {
  if (us.empty()) return;
  std::sort(us.begin(), us.end());
  state.counters["mask_median_us"] = us[us.size() / 2];
  state.counters["mask_p99_us"] = us[us.size() * 99 / 100];
  state.counters["mask_max_us"] = us.back();
  state.counters["steps"] = static_cast<double>(us.size());
}

void BM_GrammarCompile(benchmark::State& state) {
  const int vocab = static_cast<int>(state.range(0)), which = static_cast<int>(state.range(1));
  auto trie = trie_of(vocab);
  if (!trie) return state.SkipWithError("../shared/vocab is absent");
  for (auto _ : state) {
    auto g = std::make_shared<const CompiledGrammar>(parse_gbnf(grammar_text(which)), trie);
    benchmark::DoNotOptimize(g.get());
  }
  state.SetLabel(std::string(kVocabNames[vocab]) + "/" + kGrammarNames[which]);
}

// Warm: one compiled grammar for every walk. Cold: a new one per walk.
void BM_GrammarMask(benchmark::State& state) {
  const int vocab = static_cast<int>(state.range(0)), which = static_cast<int>(state.range(1));
  const bool cold = state.range(2) != 0;
  auto trie = trie_of(vocab);
  if (!trie) return state.SkipWithError("../shared/vocab is absent");
  auto g = std::make_shared<const CompiledGrammar>(parse_gbnf(grammar_text(which)), trie);
  if (!cold) {  // warm up: the stacks earlier requests reached
    std::vector<double> ignored;
    for (uint32_t s = 0; s < 16; ++s) walk(g, 1000 + s, 256, ignored);
  }
  std::vector<double> us;
  uint32_t seed = 0;
  for (auto _ : state) {
    if (cold) g = std::make_shared<const CompiledGrammar>(parse_gbnf(grammar_text(which)), trie);
    walk(g, seed++, 256, us);
  }
  percentiles(state, us);
  state.SetLabel(std::string(kVocabNames[vocab]) + "/" + kGrammarNames[which] + (cold ? "/cold" : "/warm"));
}

void args_compile(benchmark::internal::Benchmark* b) {
  for (int v = 0; v < 2; ++v)
    for (int g = 0; g < 4; ++g) b->Args({v, g});
}
void args_mask(benchmark::internal::Benchmark* b) {
  for (int v = 0; v < 2; ++v)
    for (int g = 0; g < 4; ++g)
      for (int cold = 0; cold < 2; ++cold) b->Args({v, g, cold});
}

BENCHMARK(BM_GrammarCompile)->Apply(args_compile)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GrammarMask)->Apply(args_mask)->Unit(benchmark::kMillisecond)->Iterations(20);

}  // namespace

BENCHMARK_MAIN();

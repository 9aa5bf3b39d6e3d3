// ctest-labels: asan
// The C API's grammars on ../shared/models/stories260K.gguf (a SentencePiece
// vocabulary with byte fallback): qkv_generate's text and the tokens of
// qkv_session_sample follow the grammar whatever the sampler draws, the
// grammar ends generation only where it can end, a token outside the grammar
// is refused, and bad grammars and schemas are errors naming the problem.
#include <doctest/doctest.h>

#include <cstring>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qkv.h"
#include "tests/shared_data.h"

namespace {

struct Fixture {
  qkv_model* model = nullptr;
  qkv_session* s = nullptr;
  Fixture() {
    REQUIRE(qkv_model_load(qkv::test::shared_path("models/stories260K.gguf").c_str(), nullptr, &model) == QKV_OK);
    qkv_context_options o;
    qkv_context_options_init(&o);
    o.threads = 1;
    o.context = 512;
    REQUIRE(qkv_session_create(model, &o, &s) == QKV_OK);
  }
  ~Fixture() {
    qkv_session_free(s);
    qkv_model_free(model);
  }
  // Generated text only (the prompt's echo is cut off).
  std::string generate(const qkv_grammar* g, uint64_t seed, float temperature, int64_t n = 400) {
    REQUIRE(qkv_session_truncate(s, 0) == QKV_OK);
    qkv_generate_options o;
    qkv_generate_options_init(&o);
    o.n_predict = n;
    o.sampler.temperature = temperature;
    o.sampler.seed = seed;
    o.grammar = g;
    std::string text;
    qkv_generate_stats stats;
    REQUIRE(qkv_generate(s, "Once upon a time", &o, append, &text, &stats) == QKV_OK);
    last_stop = stats.stop_reason;
    const std::string echo = "Once upon a time";
    REQUIRE(text.compare(0, echo.size(), echo) == 0);
    return text.substr(echo.size());
  }
  static int append(const char* piece, size_t n, void* user) {
    static_cast<std::string*>(user)->append(piece, n);
    return 0;
  }
  std::string last_stop;
};

qkv_grammar* make(qkv_model* m, qkv_grammar_kind kind, const char* src) {
  qkv_grammar* g = nullptr;
  REQUIRE(qkv_grammar_create(m, kind, src, &g) == QKV_OK);
  return g;
}

}  // namespace

TEST_CASE("c api: generated text follows a GBNF grammar and ends where it can") {
  if (!qkv::test::have_shared("models/stories260K.gguf")) return;
  Fixture f;
  qkv_grammar* g = make(f.model, QKV_GRAMMAR_GBNF,
                        "root ::= \" \" item (\", \" item){1,3} \".\"\nitem ::= [a-z]{2,6} | [0-9]+ \" \" [a-z]+");
  const std::regex shape(R"( ([a-z]{2,6}|[0-9]+ [a-z]+)(, ([a-z]{2,6}|[0-9]+ [a-z]+)){1,3}\.)");
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    const std::string text = f.generate(g, seed, seed % 2 ? 1.5f : 0.0f);
    CHECK_MESSAGE(std::regex_match(text, shape), text);
    CHECK(f.last_stop == "eos");  // the grammar's end allows nothing but the end
  }
  qkv_grammar_free(g);
}

TEST_CASE("c api: JSON Schema and JSON object output parse and hold their constraints") {
  if (!qkv::test::have_shared("models/stories260K.gguf")) return;
  Fixture f;
  qkv_grammar* g = make(f.model, QKV_GRAMMAR_JSON_SCHEMA, R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 8}, "n": {"type": "integer", "minimum": -3, "maximum": 42},
      "tags": {"type": "array", "items": {"enum": ["a", "b", 7]}, "maxItems": 3}},
      "required": ["name", "n", "tags"], "additionalProperties": false})");
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    const std::string text = f.generate(g, seed, 1.0f);
    const auto j = nlohmann::json::parse(text);  // throws (fails the test) when not JSON
    REQUIRE(j.is_object());
    CHECK(j.size() == 3);
    CHECK(j.at("name").get<std::string>().size() <= 8 * 4);
    CHECK(j.at("n").get<int>() >= -3);
    CHECK(j.at("n").get<int>() <= 42);
    CHECK(j.at("tags").size() <= 3);
  }
  qkv_grammar_free(g);
  g = make(f.model, QKV_GRAMMAR_JSON_OBJECT, nullptr);
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    const std::string text = f.generate(g, seed, 0.7f, 2000);
    if (f.last_stop != "eos") continue;  // a random walk may still be inside the object at the limit
    CHECK(nlohmann::json::parse(text).is_object());
  }
  qkv_grammar_free(g);
}

TEST_CASE("c api: sampling with a grammar, and tokens from elsewhere") {
  if (!qkv::test::have_shared("models/stories260K.gguf")) return;
  Fixture f;
  qkv_grammar* g = make(f.model, QKV_GRAMMAR_GBNF, "root ::= \"yes\" | \"no\"");
  int32_t bos = 1;
  REQUIRE(qkv_session_prefill(f.s, &bos, 1, nullptr, 0) == QKV_OK);
  REQUIRE(qkv_session_set_grammar(f.s, g) == QKV_OK);
  qkv_grammar_free(g);  // the session keeps its own reference
  std::string text;
  for (int i = 0; i < 8; ++i) {
    int32_t t = -1;
    REQUIRE(qkv_session_sample(f.s, &t) == QKV_OK);
    if (qkv_is_eog(f.model, t)) break;
    char piece[64];
    int64_t n = 0;
    REQUIRE(qkv_token_piece(f.model, -1, t, 0, piece, sizeof piece, &n) == QKV_OK);
    text.append(piece, static_cast<size_t>(n));
    REQUIRE(qkv_session_step(f.s, t, nullptr, 0) == QKV_OK);
  }
  CHECK((text == "yes" || text == "no"));
  // qkv_session_grammar_accept: a token the grammar does not allow is refused.
  g = make(f.model, QKV_GRAMMAR_GBNF, "root ::= \"a\"+");
  REQUIRE(qkv_session_set_grammar(f.s, g) == QKV_OK);
  int64_t n = 0;
  int32_t ids[8];
  REQUIRE(qkv_tokenize(f.model, "b", 0, ids, 8, &n) == QKV_OK);
  CHECK(qkv_session_grammar_accept(f.s, ids[n - 1]) == QKV_ERR_INVALID_ARGUMENT);
  CHECK(std::strstr(qkv_last_error(), "does not continue the grammar"));
  CHECK(qkv_session_set_grammar(f.s, nullptr) == QKV_OK);
  CHECK(qkv_session_grammar_accept(f.s, ids[n - 1]) == QKV_ERR_INVALID_ARGUMENT);
  qkv_grammar_free(g);
}

TEST_CASE("c api: bad grammars and schemas name the problem") {
  if (!qkv::test::have_shared("models/stories260K.gguf")) return;
  Fixture f;
  auto error_of = [&](qkv_grammar_kind kind, const char* src) {
    qkv_grammar* g = nullptr;
    const qkv_status st = qkv_grammar_create(f.model, kind, src, &g);
    CHECK(g == nullptr);
    return st == QKV_ERR_INVALID_ARGUMENT ? std::string(qkv_last_error()) : std::string("status ") + qkv_status_name(st);
  };
  CHECK(error_of(QKV_GRAMMAR_GBNF, "root ::= x").find("undefined rule 'x' at line 1, column 10") != std::string::npos);
  CHECK(error_of(QKV_GRAMMAR_JSON_SCHEMA, R"({"type": "object", "properties": {"x": {"not": {}}}})")
            .find("unsupported JSON Schema keyword 'not' at #/properties/x") != std::string::npos);
  CHECK(error_of(QKV_GRAMMAR_JSON_SCHEMA, "{nope").find("not valid JSON") != std::string::npos);
  CHECK(error_of(static_cast<qkv_grammar_kind>(9), "x").find("unknown grammar kind 9") != std::string::npos);
  qkv_grammar* g = nullptr;
  CHECK(qkv_grammar_create(f.model, QKV_GRAMMAR_GBNF, nullptr, &g) == QKV_ERR_INVALID_ARGUMENT);
}

// The C API's grammars: compiled once against a model's vocabulary (the
// token trie is built by the first and kept with the model), attached to
// sessions, applied by qkv_session_sample and qkv_generate.
#include <nlohmann/json.hpp>

#include "runtime/c_api_internal.h"
#include "runtime/grammar/gbnf.h"
#include "runtime/grammar/json_schema.h"

using namespace qkv::capi;

namespace {

std::shared_ptr<const qkv::grammar::TokenTrie> trie_of(const qkv_model* model) {
  auto* m = const_cast<qkv_model*>(model);  // the trie is a cache; the model is otherwise unchanged
  std::lock_guard<std::mutex> lock(m->trie_mu);
  if (!m->trie) m->trie = std::make_shared<const qkv::grammar::TokenTrie>(tokenizer_of(model));
  return m->trie;
}

}  // namespace

namespace qkv::capi {

void watch_triggers(qkv_session& s, int32_t token) {
  const qkv::Tokenizer& tok = tokenizer_of(s.context->model);
  if (tok.is_eog(token)) return;
  s.trigger_window += tok.decode(s.last_sampled, token, true);
  size_t first = std::string::npos, end = 0, longest = 0;
  for (const std::string& t : s.triggers) {
    longest = std::max(longest, t.size());
    const size_t at = s.trigger_window.find(t);
    if (at < first) {
      first = at;
      end = at + t.size();
    }
  }
  if (first != std::string::npos) {
    const std::string rest = s.trigger_window.substr(end);
    s.matcher.emplace(s.lazy_grammar);
    s.lazy_grammar.reset();
    s.trigger_window.clear();
    // Text after the trigger that the grammar refuses: the model went its own
    // way, and the output stays free rather than forced into a broken call.
    if (!s.matcher->accept_text(rest)) s.matcher.reset();
    return;
  }
  // Keep only what could still be the start of a trigger.
  if (s.trigger_window.size() >= longest) s.trigger_window.erase(0, s.trigger_window.size() - (longest - 1));
}

}  // namespace qkv::capi

extern "C" {

qkv_status qkv_grammar_create(const qkv_model* model, qkv_grammar_kind kind, const char* source,
                              qkv_grammar** grammar) {
  QKV_REQUIRE(model);
  QKV_REQUIRE(grammar);
  *grammar = nullptr;
  const int k = raw_enum(kind);
  if (k != QKV_GRAMMAR_JSON_OBJECT) QKV_REQUIRE(source);
  return guarded([&] {
    std::string gbnf;
    switch (k) {
      case QKV_GRAMMAR_GBNF:
        gbnf = source;
        break;
      case QKV_GRAMMAR_JSON_SCHEMA: {
        nlohmann::ordered_json schema;  // ordered: properties come out in the declared order
        try {
          schema = nlohmann::ordered_json::parse(source, nullptr, true, false);
        } catch (const nlohmann::json::parse_error& e) {
          qkv::fail("JSON Schema: not valid JSON (", e.what(), ")");
        }
        gbnf = qkv::grammar::json_schema_to_gbnf(schema);
        break;
      }
      case QKV_GRAMMAR_JSON_OBJECT:
        gbnf = qkv::grammar::json_object_gbnf();
        break;
      default:
        qkv::fail("qkv_grammar_create: unknown grammar kind ", k,
                  " (QKV_GRAMMAR_GBNF, QKV_GRAMMAR_JSON_SCHEMA or QKV_GRAMMAR_JSON_OBJECT)");
    }
    auto g = std::make_unique<qkv_grammar>();
    g->compiled = std::make_shared<const qkv::grammar::CompiledGrammar>(qkv::grammar::parse_gbnf(gbnf), trie_of(model));
    *grammar = g.release();
    return QKV_OK;
  });
}

void qkv_grammar_free(qkv_grammar* grammar) { delete grammar; }

qkv_status qkv_session_set_grammar(qkv_session* session, const qkv_grammar* grammar) {
  QKV_REQUIRE(session);
  return guarded([&] {
    session->matcher.reset();
    session->lazy_grammar.reset();
    session->triggers.clear();
    session->trigger_window.clear();
    if (!grammar) return QKV_OK;
    QKV_CHECK(grammar->compiled->trie().vocab_size() == tokenizer_of(session->context->model).vocab_size(),
              "qkv_session_set_grammar: the grammar was compiled for another model's vocabulary");
    session->matcher.emplace(grammar->compiled);
    return QKV_OK;
  });
}

qkv_status qkv_session_set_grammar_lazy(qkv_session* session, const qkv_grammar* grammar, const char* const* triggers,
                                        int64_t n_triggers) {
  QKV_REQUIRE(session);
  QKV_REQUIRE(grammar);
  if (n_triggers <= 0 || !triggers) {
    return set_error(QKV_ERR_INVALID_ARGUMENT, "qkv_session_set_grammar_lazy: at least one trigger is needed");
  }
  return guarded([&] {
    std::vector<std::string> list;
    for (int64_t i = 0; i < n_triggers; ++i) {
      QKV_CHECK(triggers[i] && *triggers[i], "qkv_session_set_grammar_lazy: trigger ", i, " is NULL or empty");
      QKV_CHECK(std::strlen(triggers[i]) <= 256, "qkv_session_set_grammar_lazy: trigger ", i, " is longer than 256 bytes");
      list.emplace_back(triggers[i]);
    }
    QKV_CHECK(grammar->compiled->trie().vocab_size() == tokenizer_of(session->context->model).vocab_size(),
              "qkv_session_set_grammar_lazy: the grammar was compiled for another model's vocabulary");
    session->matcher.reset();
    session->lazy_grammar = grammar->compiled;
    session->triggers = std::move(list);
    session->trigger_window.clear();
    return QKV_OK;
  });
}

qkv_status qkv_session_grammar_accept(qkv_session* session, int32_t token) {
  QKV_REQUIRE(session);
  if (!session->matcher) return set_error(QKV_ERR_INVALID_ARGUMENT, "qkv_session_grammar_accept: the session has no grammar");
  if (!session->matcher->accept_token(token)) {
    return set_error(QKV_ERR_INVALID_ARGUMENT,
                     "qkv_session_grammar_accept: token " + std::to_string(token) + " does not continue the grammar");
  }
  return QKV_OK;
}

}  // extern "C"

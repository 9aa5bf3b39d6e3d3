#include "tools/serve/responses.h"

#include <chrono>
#include <random>

namespace qkv::serve {

using nlohmann::json;

ResponseMeta new_meta(bool chat, const std::string& model) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  static const char* hex = "0123456789abcdef";
  ResponseMeta m;
  m.chat = chat;
  m.id = chat ? "chatcmpl-" : "cmpl-";
  for (int i = 0; i < 24; ++i) m.id += hex[rng() & 15];
  m.created = std::chrono::duration_cast<std::chrono::seconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  m.model = model;
  return m;
}

json usage_json(int64_t prompt, int64_t cached, int64_t completion) {
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

namespace {
json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}
}  // namespace

json logprobs_json(bool chat, const std::vector<TokenOut>& tokens, int64_t offset0) {
  if (chat) {
    json content = json::array();
    for (const TokenOut& t : tokens) {
      json top = json::array();
      for (const TopToken& x : t.top) top.push_back({{"token", x.text}, {"logprob", x.logprob}, {"bytes", bytes_of(x.text)}});
      content.push_back({{"token", t.text}, {"logprob", t.logprob}, {"bytes", bytes_of(t.text)}, {"top_logprobs", top}});
    }
    return {{"content", content}, {"refusal", nullptr}};
  }
  json toks = json::array(), lps = json::array(), tops = json::array(), offs = json::array();
  int64_t off = offset0;
  for (const TokenOut& t : tokens) {
    toks.push_back(t.text);
    lps.push_back(t.logprob);
    json top = json::object();
    for (const TopToken& x : t.top) top[x.text] = x.logprob;
    tops.push_back(top);
    offs.push_back(off);
    off += static_cast<int64_t>(t.text.size());
  }
  return {{"tokens", toks}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offs}};
}

namespace {
json base(const ResponseMeta& m, const char* object) {
  return {{"id", m.id}, {"object", object}, {"created", m.created}, {"model", m.model},
          {"system_fingerprint", "qkv"}};
}
json reason(const std::string& r) { return r.empty() ? json(nullptr) : json(r); }
}  // namespace

json full_response(const ResponseMeta& m, const std::string& text, const json& logprobs,
                   const std::string& finish_reason, const json& usage) {
  json r = base(m, m.chat ? "chat.completion" : "text_completion");
  json choice = {{"index", 0}, {"logprobs", logprobs}, {"finish_reason", reason(finish_reason)}};
  if (m.chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}, {"refusal", nullptr}};
  } else {
    choice["text"] = text;
  }
  r["choices"] = json::array({choice});
  r["usage"] = usage;
  return r;
}

json chunk(const ResponseMeta& m, const std::string& text, const json& logprobs, const std::string& finish_reason,
           const std::string& role) {
  json r = base(m, m.chat ? "chat.completion.chunk" : "text_completion");
  json choice = {{"index", 0}, {"logprobs", logprobs}, {"finish_reason", reason(finish_reason)}};
  if (m.chat) {
    json delta = json::object();
    if (!role.empty()) delta["role"] = role;
    if (!text.empty() || !role.empty()) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  r["choices"] = json::array({choice});
  return r;
}

json chat_response(const ResponseMeta& m, const json& message, const json& logprobs, const std::string& finish_reason,
                   const json& usage) {
  json r = base(m, "chat.completion");
  r["choices"] = json::array(
      {{{"index", 0}, {"message", message}, {"logprobs", logprobs}, {"finish_reason", reason(finish_reason)}}});
  r["usage"] = usage;
  return r;
}

json delta_chunk(const ResponseMeta& m, const json& delta, const json& logprobs, const std::string& finish_reason) {
  json r = base(m, "chat.completion.chunk");
  r["choices"] = json::array(
      {{{"index", 0}, {"delta", delta}, {"logprobs", logprobs}, {"finish_reason", reason(finish_reason)}}});
  return r;
}

json usage_chunk(const ResponseMeta& m, const json& usage) {
  json r = base(m, m.chat ? "chat.completion.chunk" : "text_completion");
  r["choices"] = json::array();
  r["usage"] = usage;
  return r;
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string sse_event(const json& j) { return "data: " + dump(j) + "\n\n"; }

}  // namespace qkv::serve

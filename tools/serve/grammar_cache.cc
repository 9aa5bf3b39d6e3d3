#include "tools/serve/grammar_cache.h"

#include "tools/serve/api_error.h"

namespace qkv::serve {

GrammarHandle GrammarCache::get(const qkv_model* model, int kind, const std::string& source, const std::string& param) {
  std::string key = std::to_string(kind) + ":" + source;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->first == key) {
        entries_.splice(entries_.begin(), entries_, it);
        return it->second;
      }
    }
  }
  qkv_grammar* g = nullptr;
  if (qkv_grammar_create(model, static_cast<qkv_grammar_kind>(kind), source.c_str(), &g) != QKV_OK) {
    throw ApiError(400, qkv_last_error(), "invalid_request_error", param, "invalid_grammar");
  }
  GrammarHandle handle(g, qkv_grammar_free);
  std::lock_guard<std::mutex> lock(mu_);
  entries_.emplace_front(std::move(key), handle);
  if (entries_.size() > capacity_) entries_.pop_back();
  return handle;
}

}  // namespace qkv::serve

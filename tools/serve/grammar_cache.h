// Compiled grammars of recent requests, by kind and source: a client that
// sends the same schema again (extraction pipelines send one schema many
// times) skips compiling, and its stacks' token masks, computed once per
// grammar, stay warm. Least recently used first out.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "qkv.h"

namespace qkv::serve {

using GrammarHandle = std::shared_ptr<qkv_grammar>;

class GrammarCache {
 public:
  explicit GrammarCache(size_t capacity = 32) : capacity_(capacity) {}
  // The compiled grammar, or an ApiError 400 naming the problem (param: the request field).
  GrammarHandle get(const qkv_model* model, int kind, const std::string& source, const std::string& param);
  // Drops every grammar (they belong to a model being unloaded).
  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    entries_.clear();
  }

 private:
  size_t capacity_;
  std::mutex mu_;
  std::list<std::pair<std::string, GrammarHandle>> entries_;  // most recent first
};

}  // namespace qkv::serve

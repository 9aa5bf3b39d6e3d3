#include "runtime/grammar/token_trie.h"

#include <algorithm>
#include <numeric>

#include "kernels/error.h"
#include "runtime/tokenizer.h"

namespace qkv::grammar {

namespace {
constexpr size_t kMaxTokenBytes = 4096;  // longer pieces are never allowed (no real vocabulary has them)
}

TokenTrie::TokenTrie(const Tokenizer& tokenizer) : vocab_(tokenizer.vocab_size()) {
  texts_.resize(static_cast<size_t>(vocab_));
  for (int32_t t = 0; t < vocab_; ++t) {
    const int32_t type = tokenizer.token_type(t);
    if (tokenizer.is_eog(t) || (type != Tokenizer::kNormal && type != Tokenizer::kByte && type != Tokenizer::kUserDefined)) {
      continue;
    }
    texts_[static_cast<size_t>(t)] = tokenizer.decode(-1, t);
  }
  eog_ = tokenizer.eog_ids();
  build();
}

TokenTrie::TokenTrie(const std::vector<std::string>& texts, std::vector<int32_t> eog)
    : vocab_(static_cast<int64_t>(texts.size())), texts_(texts), eog_(std::move(eog)) {
  for (int32_t t : eog_) {
    QKV_CHECK(t >= 0 && t < vocab_, "token trie: end-of-generation token ", t, " outside the vocabulary");
    texts_[static_cast<size_t>(t)].clear();
  }
  build();
}

void TokenTrie::build() {
  std::vector<int32_t> order;
  for (int32_t t = 0; t < vocab_; ++t) {
    const auto& s = texts_[static_cast<size_t>(t)];
    if (!s.empty() && s.size() <= kMaxTokenBytes) order.push_back(t);
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    const auto& x = texts_[static_cast<size_t>(a)];
    const auto& y = texts_[static_cast<size_t>(b)];
    return x != y ? x < y : a < b;
  });
  same_next_.assign(static_cast<size_t>(vocab_), -1);
  byte_.assign(1, 0);
  depth_.assign(1, 0);
  token_.assign(1, -1);
  end_.assign(1, 0);
  std::vector<uint32_t> path{0};  // path[d]: the node at depth d on the current branch
  const std::string* prev = nullptr;
  for (int32_t t : order) {
    const std::string& s = texts_[static_cast<size_t>(t)];
    size_t common = 0;
    if (prev) {
      while (common < s.size() && common < prev->size() && s[common] == (*prev)[common]) ++common;
    }
    // Close the nodes below the common prefix.
    while (path.size() > common + 1) {
      end_[path.back()] = static_cast<uint32_t>(byte_.size());
      path.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      byte_.push_back(static_cast<uint8_t>(s[d]));
      depth_.push_back(static_cast<uint32_t>(d + 1));
      token_.push_back(-1);
      end_.push_back(0);
      path.push_back(static_cast<uint32_t>(byte_.size() - 1));
    }
    const uint32_t node = path.back();
    if (token_[node] < 0) {
      token_[node] = t;
    } else {  // the same text as an earlier token (a byte token and a one-byte piece)
      int32_t last = token_[node];
      while (same_next_[static_cast<size_t>(last)] >= 0) last = same_next_[static_cast<size_t>(last)];
      same_next_[static_cast<size_t>(last)] = t;
    }
    max_depth_ = std::max<uint32_t>(max_depth_, static_cast<uint32_t>(s.size()));
    prev = &s;
  }
  while (!path.empty()) {
    end_[path.back()] = static_cast<uint32_t>(byte_.size());
    path.pop_back();
  }
}

}  // namespace qkv::grammar

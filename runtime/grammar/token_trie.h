// The vocabulary as a byte trie in preorder, for computing which tokens a
// grammar state allows in one walk: tokens sharing a prefix share its steps,
// and a prefix the grammar rejects skips its whole subtree. Only tokens that
// produce text are in it (normal, byte and user-defined tokens such as
// "<tool_call>" or "<think>", which a tool-call grammar may spell); control,
// unknown and unused tokens are never allowed by a grammar, end-of-generation
// tokens only when the grammar can end. Built once per vocabulary.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace qkv {
class Tokenizer;
}

namespace qkv::grammar {

class TokenTrie {
 public:
  explicit TokenTrie(const Tokenizer& tokenizer);
  // From token texts directly (empty: not in the trie), for tests and benchmarks.
  TokenTrie(const std::vector<std::string>& texts, std::vector<int32_t> eog);

  int64_t vocab_size() const { return vocab_; }
  const std::vector<int32_t>& eog() const { return eog_; }
  const std::string& text(int32_t token) const { return texts_[static_cast<size_t>(token)]; }

  // Node 0 is the root (no byte). For node i > 0: its byte, its depth (1 for
  // the root's children), the node after its subtree, and the first token
  // whose text ends there (-1: none; more through same_next).
  size_t nodes() const { return byte_.size(); }
  uint8_t byte(size_t i) const { return byte_[i]; }
  uint32_t depth(size_t i) const { return depth_[i]; }
  uint32_t subtree_end(size_t i) const { return end_[i]; }
  int32_t token_at(size_t i) const { return token_[i]; }
  int32_t same_next(int32_t token) const { return same_next_[static_cast<size_t>(token)]; }
  uint32_t max_depth() const { return max_depth_; }

 private:
  void build();

  int64_t vocab_ = 0;
  std::vector<std::string> texts_;
  std::vector<int32_t> eog_;
  std::vector<uint8_t> byte_;
  std::vector<uint32_t> depth_, end_;
  std::vector<int32_t> token_, same_next_;
  uint32_t max_depth_ = 0;
};

}  // namespace qkv::grammar

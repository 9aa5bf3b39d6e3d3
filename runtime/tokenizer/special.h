// Special tokens in text: control, user-defined and unknown tokens are cut out
// of the text before the model's splitting and merging sees it, so they are
// never split. User-defined tokens are always matched; control and unknown
// tokens only when the caller asks (parse_special), as llama.cpp does.
//
// Matching follows llama.cpp's order: tokens longest first (ties by id), each
// taking its leftmost non-overlapping occurrences in the text not yet taken.
// A token with lstrip / rstrip also swallows the ASCII white space before /
// after it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace qkv {

struct SpecialToken {
  int32_t id = 0;
  std::string text;
  bool always = false;  // matched even without parse_special (user-defined tokens)
  bool lstrip = false, rstrip = false;
};

// A piece of the text: a special token (token >= 0) or raw text [offset, offset + length).
struct TextFragment {
  int32_t token = -1;
  size_t offset = 0, length = 0;
};

class SpecialTokens {
 public:
  SpecialTokens() = default;
  explicit SpecialTokens(std::vector<SpecialToken> tokens);

  std::vector<TextFragment> partition(const std::string& text, bool parse_special) const;
  bool empty() const { return tokens_.empty(); }

 private:
  std::vector<SpecialToken> tokens_;  // longest first
  // A byte trie over the tokens' texts: edge (node << 8 | byte) -> child.
  std::unordered_map<uint64_t, uint32_t> edges_;
  std::vector<int32_t> node_token_;  // node -> index into tokens_, or -1
};

}  // namespace qkv

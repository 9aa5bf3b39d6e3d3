#include "runtime/tokenizer/special.h"

#include <algorithm>
#include <cctype>
#include <string_view>

namespace qkv {

SpecialTokens::SpecialTokens(std::vector<SpecialToken> tokens) : tokens_(std::move(tokens)) {
  tokens_.erase(std::remove_if(tokens_.begin(), tokens_.end(), [](const SpecialToken& t) { return t.text.empty(); }),
                tokens_.end());
  std::stable_sort(tokens_.begin(), tokens_.end(), [](const SpecialToken& a, const SpecialToken& b) {
    return a.text.size() != b.text.size() ? a.text.size() > b.text.size() : a.id < b.id;
  });
  node_token_.push_back(-1);
  for (size_t k = 0; k < tokens_.size(); ++k) {
    uint32_t node = 0;
    for (unsigned char c : tokens_[k].text) {
      const uint64_t key = uint64_t(node) << 8 | c;
      auto it = edges_.find(key);
      if (it == edges_.end()) {
        it = edges_.emplace(key, static_cast<uint32_t>(node_token_.size())).first;
        node_token_.push_back(-1);
      }
      node = it->second;
    }
    if (node_token_[node] < 0) node_token_[node] = static_cast<int32_t>(k);  // the first of equal texts
  }
}

std::vector<TextFragment> SpecialTokens::partition(const std::string& text, bool parse_special) const {
  std::vector<TextFragment> frags;
  if (text.empty()) return frags;
  frags.push_back({-1, 0, text.size()});
  if (tokens_.empty()) return frags;

  // Which tokens occur at all (one pass over the trie), so the ordered
  // passes below run only for those.
  std::vector<char> present(tokens_.size(), 0);
  bool any = false;
  for (size_t i = 0; i < text.size(); ++i) {
    uint32_t node = 0;
    for (size_t j = i; j < text.size(); ++j) {
      auto it = edges_.find(uint64_t(node) << 8 | static_cast<unsigned char>(text[j]));
      if (it == edges_.end()) break;
      node = it->second;
      const int32_t k = node_token_[node];
      if (k >= 0 && (parse_special || tokens_[k].always)) present[k] = any = true;
    }
  }
  if (!any) return frags;

  const std::string_view all(text);
  std::vector<TextFragment> next;
  for (size_t k = 0; k < tokens_.size(); ++k) {
    if (!present[k]) continue;
    const SpecialToken& tok = tokens_[k];
    next.clear();
    for (const TextFragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      size_t off = f.offset, len = f.length;
      while (len > 0) {
        const size_t m = all.substr(0, off + len).find(tok.text, off);
        if (m == std::string_view::npos) break;
        size_t left = m - off;
        if (tok.lstrip) {
          while (left > 0 && std::isspace(static_cast<unsigned char>(text[off + left - 1]))) --left;
        }
        if (left > 0) next.push_back({-1, off, left});
        next.push_back({tok.id, m, tok.text.size()});
        size_t r = m + tok.text.size();
        size_t rlen = off + len - r;
        if (tok.rstrip) {
          while (rlen > 0 && std::isspace(static_cast<unsigned char>(text[r]))) ++r, --rlen;
        }
        off = r;
        len = rlen;
      }
      if (len > 0) next.push_back({-1, off, len});
    }
    frags.swap(next);
  }
  return frags;
}

}  // namespace qkv

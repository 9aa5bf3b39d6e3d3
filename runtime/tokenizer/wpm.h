// WordPiece (GGUF tokenizer.ggml.model = "bert": BERT, BGE, nomic-embed and
// other encoder vocabularies), as llama.cpp b4748's WPM tokenizer computes it.
//
// Tokens are stored in phantom-space form: "▁word" (U+2581) starts a word, a
// continuation piece is written bare (HF's "##ing" is "ing").
//
// Text -> words, one code point at a time: the code point is replaced by the
// first code point of its canonical decomposition (é -> e, a Hangul syllable ->
// its leading jamo), then white space ends the word, NUL, U+FFFD and control /
// format / private-use / surrogate code points are dropped, punctuation, ASCII
// symbols and CJK ideographs each become a word of their own, and everything
// else is lowercased (simple per-code-point mapping, no final-sigma rule) and
// appended to the current word. Each word "▁word" is then matched greedily,
// longest token first, from its start; if some position has no token the whole
// word becomes one unknown token. Words have no length limit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace qkv {

class WpmModel {
 public:
  // Every non-empty token text is matchable (llama.cpp looks texts up among
  // all tokens). Throws qkv::Error on a repeated token text or an unk_id
  // outside the vocabulary.
  WpmModel(const std::vector<std::string>& tokens, int32_t unk_id, const std::string& where);

  // Appends the ids of text (no special tokens inside: the caller cuts them out).
  void encode(const std::string& text, std::vector<int32_t>* out) const;
  // The id of a token text, or -1.
  int32_t token_id(std::string_view text) const;

  // The words of text after normalization, each with its leading "▁".
  static std::vector<std::string> words(const std::string& text);
  // llama.cpp's clean-up of detokenized WordPiece text: no space before
  // "?", "!", ".", ","; " ' " becomes "'"; no space before "'s", "'m", "'re", "'ve".
  static std::string clean_spaces(const std::string& text);

 private:
  std::vector<std::string> texts_;  // owns the strings the index views
  std::unordered_map<std::string_view, int32_t> index_;
  size_t max_token_bytes_ = 0;
  int32_t unk_id_ = 0;
};

}  // namespace qkv

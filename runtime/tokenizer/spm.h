// SentencePiece BPE with byte fallback (GGUF tokenizer.ggml.model = "llama":
// Llama 2, Gemma, Phi-3 vocabularies).
//
// Text arrives with spaces already written as "▁" (U+2581). It is split into
// UTF-8 characters and the adjacent pair whose concatenation is a piece with
// the highest score merges (leftmost on ties) until none applies; a symbol
// that is not a piece falls back to its bytes' <0xNN> tokens (or unknown).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace qkv {

class SpmModel {
 public:
  SpmModel() = default;
  // mergeable[i]: token i may come out of merging (normal and user-defined
  // pieces); byte_ids[b]: the <0xNN> token of byte b or -1.
  SpmModel(const std::vector<std::string>& pieces, const std::vector<float>& scores,
           const std::vector<bool>& mergeable, const int32_t (&byte_ids)[256], int32_t unk_id);

  void encode(const std::string& escaped, std::vector<int32_t>* out) const;
  // The id of a mergeable piece, or -1.
  int32_t piece_id(const std::string& piece) const;

 private:
  void encode_segment(const std::string& norm, size_t begin, size_t end, std::vector<int32_t>* out) const;

  std::vector<float> scores_;
  std::unordered_map<std::string, int32_t> index_;  // mergeable pieces -> id
  int32_t byte_ids_[256] = {};
  int32_t unk_id_ = 0;
  // True when no mergeable piece has a "▁" after a non-"▁" character: then
  // encode() may split the text before each word's leading "▁" run.
  bool split_at_spaces_ = false;
};

}  // namespace qkv

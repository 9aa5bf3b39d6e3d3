// Llama-style SentencePiece BPE tokenizer with byte fallback.
//
// Pieces are kept in SentencePiece form ("▁" U+2581 for a space). Encoding:
// spaces become "▁", a "▁" is prepended to non-empty text (the dummy prefix),
// the text is split into UTF-8 characters, and the adjacent pair whose
// concatenation is a vocabulary piece with the highest score is merged
// (leftmost on ties) until none applies; a symbol that is not a piece falls
// back to its bytes' <0xNN> tokens. Decoding maps "▁" back to a space and byte
// tokens to raw bytes, drops control tokens (BOS/EOS) and drops the space the
// dummy prefix added at the start.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/gguf.h"

namespace qkv {

class Tokenizer {
 public:
  // SentencePiece piece types, as in GGUF's tokenizer.ggml.token_type.
  enum TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

  // llama2.c tokenizer.bin: int32 max_token_length, then per token f32 score,
  // int32 length, bytes. vocab_size < 0: read tokens until the end of the file;
  // otherwise exactly vocab_size tokens (run.c takes it from the model).
  static Tokenizer from_llama2c(const std::string& path, int64_t vocab_size = -1);
  // GGUF tokenizer.ggml.* keys (tokenizer.ggml.model must be "llama").
  static Tokenizer from_gguf(const GGUFFile& file);
  // A GGUF file when it starts with "GGUF", else a llama2.c tokenizer.bin.
  static Tokenizer load(const std::string& path, int64_t vocab_size = -1);
  // From pieces (SentencePiece form), scores and types; ids as given. Validates.
  static Tokenizer from_pieces(std::vector<std::string> pieces, std::vector<float> scores,
                               std::vector<int32_t> types, int32_t bos_id, int32_t eos_id, int32_t unk_id,
                               const std::string& where = "tokenizer");
  // A byte-level llama-style vocabulary for synthetic models: <unk>, <s>, </s>,
  // the 256 <0xNN> byte tokens, then filler pieces up to vocab_size (>= 259).
  static Tokenizer byte_level(int64_t vocab_size);

  std::vector<int32_t> encode(const std::string& text, bool bos, bool eos) const;
  // One token's text as run.c prints it: the leading space of the piece after
  // BOS is dropped, <0xNN> gives the raw byte (possibly part of a UTF-8
  // character), control tokens give "".
  std::string decode(int32_t prev_token, int32_t token) const;
  // A whole sequence: control tokens are skipped, the dummy-prefix space of the
  // first text piece is dropped, so decode(encode(s, ...)) == s.
  std::string decode(const std::vector<int32_t>& tokens) const;

  int64_t vocab_size() const { return static_cast<int64_t>(pieces_.size()); }
  int32_t bos_id() const { return bos_id_; }
  int32_t eos_id() const { return eos_id_; }
  int32_t unk_id() const { return unk_id_; }
  bool add_bos() const { return add_bos_; }  // GGUF tokenizer.ggml.add_bos_token (default true)

  const std::string& piece(int32_t id) const;  // SentencePiece form ("▁" for space)
  float score(int32_t id) const;
  int32_t token_type(int32_t id) const;
  // The id of a normal piece, or -1.
  int32_t piece_id(const std::string& piece) const;

 private:
  void build_index(const std::string& where);
  void check_id(int32_t id) const;
  // BPE over norm[begin, end), appending ids.
  void encode_segment(const std::string& norm, size_t begin, size_t end, std::vector<int32_t>* out) const;

  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::vector<int32_t> types_;
  std::vector<std::string> decoded_;  // text of each token for decode()
  std::unordered_map<std::string, int32_t> index_;  // mergeable pieces -> id
  int32_t byte_ids_[256] = {};  // byte -> its <0xNN> token, -1 if absent
  int32_t bos_id_ = 1, eos_id_ = 2, unk_id_ = 0;
  bool add_bos_ = true;
  // True when no mergeable piece has a "▁" after a non-"▁" character: then
  // encode() may split the text before each word's leading "▁" run.
  bool split_at_spaces_ = false;
};

}  // namespace qkv

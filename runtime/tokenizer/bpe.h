// Byte-level BPE (GPT-2 style; GGUF tokenizer.ggml.model = "gpt2").
//
// Tokens are stored byte-encoded: every byte of the text is one printable
// character (GPT-2's bytes_to_unicode: bytes 0x21-0x7E, 0xA1-0xAC and
// 0xAE-0xFF stand for themselves, the other 68 map to U+0100 onwards, so a
// space is "Ġ"). Encoding: the pre-tokenizer splits the text, each piece is
// byte-encoded, and adjacent symbols merge by rank (tokenizer.ggml.merges,
// lowest rank first, leftmost on ties) until no merge applies.
//
// A Hugging Face tokenizer.json BPE may instead be SentencePiece-style (Gemma,
// Llama 2): no byte encoding, symbols are the UTF-8 characters of the
// normalized text ("▁" for a space), and a symbol that is no token falls back
// to its bytes' <0xNN> tokens (byte_fallback) or the unknown token.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/tokenizer/normalize.h"
#include "runtime/tokenizer/pretokenizer.h"

namespace qkv {

// The character (UTF-8) that stands for byte b, and back (-1: not a byte character).
const std::string& bpe_byte_char(unsigned char b);
int bpe_char_byte(uint32_t codepoint);
// A byte-encoded token text -> the bytes it stands for; false when some
// character is not a byte character.
bool bpe_decode_bytes(const std::string& piece, std::string* out);

// Everything that selects the encoding besides tokens and merges.
struct BpeOptions {
  PreTokenizerSpec pre;                    // split patterns, nfc, ignore_merges, add_bos
  std::vector<NormalizerStep> normalizer;  // before splitting, after pre.nfc
  bool byte_level = true;     // symbols are byte characters (GPT-2); false: UTF-8 characters
  bool byte_fallback = false;  // a symbol that is no token becomes its bytes' <0xNN> tokens
  int32_t unk_id = -1;         // else this token, when there is one
  bool fuse_unk = false;       // consecutive unknown symbols give one unknown token
  // Hugging Face's Metaspace pre-tokenizer (before the split patterns): spaces
  // become `metaspace`, which is prepended to text not starting with it
  // (kFirst: only to the text at the start of the input).
  std::string metaspace;
  enum class Prepend { kNever, kAlways, kFirst } metaspace_prepend = Prepend::kNever;
};

class BpeModel {
 public:
  // pieces: every token's text (byte-encoded); mergeable[i]: token i may come
  // out of merging (normal tokens). merges: "left right" strings in rank order.
  BpeModel(const std::vector<std::string>& pieces, const std::vector<bool>& mergeable,
           const std::vector<std::string>& merges, const std::string& pre, const std::string& where);
  BpeModel(const std::vector<std::string>& pieces, const std::vector<bool>& mergeable,
           const std::vector<std::string>& merges, BpeOptions options, const std::string& where);

  const PreTokenizerSpec& pre_spec() const { return pre_.spec(); }
  bool byte_level() const { return options_.byte_level; }
  const std::string& pre_name() const { return pre_name_; }
  const std::vector<std::string>& merges() const { return merges_; }
  // Plain text (no special tokens in it) -> ids appended to out; at_start:
  // the text begins the input (not after a special token).
  void encode(const std::string& text, std::vector<int32_t>* out, bool at_start = true) const;

 private:
  void encode_word(const std::string& word, std::vector<int32_t>* out) const;
  // A final symbol that is no token: byte characters, <0xNN> tokens, or unknown.
  void encode_unknown(const std::string& symbol, bool* last_unk, std::vector<int32_t>* out) const;

  BpeOptions options_;
  PreTokenizer pre_;
  std::string pre_name_;
  std::vector<std::string> merges_;
  std::unordered_map<std::string, int32_t> ids_;    // byte-encoded text -> id
  std::unordered_map<std::string, int32_t> ranks_;  // "left right" -> rank
  int32_t byte_ids_[256] = {};                     // byte fallback: byte -> <0xNN> token or -1
};

}  // namespace qkv

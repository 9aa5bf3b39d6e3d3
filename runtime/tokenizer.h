// The tokenizer: a vocabulary (tokens, types, special ids) and one of these
// models behind it (runtime/tokenizer/):
// - SentencePiece BPE with byte fallback (GGUF tokenizer.ggml.model "llama",
//   llama2.c tokenizer.bin): Llama 2, Gemma, Phi-3. Pieces are kept in
//   SentencePiece form ("▁" U+2581 for a space); spaces become "▁" and, when
//   the vocabulary asks (add_space_prefix, the default), a "▁" is prepended to
//   the text and to the text after each special token. Decoding maps "▁" back
//   to a space, byte tokens to raw bytes, and drops that prepended space.
// - Byte-level BPE (tokenizer.ggml.model "gpt2"): Llama 3, Qwen, GPT-2,
//   StarCoder, DeepSeek, ... with the named pre-tokenizer of tokenizer.ggml.pre.
// - A Hugging Face tokenizer.json BPE (runtime/tokenizer/hf_json.cc): byte-level
//   or SentencePiece-style, with the file's own split regexes and normalizer.
// - WordPiece (tokenizer.ggml.model "bert", runtime/tokenizer/wpm.h): BERT-family
//   encoders. BOS is [CLS]; the end token is the separator [SEP] (there is
//   usually no EOS). Decoding puts a space before each word-initial piece
//   ("▁word") except at the start and joins continuation pieces.
//
// Special tokens (control, user-defined) are cut out of the text first and
// never split: user-defined ones always, control ones only with parse_special.
// Control tokens decode to nothing unless asked (special). The end-of-
// generation set holds EOS, EOT/EOM and the turn-end tokens found by text
// (<|eot_id|>, <|im_end|>, <end_of_turn>, <|end|>, ...), as llama.cpp derives it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/gguf.h"

namespace qkv {

class BpeModel;
class SpmModel;
class SpecialTokens;
class WpmModel;

class Tokenizer {
 public:
  // SentencePiece piece types, as in GGUF's tokenizer.ggml.token_type.
  enum TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

  // llama2.c tokenizer.bin: int32 max_token_length, then per token f32 score,
  // int32 length, bytes. vocab_size < 0: read tokens until the end of the file;
  // otherwise exactly vocab_size tokens (run.c takes it from the model).
  static Tokenizer from_llama2c(const std::string& path, int64_t vocab_size = -1);
  // GGUF tokenizer.ggml.* keys (tokenizer.ggml.model "llama", "gpt2" or "bert").
  // "bert": ids from bos_token_id ([CLS], default 101), seperator_token_id
  // (sic; default 102), unknown_token_id (100), padding_token_id (0),
  // mask_token_id (103), eos_token_id (none), as llama.cpp reads them.
  static Tokenizer from_gguf(const GGUFFile& file);
  // Special ids of a WordPiece vocabulary; -1 = none (cls, sep and unk are required).
  struct WordPieceIds {
    int32_t cls = 101, sep = 102, unk = 100, pad = 0, mask = 103, eos = -1;
  };
  // A WordPiece vocabulary: tokens in phantom-space form ("▁word" starts a
  // word, continuation pieces bare) and their types. add_bos is true and
  // add_eos false (the file's add_bos_token / add_eos_token are not read:
  // llama.cpp adds [CLS] and [SEP] whatever they say).
  static Tokenizer from_wordpiece(std::vector<std::string> tokens, std::vector<int32_t> types,
                                  const WordPieceIds& ids, const std::string& where = "tokenizer");
  // A byte-level BPE vocabulary: byte-encoded tokens, their types, merges in
  // rank order ("left right"), the pre-tokenizer name; bos/eos -1 when absent.
  static Tokenizer from_bpe(std::vector<std::string> tokens, std::vector<int32_t> types,
                            const std::vector<std::string>& merges, const std::string& pre, int32_t bos_id,
                            int32_t eos_id, const std::string& where = "tokenizer");
  // Hugging Face tokenizer.json (BPE models), with tokenizer_config.json from
  // the same directory when present (bos_token, eos_token, add_bos_token,
  // add_eos_token, chat_template). vocab_size > the file's tokens: the ids
  // past them are unused padding (models pad their embeddings).
  static Tokenizer from_hf_json(const std::string& path, int64_t vocab_size = -1);
  // Whether path names a tokenizer.json (".json", or starts with "{").
  static bool is_hf_json(const std::string& path);
  // A GGUF file when it starts with "GGUF", a tokenizer.json, else a llama2.c tokenizer.bin.
  static Tokenizer load(const std::string& path, int64_t vocab_size = -1);
  // From pieces (SentencePiece form), scores and types; ids as given. Validates.
  static Tokenizer from_pieces(std::vector<std::string> pieces, std::vector<float> scores,
                               std::vector<int32_t> types, int32_t bos_id, int32_t eos_id, int32_t unk_id,
                               const std::string& where = "tokenizer");
  // A byte-level llama-style vocabulary for synthetic models: <unk>, <s>, </s>,
  // the 256 <0xNN> byte tokens, then filler pieces up to vocab_size (>= 259).
  static Tokenizer byte_level(int64_t vocab_size);

  // Text -> ids, BOS first / EOS last when asked. parse_special: control
  // tokens written in the text ("<|im_start|>") become their ids.
  // WordPiece: bos puts [CLS] first and eos puts the separator [SEP] last
  // (WordPiece's end token, whether or not the vocabulary has an EOS).
  std::vector<int32_t> encode(const std::string& text, bool bos, bool eos, bool parse_special = false) const;
  // One token's text as run.c prints it: the leading space of the piece after
  // BOS is dropped (SentencePiece; WordPiece after [CLS]), <0xNN> gives the raw
  // byte (possibly part of a UTF-8 character), control tokens give "" unless
  // special. WordPiece's space clean-up needs the neighbours: decode(tokens) does it.
  std::string decode(int32_t prev_token, int32_t token, bool special = false) const;
  // A whole sequence: control tokens are skipped unless special, the
  // prepended space is dropped, so decode(encode(s, ...)) == s.
  // WordPiece gives the normalized (lowercased) words, separated by spaces,
  // with llama.cpp's clean-up (no space before . , ? !, "don't", "it's").
  std::string decode(const std::vector<int32_t>& tokens, bool special = false) const;

  int64_t vocab_size() const { return static_cast<int64_t>(pieces_.size()); }
  int32_t bos_id() const { return bos_id_; }
  int32_t eos_id() const { return eos_id_; }
  int32_t unk_id() const { return unk_id_; }
  bool add_bos() const { return add_bos_; }  // GGUF tokenizer.ggml.add_bos_token (SentencePiece default true)
  bool add_eos() const { return add_eos_; }  // GGUF tokenizer.ggml.add_eos_token (default false)
  bool is_bpe() const { return bpe_ != nullptr; }
  bool is_wordpiece() const { return wpm_ != nullptr; }
  // The separator token ([SEP] of WordPiece vocabularies; GGUF
  // tokenizer.ggml.seperator_token_id otherwise), -1 when there is none.
  int32_t sep_id() const { return sep_id_; }
  // WordPiece [PAD] and [MASK]; -1 when absent and for other vocabularies.
  int32_t pad_id() const { return pad_id_; }
  int32_t mask_id() const { return mask_id_; }
  // tokenizer_config.json's chat_template (tokenizer.json loads only; GGUF
  // files keep theirs in tokenizer.chat_template).
  const std::string& chat_template() const { return chat_template_; }
  // Byte-level BPE only (empty otherwise): the merges in rank order and tokenizer.ggml.pre.
  const std::vector<std::string>& bpe_merges() const;
  std::string bpe_pre() const;
  // End-of-generation tokens, ascending; generation stops at any of them.
  const std::vector<int32_t>& eog_ids() const { return eog_; }
  bool is_eog(int32_t id) const;

  const std::string& piece(int32_t id) const;  // SentencePiece form ("▁" for space)
  float score(int32_t id) const;
  int32_t token_type(int32_t id) const;
  // The id of a normal piece, or -1.
  int32_t piece_id(const std::string& piece) const;

 private:
  void build_index(const std::string& where);
  // The special-token matcher and the end-of-generation set, from the types
  // and texts (general_name: Phi-3 vocabularies strip spaces after special tokens).
  void build_special(const std::string& general_name, int32_t eot_id, int32_t eom_id);
  void check_id(int32_t id) const;
  bool byte_level() const;  // token texts are byte-encoded (byte-level BPE)
  // Whether a decoded piece loses its leading space after token prev (SentencePiece's prefix).
  bool drops_prefix_space(bool first, int32_t token) const;

  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::vector<int32_t> types_;
  std::vector<std::string> decoded_;  // text of each token for decode()
  int32_t byte_ids_[256] = {};  // byte -> its <0xNN> token, -1 if absent
  int32_t bos_id_ = 1, eos_id_ = 2, unk_id_ = 0;
  int32_t sep_id_ = -1, pad_id_ = -1, mask_id_ = -1;
  bool add_bos_ = true, add_eos_ = false;
  bool add_space_prefix_ = true;  // SentencePiece's dummy prefix
  std::vector<int32_t> eog_;
  std::vector<uint8_t> strip_;  // per token: 1 lstrip, 2 rstrip (tokenizer.json added tokens); may be short
  std::string chat_template_;
  std::shared_ptr<const SpmModel> spm_;
  std::shared_ptr<const BpeModel> bpe_;
  std::shared_ptr<const WpmModel> wpm_;
  std::shared_ptr<const SpecialTokens> special_;
};

}  // namespace qkv

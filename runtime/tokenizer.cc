#include "runtime/tokenizer.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "kernels/error.h"
#include "runtime/tokenizer/bpe.h"
#include "runtime/tokenizer/special.h"
#include "runtime/tokenizer/spm.h"
#include "runtime/tokenizer/vocab_text.h"
#include "runtime/tokenizer/wpm.h"

namespace qkv {

namespace {

constexpr int64_t kMaxVocab = int64_t(1) << 24;

// Token texts that end a turn (llama.cpp's list): with EOS, EOT and EOM they
// form the end-of-generation set. The last is DeepSeek's "<｜end▁of▁sentence｜>"
// in octal escapes (a hex escape would swallow the letters after it).
const char* const kEogTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<\357\275\234end\342\226\201of\342\226\201sentence\357\275\234>",
};

void check_counts(size_t n_pieces, size_t n_other, const char* what, const std::string& where) {
  QKV_CHECK(n_pieces > 0, "tokenizer '", where, "' has no tokens");
  QKV_CHECK(int64_t(n_pieces) <= kMaxVocab, "tokenizer '", where, "' has ", n_pieces, " tokens, too many");
  QKV_CHECK(n_other == n_pieces, "tokenizer '", where, "' has ", n_other, " ", what, " for ", n_pieces, " tokens");
}

}  // namespace

Tokenizer Tokenizer::from_pieces(std::vector<std::string> pieces, std::vector<float> scores,
                                 std::vector<int32_t> types, int32_t bos_id, int32_t eos_id, int32_t unk_id,
                                 const std::string& where) {
  check_counts(pieces.size(), scores.size(), "scores", where);
  check_counts(pieces.size(), types.size(), "token types", where);
  const int64_t n = static_cast<int64_t>(pieces.size());
  for (int32_t id : {bos_id, eos_id, unk_id}) {
    QKV_CHECK(id >= 0 && id < n, "tokenizer '", where, "': special token id ", id, " is outside the vocabulary of ", n);
  }
  for (size_t i = 0; i < scores.size(); ++i) {
    QKV_CHECK(!std::isnan(scores[i]), "tokenizer '", where, "': token ", i, " has a NaN score");
  }
  Tokenizer t;
  t.pieces_ = std::move(pieces);
  t.scores_ = std::move(scores);
  t.types_ = std::move(types);
  t.bos_id_ = bos_id;
  t.eos_id_ = eos_id;
  t.unk_id_ = unk_id;
  t.build_index(where);
  return t;
}

Tokenizer Tokenizer::from_bpe(std::vector<std::string> tokens, std::vector<int32_t> types,
                              const std::vector<std::string>& merges, const std::string& pre, int32_t bos_id,
                              int32_t eos_id, const std::string& where) {
  check_counts(tokens.size(), types.size(), "token types", where);
  const int64_t n = static_cast<int64_t>(tokens.size());
  for (int32_t id : {bos_id, eos_id}) {
    QKV_CHECK(id >= -1 && id < n, "tokenizer '", where, "': special token id ", id, " is outside the vocabulary of ",
              n);
  }
  Tokenizer t;
  t.pieces_ = std::move(tokens);
  t.scores_.assign(t.pieces_.size(), 0.0f);
  t.types_ = std::move(types);
  t.bos_id_ = bos_id;
  t.eos_id_ = eos_id;
  t.unk_id_ = -1;
  t.add_space_prefix_ = false;
  try {
    t.bpe_ = std::make_shared<const BpeModel>(t.pieces_, std::vector<bool>(t.pieces_.size(), true), merges, pre,
                                              where);
  } catch (const Error& e) {
    fail("tokenizer '", where, "': ", e.what());
  }
  t.add_bos_ = t.bpe_->pre_spec().add_bos && bos_id >= 0;
  t.build_index(where);
  return t;
}

Tokenizer Tokenizer::from_wordpiece(std::vector<std::string> tokens, std::vector<int32_t> types,
                                    const WordPieceIds& ids, const std::string& where) {
  check_counts(tokens.size(), types.size(), "token types", where);
  const int64_t n = static_cast<int64_t>(tokens.size());
  auto check = [&](int32_t id, const char* what, bool required) {
    QKV_CHECK(id >= (required ? 0 : -1) && id < n, "tokenizer '", where, "': the WordPiece ", what, " id ", id,
              " is outside the vocabulary of ", n, " tokens", required ? " (a WordPiece vocabulary needs it)" : "");
  };
  check(ids.cls, "[CLS] (BOS)", true);
  check(ids.sep, "[SEP] (separator)", true);
  check(ids.unk, "[UNK] (unknown token)", true);
  check(ids.pad, "[PAD]", false);
  check(ids.mask, "[MASK]", false);
  check(ids.eos, "EOS", false);
  Tokenizer t;
  t.pieces_ = std::move(tokens);
  t.scores_.assign(t.pieces_.size(), 0.0f);
  t.types_ = std::move(types);
  t.bos_id_ = ids.cls;
  t.eos_id_ = ids.eos;
  t.unk_id_ = ids.unk;
  t.sep_id_ = ids.sep;
  t.pad_id_ = ids.pad;
  t.mask_id_ = ids.mask;
  t.add_bos_ = true;
  t.add_eos_ = false;
  t.add_space_prefix_ = false;
  t.wpm_ = std::make_shared<const WpmModel>(t.pieces_, ids.unk, where);
  t.build_index(where);
  return t;
}

void Tokenizer::build_index(const std::string& where) {
  std::fill(std::begin(byte_ids_), std::end(byte_ids_), -1);
  decoded_.assign(pieces_.size(), std::string());
  std::vector<bool> mergeable(pieces_.size(), false);
  for (size_t i = 0; i < pieces_.size(); ++i) {
    const int32_t id = static_cast<int32_t>(i);
    const std::string& p = pieces_[i];
    switch (types_[i]) {
      case kNormal:
        mergeable[i] = true;
        if (byte_level()) {
          if (!bpe_decode_bytes(p, &decoded_[i])) decoded_[i] = p;  // not byte-encoded: as written
        } else {
          decoded_[i] = unescape_spaces(p);
        }
        break;
      case kUserDefined:
        mergeable[i] = true;
        decoded_[i] = byte_level() ? p : unescape_spaces(p);
        break;
      case kByte: {
        const int b = parse_byte_piece(p);
        QKV_CHECK(b >= 0, "tokenizer '", where, "': byte token ", i, " has piece '", p, "', not <0xNN>");
        if (byte_ids_[b] < 0) byte_ids_[b] = id;
        decoded_[i] = std::string(1, static_cast<char>(b));
        break;
      }
      case kControl:
        break;  // decodes to nothing
      case kUnknown:
      case kUnused:
        decoded_[i] = byte_level() ? p : unescape_spaces(p);
        break;
      default:
        fail("tokenizer '", where, "': token ", i, " has unknown type ", types_[i]);
    }
  }
  if (!bpe_ && !wpm_) spm_ = std::make_shared<const SpmModel>(pieces_, scores_, mergeable, byte_ids_, unk_id_);
  build_special("", -1, -1);
}

void Tokenizer::build_special(const std::string& general_name, int32_t eot_id, int32_t eom_id) {
  std::string name = general_name;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  const bool phi3 = name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos;

  std::vector<int32_t> eog;
  for (int32_t id : {eos_id_, eot_id, eom_id}) {
    if (id >= 0) eog.push_back(id);
  }
  for (size_t i = 0; i < pieces_.size(); ++i) {
    for (const char* t : kEogTexts) {
      if (pieces_[i] == t) {
        eog.push_back(static_cast<int32_t>(i));
        if (types_[i] != kControl) {  // a turn end is a control token whatever the file says
          types_[i] = kControl;
          decoded_[i].clear();
        }
      }
    }
  }
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
  eog_ = std::move(eog);

  std::vector<SpecialToken> special;
  for (size_t i = 0; i < pieces_.size(); ++i) {
    const int32_t type = types_[i];
    if (type != kControl && type != kUserDefined && type != kUnknown) continue;
    SpecialToken s;
    s.id = static_cast<int32_t>(i);
    s.text = pieces_[i];
    s.always = type == kUserDefined;
    // Phi-3: special tokens swallow the white space after them, except <unk>, <s>, <|endoftext|>.
    s.rstrip = phi3 && s.text != "<unk>" && s.text != "<s>" && s.text != "<|endoftext|>";
    if (i < strip_.size()) {
      s.lstrip = s.lstrip || (strip_[i] & 1);
      s.rstrip = s.rstrip || (strip_[i] & 2);
    }
    special.push_back(std::move(s));
  }
  special_ = std::make_shared<const SpecialTokens>(std::move(special));
}

const std::vector<std::string>& Tokenizer::bpe_merges() const {
  static const std::vector<std::string> none;
  return bpe_ ? bpe_->merges() : none;
}
std::string Tokenizer::bpe_pre() const { return bpe_ ? bpe_->pre_name() : std::string(); }

bool Tokenizer::byte_level() const { return bpe_ && bpe_->byte_level(); }

bool Tokenizer::is_eog(int32_t id) const { return std::binary_search(eog_.begin(), eog_.end(), id); }

std::vector<int32_t> Tokenizer::encode(const std::string& text, bool bos, bool eos, bool parse_special) const {
  QKV_CHECK(!pieces_.empty(), "encode: the tokenizer has no vocabulary");
  QKV_CHECK(!bos || bos_id_ >= 0, "encode: this vocabulary has no BOS token");
  const int32_t end_id = wpm_ ? sep_id_ : eos_id_;  // WordPiece ends a text with [SEP]
  QKV_CHECK(!eos || end_id >= 0, "encode: this vocabulary has no EOS token");
  std::vector<int32_t> out;
  if (bos) out.push_back(bos_id_);
  bool after_special = true;  // SentencePiece prefixes the first text and the text after a special token
  for (const TextFragment& f : special_->partition(text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
      continue;
    }
    const std::string piece = text.substr(f.offset, f.length);
    if (bpe_) {
      bpe_->encode(piece, &out, f.offset == 0);
    } else if (wpm_) {
      wpm_->encode(piece, &out);
    } else {
      spm_->encode((add_space_prefix_ && after_special ? kSpaceMark : std::string()) + escape_spaces(piece), &out);
    }
    after_special = false;
  }
  if (eos) out.push_back(end_id);
  return out;
}

void Tokenizer::check_id(int32_t id) const {
  QKV_CHECK(id >= 0 && int64_t(id) < vocab_size(), "token id ", id, " is outside the vocabulary of ", vocab_size());
}

bool Tokenizer::drops_prefix_space(bool first, int32_t token) const {
  // WordPiece: the "▁" of a word-initial piece becomes a space except at the start.
  if (!wpm_ && (byte_level() || !add_space_prefix_)) return false;
  if (!first || types_[token] == kByte) return false;
  const std::string& text = decoded_[token];
  return !text.empty() && text[0] == ' ';
}

std::string Tokenizer::decode(int32_t prev_token, int32_t token, bool special) const {
  check_id(token);
  if (special && types_[token] == kControl) return pieces_[token];
  // SentencePiece drops the dummy-prefix space of the first piece after BOS.
  const bool first = prev_token == bos_id_ && bos_id_ >= 0;
  if (drops_prefix_space(first, token)) return decoded_[token].substr(1);
  return decoded_[token];
}

std::string Tokenizer::decode(const std::vector<int32_t>& tokens, bool special) const {
  std::string out;
  bool first = true;  // the next text piece follows the start or a special token
  for (int32_t t : tokens) {
    check_id(t);
    const int32_t type = types_[t];
    if (type == kControl || type == kUserDefined || type == kUnknown) {
      if (type != kControl) {
        out += decoded_[t];
      } else if (special) {
        out += pieces_[t];
      }
      first = true;
      continue;
    }
    // WordPiece keeps the space of a word after a special token, as llama.cpp does.
    out += drops_prefix_space(wpm_ ? out.empty() : first, t) ? decoded_[t].substr(1) : decoded_[t];
    first = false;
  }
  return wpm_ ? WpmModel::clean_spaces(out) : out;
}

const std::string& Tokenizer::piece(int32_t id) const {
  check_id(id);
  return pieces_[id];
}
float Tokenizer::score(int32_t id) const {
  check_id(id);
  return scores_[id];
}
int32_t Tokenizer::token_type(int32_t id) const {
  check_id(id);
  return types_[id];
}
int32_t Tokenizer::piece_id(const std::string& p) const {
  if (wpm_) {
    const int32_t id = wpm_->token_id(p);
    return id >= 0 && (types_[id] == kNormal || types_[id] == kUserDefined) ? id : -1;
  }
  return spm_ ? spm_->piece_id(p) : -1;
}

}  // namespace qkv

#include "runtime/tokenizer/bpe.h"

#include "kernels/error.h"
#include "runtime/tokenizer/merge.h"
#include "runtime/tokenizer/normalize.h"
#include "runtime/tokenizer/vocab_text.h"
#include "runtime/utf8.h"

namespace qkv {

namespace {

struct ByteTable {
  std::string chars[256];
  int codepoint_to_byte[512];
  ByteTable() {
    std::fill(std::begin(codepoint_to_byte), std::end(codepoint_to_byte), -1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const int cp = printable ? b : next++;
      chars[b] = utf8_encode(static_cast<uint32_t>(cp));
      codepoint_to_byte[cp] = b;
    }
  }
};

const ByteTable& byte_table() {
  static const ByteTable t;
  return t;
}

// The code point at s[i] (advancing i), or -1 with i advanced by one for a byte
// that does not start a valid sequence.
int64_t next_codepoint(const std::string& s, size_t* i) {
  const auto c = static_cast<unsigned char>(s[*i]);
  size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
  if (n == 0 || *i + n > s.size()) {
    ++*i;
    return -1;
  }
  uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
  for (size_t k = 1; k < n; ++k) {
    const auto d = static_cast<unsigned char>(s[*i + k]);
    if ((d & 0xC0) != 0x80) {
      ++*i;
      return -1;
    }
    cp = cp << 6 | (d & 0x3F);
  }
  *i += n;
  return cp;
}

}  // namespace

const std::string& bpe_byte_char(unsigned char b) { return byte_table().chars[b]; }

int bpe_char_byte(uint32_t cp) { return cp < 512 ? byte_table().codepoint_to_byte[cp] : -1; }

bool bpe_decode_bytes(const std::string& piece, std::string* out) {
  for (size_t i = 0; i < piece.size();) {
    const int64_t cp = next_codepoint(piece, &i);
    const int b = cp < 0 ? -1 : bpe_char_byte(static_cast<uint32_t>(cp));
    if (b < 0) return false;
    *out += static_cast<char>(b);
  }
  return true;
}

namespace {

BpeOptions named_options(const std::string& pre) {
  BpeOptions o;
  o.pre = find_pre_tokenizer(pre);
  return o;
}

}  // namespace

BpeModel::BpeModel(const std::vector<std::string>& pieces, const std::vector<bool>& mergeable,
                   const std::vector<std::string>& merges, const std::string& pre, const std::string& where)
    : BpeModel(pieces, mergeable, merges, named_options(pre), where) {
  pre_name_ = pre;
}

BpeModel::BpeModel(const std::vector<std::string>& pieces, const std::vector<bool>& mergeable,
                   const std::vector<std::string>& merges, BpeOptions options, const std::string& where)
    : options_(std::move(options)), pre_(options_.pre), pre_name_(options_.pre.names.front()), merges_(merges) {
  QKV_CHECK(mergeable.size() == pieces.size(), "tokenizer '", where, "': token flags do not match the tokens");
  ids_.reserve(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (mergeable[i]) ids_.emplace(pieces[i], static_cast<int32_t>(i));
  }
  ranks_.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    const std::string& m = merges[r];
    const size_t sp = m.find(' ', 1);
    QKV_CHECK(sp != std::string::npos && sp + 1 < m.size(), "tokenizer '", where, "': merge ", r, " ('", m,
              "') is not two symbols separated by a space");
    ranks_.emplace(m, static_cast<int32_t>(r));  // the first of duplicate merges keeps its rank
  }
  static const char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    auto it = ids_.find(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">");
    byte_ids_[b] = it == ids_.end() ? -1 : it->second;
  }
  QKV_CHECK(options_.unk_id >= -1 && options_.unk_id < int64_t(pieces.size()), "tokenizer '", where,
            "': unknown token id ", options_.unk_id, " is outside the vocabulary of ", pieces.size());
}

void BpeModel::encode_unknown(const std::string& key, bool* last_unk, std::vector<int32_t>* out) const {
  if (options_.byte_level) {
    // Its byte characters one by one (a vocabulary without one skips it, as llama.cpp does).
    for (size_t j = 0; j < key.size();) {
      const size_t n = static_cast<unsigned char>(key[j]) < 0x80 ? 1 : 2;
      auto b = ids_.find(key.substr(j, n));
      if (b != ids_.end()) out->push_back(b->second);
      j += n;
    }
    return;
  }
  bool all_bytes = options_.byte_fallback;
  for (char c : key) all_bytes = all_bytes && byte_ids_[static_cast<unsigned char>(c)] >= 0;
  if (all_bytes) {
    for (char c : key) out->push_back(byte_ids_[static_cast<unsigned char>(c)]);
    *last_unk = false;
    return;
  }
  if (options_.unk_id < 0) return;  // no unknown token: dropped, as Hugging Face's BPE drops it
  if (!(options_.fuse_unk && *last_unk)) out->push_back(options_.unk_id);
  *last_unk = true;
}

void BpeModel::encode_word(const std::string& word, std::vector<int32_t>* out) const {
  if (pre_.spec().ignore_merges) {
    auto it = ids_.find(word);
    if (it != ids_.end()) {
      out->push_back(it->second);
      return;
    }
  }
  // Each symbol starts as one byte character (one or two UTF-8 bytes).
  // SentencePiece-style: one UTF-8 character (a byte that starts none: itself).
  std::vector<MergeSymbol> sym = merge_symbols(0, word.size(), [&](size_t i) {
    if (!options_.byte_level) return utf8_char_length(word, i);
    return static_cast<unsigned char>(word[i]) < 0x80 ? size_t(1) : size_t(2);
  });
  if (sym.empty()) return;
  std::string key;
  merge_all(sym, [&](const MergeSymbol& l, const MergeSymbol& r, double* p) {
    key.assign(word, l.start, l.len);
    key += ' ';
    key.append(word, r.start, r.len);
    auto it = ranks_.find(key);
    if (it == ranks_.end()) return false;
    *p = -double(it->second);  // lowest rank first
    return true;
  });
  bool last_unk = false;
  for (int64_t i = 0; i >= 0; i = sym[i].next) {
    key.assign(word, sym[i].start, sym[i].len);
    auto it = ids_.find(key);
    if (it != ids_.end()) {
      out->push_back(it->second);
      last_unk = false;
      continue;
    }
    encode_unknown(key, &last_unk, out);
  }
}

void BpeModel::encode(const std::string& raw, std::vector<int32_t>* out, bool at_start) const {
  std::string text = normalize(options_.normalizer, pre_.spec().nfc ? nfc(raw) : raw);
  if (const std::string& ms = options_.metaspace; !ms.empty()) {
    text = replace_all(text, " ", ms);
    const bool prepend = options_.metaspace_prepend == BpeOptions::Prepend::kAlways ||
                         (options_.metaspace_prepend == BpeOptions::Prepend::kFirst && at_start);
    if (prepend && !text.empty() && text.compare(0, ms.size(), ms) != 0) text = ms + text;
  }
  std::string word;
  for (const auto& [off, len] : pre_.split(text)) {
    if (!options_.byte_level) {
      encode_word(text.substr(off, len), out);
      continue;
    }
    word.clear();
    for (size_t i = off; i < off + len; ++i) word += bpe_byte_char(static_cast<unsigned char>(text[i]));
    encode_word(word, out);
  }
}

}  // namespace qkv

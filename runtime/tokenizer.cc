#include "runtime/tokenizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <queue>

#include "kernels/error.h"
#include "runtime/mapped_file.h"

namespace qkv {

namespace {

const std::string kSpaceMark = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK "▁"
constexpr int64_t kMaxVocab = int64_t(1) << 24;

std::string replace_all(const std::string& s, const std::string& from, const std::string& to) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    if (s.compare(i, from.size(), from) == 0) {
      out += to;
      i += from.size();
    } else {
      out += s[i++];
    }
  }
  return out;
}

// "<0xNN>" with two upper- or lower-case hex digits -> the byte; -1 otherwise.
int parse_byte_piece(const std::string& p) {
  if (p.size() != 6 || p.compare(0, 3, "<0x") != 0 || p[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(p[3]), lo = hex(p[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// Length of the UTF-8 character starting at s[i], or 1 for a byte that does
// not start a valid sequence (it then becomes its own symbol and byte token).
size_t utf8_char_length(const std::string& s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  size_t n;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0 && c >= 0xC2) n = 2;
  else if ((c & 0xF0) == 0xE0) n = 3;
  else if ((c & 0xF8) == 0xF0 && c <= 0xF4) n = 4;
  else return 1;
  if (i + n > s.size()) return 1;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 1;
  }
  return n;
}

// True when every "▁" in the piece belongs to its leading run of "▁"s.
bool space_only_leading(const std::string& p) {
  size_t i = 0;
  while (p.compare(i, 3, kSpaceMark) == 0) i += 3;
  return p.find(kSpaceMark, i) == std::string::npos;
}

}  // namespace

Tokenizer Tokenizer::from_pieces(std::vector<std::string> pieces, std::vector<float> scores,
                                 std::vector<int32_t> types, int32_t bos_id, int32_t eos_id, int32_t unk_id,
                                 const std::string& where) {
  QKV_CHECK(!pieces.empty(), "tokenizer '", where, "' has no tokens");
  QKV_CHECK(int64_t(pieces.size()) <= kMaxVocab, "tokenizer '", where, "' has ", pieces.size(), " tokens, too many");
  QKV_CHECK(scores.size() == pieces.size(), "tokenizer '", where, "' has ", scores.size(), " scores for ",
            pieces.size(), " tokens");
  QKV_CHECK(types.size() == pieces.size(), "tokenizer '", where, "' has ", types.size(), " token types for ",
            pieces.size(), " tokens");
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

void Tokenizer::build_index(const std::string& where) {
  std::fill(std::begin(byte_ids_), std::end(byte_ids_), -1);
  index_.clear();
  index_.reserve(pieces_.size());
  decoded_.assign(pieces_.size(), std::string());
  split_at_spaces_ = true;
  for (size_t i = 0; i < pieces_.size(); ++i) {
    const int32_t id = static_cast<int32_t>(i);
    const std::string& p = pieces_[i];
    switch (types_[i]) {
      case kNormal:
      case kUserDefined:
        index_.emplace(p, id);  // the first of duplicate pieces wins, as in SentencePiece
        if (!space_only_leading(p)) split_at_spaces_ = false;
        decoded_[i] = replace_all(p, kSpaceMark, " ");
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
        decoded_[i] = replace_all(p, kSpaceMark, " ");
        break;
      default:
        fail("tokenizer '", where, "': token ", i, " has unknown type ", types_[i]);
    }
  }
}

Tokenizer Tokenizer::from_llama2c(const std::string& path, int64_t vocab_size) {
  MappedFile f = MappedFile::open(path);
  auto truncated = [&](uint64_t pos, int64_t token) {
    fail("tokenizer file '", path, "' is truncated at byte ", pos, " (token ", token, ")");
  };
  if (f.size < 4) truncated(0, 0);
  int32_t max_len;
  std::memcpy(&max_len, f.data, 4);
  QKV_CHECK(max_len > 0, "tokenizer file '", path, "': max_token_length ", max_len, " must be positive");
  QKV_CHECK(vocab_size < kMaxVocab, "tokenizer file '", path, "': vocab size ", vocab_size, " is too large");
  std::vector<std::string> pieces;
  std::vector<float> scores;
  uint64_t pos = 4;
  for (int64_t i = 0; vocab_size < 0 ? pos < f.size : i < vocab_size; ++i) {
    QKV_CHECK(i < kMaxVocab, "tokenizer file '", path, "' has more than ", kMaxVocab, " tokens");
    if (f.size - pos < 8) truncated(pos, i);
    float score;
    int32_t len;
    std::memcpy(&score, f.data + pos, 4);
    std::memcpy(&len, f.data + pos + 4, 4);
    pos += 8;
    if (len < 0) fail("tokenizer file '", path, "': token ", i, " has negative length ", len);
    if (uint64_t(len) > f.size - pos) {
      fail("tokenizer file '", path, "': token ", i, " has length ", len, ", past the end of the file");
    }
    std::string text(reinterpret_cast<const char*>(f.data + pos), size_t(len));
    pos += uint64_t(len);
    pieces.push_back(replace_all(text, " ", kSpaceMark));  // llama2.c exports "▁" as a space
    scores.push_back(score);
  }
  // llama2.c's tokenizer.bin has no types: ids 0, 1, 2 are <unk>, <s>, </s>
  // (its files spell them "\n<s>\n"); <0xNN> pieces are byte tokens.
  std::vector<int32_t> types(pieces.size(), kNormal);
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (i == 0) {
      types[i] = kUnknown;
      pieces[i] = "<unk>";
    } else if (i == 1 || i == 2) {
      types[i] = kControl;
      pieces[i] = i == 1 ? "<s>" : "</s>";
    } else if (parse_byte_piece(pieces[i]) >= 0) {
      types[i] = kByte;
    }
  }
  QKV_CHECK(pieces.size() >= 3, "tokenizer file '", path, "' has only ", pieces.size(), " tokens");
  return from_pieces(std::move(pieces), std::move(scores), std::move(types), 1, 2, 0, path);
}

Tokenizer Tokenizer::from_gguf(const GGUFFile& g) {
  const std::string& path = g.path();
  const GGUFValue* model = g.find("tokenizer.ggml.model");
  if (!model) fail("GGUF file '", path, "' has no tokenizer (key tokenizer.ggml.model is missing)");
  QKV_CHECK(model->type == GGUFType::STRING, "GGUF file '", path, "': tokenizer.ggml.model is not a string");
  if (model->str != "llama") {
    fail("GGUF file '", path, "': tokenizer model '", model->str, "' is not supported (qkv reads 'llama' SentencePiece)");
  }
  const GGUFValue& tokens = g.get("tokenizer.ggml.tokens");
  QKV_CHECK(tokens.type == GGUFType::ARRAY && tokens.elem_type == GGUFType::STRING, "GGUF file '", path,
            "': tokenizer.ggml.tokens is not an array of strings");
  const GGUFValue& scores_v = g.get("tokenizer.ggml.scores");
  std::vector<float> scores;
  try {
    scores = scores_v.as_f32_vector();
  } catch (const Error& e) {
    fail("GGUF file '", path, "': tokenizer.ggml.scores: ", e.what());
  }
  std::vector<int32_t> types(tokens.count, kNormal);
  if (const GGUFValue* tv = g.find("tokenizer.ggml.token_type")) {
    std::vector<int64_t> raw;
    try {
      raw = tv->as_int_vector();
    } catch (const Error& e) {
      fail("GGUF file '", path, "': tokenizer.ggml.token_type: ", e.what());
    }
    QKV_CHECK(raw.size() == tokens.count, "GGUF file '", path, "': ", raw.size(), " token types for ",
              tokens.count, " tokens");
    for (size_t i = 0; i < raw.size(); ++i) {
      QKV_CHECK(raw[i] >= 1 && raw[i] <= 6, "GGUF file '", path, "': token ", i, " has unknown type ", raw[i]);
      types[i] = static_cast<int32_t>(raw[i]);
    }
  } else {
    for (size_t i = 0; i < tokens.strings.size(); ++i) {
      if (parse_byte_piece(tokens.strings[i]) >= 0) types[i] = kByte;
    }
  }
  auto id_key = [&](const char* key, int32_t fallback) -> int32_t {
    const GGUFValue* v = g.find(key);
    if (!v) return fallback;
    QKV_CHECK(v->is_integer(), "GGUF file '", path, "': ", key, " is not an integer");
    const int64_t x = v->type == GGUFType::UINT64 && v->bits > uint64_t(kMaxVocab) ? -1 : v->as_int();
    QKV_CHECK(x >= 0 && x < int64_t(tokens.count), "GGUF file '", path, "': ", key, " = ", x,
              " is outside the vocabulary of ", tokens.count);
    return static_cast<int32_t>(x);
  };
  const int32_t bos = id_key("tokenizer.ggml.bos_token_id", 1);
  const int32_t eos = id_key("tokenizer.ggml.eos_token_id", 2);
  const int32_t unk = id_key("tokenizer.ggml.unknown_token_id", 0);
  Tokenizer t = from_pieces(tokens.strings, std::move(scores), std::move(types), bos, eos, unk, path);
  if (const GGUFValue* ab = g.find("tokenizer.ggml.add_bos_token")) {
    QKV_CHECK(ab->type == GGUFType::BOOL, "GGUF file '", path, "': tokenizer.ggml.add_bos_token is not a bool");
    t.add_bos_ = ab->as_bool();
  }
  return t;
}

Tokenizer Tokenizer::load(const std::string& path, int64_t vocab_size) {
  if (GGUFFile::has_magic(path)) return from_gguf(GGUFFile::open(path));
  return from_llama2c(path, vocab_size);
}

Tokenizer Tokenizer::byte_level(int64_t vocab_size) {
  QKV_CHECK(vocab_size >= 260 && vocab_size <= kMaxVocab, "a byte-level vocabulary needs 260 to ", kMaxVocab,
            " tokens, not ", vocab_size);
  std::vector<std::string> pieces = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {kUnknown, kControl, kControl};
  static const char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    pieces.push_back(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">");
    types.push_back(kByte);
  }
  pieces.push_back(kSpaceMark);  // so spaces encode as a piece that decodes to a space
  types.push_back(kNormal);
  while (int64_t(pieces.size()) < vocab_size) {
    pieces.push_back("<unused" + std::to_string(pieces.size()) + ">");
    types.push_back(kUnused);
  }
  std::vector<float> scores(pieces.size(), 0.0f);
  return from_pieces(std::move(pieces), std::move(scores), std::move(types), 1, 2, 0, "byte-level");
}

namespace {

// Merge candidates: the merged piece's score, then leftmost first.
struct MergeCandidate {
  float score;
  size_t start;
  int64_t left, right;
  size_t len;
};
struct MergeOrder {
  bool operator()(const MergeCandidate& a, const MergeCandidate& b) const {
    return a.score != b.score ? a.score < b.score : a.start > b.start;
  }
};
// A doubly linked list over the text; a merged-away symbol has len 0.
struct Symbol {
  size_t start, len;
  int64_t prev, next;
};

}  // namespace

void Tokenizer::encode_segment(const std::string& norm, size_t begin, size_t end, std::vector<int32_t>* out) const {
  std::vector<Symbol> sym;
  for (size_t i = begin; i < end;) {
    const size_t n = std::min(utf8_char_length(norm, i), end - i);
    const int64_t k = static_cast<int64_t>(sym.size());
    sym.push_back({i, n, k - 1, k + 1});
    i += n;
  }
  if (sym.empty()) return;
  sym.back().next = -1;

  std::priority_queue<MergeCandidate, std::vector<MergeCandidate>, MergeOrder> heap;
  std::string key;
  auto consider = [&](int64_t l, int64_t r) {
    if (l < 0 || r < 0) return;
    const size_t len = sym[l].len + sym[r].len;
    key.assign(norm, sym[l].start, len);
    auto it = index_.find(key);
    if (it != index_.end()) heap.push({scores_[it->second], sym[l].start, l, r, len});
  };
  for (size_t i = 0; i + 1 < sym.size(); ++i) consider(int64_t(i), int64_t(i + 1));

  while (!heap.empty()) {
    const MergeCandidate p = heap.top();
    heap.pop();
    Symbol& l = sym[p.left];
    Symbol& r = sym[p.right];
    // Stale if either side was merged since (lengths changed or r is gone).
    if (l.len == 0 || r.len == 0 || l.next != p.right || l.len + r.len != p.len) continue;
    l.len = p.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = p.left;
    consider(l.prev, p.left);
    consider(p.left, l.next);
  }

  for (int64_t i = 0; i >= 0; i = sym[i].next) {
    key.assign(norm, sym[i].start, sym[i].len);
    auto it = index_.find(key);
    if (it != index_.end()) {
      out->push_back(it->second);
      continue;
    }
    for (unsigned char b : key) out->push_back(byte_ids_[b] >= 0 ? byte_ids_[b] : unk_id_);  // byte fallback
  }
}

std::vector<int32_t> Tokenizer::encode(const std::string& text, bool bos, bool eos) const {
  QKV_CHECK(!pieces_.empty(), "encode: the tokenizer has no vocabulary");
  std::vector<int32_t> out;
  if (bos) out.push_back(bos_id_);
  if (!text.empty()) {
    const std::string norm = kSpaceMark + replace_all(text, " ", kSpaceMark);
    if (!split_at_spaces_) {
      encode_segment(norm, 0, norm.size(), &out);
    } else {
      // No piece has "▁" after another character, so no merge crosses a "▁"
      // that follows a non-"▁": encoding the words separately gives the same
      // ids and keeps the merge queue small (linear time on long texts).
      size_t seg = 0;
      for (size_t i = 1; i < norm.size(); ++i) {
        const bool space_here = norm.compare(i, 3, kSpaceMark) == 0;
        const bool space_before = i >= 3 && norm.compare(i - 3, 3, kSpaceMark) == 0;
        if (space_here && !space_before) {
          encode_segment(norm, seg, i, &out);
          seg = i;
        }
      }
      encode_segment(norm, seg, norm.size(), &out);
    }
  }
  if (eos) out.push_back(eos_id_);
  return out;
}

void Tokenizer::check_id(int32_t id) const {
  QKV_CHECK(id >= 0 && int64_t(id) < vocab_size(), "token id ", id, " is outside the vocabulary of ", vocab_size());
}

std::string Tokenizer::decode(int32_t prev_token, int32_t token) const {
  check_id(token);
  const std::string& text = decoded_[token];
  // SentencePiece drops the dummy-prefix space of the first piece after BOS.
  if (prev_token == bos_id_ && types_[token] != kByte && !text.empty() && text[0] == ' ') return text.substr(1);
  return text;
}

std::string Tokenizer::decode(const std::vector<int32_t>& tokens) const {
  std::string out;
  bool first = true;
  for (int32_t t : tokens) {
    check_id(t);
    if (types_[t] == kControl) continue;
    const std::string& text = decoded_[t];
    if (first && types_[t] != kByte && !text.empty() && text[0] == ' ') {
      out.append(text, 1, std::string::npos);
    } else {
      out += text;
    }
    first = false;
  }
  return out;
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
  auto it = index_.find(p);
  return it == index_.end() ? -1 : it->second;
}

}  // namespace qkv

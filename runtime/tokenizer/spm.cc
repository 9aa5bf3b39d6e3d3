#include "runtime/tokenizer/spm.h"

#include <algorithm>

#include "runtime/tokenizer/merge.h"
#include "runtime/tokenizer/vocab_text.h"

namespace qkv {

namespace {

// True when every "▁" in the piece belongs to its leading run of "▁"s.
bool space_only_leading(const std::string& p) {
  size_t i = 0;
  while (p.compare(i, 3, kSpaceMark) == 0) i += 3;
  return p.find(kSpaceMark, i) == std::string::npos;
}

}  // namespace

SpmModel::SpmModel(const std::vector<std::string>& pieces, const std::vector<float>& scores,
                   const std::vector<bool>& mergeable, const int32_t (&byte_ids)[256], int32_t unk_id)
    : scores_(scores), unk_id_(unk_id) {
  std::copy(std::begin(byte_ids), std::end(byte_ids), std::begin(byte_ids_));
  index_.reserve(pieces.size());
  split_at_spaces_ = true;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (!mergeable[i]) continue;
    index_.emplace(pieces[i], static_cast<int32_t>(i));  // the first of duplicate pieces wins, as in SentencePiece
    if (!space_only_leading(pieces[i])) split_at_spaces_ = false;
  }
}

int32_t SpmModel::piece_id(const std::string& p) const {
  auto it = index_.find(p);
  return it == index_.end() ? -1 : it->second;
}

void SpmModel::encode_segment(const std::string& norm, size_t begin, size_t end, std::vector<int32_t>* out) const {
  std::vector<MergeSymbol> sym = merge_symbols(begin, end, [&](size_t i) { return utf8_char_length(norm, i); });
  if (sym.empty()) return;
  std::string key;
  merge_all(sym, [&](const MergeSymbol& l, const MergeSymbol& r, double* p) {
    key.assign(norm, l.start, l.len + r.len);
    auto it = index_.find(key);
    if (it == index_.end()) return false;
    *p = scores_[it->second];
    return true;
  });
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

void SpmModel::encode(const std::string& norm, std::vector<int32_t>* out) const {
  if (norm.empty()) return;
  if (!split_at_spaces_) {
    encode_segment(norm, 0, norm.size(), out);
    return;
  }
  // No piece has "▁" after another character, so no merge crosses a "▁"
  // that follows a non-"▁": encoding the words separately gives the same
  // ids and keeps the merge queue small (linear time on long texts).
  size_t seg = 0;
  for (size_t i = 1; i < norm.size(); ++i) {
    const bool space_here = norm.compare(i, 3, kSpaceMark) == 0;
    const bool space_before = i >= 3 && norm.compare(i - 3, 3, kSpaceMark) == 0;
    if (space_here && !space_before) {
      encode_segment(norm, seg, i, out);
      seg = i;
    }
  }
  encode_segment(norm, seg, norm.size(), out);
}

}  // namespace qkv

#include "runtime/tokenizer/wpm.h"

#include <algorithm>
#include <utility>

#include <utf8proc.h>

#include "kernels/error.h"
#include "runtime/tokenizer/vocab_text.h"

namespace qkv {

namespace {

// The next code point of s at *pos, read as llama.cpp reads UTF-8: the lead
// byte fixes the length and the continuation bytes must be 10xxxxxx; overlong
// forms and surrogates pass. -1 for a byte that starts no character (it is
// skipped: llama.cpp turns it into U+FFFD, which it then drops).
int64_t next_code_point(const std::string& s, size_t* pos) {
  const size_t i = *pos;
  const unsigned char c = static_cast<unsigned char>(s[i]);
  size_t n;
  int64_t cp;
  if (c < 0x80) {
    n = 1, cp = c;
  } else if ((c & 0xE0) == 0xC0) {
    n = 2, cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3, cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4, cp = c & 0x07;
  } else {
    *pos = i + 1;
    return -1;
  }
  if (i + n > s.size()) {
    *pos = i + 1;
    return -1;
  }
  for (size_t k = 1; k < n; ++k) {
    const unsigned char b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) {
      *pos = i + 1;
      return -1;
    }
    cp = cp << 6 | (b & 0x3F);
  }
  *pos = i + n;
  return cp;
}

// The White_Space property (what llama.cpp's is_whitespace holds).
bool is_white_space(int32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

// CJK ideograph blocks as BERT's BasicTokenizer lists them (its range
// 0x2B920-0x2CEAF, not 0x2B820, kept as Hugging Face and llama.cpp have it).
bool is_cjk_ideograph(int32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// The first code point of cp's canonical decomposition (cp itself when it has none).
int32_t first_of_decomposition(int32_t cp) {
  utf8proc_int32_t parts[32];
  int boundclass = 0;
  const utf8proc_ssize_t n = utf8proc_decompose_char(cp, parts, 32, UTF8PROC_DECOMPOSE, &boundclass);
  return n >= 1 ? parts[0] : cp;
}

void append_utf8(int32_t cp, std::string* out) {
  utf8proc_uint8_t bytes[4];
  const utf8proc_ssize_t n = utf8proc_encode_char(cp, bytes);
  out->append(reinterpret_cast<const char*>(bytes), static_cast<size_t>(n));
}

// Normalizes text into buf and lists each word as [begin, end) of buf; every
// word starts with "▁" and has at least one character after it.
void split_words(const std::string& text, std::string* buf, std::vector<std::pair<size_t, size_t>>* words) {
  buf->clear();
  words->clear();
  buf->reserve(text.size() + text.size() / 2);
  bool open = false;
  size_t begin = 0;
  const auto finish = [&] {
    if (open) words->emplace_back(begin, buf->size());
    open = false;
  };
  const auto append = [&](int32_t cp) {
    if (!open) {
      begin = buf->size();
      *buf += kSpaceMark;
      open = true;
    }
    append_utf8(cp, buf);
  };
  for (size_t pos = 0; pos < text.size();) {
    const int64_t read = next_code_point(text, &pos);
    // Past U+10FFFF (lead bytes F5-F7) llama.cpp fails to re-encode the code
    // point; it is dropped here like an invalid byte.
    if (read < 0 || read > 0x10FFFF) continue;
    int32_t cp = static_cast<int32_t>(read);
    const bool surrogate = cp >= 0xD800 && cp <= 0xDFFF;
    if (!surrogate) cp = first_of_decomposition(cp);
    if (is_white_space(cp)) {
      finish();
      continue;
    }
    const utf8proc_category_t cat = surrogate ? UTF8PROC_CATEGORY_CS : utf8proc_category(cp);
    const bool control = cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF ||
                         cat == UTF8PROC_CATEGORY_CO || cat == UTF8PROC_CATEGORY_CS;
    if (cp == 0 || cp == 0xFFFD || control) continue;
    const bool punctuation = cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
    const bool symbol = cat >= UTF8PROC_CATEGORY_SM && cat <= UTF8PROC_CATEGORY_SO;
    const int32_t lower = utf8proc_tolower(cp);
    if (punctuation || (cp < 0x7F && symbol) || is_cjk_ideograph(cp)) {
      finish();
      append(lower);
      finish();
    } else {
      append(lower);
    }
  }
  finish();
}

}  // namespace

WpmModel::WpmModel(const std::vector<std::string>& tokens, int32_t unk_id, const std::string& where)
    : texts_(tokens), unk_id_(unk_id) {
  QKV_CHECK(unk_id >= 0 && size_t(unk_id) < tokens.size(), "tokenizer '", where, "': the WordPiece unknown token id ",
            unk_id, " is outside the vocabulary of ", tokens.size(), " tokens");
  index_.reserve(texts_.size());
  for (size_t i = 0; i < texts_.size(); ++i) {
    const std::string_view text = texts_[i];
    if (text.empty()) continue;  // matches nothing
    const auto [it, fresh] = index_.emplace(text, static_cast<int32_t>(i));
    QKV_CHECK(fresh, "tokenizer '", where, "': token ", i, " repeats the text of token ", it->second, " ('",
              texts_[i], "'); a WordPiece vocabulary needs distinct tokens");
    max_token_bytes_ = std::max(max_token_bytes_, text.size());
  }
}

int32_t WpmModel::token_id(std::string_view text) const {
  const auto it = index_.find(text);
  return it == index_.end() ? -1 : it->second;
}

void WpmModel::encode(const std::string& text, std::vector<int32_t>* out) const {
  std::string buf;
  std::vector<std::pair<size_t, size_t>> spans;
  split_words(text, &buf, &spans);
  for (const auto& span : spans) {
    const std::string_view word(buf.data() + span.first, span.second - span.first);
    const size_t start = out->size();
    for (size_t i = 0; i < word.size();) {
      int32_t id = -1;
      size_t len = std::min(max_token_bytes_, word.size() - i);
      for (; len > 0; --len) {
        id = token_id(word.substr(i, len));
        if (id >= 0) break;
      }
      if (id < 0) {  // this position has no token: the whole word is unknown
        out->resize(start);
        break;
      }
      out->push_back(id);
      i += len;
    }
    if (out->size() == start) out->push_back(unk_id_);
  }
}

std::vector<std::string> WpmModel::words(const std::string& text) {
  std::string buf;
  std::vector<std::pair<size_t, size_t>> spans;
  split_words(text, &buf, &spans);
  std::vector<std::string> out;
  out.reserve(spans.size());
  for (const auto& span : spans) out.push_back(buf.substr(span.first, span.second - span.first));
  return out;
}

std::string WpmModel::clean_spaces(const std::string& text) {
  if (text.empty()) return text;
  // 1: no space before ? ! . ,
  std::string a(1, text[0]);
  for (size_t i = 1; i < text.size(); ++i) {
    const char x = text[i];
    if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) a.pop_back();
    a += x;
  }
  // 2: " ' " -> "'" (the space after it, once consumed, no longer counts as
  // a space before the next character)
  std::string b(1, a[0]);
  size_t consumed = std::string::npos;
  for (size_t i = 1; i < a.size(); ++i) {
    const char x = a[i];
    if (x == '\'' && i + 1 < a.size() && a[i - 1] == ' ' && consumed != i - 1 && a[i + 1] == ' ') {
      b.pop_back();
      b += x;
      consumed = ++i;
      continue;
    }
    b += x;
  }
  // 3: contractions "'s", "'m", "'re", "'ve" join the word before them
  std::string c(1, b[0]);
  for (size_t i = 1; i < b.size(); ++i) {
    const char x = b[i];
    if (b[i - 1] == ' ' && x == '\'' && i + 1 < b.size()) {
      const char x1 = b[i + 1];
      const char x2 = i + 2 < b.size() ? b[i + 2] : '\0';
      if (x1 == 's' || x1 == 'm' || ((x1 == 'r' || x1 == 'v') && x2 == 'e')) c.pop_back();
    }
    c += x;
  }
  return c;
}

}  // namespace qkv

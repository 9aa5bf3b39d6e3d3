// Unicode normalization of tokenizer input (utf8proc), and the normalizer
// steps a Hugging Face tokenizer.json may list.
#pragma once

#include <string>
#include <vector>

namespace qkv {

// The text in Normalization Form C. Text that is not valid UTF-8 is returned
// unchanged (its bytes are tokenized as they are).
std::string nfc(const std::string& text);

// One normalizer step: NFC, replace every `from` by `to`, or prepend `to` to
// non-empty text (SentencePiece's "▁" prefix).
struct NormalizerStep {
  enum Kind { kNfc, kReplace, kPrepend } kind = kNfc;
  std::string from, to;
};

// The steps applied in order.
std::string normalize(const std::vector<NormalizerStep>& steps, const std::string& text);

}  // namespace qkv

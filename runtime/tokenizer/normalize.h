// Unicode normalization of tokenizer input (utf8proc).
#pragma once

#include <string>

namespace qkv {

// The text in Normalization Form C. Text that is not valid UTF-8 is returned
// unchanged (its bytes are tokenized as they are).
std::string nfc(const std::string& text);

}  // namespace qkv

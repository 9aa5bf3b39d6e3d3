#include "runtime/tokenizer/normalize.h"

#include <cstdlib>

#include <utf8proc.h>

#include "runtime/tokenizer/vocab_text.h"

namespace qkv {

std::string nfc(const std::string& text) {
  // ASCII is already in NFC; most text takes this path.
  bool ascii = true;
  for (char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) {
      ascii = false;
      break;
    }
  }
  if (ascii) return text;
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                   &out, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) return text;  // invalid UTF-8
  std::string result(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return result;
}

std::string normalize(const std::vector<NormalizerStep>& steps, const std::string& text) {
  std::string s = text;
  for (const NormalizerStep& step : steps) {
    switch (step.kind) {
      case NormalizerStep::kNfc:
        s = nfc(s);
        break;
      case NormalizerStep::kReplace:
        if (!step.from.empty()) s = replace_all(s, step.from, step.to);
        break;
      case NormalizerStep::kPrepend:
        if (!s.empty()) s = step.to + s;
        break;
    }
  }
  return s;
}

}  // namespace qkv

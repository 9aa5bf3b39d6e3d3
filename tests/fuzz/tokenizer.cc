// fuzz_tokenizer: SentencePiece, byte-level BPE and WordPiece encode/decode on arbitrary
// bytes (invalid UTF-8 included). The vocabularies are loaded once from
// ../shared/vocab (QKV_FUZZ_SHARED overrides the directory). Input: byte 0
// picks the vocabulary and the flags, the rest is the text; its bytes read as
// little-endian int32 are also decoded as token ids (out-of-range ones must be
// rejected with qkv::Error).
#include <cstring>
#include <vector>

#include "runtime/gguf.h"
#include "runtime/tokenizer.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

const std::vector<qkv::Tokenizer>& vocabularies() {
  static const std::vector<qkv::Tokenizer> v = [] {
    std::vector<qkv::Tokenizer> t;
    for (const char* name : {"vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-gpt-2.gguf",
                             "vocab/ggml-vocab-phi-3.gguf", "vocab/ggml-vocab-bert-bge.gguf"}) {
      t.push_back(qkv::Tokenizer::from_gguf(qkv::GGUFFile::open(qkv::fuzz::shared_path(name))));
    }
    t.push_back(qkv::Tokenizer::byte_level(300));
    return t;
  }();
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace qkv;
  if (size == 0) return 0;
  const auto& vocabs = vocabularies();
  const Tokenizer& tok = vocabs[data[0] % vocabs.size()];
  const bool bos = data[0] & 0x10, eos = data[0] & 0x20, special = data[0] & 0x40;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  fuzz::expect_clean([&] {
    const std::vector<int32_t> ids = tok.encode(text, bos, eos, special);
    for (int32_t id : ids) {
      if (id < 0 || id >= tok.vocab_size()) std::abort();  // encode made an id outside the vocabulary
    }
    (void)tok.decode(ids, special);
    int32_t prev = -1;
    for (int32_t id : ids) (void)tok.decode(prev, id, special), prev = id;
  });
  std::vector<int32_t> raw((size - 1) / 4);
  if (!raw.empty()) std::memcpy(raw.data(), data + 1, raw.size() * 4);
  fuzz::expect_clean([&] { (void)tok.decode(raw, special); });
  fuzz::expect_clean([&] {
    int32_t prev = tok.bos_id();
    for (int32_t id : raw) (void)tok.decode(prev, id, special), prev = id;
  });
  return 0;
}

// fuzz_gguf: the GGUF reader (header, metadata, tensor table) and, for a file
// it accepts, the model loader (the config keys, the shapes against the
// config), the tokenizer and the chat-template reader over the same file.
#include "runtime/chat_template.h"
#include "runtime/gguf.h"
#include "runtime/model_loader.h"
#include "runtime/tokenizer.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace qkv;
  fuzz::expect_clean([&] {
    const GGUFFile file = GGUFFile::parse(data, size, "fuzz.gguf");
    // Every accessor over what was accepted.
    for (const auto& [key, v] : file.metadata()) {
      (void)file.find(key);
      if (v.type == GGUFType::ARRAY && v.count > 0 && v.elem_type != GGUFType::STRING &&
          v.elem_type != GGUFType::ARRAY) {
        (void)v.element(v.count - 1);
      }
    }
    for (const auto& t : file.tensors()) (void)file.find_tensor(t.name);
    fuzz::expect_clean([&] { (void)load_gguf_model(file); });
    fuzz::expect_clean([&] {
      Tokenizer tok = Tokenizer::from_gguf(file);
      (void)tok.decode(tok.encode("Hello, world! <s> 123", true, false, true));
    });
    fuzz::expect_clean([&] { (void)chat_template_of(file); });
  });
  return 0;
}

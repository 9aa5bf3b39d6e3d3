// fuzz_llama2c: llama2.c's checkpoint reader (7-int32 header, f32 weights)
// and its tokenizer.bin reader, both on the same bytes.
#include "runtime/model_loader.h"
#include "runtime/tokenizer.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace qkv;
  const std::string& path = fuzz::write_input(data, size);
  fuzz::expect_clean([&] { (void)load_llama2c_model(path); });
  fuzz::expect_clean([&] {
    Tokenizer tok = Tokenizer::from_llama2c(path);
    (void)tok.decode(tok.encode("Once upon a time \xff\xfe", true, true));
  });
  // The first byte chooses a stated vocabulary size (run.c's reading).
  if (size > 0) fuzz::expect_clean([&] { (void)Tokenizer::from_llama2c(path, data[0]); });
  return 0;
}

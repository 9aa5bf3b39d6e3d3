// fuzz_chat_template: the Jinja chat-template parser and renderer. Input: the
// template text, then a NUL byte and the conversation JSON; without a NUL the
// whole input is the template, rendered with a fixed two-message conversation.
#include <cstring>

#include "runtime/chat_template.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace qkv;
  const char* p = reinterpret_cast<const char*>(data);
  const char* nul = static_cast<const char*>(std::memchr(p, 0, size));
  ChatTemplate t;
  t.bos_token = "<s>";
  t.eos_token = "</s>";
  std::string conversation =
      R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],)"
      R"( "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]})";
  if (nul) {
    t.source.assign(p, nul);
    conversation.assign(nul + 1, p + size);
  } else {
    t.source.assign(p, size);
  }
  fuzz::expect_clean([&] { (void)render_chat(t, conversation, true); });
  return 0;
}

// fuzz_serve_request: qkv serve's request bodies, JSON text to GenRequest
// (tools/serve/request.h), for both endpoints. An ApiError (the 400 the
// server answers) is the correct rejection.
#include "tests/fuzz/fuzz_common.h"
#include "tools/serve/api_error.h"
#include "tools/serve/request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace qkv::serve;
  const std::string body(reinterpret_cast<const char*>(data), size);
  RequestLimits limits;
  limits.vocab_size = 32000;
  limits.max_prompt_tokens = 4096;
  nlohmann::json j;
  try {
    j = parse_body(body, 32);
  } catch (const ApiError&) {
    return 0;
  }
  for (bool chat : {false, true}) {
    try {
      const GenRequest r = chat ? parse_chat(j, limits) : parse_completion(j, limits);
      if (r.stop.size() > limits.max_stop || r.logit_bias.size() > limits.max_logit_bias ||
          static_cast<int64_t>(r.prompt_tokens.size()) > limits.max_prompt_tokens) {
        std::abort();  // accepted a request over its limits
      }
      for (int32_t id : r.prompt_tokens) {
        if (id < 0 || id >= limits.vocab_size) std::abort();
      }
    } catch (const ApiError&) {
    }
  }
  return 0;
}

// fuzz_serve_request: qkv serve's request bodies, JSON text to GenRequest
// (tools/serve/request.h) for both completion endpoints, and to the embedding
// and rerank requests (tools/serve/embed_request.h). An ApiError (the 400 the
// server answers) is the correct rejection.
#include "tests/fuzz/fuzz_common.h"
#include "tools/serve/api_error.h"
#include "tools/serve/embed_request.h"
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
  EmbedLimits el;
  el.vocab_size = limits.vocab_size;
  el.width = 128;
  for (int shape = 0; shape < 3; ++shape) {
    try {
      const EmbedRequest r = shape == 0   ? parse_embeddings(j, el)
                             : shape == 1 ? parse_ollama_embed(j, el)
                                          : parse_ollama_embeddings(j, el);
      if (r.inputs.size() > el.max_inputs || r.dimensions < 0 || r.dimensions > el.width) std::abort();
      for (const EmbedInput& in : r.inputs) {
        if (in.is_tokens ? in.tokens.empty() : in.text.empty()) std::abort();  // nothing to embed passed
        for (int32_t id : in.tokens) {
          if (id < 0 || id >= el.vocab_size) std::abort();
        }
      }
    } catch (const ApiError&) {
    }
  }
  try {
    const RerankRequest r = parse_rerank(j, el);
    if (r.documents.empty() || r.documents.size() > el.max_inputs || r.query.empty() || r.top_n < 0 ||
        r.top_n > static_cast<int64_t>(r.documents.size())) {
      std::abort();
    }
  } catch (const ApiError&) {
  }
  return 0;
}

// Text generation: encode a prompt, prefill it, then sample and step until a
// stop condition, handing each printable piece to a callback as it is produced.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/decoder.h"
#include "runtime/grammar/matcher.h"
#include "runtime/sampler.h"
#include "runtime/speculative.h"
#include "runtime/tokenizer.h"

namespace qkv {

struct GenerateOptions {
  // llama2.c's -n: total positions, BOS and prompt included (steps forward passes
  // at most). 0: not used. Clamped to the context like llama2.c.
  int64_t steps = 0;
  // llama.cpp's -n: new tokens to sample; -1: until EOS/BOS or a full context.
  int64_t n_predict = -1;
  bool add_bos = true;        // BOS/EOS as the vocabulary's add_bos_token / add_eos_token say
  bool parse_special = false;  // control tokens written in the prompt become their ids
  int64_t seq = 0;  // which sequence of the decoder
  SamplerOptions sampler;
  // Generation ends before the first of these strings; none of it is emitted,
  // even when it spans several tokens.
  std::vector<std::string> stop;
  // When set, every sampled token continues this grammar (and the end comes
  // only where it can end).
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  // A drafter set: speculative decoding (runtime/speculative.h), the same
  // output distribution (greedy: the same tokens) in fewer target passes. It
  // does not combine with a grammar (a drafted token would skip the grammar's
  // mask): refused.
  SpeculativeOptions speculative;
};

struct GenerateStats {
  int64_t prompt_tokens = 0;     // after encoding, BOS included
  int64_t generated_tokens = 0;  // sampled tokens (a stopping EOS/BOS included)
  int64_t forward_passes = 0;
  double prompt_ms = 0;          // prefill
  double generate_ms = 0;        // sampling and decode steps
  // Speculative decoding: tokens drafted and verified, of those accepted, and
  // the target's verify passes (forward_passes still counts positions, as
  // plain decoding does).
  int64_t drafted_tokens = 0, accepted_tokens = 0, verify_passes = 0;
  std::string stop_reason;       // "eos" (any end-of-generation token), "bos", "steps", "n_predict", "context", "stop" (a stop string), "stopped"
};

// Emits pieces exactly as llama2.c's run prints them: the prompt's pieces after
// BOS, then each sampled piece; single bytes that are neither printable nor
// white space are dropped. emit returns false to stop generating.
GenerateStats generate(Decoder& decoder, const Tokenizer& tokenizer, const std::string& prompt,
                       const GenerateOptions& options, const std::function<bool(const std::string&)>& emit);

}  // namespace qkv

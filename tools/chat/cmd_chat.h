// What qkv chat and qkv run --chat share: the sampler and context flags, and
// the chat prompt (the model's template, a --chat-template file, or ChatML when
// the model has neither) rendered and tokenized through the C API.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qkv.h"

namespace qkv::tools {

// The usage lines of the flags below.
extern const char* const kSamplerFlagsUsage;
extern const char* const kContextFlagsUsage;

// Sampler flags (--temp, --top-k, --top-p, --min-p, --seed and the penalties):
// when argv[i] is one, stores its value (advancing i) and returns true.
bool parse_sampler_flag(int argc, char** argv, int& i, qkv_sampler_options* sampler, bool* seed_given);
// -l / --logit-bias TOKEN(+|-)BIAS (as llama.cpp spells it; -inf bans the
// token), as parse_sampler_flag; the biases collect in *biases.
struct LogitBias {
  std::vector<int32_t> tokens;
  std::vector<float> biases;
};
bool parse_logit_bias_flag(int argc, char** argv, int& i, LogitBias* biases);
// Sets them on the session (an unknown token is an error naming it).
void apply_logit_bias(qkv_session* session, const LogitBias& biases);
// Context flags (-c, --kv-type, -t, -b), as parse_sampler_flag.
bool parse_context_flag(int argc, char** argv, int& i, qkv_context_options* context);

// A chat template ready to render conversations for one model.
class ChatPrompt {
 public:
  // template_path: a Jinja file used instead of the model's template ("" for
  // the model's). A model without a template, and no file, gets ChatML
  // (<|im_start|>role\ncontent<|im_end|>\n ... <|im_start|>assistant\n, as
  // llama-server falls back to it) with a warning on stderr naming `command`.
  ChatPrompt(const qkv_model* model, const std::string& template_path, const char* command);

  // conversation_json: a JSON array of {role, content} messages.
  std::string render(const std::string& conversation_json, bool add_generation_prompt) const;
  // The prompt's tokens: control tokens the template wrote become their ids,
  // and BOS comes first when the vocabulary adds one and the template did not
  // write it.
  std::vector<int32_t> tokenize(const std::string& text) const;
  // Whether the text's own tokens begin with the BOS the vocabulary adds
  // (then a tokenizer call must not add another).
  bool writes_bos(const std::string& text) const;
  // Strings that end an assistant turn besides the end-of-generation tokens
  // (ChatML's markers, which vocabularies without them spell as plain text).
  const std::vector<std::string>& stops() const { return stops_; }
  bool is_chatml() const { return !stops_.empty(); }

 private:
  std::vector<int32_t> tokenize_as_written(const std::string& text) const;
  int32_t added_bos() const;  // the BOS id the vocabulary adds, or -1

  const qkv_model* model_;
  std::string source_;  // "" for the model's own template
  std::vector<std::string> stops_;
};

// A JSON array of messages: an optional system message, then alternating
// user / assistant turns.
std::string conversation_json(const std::string& system, const std::vector<std::string>& turns);

}  // namespace qkv::tools

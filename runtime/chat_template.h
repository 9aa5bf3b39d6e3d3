// Chat templates: a model's tokenizer.chat_template rendered with a
// conversation, as Hugging Face's apply_chat_template renders it.
#pragma once

#include <string>

#include "runtime/gguf.h"

namespace qkv {

struct ChatTemplate {
  std::string source;      // the Jinja text (tokenizer.chat_template)
  std::string bos_token;   // text of tokenizer.ggml.bos_token_id ("" when absent)
  std::string eos_token;   // text of tokenizer.ggml.eos_token_id
};

// The file's template and BOS/EOS texts; source is "" when the file has none.
ChatTemplate chat_template_of(const GGUFFile& file);

// conversation_json: a JSON array of messages, or an object with "messages"
// (and optionally "tools", plus any other variables the template reads).
// Throws qkv::Error on bad JSON, a template error, or the template's own
// raise_exception (whose message is kept verbatim).
std::string render_chat(const ChatTemplate& tmpl, const std::string& conversation_json,
                        bool add_generation_prompt);

}  // namespace qkv

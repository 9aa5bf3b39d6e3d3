// Messages -> the prompt tokens of a chat request. The model's own chat
// template (tokenizer.chat_template) is rendered through the C API as Hugging
// Face's apply_chat_template renders it, and its special tokens are parsed.
// A model without a template gets ChatML (<|im_start|>role\ncontent<|im_end|>
// ... <|im_start|>assistant\n), the layout llama-server falls back to, with
// "<|im_end|>" as a stop string.
#pragma once

#include <string>
#include <vector>

#include "qkv.h"
#include "tools/serve/request.h"

namespace qkv::serve {

struct ChatPrompt {
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<std::string> stop;  // strings that end the assistant's turn
};

// Throws ApiError (400) when the template raises or the messages cannot be rendered.
ChatPrompt render_chat(const qkv_model* model, const std::vector<ChatMessage>& messages);

}  // namespace qkv::serve

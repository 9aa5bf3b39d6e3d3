// Messages -> the prompt text of a chat request. Without a chat template
// renderer for the model's own template the messages are laid out in ChatML
// (<|im_start|>role\ncontent<|im_end|>\n ... <|im_start|>assistant\n), the
// format llama-server falls back to; "<|im_end|>" is then a stop string.
#pragma once

#include <string>
#include <vector>

#include "tools/serve/request.h"

namespace qkv::serve {

struct ChatPrompt {
  std::string text;
  std::vector<std::string> stop;  // strings that end the assistant's turn
};

ChatPrompt render_chat(const std::vector<ChatMessage>& messages);

}  // namespace qkv::serve

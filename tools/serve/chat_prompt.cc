#include "tools/serve/chat_prompt.h"

namespace qkv::serve {

ChatPrompt render_chat(const std::vector<ChatMessage>& messages) {
  ChatPrompt p;
  for (const ChatMessage& m : messages) {
    const std::string role = m.role == "developer" ? "system" : m.role;
    p.text += "<|im_start|>" + role + "\n" + m.content + "<|im_end|>\n";
  }
  p.text += "<|im_start|>assistant\n";
  p.stop = {"<|im_end|>", "<|im_start|>"};
  return p;
}

}  // namespace qkv::serve

#include "tools/serve/chat_prompt.h"

#include <nlohmann/json.hpp>

#include "tools/serve/api_error.h"

namespace qkv::serve {
namespace {

std::string chatml(const std::vector<ChatMessage>& messages) {
  std::string text;
  for (const ChatMessage& m : messages) {
    const std::string role = m.role == "developer" ? "system" : m.role;
    text += "<|im_start|>" + role + "\n" + m.content + "<|im_end|>\n";
  }
  return text + "<|im_start|>assistant\n";
}

std::string render_template(const qkv_model* model, const std::vector<ChatMessage>& messages) {
  nlohmann::ordered_json conv = nlohmann::ordered_json::array();
  for (const ChatMessage& m : messages) conv.push_back({{"role", m.role}, {"content", m.content}});
  const std::string json = conv.dump();
  int64_t n = 0;
  qkv_status st = qkv_chat_render(model, nullptr, json.c_str(), 1, nullptr, 0, &n);
  std::string text(static_cast<size_t>(n) + 1, '\0');
  if (st == QKV_ERR_BUFFER_TOO_SMALL) st = qkv_chat_render(model, nullptr, json.c_str(), 1, text.data(), n + 1, &n);
  if (st != QKV_OK) {
    throw ApiError(400, std::string("the model's chat template failed: ") + qkv_last_error(), "invalid_request_error",
                   "messages");
  }
  text.resize(static_cast<size_t>(n));
  return text;
}

std::vector<int32_t> tokenize_special(const qkv_model* model, const std::string& text) {
  // Special tokens written by the template become their ids; BOS is added as
  // the vocabulary asks unless the template already wrote it.
  int64_t n = 0;
  const int flags = QKV_TOKENIZE_PARSE_SPECIAL;
  qkv_tokenize_text(model, text.data(), static_cast<int64_t>(text.size()), flags, nullptr, 0, &n);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  if (qkv_tokenize_text(model, text.data(), static_cast<int64_t>(text.size()), flags, ids.data(), n, &n) != QKV_OK) {
    throw ApiError(400, std::string("cannot tokenize the chat prompt: ") + qkv_last_error());
  }
  ids.resize(static_cast<size_t>(n));
  int64_t n_bos = 0;
  int32_t bos[2];
  // ADD_SPECIAL on empty text yields exactly what the vocabulary adds (BOS, maybe EOS).
  if (qkv_tokenize_text(model, "", 0, QKV_TOKENIZE_ADD_SPECIAL, bos, 2, &n_bos) == QKV_OK && n_bos >= 1 &&
      (ids.empty() || ids[0] != bos[0])) {
    ids.insert(ids.begin(), bos[0]);
  }
  return ids;
}

}  // namespace

ChatPrompt render_chat(const qkv_model* model, const std::vector<ChatMessage>& messages) {
  ChatPrompt p;
  if (qkv_has_chat_template(model)) {
    p.text = render_template(model, messages);
  } else {
    p.text = chatml(messages);
    p.stop = {"<|im_end|>", "<|im_start|>"};
  }
  p.tokens = tokenize_special(model, p.text);
  return p;
}

}  // namespace qkv::serve

// Messages -> the prompt tokens of a chat request. The chat template (the
// model's tokenizer.chat_template, or --chat-template-file) is rendered
// through the C API as Hugging Face's apply_chat_template renders it: with
// the request's tools, assistant tool calls (arguments as objects), tool
// results, reasoning, and chat_template_kwargs as template variables; its
// special tokens are parsed. The template also names the tool-call family
// whose output format the reply is parsed with (runtime/tool_calls/). A
// template that knows no tools gets the tools described in a system message
// and answers in the generic JSON format. A model without a template gets
// ChatML (<|im_start|>role\ncontent<|im_end|> ... <|im_start|>assistant\n),
// the layout llama-server falls back to, with "<|im_end|>" as a stop string.
#pragma once

#include <string>
#include <vector>

#include "qkv.h"
#include "runtime/tool_calls/tool_calls.h"
#include "tools/serve/request.h"

namespace qkv::serve {

struct ChatPrompt {
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<std::string> stop;  // strings that end the assistant's turn
  toolcall::Family family = toolcall::Family::kNone;
  bool starts_in_reasoning = false;  // the prompt opened the thinking block
};

// template_source: "" for the model's. Throws ApiError (400) when the
// template raises or the messages cannot be rendered.
ChatPrompt render_chat(const qkv_model* model, const std::string& template_source, const GenRequest& r);

}  // namespace qkv::serve

// The chat prompt of qkv chat and qkv run --chat, and the flags both take.
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "tools/args.h"
#include "tools/chat/cmd_chat.h"

namespace qkv::tools {

const char* const kSamplerFlagsUsage =
    "  --temp T              temperature; 0 is greedy (default 0.8)\n"
    "  --top-k K             (default 40; 0 off)   --top-p P (default 0.95; 1 off)\n"
    "  --min-p P             (default 0.05; 0 off) --seed S  (default: from the clock)\n"
    "  --repeat-penalty R    divide repeated tokens' positive logits by R (default 1, off)\n"
    "  --repeat-last-n N     tokens the penalties look back over (default 64; 0 off, -1 all)\n"
    "  --presence-penalty P  subtract P from tokens already present (default 0)\n"
    "  --frequency-penalty F subtract F per occurrence (default 0)\n"
    "  -l, --logit-bias T+B  add B to token T's logit (T-B subtracts; T-inf bans it); repeatable\n";

const char* const kContextFlagsUsage =
    "  -c, --ctx-size N      context positions (default: the model's)\n"
    "  --kv-type T           KV cache type: f32, f16 (default), bf16, q8_0\n"
    "  -b, --batch-size N    prompt tokens per prefill batch (default 256)\n"
    "  -t, --threads N       threads (default: one per physical core)\n"
    "  --memory-limit BYTES  fail before allocating when weights + KV cache + activations exceed BYTES\n"
    "                        (K, M, G suffixes: 512M, 8G; default: no limit)\n";

bool parse_sampler_flag(int argc, char** argv, int& i, qkv_sampler_options* s, bool* seed_given) {
  const std::string a = argv[i];
  const char* f = a.c_str();
  if (a == "--temp") {
    s->temperature = parse_float(f, flag_value(argc, argv, i), 0.0, 1e6);
  } else if (a == "--top-k") {
    s->top_k = static_cast<int32_t>(parse_int(f, flag_value(argc, argv, i), 0, INT32_MAX));
  } else if (a == "--top-p") {
    s->top_p = parse_float(f, flag_value(argc, argv, i), 1e-9, 1.0);
  } else if (a == "--min-p") {
    s->min_p = parse_float(f, flag_value(argc, argv, i), 0.0, 0.999999);
  } else if (a == "--seed") {
    s->seed = static_cast<uint64_t>(parse_int(f, flag_value(argc, argv, i), 0, INT64_MAX));
    *seed_given = true;
  } else if (a == "--repeat-penalty") {
    s->repeat_penalty = parse_float(f, flag_value(argc, argv, i), 0.0, 1e6);
  } else if (a == "--repeat-last-n") {
    s->repeat_last_n = parse_int(f, flag_value(argc, argv, i), -1, INT64_C(1) << 40);
  } else if (a == "--presence-penalty") {
    s->presence_penalty = parse_float(f, flag_value(argc, argv, i), -1e6, 1e6);
  } else if (a == "--frequency-penalty") {
    s->frequency_penalty = parse_float(f, flag_value(argc, argv, i), -1e6, 1e6);
  } else {
    return false;
  }
  return true;
}

bool parse_logit_bias_flag(int argc, char** argv, int& i, LogitBias* out) {
  const std::string a = argv[i];
  if (a != "-l" && a != "--logit-bias") return false;
  const std::string v = flag_value(argc, argv, i);
  const size_t sign = v.find_first_of("+-", 1);
  if (sign == std::string::npos || sign == 0) {
    fail("flag ", a, " wants TOKEN+BIAS or TOKEN-BIAS (e.g. 2+5, 13-inf), not '", v, "'");
  }
  const std::string token = v.substr(0, sign);
  out->tokens.push_back(static_cast<int32_t>(parse_int(a.c_str(), token.c_str(), 0, INT32_MAX)));
  const std::string bias = v.substr(sign);
  out->biases.push_back(bias == "-inf" ? -INFINITY : parse_float(a.c_str(), bias.c_str(), -1e6, 1e6));
  return true;
}

void apply_logit_bias(qkv_session* session, const LogitBias& b) {
  if (b.tokens.empty()) return;
  check(qkv_session_set_logit_bias(session, b.tokens.data(), b.biases.data(), static_cast<int64_t>(b.tokens.size())),
        "setting the logit biases");
}

bool parse_context_flag(int argc, char** argv, int& i, qkv_context_options* c) {
  const std::string a = argv[i];
  const char* f = a.c_str();
  if (a == "-c" || a == "--ctx-size") {
    c->context = parse_int(f, flag_value(argc, argv, i), 1, INT64_C(1) << 24);
  } else if (a == "--kv-type") {
    c->kv_type = parse_kv_type(flag_value(argc, argv, i));
  } else if (a == "-b" || a == "--batch-size") {
    c->prefill_batch = parse_int(f, flag_value(argc, argv, i), 1, 1 << 16);
  } else if (a == "-t" || a == "--threads") {
    c->threads = static_cast<int>(parse_int(f, flag_value(argc, argv, i), 1, 1024));
  } else if (a == "--memory-limit") {
    c->memory_limit = parse_bytes(f, flag_value(argc, argv, i));
  } else {
    return false;
  }
  return true;
}

namespace {

// ChatML as a Jinja template, so both paths render through qkv_chat_render.
const char* kChatML =
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}";

}  // namespace

ChatPrompt::ChatPrompt(const qkv_model* model, const std::string& template_path, const char* command)
    : model_(model) {
  if (!template_path.empty()) {
    source_ = read_file(template_path);
    if (source_.empty()) fail("the chat template file '", template_path, "' is empty");
  } else if (!qkv_has_chat_template(model)) {
    std::fprintf(stderr,
                 "qkv %s: warning: the model has no chat template (tokenizer.chat_template); using ChatML "
                 "(--chat-template FILE names another)\n",
                 command);
    source_ = kChatML;
    stops_ = {"<|im_end|>", "<|im_start|>"};
  }
}

std::string ChatPrompt::render(const std::string& conversation, bool add_generation_prompt) const {
  const char* source = source_.empty() ? nullptr : source_.c_str();
  int64_t n = 0;
  qkv_status st = qkv_chat_render(model_, source, conversation.c_str(), add_generation_prompt ? 1 : 0, nullptr, 0, &n);
  std::string text;
  if (st == QKV_ERR_BUFFER_TOO_SMALL) {
    text.assign(static_cast<size_t>(n) + 1, '\0');
    st = qkv_chat_render(model_, source, conversation.c_str(), add_generation_prompt ? 1 : 0, text.data(), n + 1, &n);
  }
  check(st, "rendering the chat template");
  text.resize(static_cast<size_t>(n));
  return text;
}

std::vector<int32_t> ChatPrompt::tokenize(const std::string& text) const {
  std::vector<int32_t> ids = tokenize_as_written(text);
  const int32_t bos = added_bos();
  if (bos >= 0 && (ids.empty() || ids[0] != bos)) ids.insert(ids.begin(), bos);
  return ids;
}

bool ChatPrompt::writes_bos(const std::string& text) const {
  const int32_t bos = added_bos();
  const std::vector<int32_t> ids = tokenize_as_written(text);
  return bos >= 0 && !ids.empty() && ids[0] == bos;
}

std::vector<int32_t> ChatPrompt::tokenize_as_written(const std::string& text) const {
  const auto length = static_cast<int64_t>(text.size());
  int64_t n = 0;
  qkv_status st = qkv_tokenize_text(model_, text.data(), length, QKV_TOKENIZE_PARSE_SPECIAL, nullptr, 0, &n);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  if (st == QKV_ERR_BUFFER_TOO_SMALL) {
    st = qkv_tokenize_text(model_, text.data(), length, QKV_TOKENIZE_PARSE_SPECIAL, ids.data(), n, &n);
  }
  check(st, "tokenizing the chat prompt");
  return ids;
}

int32_t ChatPrompt::added_bos() const {
  // ADD_SPECIAL on empty text gives exactly what the vocabulary adds (BOS, maybe EOS).
  int32_t added[2];
  int64_t n_added = 0;
  check(qkv_tokenize_text(model_, "", 0, QKV_TOKENIZE_ADD_SPECIAL, added, 2, &n_added), "tokenizing BOS");
  qkv_model_info info;
  check(qkv_model_get_info(model_, &info), "describing the model");
  return n_added >= 1 && added[0] == info.bos_id ? info.bos_id : -1;
}

std::string conversation_json(const std::string& system, const std::vector<std::string>& turns) {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
  for (size_t i = 0; i < turns.size(); ++i) {
    messages.push_back({{"role", i % 2 == 0 ? "user" : "assistant"}, {"content", turns[i]}});
  }
  // Invalid UTF-8 (a reply cut inside a character) is replaced, not an error.
  return messages.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace qkv::tools

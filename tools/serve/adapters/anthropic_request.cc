// The body of an Anthropic Messages request checked and turned into the
// server's GenRequest: content blocks become chat messages (tool_use blocks
// the assistant's tool calls, tool_result blocks tool messages), custom tools
// become function tools, tool_choice and thinking map onto their OpenAI-side
// equivalents. Errors name the field as Anthropic does ("messages.1.content.0.
// tool_use_id: ...").
#include <limits>
#include <set>

#include "tools/serve/adapters/anthropic.h"
#include "tools/serve/api_error.h"

namespace qkv::serve {

using nlohmann::ordered_json;

namespace {

constexpr size_t kMaxTools = 128;
constexpr size_t kMaxMessages = 100000;
// Anthropic asks for at least this thinking budget.
constexpr int64_t kMinThinkingBudget = 1024;

ApiError bad(const std::string& path, const std::string& problem, const std::string& code = "invalid_value") {
  return bad_field(path, path + ": " + problem, code);
}

std::string at(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }
std::string at(const std::string& path, size_t i) { return path + "." + std::to_string(i); }

// The field, or nullptr when absent or null.
const ordered_json* get(const ordered_json& o, const char* key) {
  auto it = o.find(key);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

const ordered_json& require(const ordered_json& o, const char* key, const std::string& path) {
  const ordered_json* v = get(o, key);
  if (!v) throw bad(at(path, key), "Field required", "missing_required_parameter");
  return *v;
}

std::string string_of(const ordered_json& v, const std::string& path) {
  if (!v.is_string()) throw bad(path, "Input should be a valid string", "invalid_type");
  return v.get<std::string>();
}

std::string optional_string(const ordered_json& o, const char* key, const std::string& path) {
  const ordered_json* v = get(o, key);
  return v ? string_of(*v, at(path, key)) : std::string();
}

bool optional_bool(const ordered_json& o, const char* key, const std::string& path, bool fallback) {
  const ordered_json* v = get(o, key);
  if (!v) return fallback;
  if (!v->is_boolean()) throw bad(at(path, key), "Input should be a valid boolean", "invalid_type");
  return v->get<bool>();
}

int64_t integer_of(const ordered_json& v, const std::string& path, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) throw bad(path, "Input should be a valid integer", "invalid_type");
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) {
    throw bad(path, "Input should be less than or equal to " + std::to_string(hi));
  }
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) {
    throw bad(path, "Input should be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", not " +
                        std::to_string(x));
  }
  return x;
}

double number_of(const ordered_json& v, const std::string& path, double lo, double hi) {
  if (!v.is_number()) throw bad(path, "Input should be a valid number", "invalid_type");
  const double x = v.get<double>();
  if (!(x >= lo && x <= hi)) {
    throw bad(path, "Input should be between " + ordered_json(lo).dump() + " and " + ordered_json(hi).dump() +
                        ", not " + v.dump());
  }
  return x;
}

std::string block_type(const ordered_json& block, const std::string& path) {
  if (!block.is_object()) throw bad(path, "Input should be a content block object", "invalid_type");
  return string_of(require(block, "type", path), at(path, "type"));
}

// A text block's text; cache_control and citations are hints without effect here.
std::string text_block(const ordered_json& block, const std::string& path) {
  return string_of(require(block, "text", path), at(path, "text"));
}

[[noreturn]] void unsupported_block(const std::string& type, const std::string& path) {
  if (type == "image" || type == "document" || type == "search_result") {
    throw bad(path, "'" + type + "' content blocks are not supported: this server runs a text-only model",
              "unsupported_value");
  }
  throw bad(path, "content blocks of type '" + type + "' are not supported here", "unsupported_value");
}

// A string, or a list of text blocks (system prompts, tool results).
std::string text_or_blocks(const ordered_json& v, const std::string& path) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) throw bad(path, "Input should be a string or a list of text blocks", "invalid_type");
  std::string text;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string p = at(path, i);
    const std::string type = block_type(v[i], p);
    if (type != "text") unsupported_block(type, p);
    if (!text.empty()) text += "\n";
    text += text_block(v[i], p);
  }
  return text;
}

// One Anthropic message: an assistant turn is one chat message (text,
// thinking as reasoning, tool_use blocks as calls); a user turn is, in order,
// user messages for its text and a tool message per tool_result.
// prev_calls: the tool_use blocks of the message before, which its
// tool_results must answer (Anthropic requires the result right after).
void read_message(const ordered_json& msg, const std::string& path, std::vector<ToolCallIn>& prev_calls,
                  std::vector<ChatMessage>& out) {
  if (!msg.is_object()) throw bad(path, "Input should be a message object", "invalid_type");
  const std::string role = string_of(require(msg, "role", path), at(path, "role"));
  if (role != "user" && role != "assistant") {
    throw bad(at(path, "role"), "Input should be 'user' or 'assistant' (a system prompt goes in the top-level "
                                "'system' field)");
  }
  const ordered_json& content = require(msg, "content", path);
  const std::string cpath = at(path, "content");
  if (content.is_string()) {
    ChatMessage m;
    m.role = role;
    m.content = content.get<std::string>();
    out.push_back(std::move(m));
    prev_calls.clear();
    return;
  }
  if (!content.is_array()) throw bad(cpath, "Input should be a string or a list of content blocks", "invalid_type");

  if (role == "assistant") {
    ChatMessage m;
    m.role = role;
    std::set<std::string> ids;
    for (size_t i = 0; i < content.size(); ++i) {
      const std::string p = at(cpath, i);
      const ordered_json& b = content[i];
      const std::string type = block_type(b, p);
      if (type == "text") {
        m.content += text_block(b, p);
      } else if (type == "thinking") {
        m.reasoning += string_of(require(b, "thinking", p), at(p, "thinking"));
      } else if (type == "redacted_thinking") {
        // Encrypted thinking of another server's model: nothing to show this one.
      } else if (type == "tool_use") {
        ToolCallIn c;
        c.id = string_of(require(b, "id", p), at(p, "id"));
        if (c.id.empty()) throw bad(at(p, "id"), "a tool_use id may not be empty");
        if (!ids.insert(c.id).second) throw bad(at(p, "id"), "two tool_use blocks have the id '" + c.id + "'");
        c.name = string_of(require(b, "name", p), at(p, "name"));
        const ordered_json& input = require(b, "input", p);
        if (!input.is_object()) throw bad(at(p, "input"), "Input should be an object", "invalid_type");
        c.arguments = input.dump();
        m.tool_calls.push_back(std::move(c));
      } else if (type == "tool_result") {
        throw bad(p, "tool_result blocks belong in user messages");
      } else {
        unsupported_block(type, p);
      }
    }
    prev_calls = m.tool_calls;
    out.push_back(std::move(m));
    return;
  }

  // A user turn: consecutive text blocks form one user message.
  ChatMessage text;
  bool has_text = false;
  std::set<std::string> answered;
  auto flush_text = [&] {
    if (!has_text) return;
    text.role = "user";
    out.push_back(std::move(text));
    text = ChatMessage();
    has_text = false;
  };
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string p = at(cpath, i);
    const ordered_json& b = content[i];
    const std::string type = block_type(b, p);
    if (type == "text") {
      if (has_text) text.content += "\n";
      text.content += text_block(b, p);
      has_text = true;
    } else if (type == "tool_result") {
      ChatMessage m;
      m.role = "tool";
      m.tool_call_id = string_of(require(b, "tool_use_id", p), at(p, "tool_use_id"));
      const ToolCallIn* call = nullptr;
      for (const ToolCallIn& c : prev_calls) {
        if (c.id == m.tool_call_id) call = &c;
      }
      if (!call) {
        throw bad(at(p, "tool_use_id"), "unexpected tool_use_id '" + m.tool_call_id +
                                            "' in a tool_result block: each tool_result must answer a tool_use "
                                            "block of the previous (assistant) message");
      }
      if (!answered.insert(m.tool_call_id).second) {
        throw bad(at(p, "tool_use_id"), "the tool_use '" + m.tool_call_id + "' is answered twice");
      }
      m.name = call->name;
      if (const ordered_json* c = get(b, "content")) m.content = text_or_blocks(*c, at(p, "content"));
      // The chat templates have no place for the flag: the model reads it in the text.
      if (optional_bool(b, "is_error", p, false)) m.content = "Error: " + m.content;
      flush_text();
      out.push_back(std::move(m));
    } else if (type == "tool_use" || type == "thinking" || type == "redacted_thinking") {
      throw bad(p, type + " blocks belong in assistant messages");
    } else {
      unsupported_block(type, p);
    }
  }
  // A user message of no blocks still takes its turn.
  if (content.empty()) has_text = true;
  flush_text();
  prev_calls.clear();
}

void read_tools(const ordered_json& body, GenRequest& r) {
  const ordered_json* tools = get(body, "tools");
  if (!tools) return;
  if (!tools->is_array()) throw bad("tools", "Input should be a list of tools", "invalid_type");
  if (tools->size() > kMaxTools) throw bad("tools", "at most " + std::to_string(kMaxTools) + " tools are allowed");
  std::set<std::string> names;
  for (size_t i = 0; i < tools->size(); ++i) {
    const ordered_json& t = (*tools)[i];
    const std::string p = at("tools", i);
    if (!t.is_object()) throw bad(p, "Input should be a tool object", "invalid_type");
    const std::string type = optional_string(t, "type", p);
    if (!type.empty() && type != "custom") {
      throw bad(at(p, "type"), "'" + type + "' tools (Anthropic-hosted tools) are not supported; only custom tools "
                               "with an input_schema", "unsupported_value");
    }
    ToolSpec spec;
    spec.name = string_of(require(t, "name", p), at(p, "name"));
    if (!valid_tool_name(spec.name, 128) || spec.name.find('.') != std::string::npos) {  // Anthropic: [a-zA-Z0-9_-]{1,128}
      throw bad(at(p, "name"), "a tool name must be 1 to 128 letters, digits, '_' or '-' (got '" + spec.name + "')");
    }
    if (!names.insert(spec.name).second) throw bad(at(p, "name"), "two tools are named '" + spec.name + "'");
    spec.description = optional_string(t, "description", p);
    const ordered_json& schema = require(t, "input_schema", p);
    if (!schema.is_object()) throw bad(at(p, "input_schema"), "Input should be a JSON Schema object", "invalid_type");
    const ordered_json* st = get(schema, "type");
    if (!st || *st != "object") throw bad(at(p, "input_schema.type"), "Input should be 'object'");
    spec.parameters = schema;
    r.tools.push_back(std::move(spec));
  }
}

void read_tool_choice(const ordered_json& body, GenRequest& r) {
  const ordered_json* tc = get(body, "tool_choice");
  if (!tc) return;
  if (!tc->is_object()) throw bad("tool_choice", "Input should be an object like {\"type\": \"auto\"}", "invalid_type");
  const std::string type = string_of(require(*tc, "type", "tool_choice"), "tool_choice.type");
  if (type == "auto") {
    r.tool_choice = "auto";
  } else if (type == "any") {
    r.tool_choice = "required";
  } else if (type == "none") {
    r.tool_choice = "none";
  } else if (type == "tool") {
    r.tool_choice = "function";
    r.tool_choice_name = string_of(require(*tc, "name", "tool_choice"), "tool_choice.name");
    bool found = false;
    for (const ToolSpec& t : r.tools) found |= t.name == r.tool_choice_name;
    if (!found) throw bad("tool_choice.name", "no tool named '" + r.tool_choice_name + "' is in 'tools'");
  } else {
    throw bad("tool_choice.type", "Input should be 'auto', 'any', 'tool' or 'none' (got '" + type + "')");
  }
  if ((type == "any" || type == "tool") && r.tools.empty()) {
    throw bad("tool_choice", "tool_choice '" + type + "' needs 'tools'");
  }
  r.parallel_tool_calls = !optional_bool(*tc, "disable_parallel_tool_use", "tool_choice", false);
}

void read_thinking(const ordered_json& body, GenRequest& r, bool count_only) {
  const ordered_json* th = get(body, "thinking");
  if (!th) return;
  if (!th->is_object()) throw bad("thinking", "Input should be an object like {\"type\": \"enabled\", ...}",
                                  "invalid_type");
  const std::string type = string_of(require(*th, "type", "thinking"), "thinking.type");
  if (type == "enabled") {
    // The budget is checked as Anthropic checks it; the model here thinks
    // until it closes its thinking or max_tokens ends the reply.
    const int64_t budget = integer_of(require(*th, "budget_tokens", "thinking"), "thinking.budget_tokens",
                                      kMinThinkingBudget, std::numeric_limits<int32_t>::max());
    if (!count_only && budget >= r.max_tokens) {
      throw bad("thinking.budget_tokens", "`max_tokens` must be greater than `thinking.budget_tokens`");
    }
    r.template_kwargs["enable_thinking"] = true;
  } else if (type == "disabled") {
    r.template_kwargs["enable_thinking"] = false;
  } else {
    throw bad("thinking.type", "Input should be 'enabled' or 'disabled' (got '" + type + "')");
  }
}

}  // namespace

MessagesRequest parse_messages_request(const ordered_json& body, const RequestLimits& limits, bool count_only) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  MessagesRequest mr;
  GenRequest& r = mr.gen;
  r.chat = true;
  r.model = optional_string(body, "model", "");
  qkv_sampler_options_init(&r.sampler);

  if (!count_only) {
    r.max_tokens = integer_of(require(body, "max_tokens", ""), "max_tokens", 1, std::numeric_limits<int32_t>::max());
    if (const ordered_json* t = get(body, "temperature")) r.sampler.temperature = static_cast<float>(number_of(*t, "temperature", 0, 1));
    if (const ordered_json* p = get(body, "top_p")) {
      r.sampler.top_p = static_cast<float>(number_of(*p, "top_p", 0, 1));
      if (r.sampler.top_p <= 0) throw bad("top_p", "Input should be greater than 0");
    }
    if (const ordered_json* k = get(body, "top_k")) {
      r.sampler.top_k = static_cast<int32_t>(integer_of(*k, "top_k", 0, std::numeric_limits<int32_t>::max()));
    }
    if (const ordered_json* s = get(body, "stop_sequences")) {
      if (!s->is_array()) throw bad("stop_sequences", "Input should be a list of strings", "invalid_type");
      if (s->size() > limits.max_stop) {
        throw bad("stop_sequences", "at most " + std::to_string(limits.max_stop) + " stop sequences are allowed");
      }
      for (size_t i = 0; i < s->size(); ++i) {
        const std::string x = string_of((*s)[i], at("stop_sequences", i));
        if (x.empty()) throw bad(at("stop_sequences", i), "a stop sequence may not be empty");
        if (x.size() > limits.max_stop_bytes) {
          throw bad(at("stop_sequences", i), "longer than " + std::to_string(limits.max_stop_bytes) + " bytes");
        }
        mr.stop_sequences.push_back(x);
      }
      r.stop = mr.stop_sequences;
    }
    r.stream = optional_bool(body, "stream", "", false);
    r.speculative = parse_speculative(body);  // llama-server's extension fields
    if (const ordered_json* md = get(body, "metadata")) {
      if (!md->is_object()) throw bad("metadata", "Input should be an object", "invalid_type");
      r.user = optional_string(*md, "user_id", "metadata");
    }
  }
  for (const char* hosted : {"mcp_servers", "container"}) {
    if (get(body, hosted)) throw bad(hosted, "not supported by this server", "unsupported_value");
  }

  if (const ordered_json* sys = get(body, "system")) {
    ChatMessage m;
    m.role = "system";
    m.content = text_or_blocks(*sys, "system");
    r.messages.push_back(std::move(m));
  }
  const ordered_json& messages = require(body, "messages", "");
  if (!messages.is_array()) throw bad("messages", "Input should be a valid list", "invalid_type");
  if (messages.empty()) throw bad("messages", "at least one message is required");
  if (messages.size() > kMaxMessages) throw bad("messages", "too many messages");
  std::vector<ToolCallIn> prev_calls;
  for (size_t i = 0; i < messages.size(); ++i) read_message(messages[i], at("messages", i), prev_calls, r.messages);
  if (!count_only && r.messages.back().role == "assistant") {
    // The templates would close the assistant's turn and open a new one
    // rather than continue it, so a prefill is refused rather than ignored.
    throw bad(at("messages", messages.size() - 1),
              "a final assistant message (prefilling the reply) is not supported; end with a user message",
              "unsupported_value");
  }

  read_tools(body, r);
  read_tool_choice(body, r);
  read_thinking(body, r, count_only);
  return mr;
}

}  // namespace qkv::serve

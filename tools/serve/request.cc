#include "tools/serve/request.h"

#include <cmath>
#include <limits>

#include "tools/serve/api_error.h"

namespace qkv::serve {

using nlohmann::json;

namespace {

struct TooDeep {};

// The field or nullptr when absent or null (OpenAI treats null as not given).
const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

double number(const json& body, const char* name, double lo, double hi, double fallback) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_number()) throw bad_field(name, std::string("'") + name + "' must be a number", "invalid_type");
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi)) {
    throw bad_field(name, std::string("'") + name + "' must be between " + json(lo).dump() + " and " +
                              json(hi).dump() + ", not " + v->dump());
  }
  return x;
}

int64_t integer(const json& body, const char* name, int64_t lo, int64_t hi, int64_t fallback) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_number_integer()) {
    throw bad_field(name, std::string("'") + name + "' must be an integer", "invalid_type");
  }
  // An unsigned value above int64 reads as negative: compare as unsigned first.
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi)) {
    throw bad_field(name, std::string("'") + name + "' must be at most " + std::to_string(hi));
  }
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi) {
    throw bad_field(name, std::string("'") + name + "' must be between " + std::to_string(lo) + " and " +
                              std::to_string(hi) + ", not " + std::to_string(x));
  }
  return x;
}

bool boolean(const json& body, const char* name, bool fallback) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_boolean()) throw bad_field(name, std::string("'") + name + "' must be true or false", "invalid_type");
  return v->get<bool>();
}

std::string string_field(const json& body, const char* name) {
  const json* v = field(body, name);
  if (!v) return {};
  if (!v->is_string()) throw bad_field(name, std::string("'") + name + "' must be a string", "invalid_type");
  return v->get<std::string>();
}

std::vector<int32_t> token_array(const json& a, const char* name, const RequestLimits& limits) {
  if (a.empty()) throw bad_field(name, std::string("'") + name + "' is an empty list of tokens");
  if (static_cast<int64_t>(a.size()) > limits.max_prompt_tokens) {
    throw bad_field(name, std::string("'") + name + "' has more tokens than the context holds",
                    "context_length_exceeded");
  }
  std::vector<int32_t> out;
  for (const json& t : a) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= limits.vocab_size) {
      throw bad_field(name, std::string("'") + name + "' holds " + t.dump() + ", not a token id below " +
                                std::to_string(limits.vocab_size));
    }
    out.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return out;
}

// The fields both endpoints share.
// response_format (OpenAI), json_schema and grammar (llama.cpp): at most one.
void parse_output_format(const json& body, GenRequest& r) {
  auto set = [&](int kind, std::string source, const char* param) {
    if (r.grammar_kind >= 0) {
      throw bad_field(param, "give only one of 'response_format', 'json_schema' and 'grammar' ('" +
                                 r.grammar_param + "' is given too)");
    }
    r.grammar_kind = kind;
    r.grammar_source = std::move(source);
    r.grammar_param = param;
  };
  if (const json* rf = field(body, "response_format")) {
    if (!rf->is_object()) throw bad_field("response_format", "'response_format' must be an object", "invalid_type");
    const std::string type = string_field(*rf, "type");
    if (type == "json_schema") {
      const json* js = field(*rf, "json_schema");
      if (!js || !js->is_object()) {
        throw bad_field("response_format", "'response_format.json_schema' must be an object with a 'schema'");
      }
      const json* schema = field(*js, "schema");
      if (!schema || !(schema->is_object() || schema->is_boolean())) {
        throw bad_field("response_format", "'response_format.json_schema.schema' must be a JSON Schema object");
      }
      if (const json* strict = field(*js, "strict"); strict && !strict->is_boolean()) {
        throw bad_field("response_format", "'response_format.json_schema.strict' must be true or false", "invalid_type");
      }
      set(QKV_GRAMMAR_JSON_SCHEMA, schema->dump(), "response_format");
    } else if (type == "json_object") {
      // llama-server's variant: a schema beside the type.
      if (const json* schema = field(*rf, "schema")) {
        set(QKV_GRAMMAR_JSON_SCHEMA, schema->dump(), "response_format");
      } else {
        set(QKV_GRAMMAR_JSON_OBJECT, "", "response_format");
      }
    } else if (type != "text") {
      throw bad_field("response_format", "'response_format.type' must be text, json_object or json_schema");
    }
  }
  if (const json* js = field(body, "json_schema")) {
    if (!js->is_object() && !js->is_boolean()) throw bad_field("json_schema", "'json_schema' must be a JSON Schema object", "invalid_type");
    set(QKV_GRAMMAR_JSON_SCHEMA, js->dump(), "json_schema");
  }
  if (const json* g = field(body, "grammar")) {
    if (!g->is_string()) throw bad_field("grammar", "'grammar' must be GBNF grammar text", "invalid_type");
    if (!g->get<std::string>().empty()) set(QKV_GRAMMAR_GBNF, g->get<std::string>(), "grammar");
  }
}

void parse_common(const json& body, const RequestLimits& limits, GenRequest& r) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  r.model = string_field(body, "model");
  if (integer(body, "n", 1, 1 << 30, 1) != 1) {
    throw bad_field("n", "only n = 1 is supported (one choice per request)", "unsupported_value");
  }
  if (integer(body, "best_of", 1, 1 << 30, 1) != 1) {
    throw bad_field("best_of", "only best_of = 1 is supported", "unsupported_value");
  }
  qkv_sampler_options_init(&r.sampler);
  r.sampler.temperature = static_cast<float>(number(body, "temperature", 0, 2, r.sampler.temperature));
  r.sampler.top_p = static_cast<float>(number(body, "top_p", 0, 1, r.sampler.top_p));
  if (r.sampler.top_p <= 0) throw bad_field("top_p", "'top_p' must be above 0 (1 turns it off)");
  r.sampler.top_k = static_cast<int32_t>(integer(body, "top_k", 0, std::numeric_limits<int32_t>::max(),
                                                 r.sampler.top_k));
  r.sampler.min_p = static_cast<float>(number(body, "min_p", 0, 0.999999, r.sampler.min_p));
  r.sampler.presence_penalty = static_cast<float>(number(body, "presence_penalty", -2, 2, 0));
  r.sampler.frequency_penalty = static_cast<float>(number(body, "frequency_penalty", -2, 2, 0));
  r.sampler.repeat_penalty = static_cast<float>(number(body, "repeat_penalty", 0, 100, 1));
  r.sampler.repeat_last_n = integer(body, "repeat_last_n", -1, std::numeric_limits<int32_t>::max(), 64);
  if (field(body, "seed")) {
    r.sampler.seed = static_cast<uint64_t>(
        integer(body, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), 0));
    r.seed_given = true;
  }

  if (const json* s = field(body, "stop")) {
    if (s->is_string()) {
      r.stop.push_back(s->get<std::string>());
    } else if (s->is_array()) {
      for (const json& x : *s) {
        if (!x.is_string()) throw bad_field("stop", "'stop' must be a string or a list of strings", "invalid_type");
        r.stop.push_back(x.get<std::string>());
      }
    } else {
      throw bad_field("stop", "'stop' must be a string or a list of strings", "invalid_type");
    }
    if (r.stop.size() > limits.max_stop) {
      throw bad_field("stop", "'stop' may hold at most " + std::to_string(limits.max_stop) + " strings");
    }
    for (const std::string& x : r.stop) {
      if (x.size() > limits.max_stop_bytes) {
        throw bad_field("stop", "a stop string is longer than " + std::to_string(limits.max_stop_bytes) + " bytes");
      }
    }
  }

  if (const json* lb = field(body, "logit_bias")) {
    if (!lb->is_object()) throw bad_field("logit_bias", "'logit_bias' must map token ids to numbers", "invalid_type");
    if (lb->size() > limits.max_logit_bias) {
      throw bad_field("logit_bias", "'logit_bias' may hold at most " + std::to_string(limits.max_logit_bias) +
                                        " tokens");
    }
    for (auto it = lb->begin(); it != lb->end(); ++it) {
      const std::string& key = it.key();
      char* end = nullptr;
      const long long id = std::strtoll(key.c_str(), &end, 10);
      if (key.empty() || *end != '\0' || id < 0 || id >= limits.vocab_size) {
        throw bad_field("logit_bias", "'logit_bias' key '" + key + "' is not a token id below " +
                                          std::to_string(limits.vocab_size));
      }
      if (!it->is_number() || !(it->get<double>() >= -100 && it->get<double>() <= 100)) {
        throw bad_field("logit_bias", "'logit_bias' values must be numbers from -100 to 100");
      }
      // -100 bans the token, as OpenAI describes it.
      const double b = it->get<double>();
      r.logit_bias.push_back({static_cast<int32_t>(id), b <= -100 ? -INFINITY : static_cast<float>(b)});
    }
  }

  r.stream = boolean(body, "stream", false);
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) throw bad_field("stream_options", "'stream_options' must be an object", "invalid_type");
    if (!r.stream) throw bad_field("stream_options", "'stream_options' is only allowed with 'stream': true");
    r.include_usage = boolean(*so, "include_usage", false);
  }
  r.user = string_field(body, "user");
  parse_output_format(body, r);
  r.speculative = parse_speculative(body);
}

// llama-server's speculative decoding fields.
constexpr const char* kSpeculativeFields[] = {"speculative", "speculative.n_max", "speculative.n_min",
                                              "speculative.p_min"};

}  // namespace

SpeculativeRequest parse_speculative(const json& obj, const std::string& prefix) {
  // The fields under the names an error gives them (prefix + key).
  json named = json::object();
  for (const char* key : kSpeculativeFields) {
    if (auto it = obj.find(key); it != obj.end()) named[prefix + key] = *it;
  }
  SpeculativeRequest s;
  s.enabled = boolean(named, (prefix + "speculative").c_str(), true);
  s.n_max = integer(named, (prefix + "speculative.n_max").c_str(), 0, 256, -1);
  s.n_min = integer(named, (prefix + "speculative.n_min").c_str(), 0, 256, -1);
  s.p_min = number(named, (prefix + "speculative.p_min").c_str(), 0, 1, -1);
  if (s.n_max == 0) s.enabled = false;
  return s;
}

SpeculativeRequest parse_speculative(const nlohmann::ordered_json& obj, const std::string& prefix) {
  json fields = json::object();
  for (const char* key : kSpeculativeFields) {
    if (auto it = obj.find(key); it != obj.end()) fields[key] = json(*it);
  }
  return parse_speculative(fields, prefix);
}

json parse_body(const std::string& body, int max_depth) {
  json::parser_callback_t depth_limit = [max_depth](int depth, json::parse_event_t, json&) {
    if (depth > max_depth) throw TooDeep{};
    return true;
  };
  try {
    return json::parse(body, depth_limit);
  } catch (const TooDeep&) {
    throw ApiError(400, "the JSON body nests deeper than " + std::to_string(max_depth) + " levels");
  } catch (const json::exception& e) {  // syntax, or a number out of range
    throw ApiError(400, std::string("the body is not valid JSON: ") + e.what());
  }
}

GenRequest parse_completion(const json& body, const RequestLimits& limits) {
  GenRequest r;
  parse_common(body, limits, r);
  r.max_tokens = integer(body, "max_tokens", 0, std::numeric_limits<int32_t>::max(), 16);
  const json* p = field(body, "prompt");
  if (!p) throw bad_field("prompt", "'prompt' is required", "missing_required_parameter");
  if (p->is_string()) {
    r.prompt = p->get<std::string>();
  } else if (p->is_array() && !p->empty() && (*p)[0].is_number_integer()) {
    r.prompt_tokens = token_array(*p, "prompt", limits);
  } else if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) {
    r.prompt = (*p)[0].get<std::string>();
  } else if (p->is_array() && p->size() == 1 && (*p)[0].is_array()) {
    r.prompt_tokens = token_array((*p)[0], "prompt", limits);
  } else if (p->is_array() && p->size() > 1) {
    throw bad_field("prompt", "one prompt per request: 'prompt' lists " + std::to_string(p->size()),
                    "unsupported_value");
  } else {
    throw bad_field("prompt", "'prompt' must be a string, a list of token ids, or a list of one of them",
                    "invalid_type");
  }
  r.echo = boolean(body, "echo", false);
  if (field(body, "suffix")) throw bad_field("suffix", "'suffix' (insertion) is not supported", "unsupported_value");
  r.top_logprobs = integer(body, "logprobs", 0, 5, -1);
  r.logprobs = r.top_logprobs >= 0;
  if (r.top_logprobs < 0) r.top_logprobs = 0;
  return r;
}

GenRequest parse_chat(const json& body, const RequestLimits& limits) {
  GenRequest r;
  r.chat = true;
  parse_common(body, limits, r);
  r.max_tokens = integer(body, "max_completion_tokens", 0, std::numeric_limits<int32_t>::max(), -1);
  if (r.max_tokens < 0) r.max_tokens = integer(body, "max_tokens", 0, std::numeric_limits<int32_t>::max(), -1);
  const json* m = field(body, "messages");
  if (!m) throw bad_field("messages", "'messages' is required", "missing_required_parameter");
  if (!m->is_array() || m->empty()) throw bad_field("messages", "'messages' must be a non-empty list");
  for (size_t i = 0; i < m->size(); ++i) {
    const json& msg = (*m)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!msg.is_object()) throw bad_field(where, "'" + where + "' must be an object", "invalid_type");
    ChatMessage cm;
    cm.role = string_field(msg, "role");
    if (cm.role != "system" && cm.role != "developer" && cm.role != "user" && cm.role != "assistant" &&
        cm.role != "tool") {
      throw bad_field(where + ".role", "'" + where + ".role' must be system, developer, user, assistant or tool");
    }
    const json* c = field(msg, "content");
    if (c && c->is_string()) {
      cm.content = c->get<std::string>();
    } else if (c && c->is_array()) {
      for (const json& part : *c) {  // content parts: only text ones
        if (!part.is_object() || string_field(part, "type") != "text") {
          throw bad_field(where + ".content", "only text content parts are supported", "unsupported_value");
        }
        cm.content += string_field(part, "text");
      }
    } else if (c || cm.role != "assistant") {
      throw bad_field(where + ".content", "'" + where + ".content' must be a string or a list of text parts",
                      "invalid_type");
    }
    parse_message_tool_parts(msg, where, cm);
    r.messages.push_back(std::move(cm));
  }
  parse_tool_fields(body, r);
  check_tool_messages(r);
  r.logprobs = boolean(body, "logprobs", false);
  r.top_logprobs = integer(body, "top_logprobs", 0, 20, 0);
  if (r.top_logprobs > 0 && !r.logprobs) {
    throw bad_field("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  }
  return r;
}

}  // namespace qkv::serve

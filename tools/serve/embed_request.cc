#include "tools/serve/embed_request.h"

#include <algorithm>

#include "tools/serve/api_error.h"

namespace qkv::serve {

using nlohmann::json;

namespace {

// The field when it is present and not null.
const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

bool boolean(const json& body, const char* name, bool fallback) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_boolean()) throw bad_field(name, std::string("'") + name + "' must be true or false", "invalid_type");
  return v->get<bool>();
}

std::string model_name(const json& body) {
  const json* m = field(body, "model");
  if (!m) return "";
  if (!m->is_string()) throw bad_field("model", "'model' must be a string", "invalid_type");
  return m->get<std::string>();
}

int64_t dimensions(const json& body, const EmbedLimits& limits) {
  const json* d = field(body, "dimensions");
  if (!d) return 0;
  if (!d->is_number_integer()) throw bad_field("dimensions", "'dimensions' must be an integer", "invalid_type");
  const bool is_unsigned = d->is_number_unsigned();
  const int64_t n = is_unsigned && d->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : d->get<int64_t>();
  if (n < 1 || n > limits.width) {
    throw bad_field("dimensions", "'dimensions' must be between 1 and " + std::to_string(limits.width) +
                                      " (this model's embedding width), not " + d->dump());
  }
  return n;
}

// A list of token ids; where: its path, for errors.
std::vector<int32_t> token_ids(const json& a, const std::string& where, const EmbedLimits& limits) {
  std::vector<int32_t> ids;
  ids.reserve(a.size());
  for (const json& x : a) {
    const bool in_range = x.is_number_integer() && !(x.is_number_unsigned() && x.get<uint64_t>() > INT32_MAX) &&
                          x.get<int64_t>() >= 0 && x.get<int64_t>() < limits.vocab_size;
    if (!in_range) {
      throw bad_field("input", "'" + where + "' holds " + x.dump() + ", not a token id below " +
                                   std::to_string(limits.vocab_size));
    }
    ids.push_back(static_cast<int32_t>(x.get<int64_t>()));
  }
  return ids;
}

void check_count(size_t n, const char* what, const EmbedLimits& limits) {
  if (n > limits.max_inputs) {
    throw bad_field(what, std::string("'") + what + "' has " + std::to_string(n) + " items; at most " +
                              std::to_string(limits.max_inputs) + " are allowed per request");
  }
}

// The tokenizers read C strings: a NUL would silently end the text.
void check_no_nul(const std::string& text, const char* param, const std::string& where) {
  if (text.find('\0') != std::string::npos) {
    throw bad_field(param, "'" + where + "' contains a NUL character (\\u0000)");
  }
}

EmbedInput text_input(const json& s, const std::string& where) {
  EmbedInput in;
  in.text = s.get<std::string>();
  if (in.text.empty()) throw bad_field("input", "'" + where + "' is an empty string: there is nothing to embed");
  check_no_nul(in.text, "input", where);
  return in;
}

qkv_pooling pooling_field(const json& body) {
  const json* p = field(body, "pooling");
  if (!p) return QKV_POOLING_DEFAULT;
  qkv_pooling out = QKV_POOLING_DEFAULT;
  if (!p->is_string() || !pooling_from_name(p->get<std::string>(), &out)) {
    throw bad_field("pooling", "'pooling' must be one of none, mean, cls, last, rank");
  }
  return out;
}

}  // namespace

bool pooling_from_name(const std::string& name, qkv_pooling* pooling) {
  static const struct {
    const char* name;
    qkv_pooling value;
  } kNames[] = {{"none", QKV_POOLING_NONE}, {"mean", QKV_POOLING_MEAN}, {"cls", QKV_POOLING_CLS},
                {"last", QKV_POOLING_LAST}, {"rank", QKV_POOLING_RANK}};
  for (const auto& n : kNames) {
    if (name == n.name) {
      *pooling = n.value;
      return true;
    }
  }
  return false;
}

const char* pooling_name(qkv_pooling pooling) {
  switch (pooling) {
    case QKV_POOLING_NONE: return "none";
    case QKV_POOLING_MEAN: return "mean";
    case QKV_POOLING_CLS: return "cls";
    case QKV_POOLING_LAST: return "last";
    case QKV_POOLING_RANK: return "rank";
    default: return "default";
  }
}

EmbedRequest parse_embeddings(const json& body, const EmbedLimits& limits) {
  EmbedRequest r;
  r.model = model_name(body);
  const json* in = field(body, "input");
  if (!in) throw bad_field("input", "'input' is required", "missing_required_parameter");
  const char* kShape = "'input' must be a string, a list of strings, a list of token ids or a list of lists of token ids";
  if (in->is_string()) {
    r.inputs.push_back(text_input(*in, "input"));
  } else if (in->is_array()) {
    if (in->empty()) throw bad_field("input", "'input' is an empty list: there is nothing to embed");
    check_count(in->size(), "input", limits);
    if ((*in)[0].is_number()) {  // one input given as ids
      EmbedInput e;
      e.is_tokens = true;
      e.tokens = token_ids(*in, "input", limits);
      r.inputs.push_back(std::move(e));
    } else {
      for (size_t i = 0; i < in->size(); ++i) {
        const json& x = (*in)[i];
        const std::string where = "input[" + std::to_string(i) + "]";
        if (x.is_string()) {
          r.inputs.push_back(text_input(x, where));
        } else if (x.is_array()) {
          if (x.empty()) throw bad_field("input", "'" + where + "' is an empty list of token ids");
          EmbedInput e;
          e.is_tokens = true;
          e.tokens = token_ids(x, where, limits);
          r.inputs.push_back(std::move(e));
        } else {
          throw bad_field("input", std::string(kShape) + "; '" + where + "' is " + x.type_name(), "invalid_type");
        }
      }
    }
  } else {
    throw bad_field("input", std::string(kShape) + ", not " + in->type_name(), "invalid_type");
  }
  if (const json* f = field(body, "encoding_format")) {
    const std::string v = f->is_string() ? f->get<std::string>() : "";
    if (v != "float" && v != "base64") {
      throw bad_field("encoding_format", "'encoding_format' must be \"float\" or \"base64\"");
    }
    r.base64 = v == "base64";
  }
  if (const json* u = field(body, "user"); u && !u->is_string()) {
    throw bad_field("user", "'user' must be a string", "invalid_type");
  }
  r.dimensions = dimensions(body, limits);
  r.pooling = pooling_field(body);
  r.normalize = boolean(body, "normalize", true);
  r.truncate = boolean(body, "truncate", false);
  return r;
}

EmbedRequest parse_ollama_embed(const json& body, const EmbedLimits& limits) {
  EmbedRequest r;
  r.model = model_name(body);
  if (const json* in = field(body, "input")) {
    if (in->is_string()) {
      if (!in->get<std::string>().empty()) r.inputs.push_back(text_input(*in, "input"));
    } else if (in->is_array()) {
      check_count(in->size(), "input", limits);
      for (size_t i = 0; i < in->size(); ++i) {
        const json& x = (*in)[i];
        const std::string where = "input[" + std::to_string(i) + "]";
        if (!x.is_string()) throw bad_field("input", "'" + where + "' must be a string", "invalid_type");
        r.inputs.push_back(text_input(x, where));
      }
    } else {
      throw bad_field("input", "'input' must be a string or a list of strings", "invalid_type");
    }
  }
  if (const json* o = field(body, "options"); o && !o->is_object()) {
    throw bad_field("options", "'options' must be an object", "invalid_type");
  }
  if (const json* k = field(body, "keep_alive"); k && !k->is_string() && !k->is_number()) {
    throw bad_field("keep_alive", "'keep_alive' must be a duration string or a number of seconds", "invalid_type");
  }
  r.dimensions = dimensions(body, limits);
  r.truncate = boolean(body, "truncate", true);
  return r;
}

EmbedRequest parse_ollama_embeddings(const json& body, const EmbedLimits& limits) {
  EmbedRequest r;
  r.model = model_name(body);
  if (const json* p = field(body, "prompt")) {
    if (!p->is_string()) throw bad_field("prompt", "'prompt' must be a string", "invalid_type");
    if (!p->get<std::string>().empty()) r.inputs.push_back(text_input(*p, "prompt"));
  }
  if (const json* o = field(body, "options"); o && !o->is_object()) {
    throw bad_field("options", "'options' must be an object", "invalid_type");
  }
  if (const json* k = field(body, "keep_alive"); k && !k->is_string() && !k->is_number()) {
    throw bad_field("keep_alive", "'keep_alive' must be a duration string or a number of seconds", "invalid_type");
  }
  (void)limits;
  r.normalize = false;
  r.truncate = true;
  return r;
}

RerankRequest parse_rerank(const json& body, const EmbedLimits& limits) {
  RerankRequest r;
  r.model = model_name(body);
  const json* q = field(body, "query");
  if (!q) throw bad_field("query", "'query' is required", "missing_required_parameter");
  if (!q->is_string()) throw bad_field("query", "'query' must be a string", "invalid_type");
  r.query = q->get<std::string>();
  if (r.query.empty()) throw bad_field("query", "'query' is an empty string");
  check_no_nul(r.query, "query", "query");
  const json* d = field(body, "documents");
  if (!d) throw bad_field("documents", "'documents' is required", "missing_required_parameter");
  if (!d->is_array() || d->empty()) {
    throw bad_field("documents", "'documents' must be a non-empty list of strings", "invalid_type");
  }
  check_count(d->size(), "documents", limits);
  for (size_t i = 0; i < d->size(); ++i) {
    const json& x = (*d)[i];
    const std::string where = "documents[" + std::to_string(i) + "]";
    const json* text = x.is_object() ? field(x, "text") : &x;
    if (!text || !text->is_string()) {
      throw bad_field("documents", "'" + where + "' must be a string (or an object with a string 'text')",
                      "invalid_type");
    }
    r.documents.push_back(text->get<std::string>());
    if (r.documents.back().empty()) throw bad_field("documents", "'" + where + "' is an empty string");
    check_no_nul(r.documents.back(), "documents", where);
  }
  if (const json* t = field(body, "top_n")) {
    // nlohmann keeps a non-negative integer as unsigned, a negative one as signed.
    const bool positive = t->is_number_unsigned() ? t->get<uint64_t>() >= 1
                                                   : t->is_number_integer() && t->get<int64_t>() >= 1;
    if (!positive) throw bad_field("top_n", "'top_n' must be an integer of at least 1, not " + t->dump());
    const uint64_t n = t->is_number_unsigned() ? t->get<uint64_t>() : static_cast<uint64_t>(t->get<int64_t>());
    r.top_n = static_cast<int64_t>(std::min<uint64_t>(n, r.documents.size()));
  }
  r.return_documents = boolean(body, "return_documents", false);
  r.truncate = boolean(body, "truncate", false);
  return r;
}

}  // namespace qkv::serve

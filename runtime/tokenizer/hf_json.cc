// Hugging Face tokenizer.json (and the tokenizer_config.json beside it) as a
// qkv Tokenizer. The model must be BPE: byte-level when the pre-tokenizer has
// a ByteLevel step (Llama 3, Qwen, GPT-2), SentencePiece-style otherwise
// (Gemma: spaces replaced by "▁" by a normalizer or a Metaspace
// pre-tokenizer, byte fallback). Split regexes run on PCRE2
// as written in the file. Every component qkv does not implement is an error
// naming it, so a file is either tokenized as Hugging Face does or refused.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "kernels/error.h"
#include "runtime/tokenizer.h"
#include "runtime/tokenizer/bpe.h"
#include "runtime/tokenizer/vocab_text.h"

namespace qkv {

namespace {

using nlohmann::json;

constexpr int64_t kMaxVocab = int64_t(1) << 24;
constexpr uint64_t kMaxJsonBytes = uint64_t(1) << 30;
constexpr int kMaxDepth = 64;  // real files nest 5 deep; bounds the parser's recursion


std::string read_text(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  QKV_CHECK(in.good(), "cannot open ", what, " '", path, "'");
  const auto size = static_cast<uint64_t>(in.tellg());
  QKV_CHECK(size <= kMaxJsonBytes, what, " '", path, "' has ", size, " bytes, more than ", kMaxJsonBytes);
  in.seekg(0);
  std::string text(size, '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  QKV_CHECK(in.good() || size == 0, "cannot read ", what, " '", path, "'");
  return text;
}

// Fails when arrays/objects nest deeper than kMaxDepth (outside strings).
void check_depth(const std::string& text, const std::string& path) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      QKV_CHECK(++depth <= kMaxDepth, "'", path, "' nests JSON more than ", kMaxDepth, " levels deep");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

json parse_file(const std::string& path, const char* what) {
  const std::string text = read_text(path, what);
  check_depth(text, path);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    fail(what, " '", path, "' is not valid JSON: ", e.what());
  }
}

// Typed access with errors naming the file and the key.
struct Reader {
  std::string path;

  const json& get(const json& obj, const char* key, const char* where) const {
    QKV_CHECK(obj.is_object(), "tokenizer file '", path, "': ", where, " is not an object");
    auto it = obj.find(key);
    QKV_CHECK(it != obj.end(), "tokenizer file '", path, "': ", where, " has no '", key, "'");
    return *it;
  }
  // A Sequence component's list of steps.
  const json& steps(const json& obj, const char* key, const char* where) const {
    const json& v = get(obj, key, where);
    QKV_CHECK(v.is_array(), "tokenizer file '", path, "': ", where, ".", key, " is not an array");
    return v;
  }
  const json* find(const json& obj, const char* key) const {
    if (!obj.is_object()) return nullptr;
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  std::string string(const json& v, const std::string& what) const {
    QKV_CHECK(v.is_string(), "tokenizer file '", path, "': ", what, " is not a string");
    return v.get<std::string>();
  }
  bool boolean(const json& obj, const char* key, bool fallback, const char* where) const {
    const json* v = find(obj, key);
    if (!v) return fallback;
    QKV_CHECK(v->is_boolean(), "tokenizer file '", path, "': ", where, ".", key, " is not a bool");
    return v->get<bool>();
  }
  int32_t id(const json& v, const std::string& what) const {
    QKV_CHECK(v.is_number_integer(), "tokenizer file '", path, "': ", what, " is not an integer");
    const bool neg = v.is_number_unsigned() ? false : v.get<int64_t>() < 0;
    QKV_CHECK(!neg && v.get<uint64_t>() < uint64_t(kMaxVocab), "tokenizer file '", path, "': ", what, " = ",
              v.dump(), " is outside 0..", kMaxVocab - 1);
    return static_cast<int32_t>(v.get<int64_t>());
  }
  std::string type(const json& v, const char* where) const {
    return string(get(v, "type", where), std::string(where) + ".type");
  }
  [[noreturn]] void unsupported(const char* component, const std::string& type, const char* supported) const {
    fail("tokenizer file '", path, "': ", component, " '", type, "' is not supported (qkv reads ", supported, ")");
  }
};

// {"String": s} or {"Regex": r} -> a PCRE2 pattern.
std::string split_pattern(const Reader& r, const json& pattern, const char* where) {
  if (const json* s = r.find(pattern, "String")) return literal_pattern(r.string(*s, std::string(where) + ".String"));
  if (const json* s = r.find(pattern, "Regex")) return r.string(*s, std::string(where) + ".Regex");
  fail("tokenizer file '", r.path, "': ", where, " is neither {\"String\": ...} nor {\"Regex\": ...}");
}

void add_normalizer(const Reader& r, const json& n, std::vector<NormalizerStep>* steps) {
  const std::string type = r.type(n, "normalizer");
  if (type == "Sequence") {
    const json& list = r.steps(n, "normalizers", "normalizer");
    for (const json& step : list) add_normalizer(r, step, steps);
  } else if (type == "NFC") {
    steps->push_back({NormalizerStep::kNfc, "", ""});
  } else if (type == "Replace") {
    const json& pattern = r.get(n, "pattern", "normalizer Replace");
    const json* from = r.find(pattern, "String");
    if (!from) r.unsupported("normalizer Replace pattern", pattern.dump(), "String patterns");
    steps->push_back({NormalizerStep::kReplace, r.string(*from, "normalizer Replace pattern"),
                      r.string(r.get(n, "content", "normalizer Replace"), "normalizer Replace content")});
  } else if (type == "Prepend") {
    steps->push_back({NormalizerStep::kPrepend, "", r.string(r.get(n, "prepend", "normalizer Prepend"), "prepend")});
  } else {
    r.unsupported("normalizer", type, "NFC, Replace, Prepend and Sequence");
  }
}

// Fills the split patterns; returns whether a ByteLevel step is present.
bool add_pre_tokenizer(const Reader& r, const json& p, PreTokenizerSpec* spec) {
  const std::string type = r.type(p, "pre_tokenizer");
  if (type == "Sequence") {
    const json& list = r.steps(p, "pretokenizers", "pre_tokenizer");
    bool byte_level = false;
    for (const json& step : list) byte_level = add_pre_tokenizer(r, step, spec) || byte_level;
    return byte_level;
  }
  if (type == "ByteLevel") {
    QKV_CHECK(!r.boolean(p, "add_prefix_space", false, "ByteLevel"), "tokenizer file '", r.path,
              "': pre-tokenizer ByteLevel with add_prefix_space true is not supported");
    if (r.boolean(p, "use_regex", true, "ByteLevel")) {
      spec->patterns.push_back(find_pre_tokenizer("gpt-2").patterns.at(0));  // GPT-2's split
      spec->behaviors.push_back(SplitBehavior::kIsolated);
    }
    return true;
  }
  if (type == "Split") {
    QKV_CHECK(!r.boolean(p, "invert", false, "Split"), "tokenizer file '", r.path,
              "': pre-tokenizer Split with invert true is not supported");
    const std::string behavior = r.string(r.get(p, "behavior", "Split"), "Split.behavior");
    SplitBehavior b;
    if (behavior == "Isolated") b = SplitBehavior::kIsolated;
    else if (behavior == "MergedWithPrevious") b = SplitBehavior::kMergedWithPrevious;
    else if (behavior == "MergedWithNext") b = SplitBehavior::kMergedWithNext;
    else r.unsupported("Split behavior", behavior, "Isolated, MergedWithPrevious and MergedWithNext");
    spec->patterns.push_back(split_pattern(r, r.get(p, "pattern", "Split"), "Split.pattern"));
    spec->behaviors.push_back(b);
    return false;
  }
  if (type == "Metaspace") r.unsupported("pre-tokenizer", "Metaspace inside a Sequence", "Metaspace alone");
  r.unsupported("pre-tokenizer", type, "Split, ByteLevel, Metaspace and Sequence");
}

// Metaspace, as the whole pre-tokenizer (its replacement runs before any split).
void read_metaspace(const Reader& r, const json& p, BpeOptions* o) {
  o->metaspace = r.string(r.get(p, "replacement", "Metaspace"), "Metaspace.replacement");
  if (o->metaspace != kSpaceMark) r.unsupported("Metaspace replacement", o->metaspace, "\u2581");
  std::string scheme = "always";
  if (const json* s = r.find(p, "prepend_scheme")) {
    scheme = r.string(*s, "Metaspace.prepend_scheme");
  } else if (!r.boolean(p, "add_prefix_space", true, "Metaspace")) {
    scheme = "never";
  }
  if (scheme == "always") o->metaspace_prepend = BpeOptions::Prepend::kAlways;
  else if (scheme == "first") o->metaspace_prepend = BpeOptions::Prepend::kFirst;
  else if (scheme == "never") o->metaspace_prepend = BpeOptions::Prepend::kNever;
  else r.unsupported("Metaspace prepend_scheme", scheme, "always, first and never");
  if (r.boolean(p, "split", true, "Metaspace")) {
    o->pre.patterns.push_back(literal_pattern(o->metaspace));
    o->pre.behaviors.push_back(SplitBehavior::kMergedWithNext);
  }
}

// The decoder only needs to be one qkv's decoding reproduces.
void check_decoder(const Reader& r, const json& d) {
  const std::string type = r.type(d, "decoder");
  if (type == "Sequence") {
    const json& list = r.steps(d, "decoders", "decoder");
    for (const json& step : list) check_decoder(r, step);
    return;
  }
  for (const char* known : {"ByteLevel", "Replace", "ByteFallback", "Fuse", "Strip", "Metaspace"}) {
    if (type == known) return;
  }
  r.unsupported("decoder", type, "ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace and Sequence");
}

// TemplateProcessing's "single": whether it starts / ends with a special token, and which.
struct Template {
  std::string first, last;
};
void read_post_processor(const Reader& r, const json& p, Template* t) {
  const std::string type = r.type(p, "post_processor");
  if (type == "Sequence") {
    const json& list = r.steps(p, "processors", "post_processor");
    for (const json& step : list) read_post_processor(r, step, t);
  } else if (type == "TemplateProcessing") {
    const json& single = r.get(p, "single", "TemplateProcessing");
    QKV_CHECK(single.is_array(), "tokenizer file '", r.path, "': TemplateProcessing.single is not an array");
    std::vector<std::string> items;  // special token names, "" for the sequence
    for (const json& item : single) {
      const json* s = r.find(item, "SpecialToken");
      items.push_back(s ? r.string(r.get(*s, "id", "SpecialToken"), "SpecialToken.id") : "");
    }
    const int64_t seq = std::find(items.begin(), items.end(), "") - items.begin();
    QKV_CHECK(seq < int64_t(items.size()) && std::count(items.begin(), items.end(), "") == 1, "tokenizer file '",
              r.path, "': TemplateProcessing.single must hold the sequence exactly once");
    QKV_CHECK(seq <= 1 && items.size() - seq <= 2, "tokenizer file '", r.path,
              "': TemplateProcessing.single with more than one special token before or after the text is not "
              "supported");
    if (seq == 1) t->first = items[0];
    if (items.size() - seq == 2) t->last = items.back();
  } else if (type != "ByteLevel") {
    r.unsupported("post-processor", type, "ByteLevel, TemplateProcessing and Sequence");
  }
}

// tokenizer_config.json's bos_token / eos_token: a string, null, or {"content": ...}.
std::string config_token(const Reader& r, const json& config, const char* key) {
  const json* v = r.find(config, key);
  if (!v) return "";
  if (v->is_object()) return r.string(r.get(*v, "content", key), std::string(key) + ".content");
  return r.string(*v, key);
}

}  // namespace

Tokenizer Tokenizer::from_hf_json(const std::string& path, int64_t vocab_size) {
  const json j = parse_file(path, "tokenizer file");
  const Reader r{path};
  QKV_CHECK(j.is_object(), "tokenizer file '", path, "' is not a JSON object");
  const json& model = r.get(j, "model", "the file");
  const std::string model_type = r.find(model, "type") ? r.type(model, "model") : "BPE";
  if (model_type != "BPE") r.unsupported("model type", model_type, "BPE");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const json* v = r.find(model, key);
    QKV_CHECK(!v || r.string(*v, std::string("model.") + key).empty(), "tokenizer file '", path, "': model.", key,
              " is not supported");
  }
  if (const json* d = r.find(model, "dropout")) {
    QKV_CHECK(d->is_number() && d->get<double>() == 0.0, "tokenizer file '", path,
              "': model.dropout (BPE dropout) is not supported");
  }

  // Tokens: the model's vocabulary, then the added tokens (ids may overlap when the texts agree).
  const json& vocab = r.get(model, "vocab", "model");
  QKV_CHECK(vocab.is_object(), "tokenizer file '", path, "': model.vocab is not an object");
  QKV_CHECK(int64_t(vocab.size()) <= kMaxVocab, "tokenizer file '", path, "': ", vocab.size(), " tokens, too many");
  const json* added = r.find(j, "added_tokens");
  QKV_CHECK(!added || added->is_array(), "tokenizer file '", path, "': added_tokens is not an array");
  QKV_CHECK(!added || int64_t(added->size()) <= kMaxVocab, "tokenizer file '", path, "': too many added_tokens");
  // Ids run 0..n-1 without gaps, so none is past the number of entries (this
  // bounds the tables before any is allocated).
  const size_t entries = vocab.size() + (added ? added->size() : 0);
  std::vector<std::string> pieces;
  std::vector<bool> assigned, in_model;
  auto place = [&](int32_t id, const std::string& text, const char* what) {
    QKV_CHECK(size_t(id) < entries, "tokenizer file '", path, "': id ", id, " of '", text, "' (", what,
              ") is past the ", entries, " tokens the file lists");
    if (size_t(id) >= pieces.size()) {
      pieces.resize(size_t(id) + 1);
      assigned.resize(size_t(id) + 1, false);
      in_model.resize(size_t(id) + 1, false);
    }
    QKV_CHECK(!assigned[id] || pieces[id] == text, "tokenizer file '", path, "': id ", id, " is both '", pieces[id],
              "' and '", text, "' (", what, ")");
    pieces[id] = text;
    assigned[id] = true;
  };
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const int32_t id = r.id(it.value(), "model.vocab['" + it.key() + "']");
    QKV_CHECK(size_t(id) >= pieces.size() || !assigned[id], "tokenizer file '", path, "': id ", id,
              " is given to two tokens in model.vocab");
    place(id, it.key(), "model.vocab");
    in_model[id] = true;
  }
  std::vector<int32_t> added_type(pieces.size(), 0);
  std::vector<uint8_t> strip;
  if (added) {
    for (const json& a : *added) {
      const int32_t id = r.id(r.get(a, "id", "an added token"), "added_tokens[].id");
      const std::string text = r.string(r.get(a, "content", "an added token"), "added_tokens[].content");
      QKV_CHECK(!text.empty(), "tokenizer file '", path, "': added token ", id, " is empty");
      QKV_CHECK(!r.boolean(a, "single_word", false, "added_tokens[]"), "tokenizer file '", path, "': added token '",
                text, "' has single_word true, which is not supported");
      place(id, text, "added_tokens");
      added_type.resize(pieces.size(), 0);
      strip.resize(pieces.size(), 0);
      added_type[id] = r.boolean(a, "special", false, "added_tokens[]") ? kControl : kUserDefined;
      const bool lstrip = r.boolean(a, "lstrip", false, "added_tokens[]");
      const bool rstrip = r.boolean(a, "rstrip", false, "added_tokens[]");
      strip[id] = uint8_t((lstrip ? 1 : 0) | (rstrip ? 2 : 0));
    }
  }
  const int64_t n = static_cast<int64_t>(pieces.size());
  QKV_CHECK(n > 0, "tokenizer file '", path, "' has no tokens");
  for (int64_t i = 0; i < n; ++i) {
    QKV_CHECK(assigned[i], "tokenizer file '", path, "': id ", i, " has no token (ids must run 0..", n - 1, ")");
  }
  QKV_CHECK(vocab_size < 0 || vocab_size >= n, "tokenizer file '", path, "' has ", n,
            " tokens, more than the model's vocabulary of ", vocab_size);

  // Merges: "left right" strings or [left, right] pairs, in rank order.
  const json& merges_json = r.get(model, "merges", "model");
  QKV_CHECK(merges_json.is_array(), "tokenizer file '", path, "': model.merges is not an array");
  std::vector<std::string> merges;
  merges.reserve(merges_json.size());
  for (const json& m : merges_json) {
    if (m.is_array()) {
      QKV_CHECK(m.size() == 2, "tokenizer file '", path, "': merge ", merges.size(), " is not a pair");
      const std::string a = r.string(m[0], "a merge's left side"), b = r.string(m[1], "a merge's right side");
      QKV_CHECK(a.find(' ') == std::string::npos && b.find(' ') == std::string::npos, "tokenizer file '", path,
                "': merge ", merges.size(), " has a space inside a symbol, which qkv cannot represent");
      merges.push_back(a + " " + b);
    } else {
      merges.push_back(r.string(m, "merge " + std::to_string(merges.size())));
    }
  }

  BpeOptions options;
  options.pre.names = {"tokenizer.json"};
  if (const json* nz = r.find(j, "normalizer")) add_normalizer(r, *nz, &options.normalizer);
  options.byte_level = false;
  if (const json* p = r.find(j, "pre_tokenizer")) {
    if (p->is_object() && p->value("type", json()) == "Metaspace") {
      read_metaspace(r, *p, &options);
    } else {
      options.byte_level = add_pre_tokenizer(r, *p, &options.pre);
    }
  }
  if (const json* d = r.find(j, "decoder")) check_decoder(r, *d);
  options.pre.ignore_merges = r.boolean(model, "ignore_merges", false, "model");
  options.byte_fallback = r.boolean(model, "byte_fallback", false, "model");
  options.fuse_unk = r.boolean(model, "fuse_unk", false, "model");
  auto find_id = [&](const std::string& text, const char* what) -> int32_t {
    if (text.empty()) return -1;
    for (int64_t i = 0; i < n; ++i) {
      if (pieces[i] == text) return static_cast<int32_t>(i);
    }
    fail("tokenizer file '", path, "': ", what, " '", text, "' is not a token");
  };
  if (const json* u = r.find(model, "unk_token")) {
    options.unk_id = find_id(r.string(*u, "model.unk_token"), "unk_token");
  }

  std::vector<int32_t> types(n, kNormal);
  for (int64_t i = 0; i < n; ++i) {
    if (!options.byte_level && options.byte_fallback && parse_byte_piece(pieces[i]) >= 0) types[i] = kByte;
    if (i < int64_t(added_type.size()) && added_type[i]) types[i] = added_type[i];
  }
  if (options.unk_id >= 0 && types[options.unk_id] != kControl) types[options.unk_id] = kUnknown;

  Template post;
  if (const json* p = r.find(j, "post_processor")) read_post_processor(r, *p, &post);
  json config = json::object();
  const size_t slash = path.find_last_of('/');
  const std::string config_path = (slash == std::string::npos ? std::string() : path.substr(0, slash + 1)) +
                                  "tokenizer_config.json";
  if (std::ifstream(config_path).good()) {
    config = parse_file(config_path, "tokenizer config");
    QKV_CHECK(config.is_object(), "tokenizer config '", config_path, "' is not a JSON object");
  }
  const Reader c{config_path};
  std::string bos_text = config_token(c, config, "bos_token");
  if (bos_text.empty()) bos_text = post.first;
  const int32_t bos = find_id(bos_text, "bos_token");
  const int32_t eos = find_id(config_token(c, config, "eos_token"), "eos_token");

  Tokenizer t;
  t.pieces_ = std::move(pieces);
  t.types_ = std::move(types);
  t.strip_ = std::move(strip);
  if (vocab_size > n) {  // Hugging Face models pad their embeddings past the tokenizer's ids
    t.pieces_.resize(size_t(vocab_size));
    t.types_.resize(size_t(vocab_size), kUnused);
    in_model.resize(size_t(vocab_size), false);
  }
  t.scores_.assign(t.pieces_.size(), 0.0f);
  t.bos_id_ = bos;
  t.eos_id_ = eos;
  t.unk_id_ = options.unk_id;
  t.add_space_prefix_ = false;
  for (const NormalizerStep& s : options.normalizer) {
    if (s.kind == NormalizerStep::kPrepend && s.to == kSpaceMark) t.add_space_prefix_ = true;
  }
  if (options.metaspace == kSpaceMark && options.metaspace_prepend != BpeOptions::Prepend::kNever) {
    t.add_space_prefix_ = true;
  }
  const std::string first = post.first, last = post.last;
  t.add_bos_ = c.boolean(config, "add_bos_token", !first.empty(), "tokenizer_config");
  t.add_eos_ = c.boolean(config, "add_eos_token", !last.empty(), "tokenizer_config");
  QKV_CHECK(!t.add_bos_ || bos >= 0, "tokenizer file '", path, "': add_bos_token is true but there is no bos_token");
  QKV_CHECK(!t.add_eos_ || eos >= 0, "tokenizer file '", path, "': add_eos_token is true but there is no eos_token");
  if (const json* tpl = c.find(config, "chat_template")) {
    if (tpl->is_array()) {  // [{"name": "default", "template": ...}, ...]
      for (const json& e : *tpl) {
        if (c.string(c.get(e, "name", "chat_template[]"), "chat_template[].name") == "default") {
          t.chat_template_ = c.string(c.get(e, "template", "chat_template[]"), "chat_template[].template");
        }
      }
    } else {
      t.chat_template_ = c.string(*tpl, "chat_template");
    }
  }
  try {
    t.bpe_ = std::make_shared<const BpeModel>(t.pieces_, in_model, merges, std::move(options), path);
  } catch (const Error& e) {
    fail("tokenizer file '", path, "': ", e.what());
  }
  t.build_index(path);
  return t;
}

bool Tokenizer::is_hf_json(const std::string& path) {
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) return true;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  char head[2] = {};
  const bool ok =
      std::fread(head, 1, 2, f) == 2 && head[0] == '{' && head[1] != '\0' && std::strchr("\"\n\r \t", head[1]);
  std::fclose(f);
  return ok;
}

}  // namespace qkv

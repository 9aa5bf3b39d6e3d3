#include "runtime/synthetic_encoder.h"

#include <set>

#include "kernels/error.h"
#include "runtime/arch.h"
#include "runtime/gguf.h"
#include "runtime/model_loader.h"
#include "runtime/quant_plan.h"

namespace qkv {

namespace {

struct EncoderPreset {
  const char* name;
  const char* arch;
  int64_t dim, layers, heads, ffn, vocab, ctx;
  float rope_base;  // nomic-bert only
  int32_t pooling;  // llama_pooling_type: 1 MEAN, 2 CLS
};

// Shapes of the public checkpoints (BAAI/bge-small-en-v1.5, bge-base-en-v1.5,
// nomic-ai/nomic-embed-text-v1.5) and their converted files' pooling.
constexpr EncoderPreset kEncoderPresets[] = {
    {"tiny-bert", "bert", 64, 2, 2, 128, 2048, 128, 0, 1},
    {"bge-small", "bert", 384, 12, 12, 1536, 30522, 512, 0, 2},
    {"bge-base", "bert", 768, 12, 12, 3072, 30522, 512, 0, 2},
    {"nomic-embed", "nomic-bert", 768, 12, 12, 3072, 30528, 2048, 1000.0f, 1},
};

// BERT's LayerNorm epsilon (all three checkpoints).
constexpr float kLayerNormEps = 1e-12f;
// Rows of token_types: BERT's two segment types (only row 0 is ever added).
constexpr int64_t kTokenTypes = 2;
// The WordPiece ids llama.cpp's "bert" vocabularies use.
constexpr int32_t kPad = 0, kUnk = 100, kCls = 101, kSep = 102, kMask = 103;
constexpr int64_t kMinVocab = 1024;

const EncoderPreset* find_preset(const std::string& name) {
  for (const EncoderPreset& p : kEncoderPresets) {
    if (name == p.name) return &p;
  }
  return nullptr;
}

// UTF-8 of one code point.
std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xC0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += char(0xE0 | (cp >> 12));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  } else {
    s += char(0xF0 | (cp >> 18));
    s += char(0x80 | ((cp >> 12) & 0x3F));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

const std::string kWordStart = "\xE2\x96\x81";  // U+2581, llama.cpp's phantom space

// Frequent English words and suffixes, so that ordinary text takes about as
// many tokens as with a real BERT vocabulary.
constexpr const char* kWords[] = {
    "the", "of", "and", "to", "a", "in", "is", "it", "you", "that", "he", "was", "for", "on", "are", "with", "as",
    "i", "his", "they", "be", "at", "one", "have", "this", "from", "or", "had", "by", "not", "word", "but", "what",
    "some", "we", "can", "out", "other", "were", "all", "there", "when", "up", "use", "your", "how", "said", "an",
    "each", "she", "which", "do", "their", "time", "if", "will", "way", "about", "many", "then", "them", "write",
    "would", "like", "so", "these", "her", "long", "make", "thing", "see", "him", "two", "has", "look", "more",
    "day", "could", "go", "come", "did", "number", "sound", "no", "most", "people", "my", "over", "know", "water",
    "than", "call", "first", "who", "may", "down", "side", "been", "now", "find", "any", "new", "work", "part",
    "take", "get", "place", "made", "live", "where", "after", "back", "little", "only", "round", "man", "year",
    "came", "show", "every", "good", "me", "give", "our", "under", "name", "very", "through", "just", "form",
    "sentence", "great", "think", "say", "help", "low", "line", "differ", "turn", "cause", "much", "mean",
    "before", "move", "right", "boy", "old", "too", "same", "tell", "does", "set", "three", "want", "air", "well",
    "also", "play", "small", "end", "put", "home", "read", "hand", "port", "large", "spell", "add", "even", "land",
    "here", "must", "big", "high", "such", "follow", "act", "why", "ask", "men", "change", "went", "light", "kind",
    "off", "need", "house", "picture", "try", "us", "again", "animal", "point", "mother", "world", "near", "build",
    "self", "earth", "father", "hello", "model", "text", "search", "query", "document", "embedding", "vector"};
constexpr const char* kSuffixes[] = {"ing", "ed", "s", "es", "ly", "er", "est", "tion", "ment", "ness", "able",
                                     "ful", "less", "al", "ous", "ive", "ize", "ise", "ity", "ent", "ant", "ism",
                                     "ist", "ial", "ical", "ate", "ence", "ance", "ship", "hood", "ward", "wise"};

}  // namespace

std::vector<std::string> synthetic_encoder_names() {
  std::vector<std::string> n;
  for (const EncoderPreset& p : kEncoderPresets) n.push_back(p.name);
  return n;
}

bool is_synthetic_encoder(const std::string& name) { return find_preset(name) != nullptr; }

ModelConfig synthetic_encoder_preset(const std::string& name, const std::string& arch) {
  const EncoderPreset* p = find_preset(name);
  if (p == nullptr) {
    std::string known;
    for (const std::string& n : synthetic_encoder_names()) known += (known.empty() ? "" : ", ") + n;
    fail("unknown synthetic encoder preset '", name, "' (known: ", known, ")");
  }
  if (!arch.empty() && arch != p->arch) {
    fail("synthetic preset '", name, "' is a '", p->arch, "' encoder; --arch ", arch, " does not match it");
  }
  ModelConfig c;
  c.dim = p->dim;
  apply_arch(arch_spec(p->arch), &c);
  c.n_layers = p->layers;
  c.n_heads = c.n_kv_heads = p->heads;
  c.head_dim = c.rope_dim = p->dim / p->heads;
  c.hidden_dim = p->ffn;
  c.vocab_size = p->vocab;
  c.context_length = p->ctx;
  c.norm_eps = kLayerNormEps;
  if (p->rope_base > 0) c.rope_theta = p->rope_base;
  c.pooling_type = p->pooling;
  return c;
}

Model make_synthetic_encoder(const ModelConfig& config, const WeightFormat& format, uint64_t seed) {
  validate_model_config(config, "synthetic encoder");
  const ArchSpec& spec = arch_spec(config.architecture);
  QKV_CHECK(!spec.causal, "make_synthetic_encoder: '", spec.name, "' is a decoder family (make_synthetic_model)");
  Model m;
  m.config = config;
  const int64_t dim = config.dim;
  QuantModelInfo info;
  info.arch = spec.name;
  info.n_layers = config.n_layers;
  info.n_heads = config.n_heads;
  info.n_kv_heads = config.n_kv_heads;
  info.n_attention_wv = config.n_layers;
  info.has_output = false;
  auto weight = [&](const std::string& name, int64_t rows, int64_t cols) {
    DType t = format.type;
    if (format.preset) t = plan_tensor(*format.preset, info, name, uint64_t(cols)).type;
    if (!dtype_row_ok(t, size_t(cols))) t = DType::F16;  // rows the type cannot hold
    return Matrix{nullptr, t, rows, cols};
  };
  auto vector = [](int64_t n) { return Matrix{nullptr, DType::F32, 1, n}; };
  if (format.preset) m.file_type = int32_t(quant_preset_file_type(*format.preset));

  std::vector<SyntheticTensor> plan;
  m.token_embd = weight("token_embd.weight", config.vocab_size, dim);
  plan.push_back({&m.token_embd, SyntheticFill::Matrix});
  if (config.learned_positions) {
    m.position_embd = weight("position_embd.weight", config.context_length, dim);
    plan.push_back({&m.position_embd, SyntheticFill::Matrix});
  }
  if (config.token_types) {
    m.token_types = Matrix{nullptr, DType::F32, kTokenTypes, dim};
    plan.push_back({&m.token_types, SyntheticFill::Matrix});
  }
  m.token_embd_norm = vector(dim);
  m.token_embd_norm_b = vector(dim);
  plan.push_back({&m.token_embd_norm, SyntheticFill::Norm});
  plan.push_back({&m.token_embd_norm_b, SyntheticFill::Bias});
  m.layers.resize(size_t(config.n_layers));
  const std::vector<LayerTensor> tensors = layer_tensors(spec, config);
  std::vector<Matrix> fused(m.layers.size() * tensors.size());  // attn_qkv made whole, as a file holds it
  for (size_t li = 0; li < m.layers.size(); ++li) {
    for (size_t ti = 0; ti < tensors.size(); ++ti) {
      const LayerTensor& t = tensors[ti];
      Matrix* mat = t.field ? &(m.layers[li].*t.field) : &fused[li * tensors.size() + ti];
      const std::string name = t.name;
      if (t.vector) {
        *mat = vector(extent(config, t.cols));
        const bool norm_weight = name.find("norm.weight") != std::string::npos;
        plan.push_back({mat, norm_weight ? SyntheticFill::Norm : SyntheticFill::Bias});
      } else {
        *mat = weight("blk." + std::to_string(li) + "." + name, extent(config, t.rows), extent(config, t.cols));
        plan.push_back({mat, SyntheticFill::Matrix});
      }
    }
  }
  m.storage = fill_synthetic_tensors(plan, seed);
  for (size_t li = 0; li < m.layers.size(); ++li) {
    for (size_t ti = 0; ti < tensors.size(); ++ti) {
      if (!tensors[ti].field) split_fused(tensors[ti], fused[li * tensors.size() + ti], config, &m.layers[li]);
    }
  }
  return m;
}

Tokenizer synthetic_wordpiece(int64_t vocab_size) {
  QKV_CHECK(vocab_size >= kMinVocab && vocab_size <= (int64_t{1} << 24), "a synthetic WordPiece vocabulary needs ",
            kMinVocab, "..", int64_t{1} << 24, " tokens, not ", vocab_size);
  const auto V = static_cast<size_t>(vocab_size);
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::set<std::string> seen;
  auto add = [&](const std::string& t, int32_t type = Tokenizer::kNormal) {
    if (tokens.size() < V && seen.insert(t).second) {
      tokens.push_back(t);
      types.push_back(type);
    }
  };
  add("[PAD]", Tokenizer::kControl);
  for (int i = 0; i < 99; ++i) add("[unused" + std::to_string(i) + "]");
  add("[UNK]", Tokenizer::kControl);
  add("[CLS]", Tokenizer::kControl);
  add("[SEP]", Tokenizer::kControl);
  add("[MASK]", Tokenizer::kControl);
  auto both = [&](const std::string& c) {
    add(kWordStart + c);
    add(c);
  };
  // Printable ASCII (no capitals: WordPiece lowercases the text first).
  for (uint32_t cp = 0x21; cp < 0x7F; ++cp) {
    if (cp < 'A' || cp > 'Z') both(utf8(cp));
  }
  for (char a = 'a'; a <= 'z'; ++a) {
    for (char b = 'a'; b <= 'z'; ++b) add(std::string{a, b});
  }
  for (const char* w : kWords) add(kWordStart + w);
  for (const char* s : kSuffixes) add(s);
  // Letters with no decomposition that survive normalization (ß æ ð ø þ),
  // lowercase Greek and Cyrillic, hiragana; CJK ideographs are words alone.
  for (uint32_t cp : {0xDFu, 0xE6u, 0xF0u, 0xF8u, 0xFEu}) both(utf8(cp));
  for (uint32_t cp = 0x3B1; cp <= 0x3C9; ++cp) both(utf8(cp));
  for (uint32_t cp = 0x430; cp <= 0x44F; ++cp) both(utf8(cp));
  for (uint32_t cp = 0x3041; cp <= 0x3096; ++cp) both(utf8(cp));
  for (uint32_t cp = 0x4E00; cp < 0x4E00 + 1024; ++cp) add(kWordStart + utf8(cp));
  // Syllable words to the size, from a fixed splitmix64 stream.
  static const char* const kOnsets[] = {"b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r",
                                        "s", "t", "v", "w", "z", "ch", "sh", "th", "st", "br", "tr", "pl"};
  static const char* const kVowels[] = {"a", "e", "i", "o", "u", "ai", "ou", "ea"};
  static const char* const kCodas[] = {"", "", "", "n", "r", "s", "t", "l", "m", "ng", "st"};
  uint64_t state = 0x5eedb0b0ull;
  auto next = [&] {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  while (tokens.size() < V) {
    const uint64_t r = next();
    const int syllables = 1 + int(r % 4);
    std::string word;
    uint64_t bits = r >> 2;
    for (int s = 0; s < syllables; ++s) {
      word += kOnsets[bits % 25];
      bits /= 25;
      word += kVowels[bits % 8];
      bits /= 8;
    }
    word += kCodas[bits % 11];
    // Mostly word starts; every fourth a continuation piece.
    add(((r >> 60) & 3) == 0 ? word : kWordStart + word);
  }
  Tokenizer::WordPieceIds ids;
  ids.cls = kCls;
  ids.sep = kSep;
  ids.unk = kUnk;
  ids.pad = kPad;
  ids.mask = kMask;
  return Tokenizer::from_wordpiece(std::move(tokens), std::move(types), ids, "synthetic WordPiece vocabulary");
}

void write_gguf_encoder(const Model& model, const std::string& path, const Tokenizer& tokenizer) {
  const ModelConfig& c = model.config;
  validate_model_config(c, path);
  const ArchSpec& spec = arch_spec(c.architecture);
  QKV_CHECK(!spec.causal, "write_gguf_encoder: '", spec.name, "' is a decoder family");
  // What a file of this family cannot express would not survive a reload.
  ModelConfig fixed = c;
  apply_arch(spec, &fixed);
  QKV_CHECK(fixed.rope_style == c.rope_style && fixed.activation == c.activation && fixed.qkv_bias == c.qkv_bias &&
                fixed.learned_positions == c.learned_positions && fixed.token_types == c.token_types &&
                fixed.out_ffn_bias == c.out_ffn_bias && fixed.ffn_gated == c.ffn_gated && !c.causal &&
                c.n_kv_heads == c.n_heads && c.head_dim * c.n_heads == c.dim && c.rope_dim == c.head_dim &&
                c.attn_scale == 0.0f && c.rope_freq_scale == 1.0f,
            "write_gguf_encoder: the model's settings are not those of a '", spec.name, "' file");
  QKV_CHECK(tokenizer.is_wordpiece(), "write_gguf_encoder: an encoder file needs a WordPiece vocabulary");
  QKV_CHECK(tokenizer.vocab_size() == c.vocab_size, "write_gguf_encoder: the tokenizer has ", tokenizer.vocab_size(),
            " tokens but the model's vocabulary is ", c.vocab_size);
  QKV_CHECK(int64_t(model.layers.size()) == c.n_layers, "write_gguf_encoder: ", model.layers.size(),
            " layers but the config says ", c.n_layers);
  const std::string a = std::string(spec.name) + ".";
  auto u32 = [](int64_t v) { return GGUFValue::u32(static_cast<uint32_t>(v)); };
  GGUFWriter w;
  w.set("general.architecture", GGUFValue::string(spec.name));
  w.set("general.name", GGUFValue::string(model.path.empty() ? "qkv synthetic" : model.path));
  w.set(a + "context_length", u32(c.context_length));
  w.set(a + "embedding_length", u32(c.dim));
  w.set(a + "feed_forward_length", u32(c.hidden_dim));
  w.set(a + "block_count", u32(c.n_layers));
  w.set(a + "attention.head_count", u32(c.n_heads));
  w.set(a + "attention.layer_norm_epsilon", GGUFValue::f32(c.norm_eps));
  if (!c.learned_positions) w.set(a + "rope.freq_base", GGUFValue::f32(c.rope_theta));
  w.set("general.file_type", GGUFValue::u32(model_file_type(model)));
  w.set(a + "attention.causal", GGUFValue::boolean(false));
  if (c.pooling_type >= 0) w.set(a + "pooling_type", u32(c.pooling_type));

  const int64_t type_rows = c.token_types ? model.token_types.rows : kTokenTypes;
  w.set("tokenizer.ggml.token_type_count", u32(type_rows));
  w.set("tokenizer.ggml.model", GGUFValue::string("bert"));
  w.set("tokenizer.ggml.pre", GGUFValue::string("default"));
  std::vector<std::string> pieces;
  std::vector<int32_t> types;
  for (int32_t i = 0; i < tokenizer.vocab_size(); ++i) {
    pieces.push_back(tokenizer.piece(i));
    types.push_back(tokenizer.token_type(i));
  }
  w.set("tokenizer.ggml.tokens", GGUFValue::string_array(pieces));
  w.set("tokenizer.ggml.token_type", GGUFValue::i32_array(types));
  w.set("tokenizer.ggml.unknown_token_id", u32(tokenizer.unk_id()));
  w.set("tokenizer.ggml.seperator_token_id", u32(tokenizer.sep_id()));  // sic: llama.cpp's key
  if (tokenizer.pad_id() >= 0) w.set("tokenizer.ggml.padding_token_id", u32(tokenizer.pad_id()));
  w.set("tokenizer.ggml.cls_token_id", u32(tokenizer.bos_id()));
  if (tokenizer.mask_id() >= 0) w.set("tokenizer.ggml.mask_token_id", u32(tokenizer.mask_id()));

  auto bytes_of = [](const Matrix& m) { return uint64_t(m.rows) * dtype_row_bytes(m.type, size_t(m.cols)); };
  auto tensor = [&](const std::string& name, const Matrix& m, int64_t rows, int64_t cols, bool is_vector) {
    QKV_CHECK(m.data && m.rows == rows && m.cols == cols, "write_gguf_encoder: tensor '", name, "' is [", m.rows,
              "][", m.cols, "], expected [", rows, "][", cols, "]");
    QKV_CHECK(!is_vector || m.type == DType::F32, "write_gguf_encoder: '", name, "' must be an f32 vector");
    const std::vector<uint64_t> ne = is_vector ? std::vector<uint64_t>{uint64_t(cols)}
                                               : std::vector<uint64_t>{uint64_t(cols), uint64_t(rows)};
    w.add_tensor(name, dtype_ggml_id(m.type), ne, m.data, bytes_of(m));
  };
  const int64_t dim = c.dim;
  tensor("token_embd.weight", model.token_embd, c.vocab_size, dim, false);
  if (c.learned_positions) tensor("position_embd.weight", model.position_embd, c.context_length, dim, false);
  if (c.token_types) tensor("token_types.weight", model.token_types, type_rows, dim, false);
  tensor("token_embd_norm.weight", model.token_embd_norm, 1, dim, true);
  tensor("token_embd_norm.bias", model.token_embd_norm_b, 1, dim, true);
  // A fused attn_qkv whose parts are not adjacent in memory (a converted
  // model's) is joined here; the buffers live until the file is written.
  std::vector<std::vector<uint8_t>> joined;
  const std::vector<LayerTensor> tensors = layer_tensors(spec, c);
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    const LayerWeights& l = model.layers[size_t(i)];
    for (const LayerTensor& t : tensors) {
      const int64_t rows = extent(c, t.rows), cols = extent(c, t.cols);
      if (t.field) {
        tensor(b + t.name, l.*t.field, rows, cols, t.vector);
        continue;
      }
      joined.emplace_back();
      Matrix whole{nullptr, DType::F32, 0, cols};
      for (const Matrix* part : fused_parts(t, l)) {
        QKV_CHECK(part->data && part->cols == cols && (whole.rows == 0 || part->type == whole.type),
                  "write_gguf_encoder: the parts of '", b, t.name, "' differ in type or width");
        whole.type = part->type;
        whole.rows += part->rows;
        const auto* p = static_cast<const uint8_t*>(part->data);
        joined.back().insert(joined.back().end(), p, p + bytes_of(*part));
      }
      whole.data = joined.back().data();
      tensor(b + t.name, whole, rows, cols, false);
    }
  }
  if (c.rank_head) {
    tensor("cls.weight", model.cls, dim, dim, false);
    tensor("cls.bias", model.cls_b, 1, dim, true);
    if (model.cls_out.data != nullptr) {
      tensor("cls.output.weight", model.cls_out, 1, dim, false);
      tensor("cls.output.bias", model.cls_out_b, 1, 1, true);
    }
  }
  w.write(path);
}

}  // namespace qkv

// Loading vocabularies: llama2.c tokenizer.bin, GGUF tokenizer.ggml.* keys,
// and the byte-level vocabulary of synthetic models.
#include <cstring>

#include "kernels/error.h"
#include "runtime/mapped_file.h"
#include "runtime/tokenizer.h"
#include "runtime/tokenizer/vocab_text.h"

namespace qkv {

namespace {

constexpr int64_t kMaxVocab = int64_t(1) << 24;

}  // namespace

Tokenizer Tokenizer::from_llama2c(const std::string& path, int64_t vocab_size) {
  MappedFile f = MappedFile::open(path);
  auto truncated = [&](uint64_t pos, int64_t token) {
    fail("tokenizer file '", path, "' is truncated at byte ", pos, " (token ", token, ")");
  };
  if (f.size < 4) truncated(0, 0);
  int32_t max_len;
  std::memcpy(&max_len, f.data, 4);
  QKV_CHECK(max_len > 0, "tokenizer file '", path, "': max_token_length ", max_len, " must be positive");
  QKV_CHECK(vocab_size < kMaxVocab, "tokenizer file '", path, "': vocab size ", vocab_size, " is too large");
  std::vector<std::string> pieces;
  std::vector<float> scores;
  uint64_t pos = 4;
  for (int64_t i = 0; vocab_size < 0 ? pos < f.size : i < vocab_size; ++i) {
    QKV_CHECK(i < kMaxVocab, "tokenizer file '", path, "' has more than ", kMaxVocab, " tokens");
    if (f.size - pos < 8) truncated(pos, i);
    float score;
    int32_t len;
    std::memcpy(&score, f.data + pos, 4);
    std::memcpy(&len, f.data + pos + 4, 4);
    pos += 8;
    if (len < 0) fail("tokenizer file '", path, "': token ", i, " has negative length ", len);
    if (uint64_t(len) > f.size - pos) {
      fail("tokenizer file '", path, "': token ", i, " has length ", len, ", past the end of the file");
    }
    std::string text(reinterpret_cast<const char*>(f.data + pos), size_t(len));
    pos += uint64_t(len);
    pieces.push_back(escape_spaces(text));  // llama2.c exports "▁" as a space
    scores.push_back(score);
  }
  // llama2.c's tokenizer.bin has no types: ids 0, 1, 2 are <unk>, <s>, </s>
  // (its files spell them "\n<s>\n"); <0xNN> pieces are byte tokens.
  std::vector<int32_t> types(pieces.size(), kNormal);
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (i == 0) {
      types[i] = kUnknown;
      pieces[i] = "<unk>";
    } else if (i == 1 || i == 2) {
      types[i] = kControl;
      pieces[i] = i == 1 ? "<s>" : "</s>";
    } else if (parse_byte_piece(pieces[i]) >= 0) {
      types[i] = kByte;
    }
  }
  QKV_CHECK(pieces.size() >= 3, "tokenizer file '", path, "' has only ", pieces.size(), " tokens");
  return from_pieces(std::move(pieces), std::move(scores), std::move(types), 1, 2, 0, path);
}

Tokenizer Tokenizer::from_gguf(const GGUFFile& g) {
  const std::string& path = g.path();
  const GGUFValue* model = g.find("tokenizer.ggml.model");
  if (!model) fail("GGUF file '", path, "' has no tokenizer (key tokenizer.ggml.model is missing)");
  QKV_CHECK(model->type == GGUFType::STRING, "GGUF file '", path, "': tokenizer.ggml.model is not a string");
  const bool bpe = model->str == "gpt2";
  const bool wordpiece = model->str == "bert";
  const bool sentencepiece = model->str == "llama";
  if (!sentencepiece && !bpe && !wordpiece) {
    fail("GGUF file '", path, "': tokenizer model '", model->str,
         "' is not supported (qkv reads 'llama' SentencePiece, 'gpt2' byte-level BPE and 'bert' WordPiece)");
  }
  const GGUFValue& tokens = g.get("tokenizer.ggml.tokens");
  QKV_CHECK(tokens.type == GGUFType::ARRAY && tokens.elem_type == GGUFType::STRING, "GGUF file '", path,
            "': tokenizer.ggml.tokens is not an array of strings");
  std::vector<float> scores;
  if (sentencepiece || g.find("tokenizer.ggml.scores")) {
    try {
      scores = g.get("tokenizer.ggml.scores").as_f32_vector();
    } catch (const Error& e) {
      fail("GGUF file '", path, "': tokenizer.ggml.scores: ", e.what());
    }
  }
  std::vector<int32_t> types(tokens.count, kNormal);
  if (const GGUFValue* tv = g.find("tokenizer.ggml.token_type")) {
    std::vector<int64_t> raw;
    try {
      raw = tv->as_int_vector();
    } catch (const Error& e) {
      fail("GGUF file '", path, "': tokenizer.ggml.token_type: ", e.what());
    }
    QKV_CHECK(raw.size() == tokens.count, "GGUF file '", path, "': ", raw.size(), " token types for ",
              tokens.count, " tokens");
    for (size_t i = 0; i < raw.size(); ++i) {
      QKV_CHECK(raw[i] >= 1 && raw[i] <= 6, "GGUF file '", path, "': token ", i, " has unknown type ", raw[i]);
      types[i] = static_cast<int32_t>(raw[i]);
    }
  } else if (sentencepiece) {
    for (size_t i = 0; i < tokens.strings.size(); ++i) {
      if (parse_byte_piece(tokens.strings[i]) >= 0) types[i] = kByte;
    }
  }
  auto id_key = [&](const char* key, int32_t fallback) -> int32_t {
    const GGUFValue* v = g.find(key);
    if (!v) return fallback;
    QKV_CHECK(v->is_integer(), "GGUF file '", path, "': ", key, " is not an integer");
    const int64_t x = v->type == GGUFType::UINT64 && v->bits > uint64_t(kMaxVocab) ? -1 : v->as_int();
    QKV_CHECK(x >= 0 && x < int64_t(tokens.count), "GGUF file '", path, "': ", key, " = ", x,
              " is outside the vocabulary of ", tokens.count);
    return static_cast<int32_t>(x);
  };
  // An id only WordPiece uses: llama.cpp's converters write an absent one as
  // -1 (u32 4294967295), so any value naming no token means none.
  auto optional_id_key = [&](const char* key) -> int32_t {
    const GGUFValue* v = g.find(key);
    if (!v || !v->is_integer() || (v->type == GGUFType::UINT64 && v->bits > uint64_t(kMaxVocab))) return -1;
    const int64_t x = v->as_int();
    return x >= 0 && x < int64_t(tokens.count) ? static_cast<int32_t>(x) : -1;
  };
  auto bool_key = [&](const char* key, bool* out) {
    if (const GGUFValue* v = g.find(key)) {
      QKV_CHECK(v->type == GGUFType::BOOL, "GGUF file '", path, "': ", key, " is not a bool");
      *out = v->as_bool();
    }
  };
  auto string_key = [&](const char* key) -> std::string {
    const GGUFValue* v = g.find(key);
    if (!v) return "";
    QKV_CHECK(v->type == GGUFType::STRING, "GGUF file '", path, "': ", key, " is not a string");
    return v->str;
  };
  // Defaults that name no token of a small vocabulary mean "none" for the optional ids.
  auto optional_default = [&](int32_t id) { return int64_t(id) < int64_t(tokens.count) ? id : -1; };
  Tokenizer t;
  if (wordpiece) {
    // llama.cpp's built-in ids for a "bert" vocabulary, which the keys override.
    WordPieceIds ids;
    ids.cls = id_key("tokenizer.ggml.bos_token_id", ids.cls);
    ids.sep = id_key("tokenizer.ggml.seperator_token_id", ids.sep);
    ids.unk = id_key("tokenizer.ggml.unknown_token_id", ids.unk);
    ids.pad = id_key("tokenizer.ggml.padding_token_id", optional_default(ids.pad));
    ids.mask = id_key("tokenizer.ggml.mask_token_id", optional_default(ids.mask));
    ids.eos = id_key("tokenizer.ggml.eos_token_id", -1);
    t = from_wordpiece(tokens.strings, std::move(types), ids, path);
    QKV_CHECK(scores.empty() || scores.size() == tokens.count, "GGUF file '", path, "' has ", scores.size(),
              " scores for ", tokens.count, " tokens");
    if (!scores.empty()) t.scores_ = std::move(scores);
  } else if (bpe) {
    const GGUFValue* merges = g.find("tokenizer.ggml.merges");
    if (!merges) fail("GGUF file '", path, "': a 'gpt2' tokenizer needs tokenizer.ggml.merges, which is missing");
    QKV_CHECK(merges->type == GGUFType::ARRAY && merges->elem_type == GGUFType::STRING, "GGUF file '", path,
              "': tokenizer.ggml.merges is not an array of strings");
    QKV_CHECK(scores.empty() || scores.size() == tokens.count, "GGUF file '", path, "' has ", scores.size(),
              " scores for ", tokens.count, " tokens");
    t = from_bpe(tokens.strings, std::move(types), merges->strings, string_key("tokenizer.ggml.pre"),
                 id_key("tokenizer.ggml.bos_token_id", -1), id_key("tokenizer.ggml.eos_token_id", -1), path);
    if (!scores.empty()) t.scores_ = std::move(scores);
  } else {
    const int32_t bos = id_key("tokenizer.ggml.bos_token_id", 1);
    const int32_t eos = id_key("tokenizer.ggml.eos_token_id", 2);
    const int32_t unk = id_key("tokenizer.ggml.unknown_token_id", 0);
    t = from_pieces(tokens.strings, std::move(scores), std::move(types), bos, eos, unk, path);
    bool_key("tokenizer.ggml.add_space_prefix", &t.add_space_prefix_);
  }
  if (!wordpiece) {  // WordPiece always adds [CLS] (see from_wordpiece)
    bool_key("tokenizer.ggml.add_bos_token", &t.add_bos_);
    bool_key("tokenizer.ggml.add_eos_token", &t.add_eos_);
    t.sep_id_ = optional_id_key("tokenizer.ggml.seperator_token_id");
  }
  QKV_CHECK(!t.add_bos_ || t.bos_id_ >= 0, "GGUF file '", path, "': add_bos_token is true but there is no BOS token");
  QKV_CHECK(!t.add_eos_ || t.eos_id_ >= 0, "GGUF file '", path, "': add_eos_token is true but there is no EOS token");
  t.build_special(string_key("general.name"), id_key("tokenizer.ggml.eot_token_id", -1),
                  id_key("tokenizer.ggml.eom_token_id", -1));
  return t;
}

Tokenizer Tokenizer::load(const std::string& path, int64_t vocab_size) {
  if (GGUFFile::has_magic(path)) return from_gguf(GGUFFile::open(path));
  if (is_hf_json(path)) return from_hf_json(path, vocab_size);
  return from_llama2c(path, vocab_size);
}

Tokenizer Tokenizer::byte_level(int64_t vocab_size) {
  QKV_CHECK(vocab_size >= 260 && vocab_size <= kMaxVocab, "a byte-level vocabulary needs 260 to ", kMaxVocab,
            " tokens, not ", vocab_size);
  std::vector<std::string> pieces = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {kUnknown, kControl, kControl};
  static const char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    pieces.push_back(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">");
    types.push_back(kByte);
  }
  pieces.push_back(kSpaceMark);  // so spaces encode as a piece that decodes to a space
  types.push_back(kNormal);
  while (int64_t(pieces.size()) < vocab_size) {
    pieces.push_back("<unused" + std::to_string(pieces.size()) + ">");
    types.push_back(kUnused);
  }
  std::vector<float> scores(pieces.size(), 0.0f);
  return from_pieces(std::move(pieces), std::move(scores), std::move(types), 1, 2, 0, "byte-level");
}


}  // namespace qkv

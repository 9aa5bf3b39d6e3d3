#include "runtime/tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstring>

#include "kernels/error.h"

namespace qkv {

namespace {

// The patterns, as llama.cpp's llama-vocab.cpp writes them for each
// pre-tokenizer type (adapted there from each model's tokenizer.json).
const char* const kGpt2 = R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re";
const char* const kLlama3 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char* const kQwen2 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char* const kDeepseekLlmLetters =
    R"re(\s?[A-Za-z\x{00B5}\x{00C0}-\x{00D6}\x{00D8}-\x{00F6}\x{00F8}-\x{01BA}\x{01BC}-\x{01BF}\x{01C4}-\x{0293}\x{0295}-\x{02AF}\x{0370}-\x{0373}\x{0376}\x{0377}\x{037B}-\x{037D}\x{037F}\x{0386}\x{0388}-\x{038A}\x{038C}\x{038E}-\x{03A1}\x{03A3}-\x{03F5}\x{03F7}-\x{0481}\x{048A}-\x{052F}\x{0531}-\x{0556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)re";
const char* const kCjkHangul = "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+";
const char* const kDeepseekV3 =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char* const kPoro = R"re( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{964}\x{6D4}\x{60C})]+)re";
// Tekken and GPT-4o as in their tokenizer.json (PCRE2 runs them unchanged).
const char* const kTekken =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char* const kGpt4o =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

// name(s) -> patterns, flags. "default" is what llama.cpp uses when the key is missing.
const std::vector<PreTokenizerSpec>& table() {
  static const std::vector<PreTokenizerSpec> rows = {
      {{"default"}, {R"re([\p{P}\$\+<=>\^~\|]+)re", kGpt2, R"re(\p{N}+)re", "[0-9][0-9][0-9]"}},
      {{"llama-bpe", "llama3", "llama-v3", "falcon3", "pixtral"}, {kLlama3}, false, true, true},
      {{"dbrx", "smaug-bpe", "chatglm-bpe"}, {kLlama3}},
      {{"qwen2", "deepseek-r1-qwen"}, {kQwen2}, true},
      {{"stablelm2", "megrez"}, {kQwen2}},
      {{"gpt-2", "phi-2", "mpt", "olmo", "jais", "jina-es", "jina-de", "jina-v1-en", "jina-v2-es", "jina-v2-de",
        "jina-v2-code", "roberta-bpe", "gigachat", "exaone4", "trillion"},
       {kGpt2}},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"}, {R"re(\p{N})re", kGpt2}},
      {{"falcon"}, {R"re([\p{P}\$\+<=>\^~\|`]+)re", kGpt2, "[0-9][0-9][0-9]"}},
      {{"deepseek-llm"}, {"[\r\n]", kDeepseekLlmLetters, "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+", "\\s+$", kCjkHangul,
                          R"re(\p{N}+)re"}},
      {{"deepseek-coder"}, {"[\r\n]", R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re", kCjkHangul, R"re(\p{N})re"}},
      {{"deepseek-v3"}, {R"re(\p{N}{1,3})re", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+", kDeepseekV3}},
      {{"poro-chat", "bloom", "gpt3-finnish"}, {kPoro}},
      {{"viking"}, {kPoro, R"re(\p{N})re"}},
      {{"tekken"}, {kTekken}, false, true, true},
      {{"gpt-4o", "llama4"}, {kGpt4o}},
  };
  return rows;
}

}  // namespace

const PreTokenizerSpec& find_pre_tokenizer(const std::string& name) {
  const std::string key = name.empty() ? "default" : name;
  for (const PreTokenizerSpec& row : table()) {
    for (const std::string& n : row.names) {
      if (n == key) return row;
    }
  }
  std::string known;
  for (const std::string& n : pre_tokenizer_names()) known += (known.empty() ? "" : ", ") + n;
  fail("unknown BPE pre-tokenizer '", name, "' (tokenizer.ggml.pre); qkv knows: ", known);
}

std::vector<std::string> pre_tokenizer_names() {
  std::vector<std::string> out;
  for (const PreTokenizerSpec& row : table()) out.insert(out.end(), row.names.begin(), row.names.end());
  return out;
}

std::string literal_pattern(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::strchr("\\^$.|?*+()[]{}-#/ ", c) && c != '\0') out += '\\';
    out += c;
  }
  return out;
}

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(const PreTokenizerSpec& spec) : spec_(spec) {
  QKV_CHECK(spec_.behaviors.empty() || spec_.behaviors.size() == spec_.patterns.size(), "pre-tokenizer '",
            spec_.names.front(), "': ", spec_.behaviors.size(), " split behaviours for ", spec_.patterns.size(),
            " patterns");
  spec_.behaviors.resize(spec_.patterns.size(), SplitBehavior::kIsolated);
  for (const std::string& p : spec_.patterns) {
    int err = 0;
    PCRE2_SIZE at = 0;
    auto c = std::make_unique<Compiled>();
    c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(),
                            PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY, &err, &at,
                            nullptr);
    if (!c->code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof(msg));
      fail("pre-tokenizer '", spec_.names.front(), "': pattern '", p, "' does not compile at ", at, ": ",
           reinterpret_cast<const char*>(msg));
    }
    pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE);  // optional: the interpreter runs when JIT is unavailable
    compiled_.push_back(std::move(c));
  }
}

PreTokenizer::~PreTokenizer() = default;

namespace {

size_t utf8_step(const std::string& s, size_t i, size_t end) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
  return std::min(n, end - i);
}

}  // namespace

std::vector<std::pair<size_t, size_t>> PreTokenizer::split(const std::string& text) const {
  std::vector<std::pair<size_t, size_t>> pieces;
  if (text.empty()) return pieces;
  pieces.emplace_back(0, text.size());
  std::vector<std::pair<size_t, size_t>> next;
  for (size_t k = 0; k < compiled_.size(); ++k) {
    const auto& c = compiled_[k];
    const SplitBehavior behavior = spec_.behaviors[k];
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(c->code, nullptr);
    QKV_CHECK(md, "pre-tokenizer: out of memory for match data");
    next.clear();
    for (const auto& [off, len] : pieces) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + off);
      size_t pos = 0, start = 0;  // pos: end of the last piece emitted; start: where to search
      size_t last_end = std::string::npos;  // end of the last match
      while (start < len) {
        const int rc = pcre2_match(c->code, subject, len, start, 0, md, nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          pcre2_match_data_free(md);
          PCRE2_UCHAR msg[256];
          pcre2_get_error_message(rc, msg, sizeof(msg));
          fail("pre-tokenizer '", spec_.names.front(), "': matching failed: ", reinterpret_cast<const char*>(msg));
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const size_t b = ov[0], e = ov[1];
        if (e == b) {  // an empty match splits nothing
          start = b + utf8_step(text, off + b, off + len) ;
          continue;
        }
        if (behavior == SplitBehavior::kMergedWithPrevious) {
          next.emplace_back(off + pos, e - pos);
          pos = e;
        } else if (behavior == SplitBehavior::kMergedWithNext) {
          // The match starts the next piece, unless it continues the match
          // before it (a run of matches stays in one piece, as Hugging Face's split keeps it).
          if (b != last_end) {
            if (b > pos) next.emplace_back(off + pos, b - pos);
            pos = b;
          }
        } else {
          if (b > pos) next.emplace_back(off + pos, b - pos);
          next.emplace_back(off + b, e - b);
          pos = e;
        }
        start = last_end = e;
      }
      if (pos < len) next.emplace_back(off + pos, len - pos);
    }
    pcre2_match_data_free(md);
    pieces.swap(next);
  }
  return pieces;
}

}  // namespace qkv

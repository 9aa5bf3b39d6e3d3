// Byte-level BPE pre-tokenizers: the splits llama.cpp applies before merging,
// named by GGUF's tokenizer.ggml.pre, as a table of PCRE2 patterns (UTF + UCP).
//
// Splitting runs the patterns in order. Each pattern subdivides every piece the
// previous ones produced: its matches become pieces (or join the text before
// or after them, by the pattern's SplitBehavior), and so does the text
// between matches. A piece is matched on its own (lookarounds and `$` see the
// piece's ends), as llama.cpp does.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace qkv {

// What a split keeps of a pattern's matches (Hugging Face's Split behaviours):
// a piece of its own, glued to the text before it, or to the text after it
// (a run of adjacent matches then stays together).
enum class SplitBehavior { kIsolated, kMergedWithPrevious, kMergedWithNext };

// One row of the table (or a tokenizer.json's pre-tokenizer).
struct PreTokenizerSpec {
  std::vector<std::string> names;     // tokenizer.ggml.pre values that select it
  std::vector<std::string> patterns;  // applied in order
  bool nfc = false;            // normalize text to NFC first (the Hugging Face tokenizer does)
  bool ignore_merges = false;  // a piece that is a whole token is taken as is (Llama 3)
  bool add_bos = false;        // BOS by default when the file has no add_bos_token key
  std::vector<SplitBehavior> behaviors = {};  // one per pattern; empty: all isolated
};

// The spec named `name` ("" means "default", as llama.cpp treats a missing
// key); throws qkv::Error naming it when no row has it.
const PreTokenizerSpec& find_pre_tokenizer(const std::string& name);
// Every name the table knows, for error messages and tests.
std::vector<std::string> pre_tokenizer_names();
// A PCRE2 pattern matching the literal text s.
std::string literal_pattern(const std::string& s);

// The compiled patterns of one spec; immutable and safe to share across threads.
class PreTokenizer {
 public:
  explicit PreTokenizer(const PreTokenizerSpec& spec);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  const PreTokenizerSpec& spec() const { return spec_; }
  // [offset, length) pieces of text, in order, covering it exactly. Bytes that
  // are not valid UTF-8 never match a pattern (they stay between matches).
  std::vector<std::pair<size_t, size_t>> split(const std::string& text) const;

 private:
  struct Compiled;
  PreTokenizerSpec spec_;
  std::vector<std::unique_ptr<Compiled>> compiled_;
};

}  // namespace qkv

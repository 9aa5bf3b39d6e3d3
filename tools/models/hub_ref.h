// What a user names on the Hugging Face hub, and which of a repository's GGUF
// files that picks. OWNER/REPO[:QUANT] picks by quant tag as llama.cpp's -hf
// does (case-insensitive, Q4_K_M by default); OWNER/REPO/FILE.gguf names the
// file. A split model (NAME-00001-of-0000N.gguf ...) is one choice: all parts.
#pragma once

#include <string>
#include <vector>

namespace qkv::tools::models {

inline constexpr const char* kDefaultQuant = "Q4_K_M";

struct HubRef {
  std::string repo;   // OWNER/REPO
  std::string quant;  // the tag after ':' ("" when none was given)
  std::string file;   // the path after OWNER/REPO/ ("" when none was given)
};

// Parses OWNER/REPO[:QUANT] or OWNER/REPO/FILE.gguf, with or without an hf:
// (or hf://) prefix; throws qkv::Error naming
// what is wrong (characters the hub does not allow, "..", a FILE that is not .gguf).
HubRef parse_hub_ref(const std::string& text);

// One model among a repository's files: a single GGUF file, or every part of a split one.
struct GgufChoice {
  std::string quant;               // the label in its name ("Q8_0"), for listings
  std::vector<std::string> files;  // paths in the repository, parts in order
};

// The GGUF models among a repository's file paths (multimodal projectors,
// "mmproj" files, are left out). Throws when a split model lacks a part.
std::vector<GgufChoice> gguf_choices(const std::vector<std::string>& repo_files);

// The model ref names among choices: by file (the split set holding it), or by
// quant tag (kDefaultQuant when none; the only model when the default is absent
// and there is one). Throws listing the quants available when none or several match.
GgufChoice choose_gguf(const std::vector<GgufChoice>& choices, const HubRef& ref);

// The quant label in a GGUF file name: the last '-' or '.' separated word
// before ".gguf" (and before a split suffix): "Llama-3-8B-Q4_K_M.gguf" -> "Q4_K_M".
std::string quant_label(const std::string& file_name);

}  // namespace qkv::tools::models

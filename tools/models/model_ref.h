// How the model-loading commands (run, chat, serve, bench, embed, perplexity)
// name a model besides a file path:
//   -m hf:OWNER/REPO[:QUANT], -m hf:OWNER/REPO/FILE.gguf   the Hugging Face cache, pulled first when absent
//   -hf OWNER/REPO[:QUANT] [-hff FILE]                     the same, as llama.cpp spells it
//   -m ollama:NAME[:TAG] (or ollama://NAME[:TAG])          the GGUF blob in Ollama's store, in place
#pragma once

#include <string>

namespace qkv::tools::models {

// The file path a -m value names: hf: and ollama: references resolved (and
// pulled), anything else returned as given. Throws qkv::Error on failure.
std::string resolve_model_argument(const std::string& value);

// A -m value resolved: the file, and the name the model goes by where the
// reference gives one (an Ollama model's NAME:TAG, as `ollama list` shows it;
// "" for a path or a hub file, which go by their file name).
struct ResolvedModel {
  std::string path;
  std::string name;
};
ResolvedModel resolve_model_reference(const std::string& value);

// Rewrites a model-loading command's arguments before it parses them:
// -hf/-hfr/--hf-repo and -hff/--hf-file become one "-m hf:..." (and
// --hf-token T sets HF_TOKEN); for run and chat, the sampling parameters of
// an ollama: model's params layer go in front of the user's flags, as
// defaults the user's own flags override. Returns the argument vector to
// use (argv itself or storage that lives to the program's end) and updates
// *argc; other commands' arguments are returned unchanged.
char** apply_model_flags(int* argc, char** argv);

}  // namespace qkv::tools::models

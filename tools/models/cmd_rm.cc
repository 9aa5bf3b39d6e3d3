// qkv rm OWNER/REPO[:QUANT | /FILE.gguf]: removes a model from the Hugging Face
// cache. Ollama's store is left to 'ollama rm'.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "tools/models/commands.h"
#include "tools/models/hf_cache.h"
#include "tools/models/hub_ref.h"

namespace qkv::tools::models {

namespace {

const char* const kUsage =
    "usage: qkv rm OWNER/REPO[:QUANT] | OWNER/REPO/FILE.gguf | OWNER/REPO\n"
    "\n"
    "Removes a model's files from the Hugging Face cache: the snapshot links of the\n"
    "files QUANT or FILE names (in every cached revision), then every blob no link\n"
    "points at any more. OWNER/REPO alone removes the repository's whole cache\n"
    "folder. Models in Ollama's store are removed with 'ollama rm'.\n";

std::string mib(uint64_t b) {
  char s[32];
  std::snprintf(s, sizeof(s), "%.1f MiB", static_cast<double>(b) / (1024.0 * 1024.0));
  return s;
}

}  // namespace

int cmd_rm(int argc, char** argv) {
  if (argc == 2 && (std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (argc != 2 || argv[1][0] == '-') {
    std::fprintf(stderr, "qkv rm: name one model\n\n%s", kUsage);
    return 2;
  }
  const std::string arg = argv[1];
  if (arg.rfind("ollama:", 0) == 0) {
    const size_t name_at = std::min(arg.find_first_not_of('/', 7), arg.size());
    fail("qkv does not change Ollama's store: remove ", arg.substr(name_at),
         " with 'ollama rm', which also keeps Ollama's own records straight");
  }
  const HubRef ref = parse_hub_ref(arg);
  const std::string cache = hub_cache_dir();
  const std::string repo_dir = repo_cache_dir(cache, ref.repo);
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(repo_dir, ec)) fail(ref.repo, " is not in the Hugging Face cache at ", cache);
  if (ref.quant.empty() && ref.file.empty()) {
    const uintmax_t removed = fs::remove_all(repo_dir, ec);
    if (ec) fail("cannot remove ", repo_dir, ": ", ec.message());
    std::printf("removed %s (%ju files and folders)\n", repo_dir.c_str(), removed);
    return 0;
  }
  const std::vector<CachedFile> cached = cached_gguf_files(repo_dir, ref.repo);
  std::set<std::string> unique_names;  // a file cached at several revisions counts once
  for (const CachedFile& f : cached) unique_names.insert(f.file);
  const std::vector<std::string> names(unique_names.begin(), unique_names.end());
  const GgufChoice choice = choose_gguf(gguf_choices(names), ref);
  std::vector<CachedFile> doomed;
  for (const CachedFile& f : cached) {
    for (const std::string& name : choice.files) {
      if (f.file == name) doomed.push_back(f);
    }
  }
  const uint64_t freed = remove_cached(repo_dir, doomed);
  for (const CachedFile& f : doomed) std::printf("removed %s\n", f.path.c_str());
  std::printf("freed %s\n", mib(freed).c_str());
  return 0;
}

}  // namespace qkv::tools::models

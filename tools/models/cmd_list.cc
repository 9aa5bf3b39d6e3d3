// qkv list: the GGUF models in the Hugging Face cache and in Ollama's store,
// with size, quantization and architecture read from each file's GGUF header.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "runtime/gguf.h"
#include "runtime/quant_plan.h"
#include "tools/models/commands.h"
#include "tools/models/hf_cache.h"
#include "tools/models/ollama_store.h"

namespace qkv::tools::models {

namespace {

const char* const kUsage =
    "usage: qkv list\n"
    "\n"
    "Lists the GGUF models of the Hugging Face cache (as hf:OWNER/REPO/FILE, which -m\n"
    "takes) and of Ollama's store (as ollama:NAME:TAG), with size, quantization and\n"
    "architecture. The caches are found as qkv pull and ollama find them\n"
    "(HF_HUB_CACHE, HF_HOME; OLLAMA_MODELS).\n";

struct Summary {
  std::string quant = "?";
  std::string arch = "?";
};

// The preset whose general.file_type this is ("Q4_K_M"), or the ggml type
// holding the most tensor bytes when the file names none qkv knows.
std::string quant_of(const GGUFFile& g) {
  if (const GGUFValue* ft = g.find("general.file_type"); ft != nullptr && ft->is_integer()) {
    const std::string names = quant_preset_names();
    for (size_t b = 0; b < names.size();) {
      size_t e = names.find(',', b);
      if (e == std::string::npos) e = names.size();
      const std::string name = names.substr(b, e - b);
      const QuantPreset* p = find_quant_preset(name);
      if (p != nullptr && quant_preset_file_type(*p) == ft->as_uint()) return quant_preset_name(*p);
      b = names.find_first_not_of(", ", e);
      if (b == std::string::npos) break;
    }
  }
  std::map<uint32_t, uint64_t> bytes;
  for (const GGUFTensorInfo& t : g.tensors()) bytes[t.type] += t.n_bytes;
  uint32_t top = 0;
  uint64_t most = 0;
  for (const auto& kv : bytes) {
    if (kv.second > most) {
      most = kv.second;
      top = kv.first;
    }
  }
  return most > 0 ? ggml_type_name(top) : "?";
}

Summary summarize(const std::string& path) {
  Summary s;
  try {
    const GGUFFile g = GGUFFile::open(path);
    if (const GGUFValue* a = g.find("general.architecture"); a != nullptr && a->type == GGUFType::STRING) s.arch = a->str;
    s.quant = quant_of(g);
  } catch (const Error& e) {
    s.arch = std::string("unreadable: ") + e.what();
  }
  return s;
}

std::string size_text(uint64_t b) {
  char s[32];
  if (b >= (1ull << 30)) {
    std::snprintf(s, sizeof(s), "%.2f GiB", static_cast<double>(b) / (1ull << 30));
  } else {
    std::snprintf(s, sizeof(s), "%.1f MiB", static_cast<double>(b) / (1ull << 20));
  }
  return s;
}

void print_row(const std::string& name, uint64_t size, const Summary& s) {
  std::printf("%-60s %10s  %-8s %s\n", name.c_str(), size_text(size).c_str(), s.quant.c_str(), s.arch.c_str());
}

}  // namespace

int cmd_list(int argc, char** argv) {
  if (argc == 2 && (std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (argc != 1) {
    std::fprintf(stderr, "qkv list: takes no arguments\n\n%s", kUsage);
    return 2;
  }
  std::printf("%-60s %10s  %-8s %s\n", "MODEL", "SIZE", "QUANT", "ARCH");
  const std::string cache = hub_cache_dir();
  for (const CachedFile& f : all_cached_gguf_files(cache)) {
    const std::string name = "hf:" + f.repo + "/" + f.file + (f.revision == read_ref(repo_cache_dir(cache, f.repo), "main") ? "" : " @" + f.revision.substr(0, 8));
    if (f.blob.empty()) {
      std::printf("%-60s %10s  (the link %s points at no file)\n", name.c_str(), "-", f.path.c_str());
      continue;
    }
    print_row(name, f.size, summarize(f.blob));
  }
  for (const OllamaModel& m : list_ollama_models()) {
    if (!m.problem.empty()) {
      std::printf("%-60s %10s  (unusable: %s)\n", ("ollama:" + m.name).c_str(), "-", m.problem.c_str());
      continue;
    }
    print_row("ollama:" + m.name, m.size, summarize(m.model_blob));
  }
  return 0;
}

}  // namespace qkv::tools::models

#include "tools/models/model_ref.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <nlohmann/json.hpp>
#include <vector>

#include "kernels/error.h"
#include "tools/models/hub_pull.h"
#include "tools/models/hub_ref.h"
#include "tools/models/ollama_store.h"

namespace qkv::tools::models {

namespace {

// The commands that load a model with -m, and so take -hf.
constexpr const char* kModelCommands[] = {"run", "chat", "serve", "bench", "embed", "perplexity"};

// Ollama params the run and chat commands have a flag for (both parse the
// sampler flags of tools/chat/cmd_chat.h).
struct OllamaParam {
  const char* key;   // in the params layer's JSON
  const char* flag;  // qkv's flag
};
constexpr OllamaParam kOllamaParams[] = {
    {"temperature", "--temp"}, {"top_k", "--top-k"},   {"top_p", "--top-p"},
    {"min_p", "--min-p"},      {"seed", "--seed"},     {"repeat_penalty", "--repeat-penalty"},
};

bool strip_prefix(const std::string& s, const char* prefix, std::string* rest) {
  const size_t n = std::strlen(prefix);
  if (s.compare(0, n, prefix) != 0) return false;
  *rest = s.substr(n);
  return true;
}

bool is_one_of(const char* word, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (std::strcmp(word, n) == 0) return true;
  }
  return false;
}

// Strings that outlive the command (argv points into them).
std::deque<std::string>& arg_storage() {
  static std::deque<std::string> storage;
  return storage;
}

char* keep(const std::string& s) { return arg_storage().emplace_back(s).data(); }

std::string ollama_name(const std::string& value) {
  std::string rest;
  if (strip_prefix(value, "ollama://", &rest) || strip_prefix(value, "ollama:", &rest)) return rest;
  return "";
}

// The flags an Ollama params layer sets among those qkv has; notes the rest on stderr.
std::vector<std::string> ollama_param_flags(const std::string& params_json, const std::string& model) {
  std::vector<std::string> flags;
  nlohmann::json params;
  try {
    params = nlohmann::json::parse(params_json);
  } catch (const std::exception& e) {
    fail("the params layer of the Ollama model ", model, " is not JSON: ", e.what());
  }
  if (!params.is_object()) fail("the params layer of the Ollama model ", model, " is not a JSON object");
  std::string ignored;
  for (auto it = params.begin(); it != params.end(); ++it) {
    const OllamaParam* hit = nullptr;
    for (const OllamaParam& p : kOllamaParams) {
      if (it.key() == p.key) hit = &p;
    }
    if (hit == nullptr || !it.value().is_number()) {
      ignored += (ignored.empty() ? "" : ", ") + it.key();
      continue;
    }
    char buf[64];
    if (it.value().is_number_integer()) {
      std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(it.value().get<int64_t>()));
    } else {
      std::snprintf(buf, sizeof(buf), "%g", it.value().get<double>());
    }
    flags.push_back(hit->flag);
    flags.push_back(buf);
  }
  if (!ignored.empty()) {
    std::fprintf(stderr, "qkv: %s: Ollama parameters qkv has no flag for here, not applied: %s\n", model.c_str(), ignored.c_str());
  }
  return flags;
}

}  // namespace

std::string resolve_model_argument(const std::string& value) { return resolve_model_reference(value).path; }

ResolvedModel resolve_model_reference(const std::string& value) {
  std::string rest;
  if (strip_prefix(value, "hf://", &rest) || strip_prefix(value, "hf:", &rest)) {
    const std::vector<std::string> paths = pull_model(parse_hub_ref(rest), HubSettings::from_environment());
    if (paths.size() > 1) {
      fail(rest, " is a model split into ", paths.size(), " files, which qkv pulled (", paths.front(),
           " ...) but loads only as one file: join them with llama.cpp's 'llama-gguf-split --merge' and pass -m FILE");
    }
    return {paths.front(), ""};
  }
  const std::string ollama = ollama_name(value);
  if (!ollama.empty()) {
    const OllamaModel m = find_ollama_model(ollama);
    return {m.model_blob, m.name};
  }
  return {value, ""};
}

char** apply_model_flags(int* argc, char** argv) {
  bool loads_model = false;
  for (const char* c : kModelCommands) loads_model = loads_model || std::strcmp(argv[0], c) == 0;
  if (!loads_model) return argv;
  std::string hf_repo, hf_file, model;
  std::vector<char*> out{argv[0]};
  for (int i = 1; i < *argc; ++i) {
    const bool repo_flag = is_one_of(argv[i], {"-hf", "-hfr", "--hf-repo"});
    const bool file_flag = is_one_of(argv[i], {"-hff", "--hf-file"});
    const bool token_flag = is_one_of(argv[i], {"-hft", "--hf-token"});
    if (repo_flag || file_flag || token_flag) {
      if (i + 1 >= *argc) fail("flag ", argv[i], " needs a value");
      const char* v = argv[++i];
      if (repo_flag) hf_repo = v;
      if (file_flag) hf_file = v;
      if (token_flag && setenv("HF_TOKEN", v, 1) != 0) fail("cannot set HF_TOKEN");
      continue;
    }
    if ((std::strcmp(argv[i], "-m") == 0 || std::strcmp(argv[i], "--model") == 0) && i + 1 < *argc) model = argv[i + 1];
    out.push_back(argv[i]);
  }
  if (!hf_file.empty() && hf_repo.empty()) fail("-hff/--hf-file names a file of the repository -hf/--hf-repo names: give both");
  if (!hf_repo.empty()) {
    if (!model.empty()) fail("give -m or -hf, not both (-m ", model, ", -hf ", hf_repo, ")");
    if (!hf_file.empty()) {
      // -hff overrides the quant tag of -hf, as in llama.cpp.
      hf_repo = hf_repo.substr(0, hf_repo.find(':')) + "/" + hf_file;
    }
    out.push_back(keep("-m"));
    out.push_back(keep("hf:" + hf_repo));
  }
  const std::string ollama = ollama_name(model);
  const bool samples = std::strcmp(argv[0], "run") == 0 || std::strcmp(argv[0], "chat") == 0;
  if (!ollama.empty() && samples) {
    const OllamaModel m = find_ollama_model(ollama);
    if (!m.params_json.empty()) {
      const std::vector<std::string> defaults = ollama_param_flags(m.params_json, m.name);
      std::vector<char*> with_defaults{out[0]};
      for (const std::string& f : defaults) with_defaults.push_back(keep(f));
      with_defaults.insert(with_defaults.end(), out.begin() + 1, out.end());
      out = with_defaults;
    }
  }
  static std::vector<char*> storage;
  storage = out;
  storage.push_back(nullptr);
  *argc = static_cast<int>(out.size());
  return storage.data();
}

}  // namespace qkv::tools::models

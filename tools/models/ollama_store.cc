#include "tools/models/ollama_store.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <system_error>

#include "kernels/error.h"

namespace qkv::tools::models {

namespace fs = std::filesystem;

namespace {

constexpr const char* kRegistry = "registry.ollama.ai";
constexpr const char* kModelLayer = "application/vnd.ollama.image.model";
constexpr const char* kParamsLayer = "application/vnd.ollama.image.params";
constexpr uint64_t kMaxManifest = 1 << 20;
constexpr uint64_t kMaxParams = 1 << 20;

std::string read_small_file(const fs::path& p, uint64_t max_bytes, const char* what) {
  std::error_code ec;
  const uint64_t size = fs::file_size(p, ec);
  if (ec) fail("cannot read the ", what, " ", p.string(), ": ", ec.message());
  if (size > max_bytes) fail("the ", what, " ", p.string(), " is ", size, " bytes, over the ", max_bytes, " a ", what, " may be");
  std::ifstream in(p, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in && !in.eof()) fail("cannot read the ", what, " ", p.string());
  return s;
}

// A name part of a model reference: what Ollama allows, and never "." or "..".
void check_part(const std::string& part, const std::string& ref) {
  bool ok = !part.empty() && part.size() <= 128 && part[0] != '.';
  for (char c : part) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.');
  if (!ok) fail("'", ref, "' is not an Ollama model name (NAME[:TAG], USER/NAME[:TAG]; letters, digits, '-', '_', '.')");
}

// The blob path of digest "sha256:<64 hex>".
fs::path blob_of(const fs::path& models, const std::string& digest, const std::string& manifest) {
  bool ok = digest.size() == 7 + 64 && digest.compare(0, 7, "sha256:") == 0;
  for (size_t i = 7; ok && i < digest.size(); ++i) ok = std::isxdigit(static_cast<unsigned char>(digest[i])) != 0;
  if (!ok) fail("the Ollama manifest ", manifest, " has a layer digest that is not sha256:<64 hex digits>: '", digest, "'");
  return models / "blobs" / ("sha256-" + digest.substr(7));
}

OllamaModel read_manifest(const fs::path& models, const fs::path& manifest, const std::string& name) {
  const std::string text = read_small_file(manifest, kMaxManifest, "Ollama manifest");
  nlohmann::json m;
  try {
    m = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    fail("the Ollama manifest ", manifest.string(), " is not JSON: ", e.what());
  }
  if (!m.is_object() || !m.contains("layers") || !m["layers"].is_array()) {
    fail("the Ollama manifest ", manifest.string(), " has no layers[]");
  }
  OllamaModel out;
  out.name = name;
  out.manifest = manifest.string();
  for (const nlohmann::json& layer : m["layers"]) {
    if (!layer.is_object() || !layer.contains("mediaType") || !layer["mediaType"].is_string() || !layer.contains("digest") ||
        !layer["digest"].is_string()) {
      continue;
    }
    const std::string type = layer["mediaType"].get<std::string>();
    if (type == kModelLayer && out.model_blob.empty()) {
      const fs::path blob = blob_of(models, layer["digest"].get<std::string>(), out.manifest);
      std::error_code ec;
      out.size = fs::file_size(blob, ec);
      if (ec) fail("the Ollama model ", name, "'s GGUF blob ", blob.string(), " is missing: ", ec.message());
      if (layer.contains("size") && layer["size"].is_number_unsigned() && layer["size"].get<uint64_t>() != out.size) {
        fail("the Ollama model ", name, "'s blob ", blob.string(), " is ", out.size, " bytes, not the ",
             layer["size"].get<uint64_t>(), " its manifest says (a download cut short?)");
      }
      out.model_blob = blob.string();
    } else if (type == kParamsLayer) {
      std::error_code ec;
      const fs::path blob = blob_of(models, layer["digest"].get<std::string>(), out.manifest);
      if (fs::exists(blob, ec)) out.params_json = read_small_file(blob, kMaxParams, "Ollama params layer");
    }
  }
  if (out.model_blob.empty()) fail("the Ollama manifest ", out.manifest, " has no ", kModelLayer, " layer");
  return out;
}

}  // namespace

std::string ollama_models_dir() {
  if (const char* m = std::getenv("OLLAMA_MODELS"); m != nullptr && *m != '\0') return m;
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0') fail("cannot find Ollama's store: OLLAMA_MODELS and HOME are unset");
  return std::string(home) + "/.ollama/models";
}

OllamaModel find_ollama_model(const std::string& ref) {
  std::string name = ref, tag = "latest";
  const size_t colon = ref.rfind(':');
  if (colon != std::string::npos && ref.find('/', colon) == std::string::npos) {
    name = ref.substr(0, colon);
    tag = ref.substr(colon + 1);
  }
  std::vector<std::string> parts;
  for (size_t b = 0;;) {
    const size_t e = name.find('/', b);
    parts.push_back(name.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  if (parts.size() > 3) fail("'", ref, "' is not an Ollama model name (NAME[:TAG], USER/NAME[:TAG] or HOST/USER/NAME[:TAG])");
  for (const std::string& p : parts) check_part(p, ref);
  check_part(tag, ref);
  if (parts.size() == 1) parts.insert(parts.begin(), "library");
  if (parts.size() == 2) parts.insert(parts.begin(), kRegistry);
  const fs::path models = ollama_models_dir();
  const fs::path manifest = models / "manifests" / parts[0] / parts[1] / parts[2] / tag;
  std::error_code ec;
  if (!fs::is_regular_file(manifest, ec)) {
    fail("Ollama has no model ", name, ":", tag, " (no manifest ", manifest.string(),
         "); 'ollama pull ", name, ":", tag, "' fetches it, and OLLAMA_MODELS names another store");
  }
  return read_manifest(models, manifest, name + ":" + tag);
}

std::vector<OllamaModel> list_ollama_models() {
  std::vector<OllamaModel> out;
  const fs::path models = ollama_models_dir();
  const fs::path root = models / "manifests";
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code ec2;
    if (!it->is_regular_file(ec2) || it.depth() != 3) continue;
    const fs::path rel = fs::relative(it->path(), root, ec2);
    std::vector<std::string> p;
    for (const fs::path& part : rel) p.push_back(part.string());
    // Display names as ollama lists them: the registry and "library/" left out.
    std::string name = p[0] == kRegistry ? (p[1] == "library" ? p[2] : p[1] + "/" + p[2]) : p[0] + "/" + p[1] + "/" + p[2];
    try {
      out.push_back(read_manifest(models, it->path(), name + ":" + p[3]));
    } catch (const Error& e) {
      OllamaModel broken;
      broken.name = name + ":" + p[3];
      broken.manifest = it->path().string();
      broken.problem = e.what();
      out.push_back(broken);
    }
  }
  std::sort(out.begin(), out.end(), [](const OllamaModel& a, const OllamaModel& b) { return a.name < b.name; });
  return out;
}

}  // namespace qkv::tools::models

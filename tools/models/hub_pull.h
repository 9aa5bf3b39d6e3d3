// qkv pull's work: ask the hub which files a repository holds at main, pick
// the GGUF model a HubRef names, and bring its files into the Hugging Face
// cache (hf_cache.h), verified by the sha256 the hub announces.
#pragma once

#include <string>
#include <vector>

#include "tools/models/hub_ref.h"

namespace qkv::tools::models {

// Where and how to reach the hub, from the environment huggingface_hub reads:
// HF_ENDPOINT (default https://huggingface.co), HF_TOKEN (sent as a bearer
// token; when unset, the token file 'huggingface-cli login' writes),
// HF_HUB_OFFLINE=1 (the cache only), the cache folder (hf_cache.h).
struct HubSettings {
  std::string endpoint;
  std::string token;
  std::string cache;
  bool offline = false;
  static HubSettings from_environment();
};

// The snapshot paths of the model ref names, in the cache after the call
// (parts in order for a split model; the first is the one to load). Offline,
// or when the hub cannot be reached, answers from the cache alone and throws
// when the model is not there.
std::vector<std::string> pull_model(const HubRef& ref, const HubSettings& settings);

// The snapshot paths of the model ref names from the cache alone (refs/main's
// snapshot first, then any other); throws naming what is missing.
std::vector<std::string> cached_model(const HubRef& ref, const HubSettings& settings);

}  // namespace qkv::tools::models

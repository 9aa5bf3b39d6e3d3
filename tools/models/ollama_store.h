// Ollama's model store, read in place (qkv never writes it):
//   <models>/manifests/registry.ollama.ai/library/NAME/TAG   (NAME without a '/')
//   <models>/manifests/registry.ollama.ai/USER/NAME/TAG      (NAME = USER/NAME)
//   <models>/manifests/HOST/USER/NAME/TAG                    (NAME = HOST/USER/NAME)
//   <models>/blobs/sha256-<hex>                               every layer's bytes
// <models> is $OLLAMA_MODELS, else ~/.ollama/models. A manifest is JSON whose
// layers[] carry a mediaType and a digest "sha256:<hex>"; the GGUF is the
// layer of type application/vnd.ollama.image.model. The .template layer is a
// Go template, which qkv cannot run: qkv uses the GGUF's own chat template.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace qkv::tools::models {

std::string ollama_models_dir();

struct OllamaModel {
  std::string name;         // as ollama lists it: NAME:TAG
  std::string manifest;     // the manifest's path
  std::string model_blob;   // the GGUF blob's path
  uint64_t size = 0;        // the model layer's size
  std::string params_json;  // the .params layer's JSON ("" when absent)
  std::string problem;      // why list_ollama_models found it unusable ("" when usable)
};

// The model NAME[:TAG] (TAG defaults to latest) names; throws naming the
// manifest or blob that is missing or malformed.
OllamaModel find_ollama_model(const std::string& name_and_tag);

// Every model of the store (none when the store does not exist).
std::vector<OllamaModel> list_ollama_models();

}  // namespace qkv::tools::models

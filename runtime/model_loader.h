// Loading a model (any family of runtime/arch.h) from a GGUF file or a llama2.c checkpoint
// into a qkv::Model. Weights stay in the file's memory map wherever the file's
// layout is already the in-memory layout (zero-copy); Model::storage keeps the
// map alive.
#pragma once

#include <string>

#include "runtime/gguf.h"
#include "runtime/model.h"

namespace qkv {

enum class ModelFormat { GGUF, Llama2c };

// GGUF when the file starts with "GGUF", otherwise a llama2.c checkpoint.
ModelFormat detect_model_format(const std::string& path);

// Loads either format (by detect_model_format). Throws qkv::Error naming the
// file and the problem for anything malformed or unsupported.
Model load_model(const std::string& path);

// A GGUF of one of the families in runtime/arch.h (already opened/validated).
Model load_gguf_model(const GGUFFile& file);

// llama2.c's legacy (version 0) checkpoint: 7 int32 header, then f32 weights in
// run.c's order; a negative vocab_size means an unshared classifier at the end.
Model load_llama2c_model(const std::string& path);

// Checks that a configuration is self-consistent and within sane bounds
// (positive sizes, n_heads divides dim, n_kv_heads divides n_heads, even
// rotated dims...). `where` names the file (or "synthetic") in the error.
void validate_model_config(const ModelConfig& config, const std::string& where);

}  // namespace qkv

// GGUF -> GGUF quantization as llama-quantize does it without an importance
// matrix (qkv quantize): each tensor's type from the preset's plan
// (runtime/quant_plan.h), its bytes from the reference quantizers
// (kernels/quant/quantize.h).
//
// The output matches llama-quantize's file: the input's metadata in order
// without split keys, then general.quantization_version = 2 and
// general.file_type = the preset's llama_ftype; tensors in llama-quantize's
// order (outside the layers first, then by layer, by name); the input's
// alignment. Tensors the plan leaves alone, or whose type is already the
// planned one, are copied byte for byte. Quantized inputs are dequantized to
// F32 first (a warning: the error compounds). The file is written through an
// AtomicFile: a failure (a full disk included) leaves no output behind.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "runtime/gguf.h"
#include "runtime/quant_plan.h"

namespace qkv {

struct QuantizeOptions {
  int threads = 0;       // rows are quantized in parallel; 0: all cores
  FILE* log = stderr;    // warnings; nullptr: silent
  bool progress = true;  // and a line per tensor
};

struct QuantizeSummary {
  size_t tensors = 0, quantized = 0, fallbacks = 0;
  uint64_t bytes_in = 0, bytes_out = 0;  // tensor data
};

// What llama-quantize's plan needs from a file's metadata and tensors. Throws
// qkv::Error for files it cannot plan (no architecture or layer count, mixture
// of experts, Falcon, split files).
QuantModelInfo quant_model_info(const GGUFFile& g);

// Quantizes the GGUF file `in` into `out` with preset p.
QuantizeSummary quantize_gguf(const std::string& in, const std::string& out, const QuantPreset& p,
                              const QuantizeOptions& options = {});

}  // namespace qkv

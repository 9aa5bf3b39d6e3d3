// Models built in memory with random weights (tests and benchmarks need models
// of real shapes without real checkpoints), and writing any qkv::Model out as
// a GGUF file that llama.cpp and qkv can read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "runtime/model.h"
#include "runtime/quant_plan.h"
#include "runtime/tokenizer.h"

namespace qkv {

// Named shapes: "tiny" (dim 64, 2 layers, 4 heads / 2 KV heads, FFN 172, vocab
// 512, ctx 512), "143M" (dim 576, 30 layers, 9/3 heads, FFN 1536, vocab 32000,
// ctx 8192), "1.1B" (dim 2048, 22 layers, 32/4 heads, FFN 5632, vocab 32000,
// ctx 2048). Throws qkv::Error naming the known presets for any other name.
ModelConfig synthetic_preset(const std::string& name);
std::vector<std::string> synthetic_preset_names();

// A model with deterministic random weights (the same config, type, seed and
// tie flag give the same bits on any thread count). Projections and the
// embedding are uniform with variance 1/cols (so W·x keeps unit-scale
// activations), norms are f32 in [0.9, 1.1]. Matrices are stored in
// weight_type (quantized with encode_row); a Q8_0 matrix whose rows are not a
// multiple of 32 values (e.g. FFN 172) falls back to F16. tied_output: output
// is token_embd. One allocation, filled row by row in parallel.
Model make_synthetic_model(const ModelConfig& config, DType weight_type, uint64_t seed = 1234,
                           bool tied_output = true);

// How a synthetic model's matrices are stored: `type` for every matrix (one
// whose rows it cannot hold becomes F16), or, with a preset, llama-quantize's
// per-tensor plan of that preset (runtime/quant_plan.h) applied to the same
// random f32 values (a tensor the plan has no type for becomes F16).
struct WeightFormat {
  DType type = DType::F16;
  const QuantPreset* preset = nullptr;
};
// A preset name (q4_k_m, Q8_0, ...) or else a type name (f32, q4_k, ...),
// case-insensitive; false if neither.
bool parse_weight_format(const std::string& name, WeightFormat* out);
// The preset's name ("Q4_K_M") or the type's ("q4_k").
std::string weight_format_name(const WeightFormat& f);
Model make_synthetic_model(const ModelConfig& config, const WeightFormat& format, uint64_t seed = 1234,
                           bool tied_output = true);

// The configuration c as a model of family `arch` (runtime/arch.h: its rope
// style, activation, biases, norms, soft-caps, window pattern; gemma3 gets a
// 1024-token window and base 1e6 with 10000 on its sliding layers).
ModelConfig with_arch(ModelConfig c, const std::string& arch);
// Whether a synthetic model of `arch` has a tied output: the family's rule, or
// `requested` where the family allows both.
bool arch_output_tied(const std::string& arch, bool requested);

// A copy of `model` whose projection matrices (not norms or biases) are
// re-encoded as `type` (a matrix whose rows Q8_0 cannot hold becomes F16); it
// keeps the source's memory alive. Fused parts become separate matrices.
Model convert_model(const Model& model, DType type);

// Writes `model` as GGUF v3 (its family's general.architecture and keys,
// llama.cpp tensor names, fused tensors where the family fuses, norms F32, a
// tied output omitted). With a tokenizer,
// its vocabulary goes into tokenizer.ggml.* (its size must equal the model's);
// without one, a byte-level vocabulary (Tokenizer::byte_level) is written when
// the model's vocabulary has at least 260 entries, so the file is runnable.
void write_gguf_model(const Model& model, const std::string& path, const Tokenizer* tokenizer = nullptr);

}  // namespace qkv

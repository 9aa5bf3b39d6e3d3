// Models built in memory with random weights (tests and benchmarks need models
// of real shapes without real checkpoints), and writing any qkv::Model out as
// a GGUF file that llama.cpp and qkv can read.
#pragma once

#include <cstdint>
#include <memory>
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

// How fill_synthetic_tensors fills a tensor: Matrix uniform with variance
// 1/cols, Norm in [0.9, 1.1], Bias in [-0.1, 0.1].
enum class SyntheticFill { Matrix, Norm, Bias };
struct SyntheticTensor {
  Matrix* m;  // type, rows and cols set; data is set to its place in the block
  SyntheticFill fill;
};
// One huge-page block holding every tensor (each on a 64-byte boundary),
// filled row by row in parallel from per-row random streams keyed by (seed,
// the tensor's index in the list, row): the same list and seed give the same
// bits on any thread count. Returns the block's owner.
std::shared_ptr<const void> fill_synthetic_tensors(const std::vector<SyntheticTensor>& tensors, uint64_t seed);

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

// llama.cpp's general.file_type (llama_ftype) of the model: its preset's, or
// that of the type of its first layer's attn_q when all matrices share it.
uint32_t model_file_type(const Model& model);

// Writes `model` as GGUF v3 (its family's general.architecture and keys,
// llama.cpp tensor names, fused tensors where the family fuses, norms F32, a
// tied output omitted; an encoder as write_gguf_encoder writes it, with
// synthetic_wordpiece's vocabulary when no tokenizer is given). With a tokenizer,
// its vocabulary goes into tokenizer.ggml.* (its size must equal the model's);
// without one, a byte-level vocabulary (Tokenizer::byte_level) is written when
// the model's vocabulary has at least 260 entries, so the file is runnable.
void write_gguf_model(const Model& model, const std::string& path, const Tokenizer* tokenizer = nullptr);

}  // namespace qkv

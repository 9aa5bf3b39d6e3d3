// qkv make-model: writes a synthetic model (random weights of a real shape, the
// same ones `qkv bench --synthetic` builds in memory) as a GGUF file that qkv
// and llama.cpp can load, with a byte-level vocabulary so it can also be run;
// an encoder preset gives a bert / nomic-bert embedding model with a generated
// WordPiece vocabulary (runtime/synthetic_encoder.h).
#include <cstdio>
#include <string>

#include "kernels/dtype.h"
#include "kernels/error.h"
#include "runtime/synthetic.h"
#include "runtime/synthetic_encoder.h"
#include "tools/args.h"
#include "tools/commands.h"

namespace qkv::tools {

namespace {

const char* kMakeModelUsage =
    "usage: qkv make-model NAME [--type T] -o FILE.gguf [options]\n"
    "  NAME            decoders: tiny, 143M or 1.1B; encoders (embedding models, WordPiece vocabulary):\n"
    "                  tiny-bert, bge-small, bge-base (bert), nomic-embed (nomic-bert)\n"
    "  --type T        a weight type for every matrix (f32, f16 (default), bf16, q8_0, q4_0 ... q6_k,\n"
    "                  iq4_nl, iq4_xs) or a llama-quantize preset, whose per-tensor plan qkv quantize\n"
    "                  follows (q4_k_m, q5_k_s, ...); names that are both mean the preset\n"
    "  -o, --output    the GGUF file to write\n"
    "  --seed S        random seed (default 1234, as qkv bench uses)\n"
    "  --untied        a separate output matrix (default: tied to the embedding)\n"
    "  --arch A        model family: llama (default), qwen2, qwen3, phi3, gemma, gemma2, gemma3; for an\n"
    "                  encoder preset its own family (bert or nomic-bert), which --arch may repeat\n"
    "  -q, --quiet     no summary on stderr\n";

}  // namespace

int cmd_make_model(int argc, char** argv) {
  std::string name, output;
  WeightFormat format;  // F16 unless --type
  uint64_t seed = 1234;
  bool untied = false, quiet = false;
  std::string arch;  // "": llama, or an encoder preset's own family
  for (int i = 1; i < argc; ++i) {
    const char* flag = argv[i];  // kept before flag_value() advances i
    const std::string a = flag;
    if (a == "-h" || a == "--help") {
      std::fputs(kMakeModelUsage, stdout);
      return 0;
    } else if (a == "--type") {
      format = parse_weight_format_flag(flag, flag_value(argc, argv, i));
    } else if (a == "-o" || a == "--output") {
      output = flag_value(argc, argv, i);
    } else if (a == "--seed") {
      seed = static_cast<uint64_t>(parse_int(flag, flag_value(argc, argv, i), 0, INT64_MAX));
    } else if (a == "--untied") {
      untied = true;
    } else if (a == "--arch") {
      arch = flag_value(argc, argv, i);
    } else if (a == "-q" || a == "--quiet") {
      quiet = true;
    } else if (!a.empty() && a[0] != '-' && name.empty()) {
      name = a;
    } else {
      std::fprintf(stderr, "qkv make-model: unexpected argument '%s'\n\n%s", argv[i], kMakeModelUsage);
      return 2;
    }
  }
  if (name.empty() || output.empty()) {
    std::fprintf(stderr, "qkv make-model: NAME and -o FILE are required\n\n%s", kMakeModelUsage);
    return 2;
  }
  Model model;
  if (is_synthetic_encoder(name)) {
    if (untied) {
      std::fprintf(stderr, "qkv make-model: --untied is for decoders; an encoder (%s) has no output matrix\n",
                   name.c_str());
      return 2;
    }
    model = make_synthetic_encoder(synthetic_encoder_preset(name, arch), format, seed);
    arch = model.config.architecture;
  } else {
    if (arch.empty()) arch = "llama";
    model = make_synthetic_model(with_arch(synthetic_preset(name), arch), format, seed, arch_output_tied(arch, !untied));
  }
  write_gguf_model(model, output);
  if (!quiet) {
    std::fprintf(stderr, "qkv make-model: wrote %s: synthetic %s %s, %s weights, %.1fM parameters, %.1f MB\n",
                 output.c_str(), name.c_str(), arch.c_str(), weight_format_name(format).c_str(), static_cast<double>(model.parameter_count()) * 1e-6,
                 static_cast<double>(model.weight_bytes()) * 1e-6);
  }
  return 0;
}

}  // namespace qkv::tools

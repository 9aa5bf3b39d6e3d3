// qkv quantize IN.gguf OUT.gguf PRESET: llama-quantize's presets without an
// importance matrix (runtime/quantize_model.h), the same per-tensor types and
// bytes as llama.cpp's reference quantization.
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "runtime/quantize_model.h"
#include "tools/args.h"
#include "tools/commands.h"

namespace qkv::tools {

namespace {

const char* kQuantizeUsage =
    "usage: qkv quantize IN.gguf OUT.gguf PRESET [-t THREADS] [-q]\n"
    "  IN.gguf         an F32, F16 or BF16 model (a quantized one is dequantized first, with a warning)\n"
    "  OUT.gguf        the file to write (appears only when complete)\n"
    "  PRESET          llama-quantize's name, case-insensitive:\n"
    "                  %s\n"
    "  -t, --threads N threads quantizing rows (default: one per physical core)\n"
    "  -q, --quiet     no line per tensor on stderr (warnings remain)\n";

void usage(FILE* out) { std::fprintf(out, kQuantizeUsage, quant_preset_names().c_str()); }

}  // namespace

int cmd_quantize(int argc, char** argv) {
  std::vector<std::string> positional;
  int threads = 0;
  bool quiet = false;
  for (int i = 1; i < argc; ++i) {
    const char* flag = argv[i];
    const std::string a = flag;
    if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    } else if (a == "-t" || a == "--threads") {
      threads = static_cast<int>(parse_int(flag, flag_value(argc, argv, i), 1, 1024));
    } else if (a == "-q" || a == "--quiet") {
      quiet = true;
    } else if (!a.empty() && a[0] != '-') {
      positional.push_back(a);
    } else {
      std::fprintf(stderr, "qkv quantize: unexpected argument '%s'\n\n", flag);
      usage(stderr);
      return 2;
    }
  }
  if (positional.size() != 3) {
    std::fprintf(stderr, "qkv quantize: IN.gguf, OUT.gguf and PRESET are required\n\n");
    usage(stderr);
    return 2;
  }
  const QuantPreset* preset = find_quant_preset(positional[2]);
  if (!preset) {
    std::fprintf(stderr, "qkv quantize: unknown preset '%s' (known: %s)\n", positional[2].c_str(),
                 quant_preset_names().c_str());
    return 2;
  }
  QuantizeOptions o;
  o.threads = threads;
  o.progress = !quiet;
  const QuantizeSummary s = quantize_gguf(positional[0], positional[1], *preset, o);
  if (!quiet) {
    std::fprintf(stderr, "qkv quantize: wrote %s (%s): %zu tensors, %zu quantized, %zu with fallback types, "
                 "%.2f MiB -> %.2f MiB\n", positional[1].c_str(), quant_preset_name(*preset), s.tensors, s.quantized,
                 s.fallbacks, static_cast<double>(s.bytes_in) / 1048576.0, static_cast<double>(s.bytes_out) / 1048576.0);
  }
  return 0;
}

}  // namespace qkv::tools

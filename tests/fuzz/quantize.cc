// fuzz_quantize: qkv quantize over an arbitrary file. Byte 0 picks the preset
// (of quant_preset_names()), the rest is the input GGUF file; the output goes
// to a temporary directory through quantize_gguf's AtomicFile. A qkv::Error
// is the correct answer to a file the quantizer cannot plan or read; a
// successful run must leave an output the GGUF reader accepts, with as many
// tensors as the input.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/gguf.h"
#include "runtime/quant_plan.h"
#include "runtime/quantize_model.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  const std::string all = qkv::quant_preset_names();
  size_t start = 0;
  while (start < all.size()) {
    size_t end = all.find(',', start);
    if (end == std::string::npos) end = all.size();
    std::string n = all.substr(start, end - start);
    while (!n.empty() && n.front() == ' ') n.erase(n.begin());
    if (!n.empty()) names.push_back(n);
    start = end + 1;
  }
  return names;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace qkv;
  static const std::vector<std::string> names = preset_names();
  static const std::string out = [] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/qkv_fuzz_quantized." + std::to_string(getpid()) + ".gguf";
  }();
  if (size < 1 || names.empty()) return 0;
  const QuantPreset* preset = find_quant_preset(names[data[0] % names.size()]);
  if (!preset) std::abort();  // a listed name the lookup does not know
  const std::string& in = fuzz::write_input(data + 1, size - 1);
  QuantizeOptions o;
  o.threads = 1;
  o.log = nullptr;
  o.progress = false;
  std::remove(out.c_str());
  fuzz::expect_clean([&] {
    const QuantizeSummary s = quantize_gguf(in, out, *preset, o);
    const GGUFFile written = GGUFFile::open(out);
    if (written.tensors().size() != s.tensors) std::abort();
  });
  std::remove(out.c_str());
  return 0;
}

// ctest-labels: kernels
// The block quantizers against llama.cpp: every 2-D tensor of every
// llama.cpp-made tinystories-3M preset file (../shared/models) is re-quantized
// from the F32 model into the type llama-quantize chose for it, and the bytes
// must be identical. Differences are reported per type as the fraction of
// blocks that differ with both quantizations' errors against the F32 values.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/error.h"
#include "kernels/quant/dequant.h"
#include "kernels/quant/quantize.h"
#include "kernels/quant/quantize_search.h"
#include "runtime/gguf.h"
#include "tests/shared_data.h"

using namespace qkv;

namespace {

const char* const kPresetFiles[] = {"Q4_0", "Q4_1",   "Q5_0",   "Q5_1",   "Q8_0",   "Q2_K",
                                    "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S",
                                    "Q5_K_M", "Q6_K",   "IQ4_NL", "IQ4_XS", "F16",    "BF16"};

struct TypeTally {
  uint64_t blocks = 0, differing = 0;
  double sq_err_ours = 0, sq_err_theirs = 0;  // over the differing blocks
};

double block_sq_error(DType t, const uint8_t* block, const float* x) {
  const size_t nv = dtype_block_values(t);
  std::vector<float> y(nv);
  decode_row(t, block, nv, y.data());
  double e = 0;
  for (size_t i = 0; i < nv; ++i) e += (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
  return e;
}

}  // namespace

TEST_CASE("the quantizers reproduce llama-quantize's bytes for every tensor of every preset") {
  const std::string src_rel = "models/tinystories-3M-F32.gguf";
  if (!test::have_shared(src_rel)) return;
  const GGUFFile src = GGUFFile::open(test::shared_path(src_rel));
  std::map<std::string, TypeTally> tally;
  int tensors = 0;
  for (const char* preset : kPresetFiles) {
    const std::string rel = std::string("models/tinystories-3M-") + preset + ".gguf";
    if (!test::have_shared(rel)) continue;
    const GGUFFile ref = GGUFFile::open(test::shared_path(rel));
    for (const GGUFTensorInfo& rt : ref.tensors()) {
      if (rt.ne.size() < 2) continue;
      const GGUFTensorInfo* st = src.find_tensor(rt.name);
      REQUIRE(st != nullptr);
      REQUIRE(st->type == ggml_type::F32);
      DType t = DType::F32;
      REQUIRE_MESSAGE(dtype_from_ggml(rt.type, &t), rt.name, " has type ", rt.type);
      const size_t n = rt.n_elements, row = rt.ne[0];
      std::vector<float> x(n);
      std::memcpy(x.data(), st->data, n * sizeof(float));
      std::vector<uint8_t> out(dtype_row_bytes(t, n));
      for (size_t r = 0; r < n / row; ++r) {
        quantize_row(t, x.data() + r * row, row, out.data() + r * dtype_row_bytes(t, row));
      }
      REQUIRE(out.size() == rt.n_bytes);
      const size_t bb = dtype_block_bytes(t), nb = out.size() / bb;
      TypeTally& tt = tally[dtype_info(t).ggml_name];
      tt.blocks += nb;
      for (size_t b = 0; b < nb; ++b) {
        if (std::memcmp(out.data() + b * bb, rt.data + b * bb, bb) == 0) continue;
        ++tt.differing;
        const float* xb = x.data() + b * dtype_block_values(t);
        tt.sq_err_ours += block_sq_error(t, out.data() + b * bb, xb);
        tt.sq_err_theirs += block_sq_error(t, rt.data + b * bb, xb);
      }
      ++tensors;
    }
  }
  for (const auto& entry : tally) {
    // Plain references: INFO's lambda cannot capture structured bindings before C++20 (clang).
    const auto& name = entry.first;
    const auto& tt = entry.second;
    INFO(name, ": ", tt.differing, " of ", tt.blocks, " blocks differ (",
         100.0 * double(tt.differing) / double(tt.blocks), "%); squared error over them: ours ",
         tt.sq_err_ours, ", llama.cpp's ", tt.sq_err_theirs);
    CHECK(tt.differing == 0);
  }
  MESSAGE(tensors, " tensors compared over ", tally.size(), " types");
}

// The AMX int8 GEMM's kernel on the scalar model of the tile instructions
// (kernels/quant/gemm_amx_model.h): the kernel body of the real path, built
// for the baseline target, so that it runs on every CPU.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/error.h"
#include "kernels/machine/amx_tiles.h"
#include "kernels/quant/blocks.h"
#include "kernels/quant/gemm_amx.h"
#include "kernels/quant/gemm_amx_model.h"
#include "kernels/quant/row_groups.h"

namespace qkv {
namespace amx_model {
#include "kernels/quant/gemm_amx_types-inl.h"
#include "kernels/quant/gemm_amx_kernel-inl.h"
}  // namespace amx_model

void quant_gemm_amx_model(DType t, const void* rows, size_t cols, const void* xa, size_t M, float* y, size_t ldy,
                          size_t n_rows, bool row_groups) {
  check_quant_gemm_amx_args("quant_gemm_amx_model", t, cols, M, ldy, n_rows, row_groups);
  static thread_local AmxTileModel tiles;
  amx_model::GemmAmx(tiles, t, static_cast<const uint8_t*>(rows), cols, static_cast<const uint8_t*>(xa), M, y, ldy,
                     n_rows, row_groups);
}

}  // namespace qkv

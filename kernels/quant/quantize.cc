#include "kernels/quant/quantize.h"

#include <cstring>

#include "kernels/error.h"

namespace qkv {

namespace {

template <class Block>
void quantize_blocks(const float* src, size_t n, void* dst) {
  // Destination rows may sit at any 2-byte offset; build each block aside.
  auto* p = static_cast<uint8_t*>(dst);
  for (size_t i = 0; i < n / Block::kValues; ++i) {
    Block b;
    quantize_block(src + i * Block::kValues, &b);
    std::memcpy(p + i * sizeof(Block), &b, sizeof(Block));
  }
}

}  // namespace

void quantize_row(DType t, const float* src, size_t n, void* dst) {
  QKV_CHECK(static_cast<unsigned>(t) < unsigned(kDTypeCount), "quantize_row: unknown type id ", static_cast<int>(t));
  QKV_CHECK(dtype_row_ok(t, n), "a row of ", n, " values cannot be quantized to ", dtype_info(t).ggml_name,
            " (it needs a multiple of ", dtype_block_values(t), " values)");
  switch (t) {
    case DType::F32: case DType::F16: case DType::BF16: encode_row(t, src, n, dst); return;
    case DType::Q8_0: quantize_blocks<BlockQ8_0>(src, n, dst); return;
    case DType::Q4_0: quantize_blocks<BlockQ4_0>(src, n, dst); return;
    case DType::Q4_1: quantize_blocks<BlockQ4_1>(src, n, dst); return;
    case DType::Q5_0: quantize_blocks<BlockQ5_0>(src, n, dst); return;
    case DType::Q5_1: quantize_blocks<BlockQ5_1>(src, n, dst); return;
    case DType::Q2_K: quantize_blocks<BlockQ2_K>(src, n, dst); return;
    case DType::Q3_K: quantize_blocks<BlockQ3_K>(src, n, dst); return;
    case DType::Q4_K: quantize_blocks<BlockQ4_K>(src, n, dst); return;
    case DType::Q5_K: quantize_blocks<BlockQ5_K>(src, n, dst); return;
    case DType::Q6_K: quantize_blocks<BlockQ6_K>(src, n, dst); return;
    case DType::IQ4_NL: quantize_blocks<BlockIQ4_NL>(src, n, dst); return;
    case DType::IQ4_XS: quantize_blocks<BlockIQ4_XS>(src, n, dst); return;
  }
  fail("quantize_row: no quantizer for ", dtype_name(t));
}

}  // namespace qkv

// The KV cache's store path: f32 rows converted to the cache's element type,
// vectorized with Highway. Bit-identical to kernels/dtype.h's encode_row (the
// scalar contract) wherever that is defined; see kv_encode.cc for the one
// corner (Q8_0 blocks whose scale underflows) where it is not.
#pragma once

#include <cstdint>

#include "kernels/dtype.h"

namespace qkv {

// Converts n rows of d floats, row i at src + i*src_stride, into n contiguous
// rows of type t (dtype_row_bytes(t, d) bytes each) at dst. d must satisfy
// dtype_row_ok(t, d).
void encode_rows(DType t, const float* src, int64_t src_stride, int64_t n, int64_t d, uint8_t* dst);

}  // namespace qkv

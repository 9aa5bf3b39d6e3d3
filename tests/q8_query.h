// The query quantization of qkv's Q8_0 decode path (kernels/attention.cc,
// QueryQ8, AVX-512 VNNI only): per 32-value block the scaled query x = scale * q
// becomes dq * q8 with dq = max|x| / 127 and q8 = round(x / dq) in [-127, 127].
// Tests run their fp64 reference on this quantized query to check the integer
// path exactly; on other targets the kernel keeps f32 arithmetic on q itself.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace qkv {
namespace testing {

// Replaces row[0 .. d) (d % 32 == 0) by its quantized value divided by `scale`
// again, computed in f32 exactly as the kernel does, so that scale * row' = dq * q8.
inline void quantize_query_like_q8_decode(float* row, int64_t d, float scale) {
  for (int64_t blk = 0; blk < d; blk += 32) {
    float x[32], amax = 0.0f;
    for (int c = 0; c < 32; ++c) {
      x[c] = row[blk + c] * scale;
      amax = std::max(amax, std::fabs(x[c]));
    }
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    const float dq = amax / 127.0f;
    for (int c = 0; c < 32; ++c) {
      const float q8 = std::min(127.0f, std::max(-127.0f, std::nearbyint(x[c] * inv)));
      row[blk + c] = static_cast<float>(double(q8) * double(dq) / double(scale));
    }
  }
}

}  // namespace testing
}  // namespace qkv

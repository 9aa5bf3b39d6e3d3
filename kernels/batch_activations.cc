#include "kernels/batch_activations.h"

#include <vector>

#include "kernels/quant/blocks.h"
#include "kernels/quant/vec_dot.h"

namespace qkv {
namespace detail {

void activation_round_trip(DType t, const float* X, int64_t M, size_t cols, float* out) {
  static thread_local std::vector<uint8_t> buf;
  buf.resize(act_bytes(t, cols));
  for (int64_t m = 0; m < M; ++m) {
    const float* x = X + m * static_cast<int64_t>(cols);
    float* y = out + m * static_cast<int64_t>(cols);
    quantize_activation(t, x, cols, buf.data());
    switch (act_type(t)) {
      case ActType::kQ8_0: {
        const auto* b = reinterpret_cast<const BlockQ8_0*>(buf.data());
        for (size_t k = 0; k < cols; ++k) y[k] = f16_to_f32(b[k / 32].d) * static_cast<float>(b[k / 32].qs[k % 32]);
        break;
      }
      case ActType::kQ8_1: {
        const auto* b = reinterpret_cast<const BlockQ8_1*>(buf.data());
        for (size_t k = 0; k < cols; ++k) y[k] = f16_to_f32(b[k / 32].d) * static_cast<float>(b[k / 32].qs[k % 32]);
        break;
      }
      case ActType::kQ8_K: {
        const auto* b = reinterpret_cast<const BlockQ8_K*>(buf.data());
        for (size_t k = 0; k < cols; ++k) y[k] = b[k / kQK].d * static_cast<float>(b[k / kQK].qs[k % kQK]);
        break;
      }
    }
  }
}

}  // namespace detail
}  // namespace qkv

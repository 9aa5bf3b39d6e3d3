// The aarch64 BF16 small-batch matmul's availability and per-thread driver
// (kernels/matmul_small/arm_bf16.h): the queue, the segments and the buffers
// live here, built with the library's flags; only the tiles
// (arm_bf16_tiles.cc) are built with +bf16.
#include "kernels/matmul_small/arm_bf16.h"

#include <vector>

#include "kernels/error.h"
#include "kernels/machine/arm_features.h"
#include "kernels/machine/isa_cap.h"
#include "kernels/matmul_small/arm_bf16_tiles.h"
#include "kernels/matmul_small/schedule.h"

namespace qkv {
namespace detail {

static_assert(static_cast<size_t>(kArmBF16Rows) == arm_bf16::kBlockRows, "one block size for the queue and the tiles");

bool arm_bf16_matmul_available() {
#if defined(__aarch64__)
  if (!arm_features().bf16) return false;
  const std::optional<IsaLevel> cap = isa_cap();
  return !(cap.has_value() && (*cap == IsaLevel::kScalar || *cap == IsaLevel::kNeon));
#else
  return false;
#endif
}

void matmul_small_arm_bf16(const Matrix* Ws, float* const* Ys, int count, const float* X, int64_t M,
                           BlockQueue* queue, int64_t block) {
#if defined(__aarch64__)
  // matmul_small_multi checked M, the types (matmul_small_precision) and the
  // columns (matmul_multi) before the threads started: a throw here, inside
  // the parallel region, would end the program.
  const size_t cols = static_cast<size_t>(Ws[0].cols), m = static_cast<size_t>(M);
  // Per thread, kept across calls: no allocation once large enough.
  static thread_local std::vector<uint16_t> xp;
  static thread_local std::vector<matmul_small::Segment> segments;
  bool packed = false;
  if (segments.size() < static_cast<size_t>(count)) segments.resize(static_cast<size_t>(count));
  int64_t b0, b1;
  while (queue->take(&b0, &b1)) {
    if (!packed) {  // only threads that get work round X
      xp.resize(arm_bf16::packed_inputs_size(m, cols));
      arm_bf16::pack_inputs(X, m, cols, xp.data());
      packed = true;
    }
    const int n = matmul_small::SplitRange(Ws, count, block, b0, b1, segments.data());
    for (int k = 0; k < n; ++k) {
      const matmul_small::Segment& s = segments[static_cast<size_t>(k)];
      const Matrix& W = Ws[s.i];
      const uint16_t* w = static_cast<const uint16_t*>(W.data) + static_cast<size_t>(s.r0) * cols;
      arm_bf16::matmul_rows(W.type == DType::F16, w, cols, static_cast<size_t>(s.r1 - s.r0), xp.data(), m,
                            Ys[s.i] + s.r0, static_cast<size_t>(W.rows));
    }
  }
#else
  (void)Ws, (void)Ys, (void)count, (void)X, (void)M, (void)queue, (void)block;
  fail("matmul_small: the Armv8.6 BF16 kernel runs on aarch64 only");
#endif
}

}  // namespace detail
}  // namespace qkv

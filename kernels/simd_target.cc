#include "kernels/simd_target.h"

#include "kernels/machine/isa_cap.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd_target.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace qkv {
namespace HWY_NAMESPACE {
const char* TargetName() { return hwy::TargetName(HWY_TARGET); }
}  // namespace HWY_NAMESPACE
}  // namespace qkv
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qkv {
HWY_EXPORT(TargetName);

const char* simd_target_name() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }

std::string simd_compiled_targets() {
  std::string out;
  // Best first: Highway's better targets have the lower bits.
  for (int64_t targets = supported_simd_targets() & HWY_TARGETS; targets != 0; targets &= targets - 1) {
    if (!out.empty()) out += ' ';
    out += hwy::TargetName(targets & -targets);
  }
  return out;
}
}  // namespace qkv
#endif

#include "kernels/simd_target.h"

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
  for (const uint32_t t : hwy::SupportedAndGeneratedTargets()) {
    if (!out.empty()) out += ' ';
    out += hwy::TargetName(t);
  }
  return out;
}
}  // namespace qkv
#endif

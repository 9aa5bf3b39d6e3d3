// Tests of kernels with per-target code paths: one run per compiled SIMD target.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "hwy/targets.h"

namespace qkv {
namespace testing {

// Runs fn() once on every compiled SIMD target this CPU supports (the target's
// name captured for failure messages), then restores normal dispatch.
template <class Fn>
void for_each_simd_target(Fn&& fn) {
  const auto targets = hwy::SupportedAndGeneratedTargets();
  REQUIRE(!targets.empty());
  for (const int64_t target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    const std::string target_name = hwy::TargetName(target);
    CAPTURE(target_name);
    fn();
  }
  hwy::SetSupportedTargetsForTest(0);
}

}  // namespace testing
}  // namespace qkv

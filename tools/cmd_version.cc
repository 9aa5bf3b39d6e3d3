#include <cstdio>

#include "kernels/simd_target.h"
#include "runtime/version.h"
#include "tools/commands.h"

namespace qkv::tools {

int cmd_version(int, char**) {
  std::printf("qkv %s\nsimd target: %s\n", version_string(), simd_target_name());
  return 0;
}

}  // namespace qkv::tools

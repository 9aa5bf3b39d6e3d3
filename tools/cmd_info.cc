#include <cstdio>
#include <cstring>
#include <string>

#include "kernels/error.h"
#include "kernels/simd_target.h"
#include "tools/commands.h"

namespace qkv::tools {

namespace {
int print_cpu() {
  std::printf("simd target: %s\ncompiled targets (supported here): %s\n", simd_target_name(),
              simd_compiled_targets().c_str());
  return 0;
}
}  // namespace

int cmd_info(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--cpu") == 0) return print_cpu();
  std::fprintf(stderr, "usage: qkv info --cpu | qkv info MODEL\n");
  return 2;
}

}  // namespace qkv::tools

#include "tools/wait_policy.h"

#include <cstdio>
#include <cstring>

#include "kernels/threads/wait.h"
#include "tools/poll_level.h"

extern "C" int qkv_openmp_wait_linked();  // tools/openmp_wait/openmp_wait.cc

namespace qkv::tools {

int take_poll_flag(int* argc, char** argv) {
  (void)qkv_openmp_wait_linked();
  int level = kDefaultPoll;
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    if (std::strcmp(argv[i], "--poll") != 0) {
      argv[out++] = argv[i];
      continue;
    }
    if (i + 1 >= *argc || !parse_poll_level(argv[i + 1], &level)) {
      std::fprintf(stderr,
                   "qkv: --poll takes a level from 0 to 100 (microseconds a waiting thread spins before it "
                   "blocks), got '%s'\n",
                   i + 1 < *argc ? argv[i + 1] : "");
      return -1;
    }
    ++i;
  }
  argv[out] = nullptr;
  *argc = out;
  set_wait_poll(level);
  return level;
}

}  // namespace qkv::tools

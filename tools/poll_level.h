// Parsing --poll (tools/wait_policy.h), shared with libqkv_openmp_wait.so.
#pragma once

#include <cstring>

namespace qkv::tools {

// A --poll level: an integer in [0, 100], nothing else.
inline bool parse_poll_level(const char* s, int* level) {
  if (s == nullptr || *s == '\0' || std::strlen(s) > 3) return false;
  int v = 0;
  for (const char* p = s; *p != '\0'; ++p) {
    if (*p < '0' || *p > '9') return false;
    v = v * 10 + (*p - '0');
  }
  if (v > 100) return false;
  *level = v;
  return true;
}

}  // namespace qkv::tools

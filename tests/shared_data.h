// Where the read-only shared models and references live, and how a test skips
// (with a message saying so) when they are absent.
#pragma once

#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <sys/stat.h>

namespace qkv::test {

inline std::string shared_path(const std::string& rel) { return std::string(QKV_SHARED_DIR) + "/" + rel; }

inline bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// True when ../shared/<rel> exists; otherwise prints why the caller skips.
inline bool have_shared(const std::string& rel) {
  if (file_exists(shared_path(rel))) return true;
  std::printf("SKIPPED: %s is absent (the shared models live beside the project root)\n",
              shared_path(rel).c_str());
  return false;
}

}  // namespace qkv::test

// What the harnesses share: the input written to a per-process temporary file
// (for readers that take a path) and the rule that a qkv::Error is a correct
// answer to bad bytes, while anything else (another exception, a sanitizer
// report, a crash, a timeout) is a finding.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernels/error.h"

namespace qkv::fuzz {

// The input's bytes in a file named by this process (rewritten on every call).
inline const std::string& write_input(const uint8_t* data, size_t size) {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/qkv_fuzz_input." + std::to_string(getpid());
  }();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  if (std::fclose(f) != 0) std::abort();
  return path;
}

// Runs body; a qkv::Error (the reader's clear rejection) is swallowed.
template <class F>
void expect_clean(F&& body) {
  try {
    body();
  } catch (const qkv::Error&) {
  }
}

// A file from ../shared (the build's QKV_SHARED_DIR) or from QKV_FUZZ_SHARED.
inline std::string shared_path(const std::string& rel) {
  const char* env = std::getenv("QKV_FUZZ_SHARED");
  return std::string(env && *env ? env : QKV_SHARED_DIR) + "/" + rel;
}

}  // namespace qkv::fuzz

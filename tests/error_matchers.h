// Checking that a call fails with a qkv::Error whose message names the problem.
#pragma once

#include <cstdio>
#include <functional>
#include <string>

#include "kernels/error.h"

namespace qkv::test {

// True when f throws qkv::Error mentioning needle; otherwise says what happened.
inline bool throws_with(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.find(needle) != std::string::npos) return true;
    std::printf("error message lacks '%s': %s\n", needle.c_str(), what.c_str());
    return false;
  }
  std::printf("no error (expected one mentioning '%s')\n", needle.c_str());
  return false;
}

}  // namespace qkv::test

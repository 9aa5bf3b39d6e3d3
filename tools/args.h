// Small helpers for the subcommands' flag parsing: each value is checked and a
// bad one is a qkv::Error naming the flag.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <cstring>

#include "kernels/error.h"
#include "qkv.h"

namespace qkv::tools {

// The value after flag argv[i] (advances i); fails when it is missing.
inline const char* flag_value(int argc, char** argv, int& i) {
  if (i + 1 >= argc) fail("flag ", argv[i], " needs a value");
  return argv[++i];
}

inline int64_t parse_int(const char* flag, const char* s, int64_t lo, int64_t hi) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
    fail("flag ", flag, " wants a whole number from ", lo, " to ", hi, ", not '", s, "'");
  }
  return v;
}

inline float parse_float(const char* flag, const char* s, double lo, double hi) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0' || !(v >= lo && v <= hi)) {
    fail("flag ", flag, " wants a number from ", lo, " to ", hi, ", not '", s, "'");
  }
  return static_cast<float>(v);
}

// The KV cache types of the C API by name.
struct KvTypeName {
  const char* name;
  qkv_type type;
};
inline const KvTypeName kKvTypes[] = {
    {"f32", QKV_TYPE_F32}, {"f16", QKV_TYPE_F16}, {"bf16", QKV_TYPE_BF16}, {"q8_0", QKV_TYPE_Q8_0}};

inline qkv_type parse_kv_type(const char* s) {
  for (const KvTypeName& k : kKvTypes) {
    if (std::strcmp(s, k.name) == 0) return k.type;
  }
  fail("flag --kv-type wants f32, f16, bf16 or q8_0, not '", s, "'");
}

inline const char* kv_type_name(qkv_type t) {
  for (const KvTypeName& k : kKvTypes) {
    if (k.type == t) return k.name;
  }
  return "?";
}

}  // namespace qkv::tools

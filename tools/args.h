// Small helpers for the subcommands' flag parsing: each value is checked and a
// bad one is a qkv::Error naming the flag.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "kernels/dtype.h"
#include "kernels/error.h"
#include "qkv.h"
#include "runtime/quant_plan.h"
#include "runtime/synthetic.h"

namespace qkv::tools {

// Whether word looks like a flag: "--x", or "-" and a letter (negative
// numbers and "-", standard input, do not).
inline bool looks_like_flag(const char* word) {
  return word[0] == '-' && ((word[1] == '-' && word[2] != '\0') || (word[1] >= 'a' && word[1] <= 'z') ||
                            (word[1] >= 'A' && word[1] <= 'Z'));
}

// Whether flag argv[i] is followed by a value (a word that is no flag).
inline bool has_value(int argc, char** argv, int i) { return i + 1 < argc && !looks_like_flag(argv[i + 1]); }

// The value after flag argv[i] (advances i); fails when it is missing, and
// when the next word is itself a flag, which would otherwise be swallowed as
// the value and the real value then read as an unknown flag.
inline const char* flag_value(int argc, char** argv, int& i) {
  if (i + 1 >= argc) fail("flag ", argv[i], " needs a value");
  if (looks_like_flag(argv[i + 1])) fail("flag ", argv[i], " needs a value, but the next word is the flag '", argv[i + 1], "'");
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

// A byte count with an optional K, M, G or T suffix (powers of 1024: 512M,
// 8G), at least 1 byte and below 2^63.
inline uint64_t parse_bytes(const char* flag, const char* s) {
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s, &end, 10);
  unsigned shift = 0;
  if (end != s && *end != '\0' && end[1] == '\0') {
    switch (*end) {
      case 'k': case 'K': shift = 10; ++end; break;
      case 'm': case 'M': shift = 20; ++end; break;
      case 'g': case 'G': shift = 30; ++end; break;
      case 't': case 'T': shift = 40; ++end; break;
      default: break;
    }
  }
  if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v == 0 || v > (UINT64_C(1) << (63 - shift)) - 1) {
    fail("flag ", flag, " wants a byte count above 0 with an optional K, M, G or T suffix (512M, 8G), not '", s, "'");
  }
  return static_cast<uint64_t>(v) << shift;
}

// A synthetic model's --type: a llama-quantize preset or a weight type.
inline WeightFormat parse_weight_format_flag(const char* flag, const char* v) {
  WeightFormat f;
  if (parse_weight_format(v, &f)) return f;
  std::string types;
  for (const DTypeInfo& t : kDTypeInfo) types += std::string(types.empty() ? "" : ", ") + t.name;
  fail("flag ", flag, " wants a weight type (", types, ") or a llama-quantize preset (", quant_preset_names(),
       "), not '", v, "'");
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

// Fails with the C API's message unless st is QKV_OK.
inline void check(qkv_status st, const char* what) {
  if (st != QKV_OK) fail(what, ": ", qkv_last_error());
}

// The whole of a file, or an error naming it.
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open '", path, "'");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail("cannot read '", path, "'");
  return text;
}

// v with `places` decimals ("%.*f").
inline std::string fixed(double v, int places) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", places, v);
  return buf;
}

// s as the inside of a JSON string.
inline std::string json_escape(const std::string& s) {
  std::string out;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out;
}

}  // namespace qkv::tools

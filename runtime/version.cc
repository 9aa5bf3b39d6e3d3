#include "runtime/version.h"

#ifndef QKV_VERSION
#define QKV_VERSION "0.1.0"
#endif

namespace qkv {
const char* version_string() { return QKV_VERSION; }
}  // namespace qkv

// qkv's version, from the CMake project version.
#pragma once

namespace qkv {
const char* version_string();
}

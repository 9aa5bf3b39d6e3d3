// Which Highway target the dynamic dispatch picked on this CPU.
#pragma once

#include <string>

namespace qkv {

// Name of the SIMD target the kernels run on here (e.g. "AVX3_DL", "AVX2", "SCALAR").
const char* simd_target_name();
// Every target compiled into this binary, best first, space separated.
std::string simd_compiled_targets();

}  // namespace qkv

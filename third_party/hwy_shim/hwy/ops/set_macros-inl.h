// Found before Debian's Highway 1.0.3 headers (third_party/dependencies.cmake
// puts this folder first on the include path); includes the real header, then
// corrects one target string. No include guard: Highway re-includes it once
// per target pass of foreach_target, and so must this.
//
// Highway 1.0.3's AVX3_DL target string enables `avxvnni`, the VEX-encoded
// VNNI of client CPUs, which its AVX3_DL dispatch never checks for. With it
// enabled, clang's EVEX-to-VEX compression turns 256-bit vpdpwssd into the VEX
// form, which AVX-512 VNNI CPUs without AVX-VNNI (Zen 4, Xeons before Sapphire
// Rapids) fault on. The string below is the same without it; the kernels that
// use VNNI ask for avx512vnni themselves.
#include_next "hwy/ops/set_macros-inl.h"

#if HWY_TARGET == HWY_AVX3_DL
#undef HWY_TARGET_STR
#define HWY_TARGET_STR \
  HWY_TARGET_STR_AVX3 ",vpclmulqdq,avx512vbmi,avx512vbmi2,vaes,avx512bitalg,avx512vpopcntdq"
#endif

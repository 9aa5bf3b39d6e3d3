// The AVX-VNNI block kernels with the instruction itself: the one file of the
// tree compiled with avxvnni (the VEX-encoded vpdpbusd), whose functions run
// only after avxvnni_dot_rows / avxvnni_gemm have checked that the CPU has
// AVX-VNNI (kernels/quant/vec_dot_avxvnni.h, gemm_avx2_lanes.h). No AVX-512 feature is enabled
// here, so every instruction of the file is VEX-encoded.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/quant/blocks.h"
#include "kernels/quant/gemm_avx2_lanes.h"
#include "kernels/quant/row_groups.h"
#include "kernels/quant/vec_dot_avxvnni.h"

#if defined(__x86_64__)
#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avxvnni"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avxvnni")
#endif

namespace qkv {
namespace {

struct VexDot {
  static __m256i Dot(__m256i acc, __m256i u, __m256i a) { return _mm256_dpbusd_avx_epi32(acc, u, a); }
};

#include "kernels/quant/vec_dot_avxvnni-inl.h"
#include "kernels/quant/gemm_avx2_lanes-inl.h"

}  // namespace

bool detail::avxvnni_vex_kernel(DType t, const void* rows, size_t cols, const AvxVnniInput* in, size_t M, float* y,
                                size_t ldy, size_t n_rows) {
  return RunKernel<VexDot>(t, rows, cols, in, M, y, ldy, n_rows);
}

void detail::avx2_lanes_vex_kernel(DType t, const uint8_t* rows, size_t cols, const float* tables, size_t M, float* y,
                                   size_t ldy, size_t n_rows, uint8_t* scratch) {
  Lanes8Kernel<VexDot>(t, rows, cols, tables, M, y, ldy, n_rows, scratch);
}

bool detail::avx2_lanes_vex_groups_kernel(DType t, const uint8_t* groups, size_t cols, const float* tables, size_t M,
                                          float* y, size_t ldy, size_t n_rows, uint8_t* scratch) {
  return Lanes8GroupsKernel<VexDot>(t, groups, cols, tables, M, y, ldy, n_rows, scratch);
}

void detail::avxvnni_vex_dot(const uint8_t* u, const int8_t* a, int32_t* acc) {
  const __m256i sum = VexDot::Dot(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc)),
                                 _mm256_loadu_si256(reinterpret_cast<const __m256i*>(u)),
                                 _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc), sum);
}

}  // namespace qkv

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#else  // not x86-64: avxvnni_op_runs is false, so nothing reaches here

bool qkv::detail::avxvnni_vex_kernel(DType, const void*, size_t, const AvxVnniInput*, size_t, float*, size_t, size_t) {
  return false;
}

void qkv::detail::avxvnni_vex_dot(const uint8_t*, const int8_t*, int32_t*) {}

void qkv::detail::avx2_lanes_vex_kernel(DType, const uint8_t*, size_t, const float*, size_t, float*, size_t, size_t,
                                        uint8_t*) {}

bool qkv::detail::avx2_lanes_vex_groups_kernel(DType, const uint8_t*, size_t, const float*, size_t, float*, size_t,
                                               size_t, uint8_t*) {
  return false;
}

#endif

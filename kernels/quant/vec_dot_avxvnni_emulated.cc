// The AVX-VNNI block kernels with an exact AVX2 emulation of vpdpbusd, so
// that the kernel code of vec_dot_avxvnni_vex.cc runs, and is tested, on any
// AVX2 CPU (kernels/quant/vec_dot_avxvnni.h); with it and with AVX2's
// vpmaddubsw, the inputs-in-lanes GEMM (kernels/quant/gemm_avx2_lanes.h).
// Compiled for AVX2 without avxvnni (or any VNNI): only
// vec_dot_avxvnni_vex.cc may contain the VEX vpdpbusd.
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
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

namespace qkv {
namespace {

// acc + per int32 lane the four products of unsigned bytes u and signed
// bytes a, as vpdpbusd: the even and the odd bytes widened to 16 bits (u
// zero-extended, a sign-extended), each pair of products summed by vpmaddwd
// in 32 bits (|u a| <= 255 * 128: no int16 saturation as vpmaddubsw has),
// the two sums and acc added with wrap-around.
struct EmulatedDot {
  static __m256i Dot(__m256i acc, __m256i u, __m256i a) {
    const __m256i u_even = _mm256_and_si256(u, _mm256_set1_epi16(0x00FF));
    const __m256i u_odd = _mm256_srli_epi16(u, 8);
    const __m256i a_even = _mm256_srai_epi16(_mm256_slli_epi16(a, 8), 8);
    const __m256i a_odd = _mm256_srai_epi16(a, 8);
    const __m256i sums = _mm256_add_epi32(_mm256_madd_epi16(u_even, a_even), _mm256_madd_epi16(u_odd, a_odd));
    return _mm256_add_epi32(acc, sums);
  }
};

#include "kernels/quant/vec_dot_avxvnni-inl.h"
#include "kernels/quant/gemm_avx2_lanes-inl.h"
#include "kernels/quant/gemm_avx2_lanes_maddubs-inl.h"

}  // namespace

void detail::avx2_lanes_avx2_kernel(DType t, const uint8_t* rows, size_t cols, const float* tables, size_t M, float* y,
                                    size_t ldy, size_t n_rows, uint8_t* scratch, bool maddubs) {
  if (maddubs) {
    WithLanesDecoder(t, [&](auto tag) {
      using Dec = typename decltype(tag)::type;
      if constexpr (Dec::kBlockValues == 32) {
        MaddubsRows32<Dec>(rows, cols, tables, M, y, ldy, n_rows, scratch);
      } else {
        MaddubsRowsK<Dec>(rows, cols, tables, M, y, ldy, n_rows, scratch);
      }
    });
  } else {
    Lanes8Kernel<EmulatedDot>(t, rows, cols, tables, M, y, ldy, n_rows, scratch);
  }
}

bool detail::avx2_lanes_avx2_groups_kernel(DType t, const uint8_t* groups, size_t cols, const float* tables, size_t M,
                                           float* y, size_t ldy, size_t n_rows, uint8_t* scratch, bool maddubs) {
  if (!maddubs) return Lanes8GroupsKernel<EmulatedDot>(t, groups, cols, tables, M, y, ldy, n_rows, scratch);
  bool done = false;
  WithLanesDecoder(t, [&](auto tag) {
    using Dec = typename decltype(tag)::type;
    if constexpr (kLanesGroups<Dec>) {
      MaddubsGroups32<Dec>(groups, cols, tables, M, y, ldy, n_rows, scratch);
      done = true;
    }
  });
  return done;
}

bool detail::avxvnni_emulated_kernel(DType t, const void* rows, size_t cols, const AvxVnniInput* in, size_t M,
                                     float* y, size_t ldy, size_t n_rows) {
  return RunKernel<EmulatedDot>(t, rows, cols, in, M, y, ldy, n_rows);
}

void detail::avxvnni_emulated_dot(const uint8_t* u, const int8_t* a, int32_t* acc) {
  const __m256i sum = EmulatedDot::Dot(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc)),
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

bool qkv::detail::avxvnni_emulated_kernel(DType, const void*, size_t, const AvxVnniInput*, size_t, float*, size_t,
                                          size_t) {
  return false;
}

void qkv::detail::avxvnni_emulated_dot(const uint8_t*, const int8_t*, int32_t*) {}

void qkv::detail::avx2_lanes_avx2_kernel(DType, const uint8_t*, size_t, const float*, size_t, float*, size_t, size_t,
                                         uint8_t*, bool) {}

bool qkv::detail::avx2_lanes_avx2_groups_kernel(DType, const uint8_t*, size_t, const float*, size_t, float*, size_t,
                                                size_t, uint8_t*, bool) {
  return false;
}

#endif

// The AMX int8 GEMM on the tile instructions, and whether it runs here.
// The kernel body (gemm_amx_kernel-inl.h) and type table are compiled here
// inside a region whose functions all target AMX-INT8 and AVX-512 (every
// CPU with AMX has AVX-512), in a namespace of their own: the model's copy
// (gemm_amx_model.cc) stays on the baseline target.
#include "kernels/quant/gemm_amx.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/error.h"
#include "kernels/machine/amx_tiles.h"
#include "kernels/machine/cpu_features.h"
#include "kernels/quant/blocks.h"
#include "kernels/quant/row_groups.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define QKV_GEMM_AMX_HW 1
#else
#define QKV_GEMM_AMX_HW 0
#endif

namespace qkv {

#if QKV_GEMM_AMX_HW
// Every CPU with AMX has these (the pragmas take no macros).
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,bmi2,avx512f,avx512bw,avx512dq,avx512vl,amx-tile,amx-int8"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,bmi2,avx512f,avx512bw,avx512dq,avx512vl,amx-tile,amx-int8")
#endif
namespace amx_hw {

// The tile instructions (the model's interface, kernels/quant/gemm_amx_model.h).
// g++'s intrinsics paste the tile numbers into the instruction's text, so
// each is spelled out for the registers the kernel uses. Its LDTILECFG and
// TILELOADD are asm statements that do not tell the compiler which memory
// they read (8 bytes of the configuration, none of the tile): a compiler
// barrier before each keeps the stores they depend on ahead of them.
struct AmxTileHardware {
  static void barrier() { __asm__ volatile("" ::: "memory"); }
  void configure(const AmxTileConfig& c) {
    barrier();
    _tile_loadconfig(&c);
  }
  template <int kT>
  void load(const void* base, size_t stride) {
    static_assert(kT >= 0 && kT < 8, "palette 1's tiles");
    barrier();
    if constexpr (kT == 0) _tile_loadd(0, base, stride);
    if constexpr (kT == 1) _tile_loadd(1, base, stride);
    if constexpr (kT == 2) _tile_loadd(2, base, stride);
    if constexpr (kT == 3) _tile_loadd(3, base, stride);
    if constexpr (kT == 4) _tile_loadd(4, base, stride);
    if constexpr (kT == 5) _tile_loadd(5, base, stride);
    if constexpr (kT == 6) _tile_loadd(6, base, stride);
    if constexpr (kT == 7) _tile_loadd(7, base, stride);
  }
  template <int kT>
  void store(void* base, size_t stride) {
    static_assert(kT >= 0 && kT < 8, "palette 1's tiles");
    if constexpr (kT == 0) _tile_stored(0, base, stride);
    if constexpr (kT == 1) _tile_stored(1, base, stride);
    if constexpr (kT == 2) _tile_stored(2, base, stride);
    if constexpr (kT == 3) _tile_stored(3, base, stride);
    if constexpr (kT == 4) _tile_stored(4, base, stride);
    if constexpr (kT == 5) _tile_stored(5, base, stride);
    if constexpr (kT == 6) _tile_stored(6, base, stride);
    if constexpr (kT == 7) _tile_stored(7, base, stride);
  }
  template <int kT>
  void zero() {
    static_assert(kT >= 0 && kT < 4, "the kernel zeroes its C tiles 0 .. 3 only");
    if constexpr (kT == 0) _tile_zero(0);
    if constexpr (kT == 1) _tile_zero(1);
    if constexpr (kT == 2) _tile_zero(2);
    if constexpr (kT == 3) _tile_zero(3);
  }
  // The kernel's operands: C tile q with A tile 4 + q % 2 and B tile 6 + q % 2.
  template <int kC, int kA, int kB>
  void dpbusd() {
    static_assert(kC >= 0 && kC < 4 && kA == 4 + kC % 2 && kB == 6 + kC % 2, "the kernel's tile operands");
    if constexpr (kC == 0) _tile_dpbusd(0, 4, 6);
    if constexpr (kC == 1) _tile_dpbusd(1, 5, 7);
    if constexpr (kC == 2) _tile_dpbusd(2, 4, 6);
    if constexpr (kC == 3) _tile_dpbusd(3, 5, 7);
  }
  void release() { _tile_release(); }
};

#include "kernels/quant/gemm_amx_types-inl.h"
#include "kernels/quant/gemm_amx_kernel-inl.h"

bool Run(DType t, const uint8_t* rows, size_t cols, const uint8_t* xa, size_t M, float* y, size_t ldy,
         size_t n_rows, bool row_groups) {
  AmxTileHardware tiles;
  return GemmAmx(tiles, t, rows, cols, xa, M, y, ldy, n_rows, row_groups);
}

}  // namespace amx_hw
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif  // QKV_GEMM_AMX_HW

namespace {

std::atomic<bool> g_amx_allowed{true};
std::atomic<bool> g_amx_on_model{false};
std::atomic<size_t> g_amx_calls{0};

// Why the AMX kernel cannot run here ("" if it can), decided once: the
// CPU's AMX-INT8 under the ISA cap, then Linux's grant of the tile state.
const char* AmxRefusal() {
  static const char* const why = [] {
    if (!QKV_GEMM_AMX_HW) return "no AMX on this architecture";
    if (!cpu_features().amx_int8) {
      return host_cpu_features().amx_int8 ? "AMX-INT8 above the ISA cap" : "no AMX-INT8 on this CPU";
    }
    const int err = request_amx_tile_permission();
    if (err == 0) return "";
    std::fprintf(stderr,
                 "qkv: Linux refused the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM: %s); the block types' "
                 "batches stay on the AVX-512 VNNI kernels\n",
                 std::strerror(err));
    return "the tile state refused by the kernel";
  }();
  return why;
}

}  // namespace

bool quant_gemm_amx_type(DType t) { return dtype_is_quantized(t); }

void check_quant_gemm_amx_args(const char* what, DType t, size_t cols, size_t M, size_t ldy, size_t n_rows,
                               bool row_groups) {
  QKV_CHECK(quant_gemm_amx_type(t) && dtype_row_ok(t, cols), what, ": ", cols, " columns of ", dtype_name(t));
  QKV_CHECK(ldy >= n_rows || M <= 1, what, ": output stride ", ldy, " below the row count ", n_rows);
  QKV_CHECK(!row_groups || (row_groups_layout(t) && n_rows % kRowGroup == 0), what, ": row groups of ",
            dtype_name(t), " (", n_rows, " rows) need a type with row groups and whole groups");
}

bool quant_gemm_amx_usable() {
  return g_amx_allowed.load(std::memory_order_relaxed) &&
         (g_amx_on_model.load(std::memory_order_relaxed) || AmxRefusal()[0] == '\0');
}

void set_quant_gemm_amx(bool allowed) { g_amx_allowed.store(allowed, std::memory_order_relaxed); }

void set_quant_gemm_amx_on_model(bool on_model) { g_amx_on_model.store(on_model, std::memory_order_relaxed); }

size_t quant_gemm_amx_calls() { return g_amx_calls.load(std::memory_order_relaxed); }

bool quant_gemm_amx_takes(DType t, size_t M, bool row_groups) {
  return (!row_groups || row_groups_layout(t)) && M >= kQuantGemmAmxMinInputs && quant_gemm_amx_type(t) &&
         quant_gemm_amx_usable();
}

const char* quant_gemm_amx_status() {
  if (!g_amx_allowed.load(std::memory_order_relaxed)) return "AMX int8 tiles switched off";
  if (g_amx_on_model.load(std::memory_order_relaxed)) return "AMX int8 tiles on the scalar model (tests)";
  return AmxRefusal()[0] == '\0' ? "AMX int8 tiles" : AmxRefusal();
}

void quant_gemm_amx(DType t, const void* rows, size_t cols, const void* xa, size_t M, float* y, size_t ldy,
                    size_t n_rows, bool row_groups) {
  check_quant_gemm_amx_args("quant_gemm_amx", t, cols, M, ldy, n_rows, row_groups);
  g_amx_calls.fetch_add(1, std::memory_order_relaxed);
  if (g_amx_on_model.load(std::memory_order_relaxed)) {
    quant_gemm_amx_model(t, rows, cols, xa, M, y, ldy, n_rows, row_groups);
    return;
  }
  QKV_CHECK(AmxRefusal()[0] == '\0', "quant_gemm_amx: ", AmxRefusal());
#if QKV_GEMM_AMX_HW
  amx_hw::Run(t, static_cast<const uint8_t*>(rows), cols, static_cast<const uint8_t*>(xa), M, y, ldy, n_rows,
              row_groups);
#endif
}

}  // namespace qkv

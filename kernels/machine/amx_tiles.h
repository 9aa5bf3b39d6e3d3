// The AMX tile state both AMX kernels share (the small-batch matmul's bf16
// tiles, kernels/matmul_small/amx-inl.h; the block types' int8 tiles,
// kernels/quant/gemm_amx.cc): the LDTILECFG memory layout (palette 1) and the
// operating system's permission to use the tile data.
#pragma once

#include <cstdint>

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#endif

namespace qkv {

// What LDTILECFG reads: palette 1 (8 tiles of at most 16 rows of 64 bytes),
// per tile its bytes per row (colsb) and rows; unused tiles 0 x 0.
struct alignas(64) AmxTileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
  constexpr void set(int tile, uint8_t n_rows, uint16_t bytes_per_row) {
    rows[tile] = n_rows;
    colsb[tile] = bytes_per_row;
  }
};
static_assert(sizeof(AmxTileConfig) == 64, "the LDTILECFG memory layout");

constexpr int kAmxTiles = 8;           // palette 1's tile registers
constexpr int kAmxTileRows = 16;       // rows per tile at most
constexpr int kAmxTileRowBytes = 64;   // bytes per tile row at most

// Asks Linux (5.16+) for the tile data state: arch_prctl(ARCH_REQ_XCOMP_PERM,
// XFEATURE_XTILEDATA). The permission is the process's, threads created
// before or after included (Documentation/arch/x86/xstate.rst), so one
// request covers every thread. 0 if granted, else the errno (ENOSYS on other
// systems and architectures).
inline int request_amx_tile_permission() {
#if defined(__linux__) && defined(__x86_64__)
  constexpr long kReqXcompPerm = 0x1023, kXtileData = 18;
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0 ? 0 : errno;
#else
  return 38;  // ENOSYS
#endif
}

}  // namespace qkv

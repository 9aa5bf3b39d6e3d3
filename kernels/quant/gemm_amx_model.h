// A scalar model of the AMX tile instructions the int8 block GEMM uses
// (kernels/quant/gemm_amx_kernel-inl.h), exact to the Intel SDM's
// definitions: the same operand layouts, palette 1's 8 tiles of at most 16
// rows of 64 bytes, int32 sums that wrap. The GEMM's kernel body runs on it
// on every host (tests/test_quant_gemm_amx.cc), and on the real instructions
// (kernels/quant/gemm_amx.cc) where the CPU has AMX-INT8: the same member
// templates on both.
//
// Where the CPU raises #UD (no configuration loaded, a tile shape past
// palette 1's limits, TDPBUSD operands whose shapes disagree), the model
// throws qkv::Error naming the problem, so a test of the model also checks
// the kernel's tile configuration.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/error.h"
#include "kernels/machine/amx_tiles.h"

namespace qkv {

class AmxTileModel {
 public:
  // LDTILECFG.
  void configure(const AmxTileConfig& c) {
    QKV_CHECK(c.palette == 1, "AMX model: palette ", int(c.palette), " (palette 1 only)");
    for (int t = 0; t < kAmxTiles; ++t) {
      QKV_CHECK(c.rows[t] <= kAmxTileRows && c.colsb[t] <= kAmxTileRowBytes, "AMX model: tile ", t, " of ",
                int(c.rows[t]), " rows of ", c.colsb[t], " bytes (palette 1: 16 of 64 at most)");
    }
    cfg_ = c;
    configured_ = true;
    std::memset(tmm_, 0, sizeof(tmm_));
  }
  // TILELOADD: rows[t] rows of colsb[t] bytes from base + row * stride; the
  // rest of the register zero.
  template <int kT>
  void load(const void* base, size_t stride) {
    usable(kT, "TILELOADD");
    std::memset(tmm_[kT], 0, sizeof(tmm_[kT]));
    for (int r = 0; r < cfg_.rows[kT]; ++r) {
      std::memcpy(tmm_[kT] + r * kAmxTileRowBytes, static_cast<const uint8_t*>(base) + r * stride, cfg_.colsb[kT]);
    }
  }
  // TILESTORED: rows[t] rows of colsb[t] bytes to base + row * stride.
  template <int kT>
  void store(void* base, size_t stride) const {
    usable(kT, "TILESTORED");
    for (int r = 0; r < cfg_.rows[kT]; ++r) {
      std::memcpy(static_cast<uint8_t*>(base) + r * stride, tmm_[kT] + r * kAmxTileRowBytes, cfg_.colsb[kT]);
    }
  }
  // TILEZERO.
  template <int kT>
  void zero() {
    usable(kT, "TILEZERO");
    std::memset(tmm_[kT], 0, sizeof(tmm_[kT]));
  }
  // TDPBUSD C, A, B: for m < rows(C), n < colsb(C) / 4,
  //   C[m][n] += sum over k < colsb(A) / 4, i < 4 of u8(A[m][4k + i]) * s8(B[k][4n + i]),
  // the int32 sum wrapping; C's bytes past its shape zero.
  template <int kC, int kA, int kB>
  void dpbusd() {
    static_assert(kC != kA && kC != kB && kA != kB, "TDPBUSD: three distinct tiles");
    usable(kC, "TDPBUSD");
    usable(kA, "TDPBUSD");
    usable(kB, "TDPBUSD");
    const int M = cfg_.rows[kC], N = cfg_.colsb[kC] / 4, K = cfg_.colsb[kA] / 4;
    QKV_CHECK(cfg_.colsb[kC] % 4 == 0 && cfg_.colsb[kA] % 4 == 0 && cfg_.rows[kA] == M && cfg_.rows[kB] == K &&
                  cfg_.colsb[kB] == cfg_.colsb[kC],
              "AMX model: TDPBUSD shapes C ", int(cfg_.rows[kC]), "x", cfg_.colsb[kC], ", A ", int(cfg_.rows[kA]),
              "x", cfg_.colsb[kA], ", B ", int(cfg_.rows[kB]), "x", cfg_.colsb[kB],
              " (need rows A = rows C, rows B = colsb A / 4, colsb B = colsb C)");
    for (int m = 0; m < M; ++m) {
      for (int n = 0; n < N; ++n) {
        uint32_t acc = word(kC, m, n);
        for (int k = 0; k < K; ++k) {
          for (int i = 0; i < 4; ++i) {
            const int32_t a = tmm_[kA][m * kAmxTileRowBytes + 4 * k + i];
            const int32_t b = static_cast<int8_t>(tmm_[kB][k * kAmxTileRowBytes + 4 * n + i]);
            acc += static_cast<uint32_t>(a * b);
          }
        }
        std::memcpy(tmm_[kC] + m * kAmxTileRowBytes + 4 * n, &acc, 4);
      }
      std::memset(tmm_[kC] + m * kAmxTileRowBytes + 4 * N, 0, kAmxTileRowBytes - 4 * N);
    }
    std::memset(tmm_[kC] + M * kAmxTileRowBytes, 0, (kAmxTileRows - M) * kAmxTileRowBytes);
  }
  // TILERELEASE: the configuration and tiles back to their initial state.
  void release() {
    configured_ = false;
    std::memset(tmm_, 0, sizeof(tmm_));
  }

 private:
  void usable(int t, const char* what) const {
    QKV_CHECK(configured_, "AMX model: ", what, " without a tile configuration (LDTILECFG)");
    QKV_CHECK(cfg_.rows[t] != 0 && cfg_.colsb[t] != 0, "AMX model: ", what, " on tile ", t,
              ", which the configuration leaves unused");
  }
  uint32_t word(int t, int m, int n) const {
    uint32_t w;
    std::memcpy(&w, tmm_[t] + m * kAmxTileRowBytes + 4 * n, 4);
    return w;
  }
  AmxTileConfig cfg_;
  bool configured_ = false;
  uint8_t tmm_[kAmxTiles][kAmxTileRows * kAmxTileRowBytes] = {};
};

}  // namespace qkv

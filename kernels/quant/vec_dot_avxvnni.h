// AVX-VNNI (the 256-bit, VEX-encoded vpdpbusd of client x86 CPUs without
// AVX-512: Intel 12th generation and later, AMD Zen 5 clients) for the block
// types: the matvec (quant_dot_rows) and the GEMM on rows (quant_gemm
// without tables, a tile of rows x inputs sharing each decoded weight block).
//
// vpdpbusd adds to each int32 lane the four products of its unsigned weight
// bytes and signed activation bytes, without the int16 saturation of
// vpmaddubsw: a register of 32 consecutive values gives lane l = values
// 4l .. 4l + 3, the scalar reference's 8-lane layout (kernels/quant/vec_dot.h).
// Weights are biased to unsigned bytes u = q + offset (Q8_0 and the IQ4
// levels by 128) and the bias removed exactly by starting the accumulator at
// -vpdpbusd(offset, a), computed once per activation block. Integer block
// sums are exact for every activation byte, -128 included; the f32 steps
// (one fused multiply-add per block and lane, the min terms, the final
// pairwise sums) are the scalar kernel's in its order, so every output equals
// quant_dot_rows_scalar's bit for bit.
//
// The kernels (kernels/quant/vec_dot_avxvnni-inl.h) are templates over the
// dot-product op, compiled twice: with the instruction itself
// (vec_dot_avxvnni_vex.cc, the only file built with avxvnni: clang turns
// other VNNI code into the VEX form under it, which AVX-512 VNNI CPUs such as
// Zen 4 lack) and with an exact AVX2 emulation of it
// (vec_dot_avxvnni_emulated.cc), which runs the same kernel code on any AVX2
// CPU for the tests.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/dtype.h"

namespace qkv {

enum class AvxVnniOp {
  kVex,       // _mm256_dpbusd_avx_epi32: CPUs with AVX-VNNI
  kEmulated,  // vpmaddwd on widened bytes, the same sums: CPUs with AVX2
};

// Whether this build has an AVX-VNNI kernel for t (x86 builds: Q8_0, Q4_0,
// Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS).
bool avxvnni_kernel(DType t);
// Whether quant_dot_rows and quant_gemm (without tables) take the AVX-VNNI
// kernel for t here: a kernel for t, and a CPU with AVX-VNNI and without
// AVX-512 (client x86, or a cap at avx2-vnni on a CPU with both), as
// cpu_features() reports them under the ISA cap.
bool avxvnni_takes(DType t);
// For qkv info --cpu: "{vex} vpdpbusd (matvec and GEMM on rows)" where
// avxvnni_takes, else why not ("none: this CPU has no AVX-VNNI", "off: the
// AVX-512 kernels run instead", "off: the ISA cap").
const char* avxvnni_status();
// Whether this CPU can run the op (kVex: AVX-VNNI; kEmulated: AVX2), whatever the cap.
bool avxvnni_op_runs(AvxVnniOp op);

// quant_dot_rows' contract with the op given; false, computing nothing,
// where this build has no kernel for t. Throws qkv::Error on a bad type or
// column count, or where the CPU cannot run the op.
bool avxvnni_dot_rows(DType t, const void* rows, size_t cols, const void* xa, float* y, size_t n_rows,
                      AvxVnniOp op = AvxVnniOp::kVex);
// quant_gemm's contract without tables (M inputs' activation blocks back to
// back in xa, y[m * ldy + r]), likewise.
bool avxvnni_gemm(DType t, const void* rows, size_t cols, const void* xa, size_t M, float* y, size_t ldy,
                  size_t n_rows, AvxVnniOp op = AvxVnniOp::kVex);

namespace detail {

// One input as the kernels read it: its activation blocks and, for the
// 32-value types, the blocks' f16 scales d (and Q8_1's sums s) as f32.
struct AvxVnniInput {
  const void* blocks;
  const float* d;
  const float* s;
};

// The kernels of each op (arguments checked, t a type avxvnni_kernel has):
// y[m * ldy + r] for M inputs, or with M == 1 the matvec's four row streams.
bool avxvnni_vex_kernel(DType t, const void* rows, size_t cols, const AvxVnniInput* in, size_t M, float* y,
                        size_t ldy, size_t n_rows);
bool avxvnni_emulated_kernel(DType t, const void* rows, size_t cols, const AvxVnniInput* in, size_t M, float* y,
                             size_t ldy, size_t n_rows);

// One op on 32 bytes: acc[l] += sum of u[4l + j] * a[4l + j], j < 4 (l < 8),
// for the tests (the instruction against its emulation). Only where
// avxvnni_op_runs(op).
void avxvnni_vex_dot(const uint8_t* u, const int8_t* a, int32_t* acc);
void avxvnni_emulated_dot(const uint8_t* u, const int8_t* a, int32_t* acc);

}  // namespace detail
}  // namespace qkv

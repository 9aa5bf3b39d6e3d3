// Inputs-in-lanes GEMM of the ggml block types on 256-bit x86 without
// AVX-512 VNNI: AVX-VNNI's {vex} vpdpbusd, or AVX2's vpmaddubsw with int16
// sums (gemm_avx2_lanes_maddubs-inl.h; the 8-bit types' bytes in two
// 4-bit planes). Prefill and batches from kAvx2LanesMinInputs inputs; the
// AVX-512 VNNI kernels' idea in 8 lanes (kernels/quant/gemm_vnni_lanes-inl.h).
//
// Lane c of every register is input c of a group of 8. Once per batch the
// inputs are laid out per group and block (avx2_lanes_tables): a register of
// the 8 inputs' 4 activation bytes per column quad, then the inputs' da
// (the activation scale), and for the 32-value types sa (Q8_1's f16 sum as
// f32) and corr (-offset * the block's activation sum), for the K-quants the
// activation sum of each sub-block. The kernel decodes 4 weight rows into an
// L1 scratch once per call and, per block, broadcasts each row's 4-byte
// groups into the dot product against those registers: per 4 rows x 8
// inputs x 32 values, 32 dot products, 32 broadcasts, 8 activation loads and
// 3 f32 operations per row, where the 2 x 4 tile (vec_dot_avxvnni-inl.h)
// spends a dot product, a conversion, a broadcast product and a fused
// multiply-add per row, input and block.
//
// Each output, per block i in order, from acc = 0:
//   32-value types: s = the block's exact integer dot product of the
//     weights' values and the input's bytes; acc = fma(float(s), da_i * dw_i,
//     acc), then for Q4_1/Q5_1 acc = fma(mw_i, sa_i, acc);
//   K-quants: s = sum over sub-blocks j of sc_j * (the sub-block's integer
//     dot product), t = sum of m_j * (the sub-block's activation sum), both
//     exact int32; acc = fma(float(s), da_i * d_i, acc), then for Q2_K, Q4_K
//     and Q5_K acc = fma(float(t), -(da_i * dmin_i), acc).
// avx2_lanes_gemm_scalar is that arithmetic in plain C++; the kernels equal
// it bit for bit (ggml's terms in another order than the matvec's eight
// lanes: within f32 rounding of quant_dot_rows).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/dtype.h"

namespace qkv {

// Below this many inputs the tile kernels run (8 lanes compute 8 inputs
// whatever the batch): Zen 5 guest, 2 threads, qkv bench --batches 3-6,
// alternated runs, tile -> lanes under QKV_ISA=avx2: 143M Q4_0 4 sequences
// 349-362 -> 322-479 tok/s, 6 352-395 -> 537-676; 143M Q4_K_M 3 178-266 ->
// 237-354, 6 199-337 -> 458-648; 1.1B Q4_K_M 4 46-53 -> 39-46, 5 42-51 ->
// 48-52, 6 45-47 -> 63-65; under avx2-vnni 143M Q4_K_M 5 371-380 -> 436-548.
constexpr size_t kAvx2LanesMinInputs = 5;
constexpr size_t kAvx2LanesGroup = 8;  // inputs per group: int32 lanes of a 256-bit register

enum class Avx2LanesOp {
  kVex,      // {vex} vpdpbusd: CPUs with AVX-VNNI
  kMaddubs,  // vpmaddubsw summed in int16, then vpmaddwd: AVX2, every type
  kEmulated, // vpdpbusd emulated exactly with vpmaddwd on widened bytes: AVX2, every type (tests)
};

// Whether this build has the kernel for t (x86-64, a block type).
bool avx2_lanes_kernel(DType t);
// Whether op runs t on this CPU.
bool avx2_lanes_op_runs(Avx2LanesOp op, DType t);
// The op quant_gemm takes for t here, and whether it takes one: batches of
// kAvx2LanesMinInputs or more of t where AVX-512 VNNI's kernels are not
// available (under the ISA cap) and AVX-VNNI (kVex) or AVX2 (kMaddubs) is.
bool avx2_lanes_takes(DType t, size_t M, Avx2LanesOp* op = nullptr);

// Allows or forbids the kernel (for comparisons; allowed by default).
void set_avx2_lanes(bool allowed);

// Floats of the layout per input (whole groups: a group of 8 starts at
// 8 * this many floats).
size_t avx2_lanes_table_floats(DType t, size_t cols);
// Lays out M inputs' activation blocks (act_type(t), back to back in xa) in
// ceil(M / 8) groups; lanes past M are zero. tables holds
// avx2_lanes_table_floats(t, cols) * 8 * ceil(M / 8) floats.
void avx2_lanes_tables(DType t, const void* xa, size_t cols, size_t M, float* tables);

// y[m * ldy + r] for n_rows rows and M inputs laid out by avx2_lanes_tables
// (tables at a group's start). With row_groups, rows holds whole row groups
// (kernels/quant/row_groups.h), each taken back to rows in L1 before its
// tiles: the same outputs. Throws qkv::Error on a type without the kernel, a
// bad column count or stride, rows that are not whole groups, or an op this
// CPU cannot run.
void avx2_lanes_gemm(DType t, const void* rows, size_t cols, const float* tables, size_t M, float* y, size_t ldy,
                     size_t n_rows, Avx2LanesOp op, bool row_groups = false);
// The same outputs from the activation blocks in plain C++ (the reference).
void avx2_lanes_gemm_scalar(DType t, const void* rows, size_t cols, const void* xa, size_t M, float* y, size_t ldy,
                            size_t n_rows);

namespace detail {

// The kernels of each compilation unit (arguments checked; scratch holds
// avx2_lanes_scratch_bytes(cols)).
size_t avx2_lanes_scratch_bytes(size_t cols);
void avx2_lanes_vex_kernel(DType t, const uint8_t* rows, size_t cols, const float* tables, size_t M, float* y,
                           size_t ldy, size_t n_rows, uint8_t* scratch);
void avx2_lanes_avx2_kernel(DType t, const uint8_t* rows, size_t cols, const float* tables, size_t M, float* y,
                            size_t ldy, size_t n_rows, uint8_t* scratch, bool maddubs);
// The kernels on row groups (n_rows whole groups) of Q4_0, Q4_1, Q5_0 and
// Q5_1, each 4-row tile decoded straight out of its group; false for the
// other types (avx2_lanes_gemm unpacks their groups first).
bool avx2_lanes_vex_groups_kernel(DType t, const uint8_t* groups, size_t cols, const float* tables, size_t M, float* y,
                                  size_t ldy, size_t n_rows, uint8_t* scratch);
bool avx2_lanes_avx2_groups_kernel(DType t, const uint8_t* groups, size_t cols, const float* tables, size_t M, float* y,
                                   size_t ldy, size_t n_rows, uint8_t* scratch, bool maddubs);

}  // namespace detail
}  // namespace qkv

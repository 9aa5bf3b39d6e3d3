// Internals of kernels/linear.cc shared with its oneDNN back end and the
// benchmarks (which compare the alternatives). Not part of the public interface.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/threads/block_queue.h"
#include "kernels/linear.h"

namespace qkv {

// matmul() uses the Highway small-batch kernel up to this many inputs, oneDNN above.
constexpr int64_t kMatmulSmallMaxM = 16;

namespace detail {

// How oneDNN multiplies non-F32 weights: decode weight tiles to f32 and run an
// f32 GEMM, or round weights and activations to bf16 and run bf16 x bf16 -> f32.
enum class GemmPrecision { kF32, kBF16 };

// The precision matmul() uses for W's dtype (F32 weights always use kF32).
GemmPrecision default_gemm_precision(DType t);

// Below this many weight bytes a call stays on one thread: waking the team
// costs more than the work.
constexpr size_t kMinParallelBytes = 64 * 1024;

// Whether a call on this many weight bytes opens a parallel region: not when
// already inside one, not on one thread, not below kMinParallelBytes.
bool go_parallel(size_t bytes);

// Smallest range of weights a thread takes at a time from a BlockQueue.
constexpr size_t kMinChunkBytes = 64 * 1024;

// Y = X·Wᵀ for 2 <= M <= kMatmulSmallMaxM inputs (batched decode), Highway
// kernels in kernels/matmul_small/; W and the pointers checked by the caller.
void matmul_small(const Matrix& W, const float* X, int64_t M, float* Y);
// Ys[i] = X·Ws[i]ᵀ for matrices with equal cols; on the bf16 path one parallel
// pass over all of them (Q/K/V together, gate and up together).
void matmul_small_multi(const Matrix* Ws, float* const* Ys, int count, const float* X, int64_t M);

// The precision matmul_small uses for W's dtype: on CPUs with AVX512_BF16,
// non-F32 weights go through bf16 dot products (kBF16, weights and inputs
// rounded to bf16 as in the oneDNN bf16 GEMM: about 2x the f32 FMA rate), and
// on aarch64 cores with BF16 the F16 and BF16 weights (BFMMLA,
// kernels/matmul_small/arm_bf16.h); F32 weights, and every weight type on other
// CPUs, use f32 FMAs on exactly decoded weights (kF32).
GemmPrecision matmul_small_precision(DType t);
// false: always kF32 (tests and benchmarks compare both). Not thread-safe:
// set before any concurrent use.
void set_matmul_small_bf16(bool allowed);
// Whether the kBF16 precision runs on AMX tiles (CPUs with AMX-BF16 whose
// kernel grants the tile state; same precision, other summation order), and
// false: the AVX512_BF16 kernel even there (tests and benchmarks compare
// both). Not thread-safe: set before any concurrent use.
bool matmul_small_uses_amx();
void set_matmul_small_amx(bool allowed);

// Whether matmul runs batches of M >= 2 inputs on weight type t on the
// integer block GEMM (kernels/block_gemm.cc): the ggml block types, Q8_0
// included, on CPUs with AVX-512 VNNI (quant_gemm_available), unless
// set_block_gemm(false); the 32-value types only above kMatmulSmallMaxM
// inputs where the small-batch kernel has its bf16 path.
bool block_gemm_type(DType t, int64_t M);
// false: batches take the earlier paths (decoded bf16/f32 tiles, or one
// matvec per input), for tests and benchmarks that compare. Not thread-safe:
// set before any concurrent use.
void set_block_gemm(bool allowed);
// Whether matmul_multi takes W with M >= 2 inputs to the block GEMM (row
// groups only through its packed kernel).
bool matmul_takes_block_gemm(const Matrix& W, int64_t M);
// Ys[i] = X·Ws[i]ᵀ for M >= 2 inputs on matrices of block_gemm_type types
// with equal cols > 0 (checked by the caller); inside a parallel region or
// team as matvec_multi. xq: X quantized ahead, where it holds a type.
void matmul_block_gemm(const Matrix* Ws, float* const* Ys, int count, const float* X, int64_t M,
                       const QuantizedInputs* xq = nullptr);

// Y = X·Wᵀ through oneDNN (M > 0, W checked by the caller, not inside a parallel region).
void matmul_onednn(const Matrix& W, const float* X, int64_t M, float* Y);
void matmul_onednn(const Matrix& W, const float* X, int64_t M, float* Y, GemmPrecision p);
// Builds the oneDNN primitives matmul_onednn(W, ..., p) uses for batches of
// up to max_rows rows (one per row bucket and GEMM width); returns how many it
// made (0 when all were built before).
int64_t prepare_matmul_onednn(const Matrix& W, int64_t max_rows, GemmPrecision p);

// How matvec dots Q8_0 rows: dequantize weights to f32 in registers (exact
// weights, f32 x), or quantize x per 32-block to int8 and use integer products
// (x then carries up to half a quantization step of error per element).
enum class Q8Dot { kDequantF32, kInt8 };
Q8Dot q8_matvec_mode();
// Not thread-safe: for tests and benchmarks, set before any concurrent use.
void set_q8_matvec_mode(Q8Dot mode);

// Matvec software prefetch: each row stream (see linear.cc) prefetches this many
// bytes ahead of itself. 1 KB measured best for every dtype on 2 threads:
// F16 rows gain ~10% (bench_linear matvec_pf_sweep), and the 143M Q8_0 decode
// ~17% over no software prefetch (qkv bench, 4 alternating runs, 168 -> 198 tok/s).
// 0 turns prefetching off (the kernels otherwise unchanged), for benchmarks that
// compare. Not thread-safe: set before any concurrent use.
constexpr size_t kDefaultMatvecPrefetchBytes = 1024;    // F32, F16, BF16
constexpr size_t kDefaultMatvecPrefetchBytesQ8 = 1024;  // Q8_0
size_t matvec_prefetch_bytes(DType t);
void set_matvec_prefetch_bytes(DType t, size_t bytes);

// x (n % 32 == 0) quantized per 32-block: q[i] = round(x[i] / d[b]) in
// [-127, 127] (stored as int16 in q and as int8 in q8), d[b] = max|x in block b| / 127.
void quantize_x_q8(const float* x, size_t n, int16_t* q, int8_t* q8, float* d);
// The kernels read this many scales past the last block of d (set them to 0).
constexpr size_t kQ8ScalePadding = 16;

// Rows [r0, r1) of W decoded to f32 (row stride W.cols), vectorized.
void decode_rows_f32(const Matrix& W, int64_t r0, int64_t r1, float* out);
// Rows [r0, r1) of W (a ggml block type but Q8_0) decoded to f32 (row stride
// W.cols) by the same AVX-512 step decoders, decode_row's values exactly;
// false (nothing written) on CPUs without them or for other types.
bool decode_rows_f32_blocks(const Matrix& W, int64_t r0, int64_t r1, float* out);
// Rows [r0, r1) of W decoded to bf16 (nearest even; row stride W.cols) by the
// small-batch kernel's AVX-512 step decoders, for any non-F32 type with
// cols % 32 == 0 on CPUs with AVX512_BF16; false (nothing written) elsewhere.
bool decode_rows_bf16(const Matrix& W, int64_t r0, int64_t r1, uint16_t* out);
// n floats rounded to bf16 (nearest even), vectorized.
void round_to_bf16(const float* in, size_t n, uint16_t* out);

}  // namespace detail
}  // namespace qkv

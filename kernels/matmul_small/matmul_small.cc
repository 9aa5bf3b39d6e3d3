// Small-batch matmul (batched decode): Y[m][r] = dot(W[r], X[m]) for 2 <= M <=
// kMatmulSmallMaxM inputs.
//
// Three paths. On CPUs with AVX512_BF16, non-F32 weights take the bf16 path
// (bf16-inl.h: bf16 dot products, twice the f32 FMA rate on AMD Zen 5, the
// precision of the oneDNN bf16 GEMM that prefill uses; measured 1.8x the f32
// path at M = 16 on the 143M shapes, bench_linear matmul_small), and on CPUs
// with AMX-BF16 the same precision on AMX tiles (amx-inl.h); on aarch64 CPUs
// with BF16, F16 and BF16 weights take it by BFMMLA (arm_bf16.h).
// Everything else takes the f32 path (f32-inl.h), whose products are exact.
//
// Files (kernels/matmul_small/): schedule.h (column chunks, packed inputs,
// queue ranges split into segments), common-inl.h (per-target types, tile
// shape, prefetch request), f32-inl.h, bf16_decode-inl.h, bf16-inl.h, amx-inl.h,
// and this file: the entry points, which hand the row blocks to the threads.
#include "kernels/sve_excluded.h"  // first: it decides Highway's targets here
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/error.h"
#include "kernels/linear_internal.h"
#include "kernels/matmul_small/arm_bf16.h"
#include "kernels/matmul_small/schedule.h"
#include "kernels/quant/vec_dot.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matmul_small/matmul_small.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/aligned_allocator.h"
#include "hwy/highway.h"
#include "kernels/matmul_small/amx-inl.h"
#include "kernels/matmul_small/bf16-inl.h"
#include "kernels/matmul_small/common-inl.h"
#include "kernels/matmul_small/f32-inl.h"

HWY_BEFORE_NAMESPACE();
namespace qkv {
namespace HWY_NAMESPACE {

// Rows per block for this target (threads split the rows in whole blocks).
int64_t MatmulSmallRows() { return static_cast<int64_t>(kRows); }

#if HWY_TARGET == HWY_AVX3_DL
template <DType T>
QKV_BF16_TARGET void DecodeRowsBF16T(const Matrix& W, int64_t r0, int64_t r1, uint16_t* out) {
  const size_t cols = static_cast<size_t>(W.cols), row_bytes = dtype_row_bytes(T, cols);
  const uint8_t* base = static_cast<const uint8_t*>(W.data);
  for (int64_t r = r0; r < r1; ++r) {
    DecodeRowBF16<T>(base + r * static_cast<int64_t>(row_bytes), cols, out + (r - r0) * W.cols, kBF16Step);
  }
}
#endif

#if HWY_TARGET == HWY_AVX3_DL
template <DType T>
void DecodeRowsF32T(const Matrix& W, int64_t r0, int64_t r1, float* out) {
  const size_t cols = static_cast<size_t>(W.cols), row_bytes = dtype_row_bytes(T, cols);
  const uint8_t* base = static_cast<const uint8_t*>(W.data);
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = base + r * static_cast<int64_t>(row_bytes);
    float* o = out + (r - r0) * W.cols;
    for (size_t t = 0; t < cols / kBF16Step; ++t) {
      const StepValues v = DecodeQuantStep<T>(row, t);
      _mm512_storeu_ps(o + t * kBF16Step, v.lo);
      _mm512_storeu_ps(o + t * kBF16Step + 16, v.hi);
    }
  }
}
#endif

#if HWY_TARGET == HWY_AVX3_DL
// Calls f(WeightTag<t>()) when t has a step decoder (and, with kBlocksOnly,
// is a ggml block type but Q8_0); returns whether it did.
template <bool kBlocksOnly, class F>
bool WithStepDecoder(DType t, const F& f) {
  bool done = false;
  WithBF16Type(t, [&](auto tag) {
    if constexpr (!kBlocksOnly || IsQuantStepType(decltype(tag)::value)) {
      f(tag);
      done = true;
    }
  });
  return done;
}
#endif

// Rows [r0, r1) of W as f32 (a ggml block type but Q8_0: ggml's values
// exactly) or bf16 (cols % 32 == 0, not F32), row stride W.cols; false on
// targets without the step decoders.
bool DecodeRowsF32Blocks(const Matrix& W, int64_t r0, int64_t r1, float* out) {
#if HWY_TARGET == HWY_AVX3_DL
  return WithStepDecoder<true>(W.type, [&](auto tag) { DecodeRowsF32T<decltype(tag)::value>(W, r0, r1, out); });
#else
  (void)W, (void)r0, (void)r1, (void)out;
  return false;
#endif
}

bool DecodeRowsBF16(const Matrix& W, int64_t r0, int64_t r1, uint16_t* out) {
#if HWY_TARGET == HWY_AVX3_DL
  return WithStepDecoder<false>(W.type, [&](auto tag) { DecodeRowsBF16T<decltype(tag)::value>(W, r0, r1, out); });
#else
  (void)W, (void)r0, (void)r1, (void)out;
  return false;
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace qkv
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qkv {
HWY_EXPORT(MatmulSmallRange);
HWY_EXPORT(MatmulSmallRows);
HWY_EXPORT(MatmulSmallBF16);
HWY_EXPORT(HasBF16Path);
HWY_EXPORT(MatmulSmallRowsBF16);
HWY_EXPORT(MatmulSmallAMX);
HWY_EXPORT(HasAMXPath);
HWY_EXPORT(DecodeRowsBF16);
HWY_EXPORT(DecodeRowsF32Blocks);

namespace detail {

namespace {

// The f32 path for one matrix.
void matmul_small_f32(const Matrix& W, const float* X, int64_t M, float* Y) {
  const int64_t block = HWY_DYNAMIC_DISPATCH(MatmulSmallRows)();
  const int64_t blocks = (W.rows + block - 1) / block;
  const size_t cols = static_cast<size_t>(W.cols);
  auto* const kernel = HWY_DYNAMIC_DISPATCH(MatmulSmallRange);
  // One contiguous range of whole row blocks per thread: every row is
  // computed by the same code whichever thread has it. (Handing out smaller
  // pieces dynamically measured no better end to end for this path.)
  auto body = [&](int parts, int part) {
    // Each thread packs its own copy of X: M x cols floats against its share
    // of rows x M x cols FMAs, and no thread waits for another.
    static thread_local hwy::AlignedFreeUniquePtr<float[]> packed;
    static thread_local size_t packed_size = 0;
    const float* Xp = nullptr;
    const int64_t b0 = blocks * part / parts, b1 = blocks * (part + 1) / parts;
    if (b0 >= b1) return;
    if (W.type != DType::F32) {
      const size_t need = matmul_small::PackedXFloats(static_cast<size_t>(M), cols);
      if (need > packed_size) {
        packed = hwy::AllocateAligned<float>(need);
        packed_size = need;
      }
      matmul_small::PackX(X, static_cast<size_t>(M), cols, packed.get());
      Xp = packed.get();
    }
    kernel(W, X, Xp, M, Y, b0 * block, std::min(W.rows, b1 * block));
  };
  if (Team* team = current_team()) {
    body(team->size(), team->thread());
    team->sync();
    return;
  }
#pragma omp parallel if (go_parallel(static_cast<size_t>(W.rows) * dtype_row_bytes(W.type, cols)))
  body(omp_get_num_threads(), omp_get_thread_num());
}

}  // namespace

void matmul_small(const Matrix& W, const float* X, int64_t M, float* Y) {
  float* const ys[1] = {Y};
  matmul_small_multi(&W, ys, 1, X, M);
}

void matmul_small_multi(const Matrix* Ws, float* const* Ys, int count, const float* X, int64_t M) {
  QKV_CHECK(M >= 1 && M <= kMatmulSmallMaxM, "matmul_small: ", M, " inputs (at most ", kMatmulSmallMaxM, ")");
  // Matrices on the f32 path (and empty ones) go one by one; the others share
  // one bf16 pass.
  std::vector<Matrix> fused;
  std::vector<float*> fused_y;
  Team* const team = current_team();
  for (int i = 0; i < count; ++i) {
    if (Ws[i].cols == 0) {  // empty dot products
      if (team == nullptr || team->thread() == 0) std::fill(Ys[i], Ys[i] + M * Ws[i].rows, 0.0f);
      if (team != nullptr) team->sync();
    } else if (matmul_small_precision(Ws[i].type) == GemmPrecision::kBF16) {
      fused.push_back(Ws[i]);
      fused_y.push_back(Ys[i]);
    } else {
      matmul_small_f32(Ws[i], X, M, Ys[i]);
    }
  }
  if (fused.empty()) return;
  Ws = fused.data();
  Ys = fused_y.data();
  count = static_cast<int>(fused.size());
  // bf16: one parallel pass over every matrix's row blocks, taken from a
  // queue at least kMinChunkBytes of weights at a time, on AMX tiles where
  // the CPU has them, by BFMMLA on aarch64 (arm_bf16.h).
  const bool amx = matmul_small_uses_amx(), arm = arm_bf16_matmul_available();
  const int64_t block = amx   ? 16 /* kRowsAMX: an A tile's rows */
                        : arm ? kArmBF16Rows
                              : HWY_DYNAMIC_DISPATCH(MatmulSmallRowsBF16)();
  const size_t cols = static_cast<size_t>(Ws[0].cols);
  int64_t blocks = 0;
  size_t bytes = 0;
  for (int i = 0; i < count; ++i) {
    blocks += (Ws[i].rows + block - 1) / block;
    bytes += static_cast<size_t>(Ws[i].rows) * dtype_row_bytes(Ws[i].type, cols);
  }
  if (blocks == 0) return;
  const int64_t grain = std::max<int64_t>(
      1, static_cast<int64_t>(kMinChunkBytes / std::max<size_t>(1, block * dtype_row_bytes(Ws[0].type, cols))));
  auto* const kernel = amx   ? HWY_DYNAMIC_DISPATCH(MatmulSmallAMX)
                       : arm ? &matmul_small_arm_bf16
                             : HWY_DYNAMIC_DISPATCH(MatmulSmallBF16);
  share_blocks(blocks, grain, bytes >= kMinParallelBytes,
               [&](BlockQueue& queue) { kernel(Ws, Ys, count, X, M, &queue, block); });
}

bool decode_rows_f32_blocks(const Matrix& W, int64_t r0, int64_t r1, float* out) {
  if (!dtype_is_quantized(W.type) || W.type == DType::Q8_0) return false;
  return HWY_DYNAMIC_DISPATCH(DecodeRowsF32Blocks)(W, r0, r1, out);
}

bool decode_rows_bf16(const Matrix& W, int64_t r0, int64_t r1, uint16_t* out) {
  static const bool has_bf16 = HWY_DYNAMIC_DISPATCH(HasBF16Path)();
  if (!has_bf16 || W.type == DType::F32 || W.cols % 32 != 0) return false;
  return HWY_DYNAMIC_DISPATCH(DecodeRowsBF16)(W, r0, r1, out);
}

namespace {
bool g_small_bf16_allowed = true;
bool g_small_amx_allowed = true;
}

bool matmul_small_uses_amx() {
  static const bool has_amx = HWY_DYNAMIC_DISPATCH(HasAMXPath)();
  return g_small_amx_allowed && has_amx;
}

void set_matmul_small_amx(bool allowed) { g_small_amx_allowed = allowed; }

GemmPrecision matmul_small_precision(DType t) {
  static const bool has_bf16 = HWY_DYNAMIC_DISPATCH(HasBF16Path)();
  // aarch64's BFMMLA kernel takes F16 and BF16 weights only.
  const bool arm = (t == DType::F16 || t == DType::BF16) && arm_bf16_matmul_available();
  const bool bf16 = t != DType::F32 && (has_bf16 || arm);
  return g_small_bf16_allowed && bf16 ? GemmPrecision::kBF16 : GemmPrecision::kF32;
}

void set_matmul_small_bf16(bool allowed) { g_small_bf16_allowed = allowed; }

}  // namespace detail

const char* matmul_small_kernel_name(DType t) {
  if (detail::block_gemm_type(t, kMatmulSmallMaxM)) return quant_gemm_name();
  if (detail::matmul_small_precision(t) == detail::GemmPrecision::kF32) {
    return dtype_is_quantized(t) && t != DType::Q8_0 ? "one matvec per input" : "f32 FMA";
  }
  if (detail::matmul_small_uses_amx()) return "AMX bf16 tiles";
  return detail::arm_bf16_matmul_available() ? kArmBF16MatmulName : "AVX512_BF16 dot products";
}

}  // namespace qkv
#endif  // HWY_ONCE

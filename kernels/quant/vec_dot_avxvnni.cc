// Selection of the AVX-VNNI block kernels and the activation scales they
// read (kernels/quant/vec_dot_avxvnni.h). Compiled for the baseline: the
// kernels themselves live in vec_dot_avxvnni_vex.cc and
// vec_dot_avxvnni_emulated.cc, reached only after the CPU checks here.
#include "kernels/quant/vec_dot_avxvnni.h"

#include <cstdint>
#include <vector>

#include "kernels/error.h"
#include "kernels/machine/cpu_features.h"
#include "kernels/quant/blocks.h"
#include "kernels/quant/vec_dot.h"

namespace qkv {

bool avxvnni_kernel(DType t) {
#if defined(__x86_64__)
  return dtype_is_quantized(t);  // every block type
#else
  (void)t;
  return false;
#endif
}

bool avxvnni_takes(DType t) {
  const CpuFeatures& f = cpu_features();
  return avxvnni_kernel(t) && f.avx_vnni && !f.avx512;
}

const char* avxvnni_status() {
  if (avxvnni_takes(DType::Q4_0)) return "{vex} vpdpbusd (matvec and GEMM on rows)";
  if (!avxvnni_kernel(DType::Q4_0)) return "none: not an x86-64 build";
  if (!host_cpu_features().avx_vnni) return "none: this CPU has no AVX-VNNI";
  return cpu_features().avx512 ? "off: the AVX-512 kernels run instead" : "off: the ISA cap";
}

bool avxvnni_op_runs(AvxVnniOp op) {
#if defined(__x86_64__)
  const CpuFeatures& h = host_cpu_features();
  return op == AvxVnniOp::kVex ? h.avx_vnni : h.avx2;
#else
  (void)op;
  return false;
#endif
}

namespace {

// The M inputs as the kernels read them; the f32 scales of the 32-value
// types' activation blocks in a per-thread buffer.
const detail::AvxVnniInput* inputs(DType t, const void* xa, size_t cols, size_t M) {
  static thread_local std::vector<detail::AvxVnniInput> in;
  static thread_local std::vector<float> scales;
  in.resize(M);
  const size_t ab = act_bytes(t, cols), nb = cols / 32;
  const auto* base = static_cast<const uint8_t*>(xa);
  const ActType at = act_type(t);
  scales.resize(at == ActType::kQ8_K ? 0 : 2 * nb * M);
  for (size_t m = 0; m < M; ++m) {
    in[m] = detail::AvxVnniInput{base + m * ab, nullptr, nullptr};
    if (at == ActType::kQ8_K) continue;
    float* d = scales.data() + 2 * nb * m;
    float* s = d + nb;
    if (at == ActType::kQ8_0) {
      const auto* a = reinterpret_cast<const BlockQ8_0*>(base + m * ab);
      for (size_t i = 0; i < nb; ++i) d[i] = f16_to_f32(a[i].d);
    } else {
      const auto* a = reinterpret_cast<const BlockQ8_1*>(base + m * ab);
      for (size_t i = 0; i < nb; ++i) d[i] = f16_to_f32(a[i].d), s[i] = f16_to_f32(a[i].s);
    }
    in[m].d = d;
    in[m].s = s;
  }
  return in.data();
}

bool run(DType t, const void* rows, size_t cols, const void* xa, size_t M, float* y, size_t ldy, size_t n_rows,
         AvxVnniOp op, const char* what) {
  QKV_CHECK(dtype_is_quantized(t) && dtype_row_ok(t, cols), what, ": ", cols, " columns of ", dtype_name(t));
  QKV_CHECK(ldy >= n_rows || M <= 1, what, ": output stride ", ldy, " below the row count ", n_rows);
  QKV_CHECK(avxvnni_op_runs(op), what, ": this CPU has no ",
            op == AvxVnniOp::kVex ? "AVX-VNNI" : "AVX2 (for the emulated AVX-VNNI op)");
  if (!avxvnni_kernel(t)) return false;
  if (M == 0 || n_rows == 0) return true;
  const detail::AvxVnniInput* in = inputs(t, xa, cols, M);
  return op == AvxVnniOp::kVex ? detail::avxvnni_vex_kernel(t, rows, cols, in, M, y, ldy, n_rows)
                               : detail::avxvnni_emulated_kernel(t, rows, cols, in, M, y, ldy, n_rows);
}

}  // namespace

bool avxvnni_dot_rows(DType t, const void* rows, size_t cols, const void* xa, float* y, size_t n_rows,
                      AvxVnniOp op) {
  return run(t, rows, cols, xa, 1, y, n_rows, n_rows, op, "avxvnni_dot_rows");
}

bool avxvnni_gemm(DType t, const void* rows, size_t cols, const void* xa, size_t M, float* y, size_t ldy,
                  size_t n_rows, AvxVnniOp op) {
  return run(t, rows, cols, xa, M, y, ldy, n_rows, op, "avxvnni_gemm");
}

}  // namespace qkv

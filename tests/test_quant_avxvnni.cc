// ctest-labels: kernels asan
// The AVX-VNNI block kernels (kernels/quant/vec_dot_avxvnni.h) against the
// scalar reference quant_dot_rows_scalar, bit for bit: the matvec (one
// input) and the GEMM (2 .. 16 inputs), with the emulated vpdpbusd on any
// AVX2 CPU and with the instruction itself where the CPU has AVX-VNNI (else
// skipped with a message). Shapes leave partial tiles and 4-row streams;
// activations include bytes of -128, -127 and 127 (the extremes of the
// unsaturated u8 x s8 sums); weights include f16 scales at the extremes of
// the format (65504, subnormal 2^-24, negative).
#include <doctest/doctest.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/dtype.h"
#include "kernels/error.h"
#include "kernels/machine/cpu_features.h"
#include "kernels/quant/blocks.h"
#include "kernels/quant/vec_dot.h"
#include "kernels/quant/vec_dot_avxvnni.h"
#include "tests/quant_fixture.h"

using namespace qkv;

namespace {

constexpr DType kVnniTypes[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::IQ4_NL,
                                DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS};

enum class Acts { kRandom, kFlat, kEdges };

// Random weights, every fourth block's d replaced by an extreme f16
// (65504, 2^-24, -65504, -1) and, for the types with a min, its min too.
std::vector<uint8_t> weights(DType t, size_t rows, size_t cols, std::mt19937& g) {
  std::vector<uint8_t> w = testing::random_rows(t, rows, cols, g);
  const uint16_t extremes[] = {0x7BFF, 0x0001, 0xFBFF, 0xBC00};
  const bool has_min = t == DType::Q4_1 || t == DType::Q5_1 || t == DType::Q2_K || t == DType::Q4_K ||
                       t == DType::Q5_K;
  const size_t bb = dtype_block_bytes(t);
  size_t k = 0;
  for (size_t off = 0; off < w.size(); off += 4 * bb, ++k) {
    const uint16_t e = extremes[k % 4];
    std::memcpy(w.data() + off + testing::d_offset(t), &e, 2);
    if (has_min) std::memcpy(w.data() + off + testing::d_offset(t) + 2, &extremes[(k + 1) % 4], 2);
  }
  return w;
}

// One input's activation blocks: quantized random values (kRandom), all at
// -127 (kFlat), or with the quantized bytes then overwritten by -128, -127,
// 127 and random bytes (kEdges; Q8_K's block sums kept consistent).
std::vector<uint8_t> activation(DType t, size_t cols, Acts acts, std::mt19937& g) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(cols, -1.0f);
  if (acts != Acts::kFlat) {
    for (auto& v : x) v = nd(g);
  }
  std::vector<uint8_t> xa(act_bytes(t, cols));
  quantize_activation(t, x.data(), cols, xa.data());
  if (acts != Acts::kEdges) return xa;
  const int8_t edges[] = {-128, -127, 127, -128};
  auto edge = [&](size_t k) { return k % 3 == 2 ? static_cast<int8_t>(g()) : edges[(k / 3) % 4]; };
  switch (act_type(t)) {
    case ActType::kQ8_0: {
      auto* b = reinterpret_cast<BlockQ8_0*>(xa.data());
      for (size_t k = 0; k < cols; ++k) b[k / 32].qs[k % 32] = edge(k);
      break;
    }
    case ActType::kQ8_1: {
      auto* b = reinterpret_cast<BlockQ8_1*>(xa.data());
      for (size_t k = 0; k < cols; ++k) b[k / 32].qs[k % 32] = edge(k);
      break;
    }
    case ActType::kQ8_K: {
      auto* b = reinterpret_cast<BlockQ8_K*>(xa.data());
      for (size_t k = 0; k < cols; ++k) b[k / kQK].qs[k % kQK] = edge(k);
      for (size_t i = 0; i < cols / kQK; ++i) {
        for (size_t j = 0; j < 16; ++j) {
          int s = 0;
          for (size_t k = 0; k < 16; ++k) s += b[i].qs[16 * j + k];
          b[i].bsums[j] = static_cast<int16_t>(s);
        }
      }
      break;
    }
  }
  return xa;
}

#if defined(__x86_64__)
// The AVX-512 VNNI instruction on 256-bit vectors (EVEX vpdpbusd, the same
// sums as the VEX form): an oracle for the emulated op on CPUs with AVX-512 VNNI.
__attribute__((target("avx2,avx512f,avx512vl,avx512vnni"))) void evex_dot(const uint8_t* u, const int8_t* a,
                                                                         int32_t* acc) {
  const __m256i sum = _mm256_dpbusd_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc)),
                                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(u)),
                                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc), sum);
}
#endif

// Every (u, a) byte pair, 32 pairs per call, against the definition (exact
// int32 sums of four u8 x s8 products, wrapping) and, where given, an oracle op.
void check_op(void (*op)(const uint8_t*, const int8_t*, int32_t*),
              void (*oracle)(const uint8_t*, const int8_t*, int32_t*)) {
  int mismatches = 0;
  std::mt19937 g(5);
  for (int u0 = 0; u0 < 256; ++u0) {
    for (int a0 = 0; a0 < 256; a0 += 32) {
      uint8_t u[32];
      int8_t a[32];
      int32_t acc[8], ref[8], other[8];
      for (int k = 0; k < 32; ++k) {
        u[k] = static_cast<uint8_t>(k % 2 == 0 ? u0 : 255 - u0);
        a[k] = static_cast<int8_t>(a0 + k - 128);
      }
      for (int l = 0; l < 8; ++l) {
        // Accumulators near the int32 limits too: the sum wraps, as vpdpbusd's (not vpdpbusds).
        acc[l] = l == 0 ? INT32_MAX - 100 : l == 1 ? INT32_MIN + 100 : static_cast<int32_t>(g());
        uint32_t sum = static_cast<uint32_t>(acc[l]);
        for (int j = 0; j < 4; ++j) sum += static_cast<uint32_t>(int32_t(u[4 * l + j]) * int32_t(a[4 * l + j]));
        ref[l] = static_cast<int32_t>(sum);
        other[l] = acc[l];
      }
      op(u, a, acc);
      if (oracle != nullptr) oracle(u, a, other);
      for (int l = 0; l < 8; ++l) mismatches += acc[l] != ref[l] || (oracle != nullptr && other[l] != acc[l]);
    }
  }
  CHECK(mismatches == 0);
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

// Every covered type at several shapes: the matvec, and the GEMM for M = 1 .. 16,
// each output's bits against quant_dot_rows_scalar's for its input.
void check_against_scalar(AvxVnniOp op) {
  std::mt19937 g(53);
  for (DType t : kVnniTypes) {
    const std::string type = dtype_name(t);
    CAPTURE(type);
    const size_t bv = dtype_block_values(t);
    for (size_t blocks : {size_t(1), size_t(3), size_t(9)}) {
      if (bv == 256 && blocks > 3) continue;
      const size_t cols = blocks * bv;
      for (size_t rows : {size_t(1), size_t(5), size_t(9)}) {
        CAPTURE(cols);
        CAPTURE(rows);
        const std::vector<uint8_t> w = weights(t, rows, cols, g);
        const size_t ab = act_bytes(t, cols);
        for (Acts acts : {Acts::kRandom, Acts::kFlat, Acts::kEdges}) {
          CAPTURE(static_cast<int>(acts));
          std::vector<uint8_t> xa(16 * ab);
          for (size_t m = 0; m < 16; ++m) {
            const std::vector<uint8_t> one = activation(t, cols, acts, g);
            std::memcpy(xa.data() + m * ab, one.data(), ab);
          }
          std::vector<float> ref(16 * rows), y(rows, -7.0f);
          for (size_t m = 0; m < 16; ++m) {
            quant_dot_rows_scalar(t, w.data(), cols, xa.data() + m * ab, ref.data() + m * rows, rows);
          }
          REQUIRE(avxvnni_dot_rows(t, w.data(), cols, xa.data(), y.data(), rows, op));
          int mismatches = 0;
          for (size_t r = 0; r < rows; ++r) mismatches += !same_bits(y[r], ref[r]);
          CHECK(mismatches == 0);
          for (size_t M = 1; M <= 16; ++M) {
            CAPTURE(M);
            const size_t ldy = rows + 2;  // the kernel must write only its rows of each input
            std::vector<float> yg(ldy * M, -7.0f);
            REQUIRE(avxvnni_gemm(t, w.data(), cols, xa.data(), M, yg.data(), ldy, rows, op));
            mismatches = 0;
            for (size_t m = 0; m < M; ++m) {
              for (size_t r = 0; r < rows; ++r) mismatches += !same_bits(yg[m * ldy + r], ref[m * rows + r]);
              for (size_t r = rows; r < ldy; ++r) mismatches += yg[m * ldy + r] != -7.0f;
            }
            CHECK(mismatches == 0);
          }
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("avxvnni: the emulated op sums as vpdpbusd, every byte pair (the AVX-512 VNNI instruction as oracle)") {
  if (!avxvnni_op_runs(AvxVnniOp::kEmulated)) {
    MESSAGE("skipped: no AVX2 on this CPU (the emulated AVX-VNNI op needs it)");
    return;
  }
#if defined(__x86_64__)
  const bool evex = host_cpu_features().avx512_vnni;
  if (!evex) MESSAGE("no AVX-512 VNNI on this CPU: the emulated op checked against the definition only");
  check_op(detail::avxvnni_emulated_dot, evex ? evex_dot : nullptr);
  if (avxvnni_op_runs(AvxVnniOp::kVex)) check_op(detail::avxvnni_vex_dot, detail::avxvnni_emulated_dot);
#endif
}

TEST_CASE("avxvnni: the emulated vpdpbusd kernels equal the scalar reference bit for bit") {
  if (!avxvnni_op_runs(AvxVnniOp::kEmulated)) {
    MESSAGE("skipped: no AVX2 on this CPU (the emulated AVX-VNNI op needs it)");
    return;
  }
  check_against_scalar(AvxVnniOp::kEmulated);
}

TEST_CASE("avxvnni: the {vex} vpdpbusd kernels equal the scalar reference bit for bit") {
  if (!avxvnni_op_runs(AvxVnniOp::kVex)) {
    MESSAGE("skipped: no AVX-VNNI on this CPU (Intel 12th generation and later, AMD Zen 5 clients have it); "
            "the emulated op ran the same kernel code");
    return;
  }
  check_against_scalar(AvxVnniOp::kVex);
}

TEST_CASE("avxvnni: selection follows the CPU features, and bad calls fail clearly") {
  const CpuFeatures& f = cpu_features();
  for (DType t : kVnniTypes) {
    const std::string type = dtype_name(t);
    CAPTURE(type);
#if defined(__x86_64__)
    CHECK(avxvnni_kernel(t));
#endif
    CHECK(avxvnni_takes(t) == (avxvnni_kernel(t) && f.avx_vnni && !f.avx512));
  }
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    CHECK_FALSE(avxvnni_kernel(t));
    CHECK_FALSE(avxvnni_takes(t));
  }
  // quant_gemm names the kernel it runs.
  if (avxvnni_takes(DType::Q4_0)) {
    CHECK(std::string(quant_gemm_name()) == "AVX-VNNI integer block GEMM, inputs in lanes from 5");
    CHECK(quant_gemm_rows_available(DType::Q4_K));
  } else {
    CHECK(std::string(quant_gemm_name()).rfind("AVX-VNNI", 0) == std::string::npos);
  }
  std::vector<uint8_t> w(dtype_row_bytes(DType::Q4_0, 64));
  std::vector<uint8_t> xa(act_bytes(DType::Q4_0, 64));
  float y[2];
  CHECK_THROWS_WITH_AS(avxvnni_dot_rows(DType::Q4_0, w.data(), 48, xa.data(), y, 1, AvxVnniOp::kEmulated),
                       doctest::Contains("48 columns of q4_0"), Error);
  CHECK_THROWS_WITH_AS(avxvnni_dot_rows(DType::F32, w.data(), 64, xa.data(), y, 1, AvxVnniOp::kEmulated),
                       doctest::Contains("columns of f32"), Error);
  CHECK_THROWS_WITH_AS(avxvnni_gemm(DType::Q4_0, w.data(), 64, xa.data(), 2, y, 0, 1, AvxVnniOp::kEmulated),
                       doctest::Contains("output stride"), Error);
  if (!avxvnni_op_runs(AvxVnniOp::kVex)) {
    CHECK_THROWS_WITH_AS(avxvnni_dot_rows(DType::Q4_0, w.data(), 64, xa.data(), y, 1, AvxVnniOp::kVex),
                         doctest::Contains("this CPU has no AVX-VNNI"), Error);
  }
}

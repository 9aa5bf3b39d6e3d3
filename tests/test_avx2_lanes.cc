// ctest-labels: kernels asan
// The 256-bit inputs-in-lanes GEMM of the block types
// (kernels/quant/gemm_avx2_lanes.h): each op's kernel against the plain-C++
// reference bit for bit (the emulated vpdpbusd and vpmaddubsw on any AVX2
// CPU, the {vex} vpdpbusd where the CPU has AVX-VNNI, else skipped with a
// message), the reference against an fp64 dot product within f32 rounding,
// the selection under the ISA cap, and matmul through the block GEMM equal
// to the reference where it takes the kernel. Shapes leave partial 4-row
// tiles and 8-input groups; activations include bytes of -128, -127 and 127;
// weights f16 scales at the extremes of the format; saturating blocks (every
// weight at its largest biased byte against activations all -128 or 127)
// reach the bounds of vpmaddubsw's int16 sums.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/error.h"
#include "kernels/linear.h"
#include "kernels/linear_internal.h"
#include "kernels/machine/cpu_features.h"
#include "kernels/quant/blocks.h"
#include "kernels/quant/gemm_avx2_lanes.h"
#include "kernels/quant/row_groups.h"
#include "kernels/quant/vec_dot.h"
#include "kernels/quant/vec_dot_avxvnni.h"
#include "tests/error_matchers.h"
#include "tests/linear_fixture.h"
#include "tests/quant_fixture.h"

using namespace qkv;

namespace {

constexpr DType kLaneTypes[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::IQ4_NL,
                                DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS};

bool has_min(DType t) {
  return t == DType::Q4_1 || t == DType::Q5_1 || t == DType::Q2_K || t == DType::Q4_K || t == DType::Q5_K;
}

// How a test fills weights and activations: random; random with extreme
// f16 scales and activation bytes of -128, -127, 127; or saturating, every
// weight at its type's largest biased byte (all quant bits set, Q8_0 127)
// against activations all -128 or all 127, the int16 sums' worst case.
enum class Fill { kRandom, kEdges, kSaturating };

// Random weights; with kEdges every third block's d (and min) replaced by an
// extreme finite f16 (65504, 2^-24, -65504).
std::vector<uint8_t> weights(DType t, size_t rows, size_t cols, std::mt19937& g, Fill fill) {
  std::vector<uint8_t> w = testing::random_rows(t, rows, cols, g);
  if (fill == Fill::kRandom) return w;
  const size_t bb = dtype_block_bytes(t);
  if (fill == Fill::kSaturating) {
    const uint16_t one = 0x3C00;
    std::memset(w.data(), t == DType::Q8_0 ? 0x7F : 0xFF, w.size());
    for (size_t off = 0; off < w.size(); off += bb) {
      std::memcpy(w.data() + off + testing::d_offset(t), &one, 2);
      if (has_min(t)) std::memcpy(w.data() + off + testing::d_offset(t) + 2, &one, 2);
    }
    return w;
  }
  const uint16_t e[] = {0x7BFF, 0x0001, 0xFBFF};
  size_t k = 0;
  for (size_t off = 0; off < w.size(); off += 3 * bb, ++k) {
    std::memcpy(w.data() + off + testing::d_offset(t), &e[k % 3], 2);
    if (has_min(t)) std::memcpy(w.data() + off + testing::d_offset(t) + 2, &e[(k + 1) % 3], 2);
  }
  return w;
}

// M inputs' activation blocks; with kEdges each input's bytes overwritten
// by -128, -127, 127 and random bytes, with kSaturating all by -128 (even
// inputs) or 127.
std::vector<uint8_t> activations(DType t, size_t cols, size_t M, std::mt19937& g, Fill fill) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const size_t ab = act_bytes(t, cols);
  std::vector<uint8_t> xa(ab * M);
  std::vector<float> x(cols);
  for (size_t m = 0; m < M; ++m) {
    for (auto& v : x) v = nd(g) * static_cast<float>(1 + m % 3);
    quantize_activation(t, x.data(), cols, xa.data() + m * ab);
    if (fill == Fill::kRandom) continue;
    const int8_t e[] = {-128, -127, 127};
    const size_t bv = dtype_block_values(t), nb = cols / bv;
    const size_t header = act_type(t) == ActType::kQ8_1 ? 4 : act_type(t) == ActType::kQ8_K ? 4 : 2;
    for (size_t i = 0; i < nb; ++i) {
      auto* qs = reinterpret_cast<int8_t*>(xa.data() + m * ab + i * (ab / nb) + header);
      for (size_t k = 0; k < bv; ++k) {
        if (fill == Fill::kSaturating) {
          qs[k] = m % 2 == 0 ? -128 : 127;
        } else {
          qs[k] = k % 4 == 3 ? static_cast<int8_t>(g()) : e[(k + m) % 3];
        }
      }
    }
  }
  return xa;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

const char* op_name(Avx2LanesOp op) {
  return op == Avx2LanesOp::kVex ? "vex" : op == Avx2LanesOp::kMaddubs ? "maddubs" : "emulated";
}

// Every type the op runs at several shapes, outputs against the reference's
// bits; the rows of each input past n_rows untouched. 32 rows of the types
// with row groups also go in as groups (kernels/quant/row_groups.h): Q4_0 ...
// Q5_1 decoded straight out of them, the others unpacked first.
void check_op(Avx2LanesOp op) {
  std::mt19937 g(8);
  int64_t checked = 0;
  for (DType t : kLaneTypes) {
    if (!avx2_lanes_op_runs(op, t)) continue;
    const std::string type = dtype_name(t);
    CAPTURE(type);
    const bool k = dtype_block_values(t) == 256;
    for (size_t cols : k ? std::vector<size_t>{256, 768} : std::vector<size_t>{32, 96, 576}) {
      for (size_t rows : {size_t(1), size_t(3), size_t(4), size_t(9), size_t(32)}) {
        if (rows == 32 && !row_groups_layout(t)) continue;
        for (Fill fill : {Fill::kRandom, Fill::kEdges, Fill::kSaturating}) {
          CAPTURE(cols);
          CAPTURE(rows);
          CAPTURE(static_cast<int>(fill));
          const std::vector<uint8_t> w = weights(t, rows, cols, g, fill);
          for (size_t M : {size_t(1), size_t(5), size_t(8), size_t(9), size_t(16), size_t(23)}) {
            CAPTURE(M);
            const std::vector<uint8_t> xa = activations(t, cols, M, g, fill);
            const size_t groups = (M + 7) / 8;
            std::vector<float> tables(avx2_lanes_table_floats(t, cols) * 8 * groups, NAN);
            avx2_lanes_tables(t, xa.data(), cols, M, tables.data());
            const size_t ldy = rows + 3;
            std::vector<float> ref(ldy * M, -7.0f), y(ldy * M, -7.0f);
            avx2_lanes_gemm_scalar(t, w.data(), cols, xa.data(), M, ref.data(), ldy, rows);
            avx2_lanes_gemm(t, w.data(), cols, tables.data(), M, y.data(), ldy, rows, op);
            int mismatches = 0;
            for (size_t i = 0; i < y.size(); ++i) mismatches += !same_bits(y[i], ref[i]);
            CHECK(mismatches == 0);
            for (size_t m = 0; m < M; ++m) {
              for (size_t r = rows; r < ldy; ++r) CHECK(y[m * ldy + r] == -7.0f);
            }
            if (rows % kRowGroup == 0) {
              std::vector<uint8_t> grouped(w.size());
              pack_row_groups(t, w.data(), rows, cols, grouped.data());
              std::fill(y.begin(), y.end(), -7.0f);
              avx2_lanes_gemm(t, grouped.data(), cols, tables.data(), M, y.data(), ldy, rows, op, true);
              mismatches = 0;
              for (size_t i = 0; i < y.size(); ++i) mismatches += !same_bits(y[i], ref[i]);
              CHECK(mismatches == 0);
            }
            ++checked;
          }
        }
      }
    }
  }
  MESSAGE(std::string(op_name(op)), ": ", checked, " shapes");
  CHECK(checked > 0);
}

}  // namespace

TEST_CASE("the emulated vpdpbusd and vpmaddubsw kernels equal the reference bit for bit") {
  if (!avx2_lanes_op_runs(Avx2LanesOp::kEmulated, DType::Q4_0)) {
    MESSAGE("skipped: not an x86-64 CPU with AVX2");
    return;
  }
  check_op(Avx2LanesOp::kEmulated);
  check_op(Avx2LanesOp::kMaddubs);
  for (DType t : kLaneTypes) CHECK(avx2_lanes_op_runs(Avx2LanesOp::kMaddubs, t));
}

TEST_CASE("the AVX-VNNI kernel equals the reference bit for bit") {
  if (!avx2_lanes_op_runs(Avx2LanesOp::kVex, DType::Q4_0)) {
    MESSAGE("skipped: this CPU has no AVX-VNNI");
    return;
  }
  check_op(Avx2LanesOp::kVex);
}

TEST_CASE("the reference is within f32 rounding of an fp64 dot product") {
  if (!avx2_lanes_kernel(DType::Q4_0)) {
    MESSAGE("skipped: not an x86-64 build");
    return;
  }
  std::mt19937 g(9);
  for (DType t : kLaneTypes) {
    CAPTURE(std::string(dtype_name(t)));
    for (size_t cols : dtype_block_values(t) == 256 ? std::vector<size_t>{256, 2304} : std::vector<size_t>{32, 2080}) {
      const size_t rows = 5, M = 3, ab = act_bytes(t, cols), rb = dtype_row_bytes(t, cols);
      const std::vector<uint8_t> w = weights(t, rows, cols, g, Fill::kRandom);
      const std::vector<uint8_t> xa = activations(t, cols, M, g, Fill::kRandom);
      std::vector<float> y(rows * M);
      avx2_lanes_gemm_scalar(t, w.data(), cols, xa.data(), M, y.data(), rows, rows);
      const double gamma = static_cast<double>(cols / 32 + 4) * 0x1p-23;
      for (size_t m = 0; m < M; ++m) {
        const std::vector<uint8_t> one(xa.begin() + static_cast<long>(m * ab), xa.begin() + static_cast<long>((m + 1) * ab));
        const testing::ActRef a = testing::dequantized_activation(t, one, cols);
        for (size_t r = 0; r < rows; ++r) {
          const testing::RowRef ref = testing::row_reference(t, w.data() + r * rb, cols, a);
          CHECK(std::fabs(double(y[m * rows + r]) - ref.value) <= gamma * ref.mag);
        }
      }
    }
  }
}

TEST_CASE("the selection follows the CPU and the ISA cap") {
  const CpuFeatures& f = cpu_features();
  for (DType t : kLaneTypes) {
    CAPTURE(std::string(dtype_name(t)));
    Avx2LanesOp op = Avx2LanesOp::kEmulated;
    const bool takes = avx2_lanes_takes(t, 16, &op);
    CHECK_FALSE(avx2_lanes_takes(t, kAvx2LanesMinInputs - 1));
    if (quant_gemm_available(t) || !avx2_lanes_kernel(t)) {
      CHECK_FALSE(takes);  // AVX-512 VNNI's kernels, or not x86
    } else if (f.avx_vnni && !f.avx512) {
      CHECK(takes);
      CHECK(op == Avx2LanesOp::kVex);
    } else {
      CHECK(takes == f.avx2);
      if (takes) CHECK(op == Avx2LanesOp::kMaddubs);
    }
  }
  for (DType t : {DType::F16, DType::F32, DType::BF16}) CHECK_FALSE(avx2_lanes_takes(t, 16));
  CHECK_THROWS_AS(avx2_lanes_gemm_scalar(DType::F16, nullptr, 256, nullptr, 1, nullptr, 1, 1), Error);
  CHECK_THROWS_AS(avx2_lanes_gemm_scalar(DType::Q4_K, nullptr, 288, nullptr, 1, nullptr, 1, 1), Error);
  // Bad calls of the kernel itself: a row length off the blocks, an output
  // stride below the rows, a type without the kernel.
  std::vector<float> tables(1024), y(64);
  CHECK_THROWS_AS(avx2_lanes_tables(DType::Q4_0, nullptr, 48, 1, tables.data()), Error);
  CHECK_THROWS_AS(avx2_lanes_gemm(DType::Q4_0, nullptr, 64, tables.data(), 8, y.data(), 1, 2, Avx2LanesOp::kEmulated),
                  Error);
  CHECK_THROWS_AS(avx2_lanes_gemm(DType::F16, nullptr, 64, tables.data(), 8, y.data(), 4, 4, Avx2LanesOp::kMaddubs),
                  Error);
  CHECK_THROWS_AS(avx2_lanes_gemm_scalar(DType::Q4_0, nullptr, 48, nullptr, 1, nullptr, 1, 1), Error);
  // Row groups: whole groups of a type that has them.
  if (avx2_lanes_op_runs(Avx2LanesOp::kEmulated, DType::Q4_0)) {
    CHECK(test::throws_with([&] { avx2_lanes_gemm(DType::Q4_0, nullptr, 64, tables.data(), 8, y.data(), 20, 20,
                                                  Avx2LanesOp::kEmulated, true); }, "20 rows of q4_0 are not whole row groups"));
    CHECK(test::throws_with([&] { avx2_lanes_gemm(DType::Q3_K, nullptr, 256, tables.data(), 8, y.data(), 16, 16,
                                                  Avx2LanesOp::kEmulated, true); }, "16 rows of q3_k are not whole row groups"));
  }
}

TEST_CASE("matmul takes the kernel for batches and equals the reference") {
  // Where the kernel is selected (a cap at avx2 or avx2-vnni, or such a CPU):
  // 5 inputs (one group, lanes idle), batches past one panel (the block GEMM's slices of 8-input groups), one
  // and two threads, rows past the 4-row tiles.
  std::mt19937 g(10);
  int64_t checked = 0;
  for (DType t : kLaneTypes) {
    // (Builds whose Highway targets lack the tile kernels, SCALAR-only, route batches elsewhere.)
    if (!avx2_lanes_takes(t, 16) || !detail::block_gemm_type(t, 16)) continue;
    CAPTURE(std::string(dtype_name(t)));
    const bool k = dtype_block_values(t) == 256;
    for (int64_t cols : k ? std::vector<int64_t>{256, 2304} : std::vector<int64_t>{64, 2080}) {
      const int64_t rows = 43;
      const std::vector<uint8_t> w = weights(t, rows, static_cast<size_t>(cols), g, Fill::kRandom);
      const Matrix m{w.data(), t, rows, cols};
      for (int64_t M : {int64_t(5), int64_t(8), int64_t(13), int64_t(16), int64_t(131)}) {
        for (int threads : {1, 2}) {
          CAPTURE(cols);
          CAPTURE(M);
          CAPTURE(threads);
          const std::vector<float> X = testing::make_inputs(M, cols, static_cast<uint32_t>(M + cols));
          std::vector<float> y(static_cast<size_t>(M * rows), NAN), ref(y.size(), NAN);
          testing::with_threads(threads, [&] { matmul(m, X.data(), M, y.data()); });
          const size_t ab = act_bytes(t, static_cast<size_t>(cols));
          std::vector<uint8_t> xa(ab * static_cast<size_t>(M));
          for (int64_t k = 0; k < M; ++k) {
            quantize_activation(t, X.data() + k * cols, static_cast<size_t>(cols), xa.data() + static_cast<size_t>(k) * ab);
          }
          avx2_lanes_gemm_scalar(t, w.data(), static_cast<size_t>(cols), xa.data(), static_cast<size_t>(M), ref.data(),
                                 static_cast<size_t>(rows), static_cast<size_t>(rows));
          int64_t differ = 0;
          for (size_t i = 0; i < y.size(); ++i) differ += !same_bits(y[i], ref[i]);
          CHECK(differ == 0);
          ++checked;
        }
      }
    }
  }
  if (checked == 0) MESSAGE("skipped: the kernel is not selected here (AVX-512 VNNI's kernels run; QKV_ISA=avx2 covers it)");
}

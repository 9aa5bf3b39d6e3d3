// ctest-labels: kernels asan
// Row groups (kernels/quant/row_groups.h): the layout round-trips every
// 32-value block type byte for byte; row_group_dot equals its scalar kernel
// bit for bit on every compiled SIMD target and is within the f32 bound of an
// fp64 reference; bad shapes and types are refused by name.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/linear.h"
#include "kernels/linear_internal.h"
#include "kernels/quant/gemm_avx2_lanes.h"
#include "kernels/quant/row_groups.h"
#include "kernels/quant/vec_dot.h"
#include "tests/error_matchers.h"
#include "tests/quant_fixture.h"
#include "tests/simd_targets.h"

using namespace qkv;
using testing::random_rows;

namespace {

constexpr DType kLayoutTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
                                  DType::IQ4_NL, DType::Q4_K, DType::Q5_K, DType::Q6_K};

// Column counts of one, a few and many blocks of t.
std::vector<size_t> columns(DType t, std::initializer_list<size_t> blocks) {
  std::vector<size_t> out;
  for (size_t b : blocks) out.push_back(b * dtype_block_values(t));
  return out;
}

// The fp64 dot product of row r (from its GGUF blocks) with the activation
// blocks, and the sum of the magnitudes of its per-block terms.
testing::RowRef reference(DType t, const uint8_t* row, size_t cols, const std::vector<uint8_t>& xa) {
  const testing::ActRef a = testing::dequantized_activation(t, xa, cols);
  return testing::row_reference(t, row, cols, a);
}

}  // namespace

TEST_CASE("the row-group layout round-trips every 32-value block type") {
  std::mt19937 g(3);
  for (DType t : kLayoutTypes) {
    CAPTURE(dtype_name(t));
    CHECK(row_groups_layout(t));
    for (size_t cols : columns(t, {1, 3, 18})) {
      for (size_t rows : {size_t(16), size_t(48)}) {
        const std::vector<uint8_t> w = random_rows(t, rows, cols, g);
        std::vector<uint8_t> packed(w.size()), back(w.size());
        pack_row_groups(t, w.data(), rows, cols, packed.data());
        CHECK(packed != w);  // the bytes moved
        unpack_row_groups(t, packed.data(), rows, cols, back.data());
        CHECK(back == w);
        // Row r's d (the first 2-byte field of its first block; Q6_K: the
        // last) sits at 2r of its group.
        const size_t rb = dtype_row_bytes(t, cols), d_at = t == DType::Q6_K ? dtype_block_bytes(t) - 2 : 0;
        for (size_t r = 0; r < rows; ++r) {
          const size_t group = r / kRowGroup * kRowGroup * rb;
          CHECK(std::memcmp(packed.data() + group + 2 * (r % kRowGroup), w.data() + r * rb + d_at, 2) == 0);
          // row_group_row gathers the row back from its group.
          std::vector<uint8_t> row(rb);
          row_group_row(t, packed.data(), cols, r, row.data());
          CHECK(std::memcmp(row.data(), w.data() + r * rb, rb) == 0);
        }
      }
    }
  }
  for (DType t : {DType::Q2_K, DType::Q3_K, DType::IQ4_XS, DType::F16}) CHECK_FALSE(row_groups_layout(t));
}

TEST_CASE("row_group_dot equals its scalar kernel and the fp64 reference") {
  // Per row and block, the exact integer sum times (dw * da) is fused-added
  // into one f32 accumulator (Q4_K / Q5_K: per sub-block, it times dw and
  // its min term into the super-block's sum, which times da is fused-added
  // into the accumulator): one rounding of a sum per term and a few of each
  // scale product and of the integer sum's conversion (Q6_K's super-block
  // sums reach 2^27), so |y - ref| <= (terms + 4) * 2^-24 * sum |terms|.
  std::mt19937 g(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (DType t : kLayoutTypes) {
    CAPTURE(dtype_name(t));
    REQUIRE(row_groups_layout(t));
    for (size_t cols : columns(t, {1, 2, 18, 64})) {
      // 5, 9 and 11 groups: passes over streams of several groups each
      // (GroupStreams), and the groups left over after them.
      for (size_t groups : {size_t(1), size_t(2), size_t(3), size_t(5), size_t(9), size_t(11)}) {
        CAPTURE(cols);
        CAPTURE(groups);
        const size_t rows = groups * kRowGroup;
        const std::vector<uint8_t> w = random_rows(t, rows, cols, g);
        std::vector<uint8_t> packed(w.size());
        pack_row_groups(t, w.data(), rows, cols, packed.data());
        std::vector<float> x(cols);
        for (auto& v : x) v = nd(g);
        x[cols / 2] = -9.0f;
        std::vector<uint8_t> xa(act_bytes(t, cols));
        quantize_activation(t, x.data(), cols, xa.data());
        std::vector<float> ys(rows), yr(rows);
        row_group_dot_scalar(t, packed.data(), cols, xa.data(), yr.data(), groups);
        testing::for_each_simd_target([&] {
          std::fill(ys.begin(), ys.end(), std::numeric_limits<float>::quiet_NaN());
          row_group_dot(t, packed.data(), cols, xa.data(), ys.data(), groups);
          for (size_t r = 0; r < rows; ++r) CHECK(ys[r] == yr[r]);
        });
        const size_t rb = dtype_row_bytes(t, cols);
        for (size_t r = 0; r < rows; ++r) {
          const testing::RowRef ref = reference(t, w.data() + r * rb, cols, xa);
          const double terms = dtype_block_values(t) == 32 ? double(cols / 32) : double(cols / 16 + cols / 256);
          const double tol = (terms + 4.0) * std::ldexp(1.0, -24) * ref.mag + 1e-30;
          CHECK(std::fabs(yr[r] - ref.value) <= tol);
        }
      }
    }
  }
}

TEST_CASE("the packed GEMM on row groups equals it on the rows") {
  // The packed kernel's arithmetic after packing is the same whichever
  // layout it packed from, so the outputs must agree bit for bit; 48 rows
  // leave a 32-row tile with one group. Each 32-row block is packed during
  // the previous one's tiles into the other of two sets: 112 rows reuse a
  // set and end with one group.
  if (!quant_gemm_available(DType::Q4_0)) {
    MESSAGE("SKIPPED: no AVX-512 VNNI here (the block GEMMs need it)");
    return;
  }
  std::mt19937 g(9);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (DType t : kLayoutTypes) {
    CAPTURE(dtype_name(t));
    for (size_t cols : columns(t, {2, 18})) {
      for (size_t rows : {size_t(16), size_t(48), size_t(64), size_t(112)}) {
        for (size_t M : {size_t(3), size_t(8), size_t(16), size_t(17), size_t(40)}) {
          CAPTURE(cols);
          CAPTURE(rows);
          CAPTURE(M);
          const std::vector<uint8_t> w = random_rows(t, rows, cols, g);
          std::vector<uint8_t> packed(w.size());
          pack_row_groups(t, w.data(), rows, cols, packed.data());
          const size_t ab = act_bytes(t, cols);
          std::vector<uint8_t> xa(M * ab);
          std::vector<float> x(cols);
          for (size_t m = 0; m < M; ++m) {
            for (auto& v : x) v = nd(g);
            quantize_activation(t, x.data(), cols, xa.data() + m * ab);
          }
          std::vector<float> tables(quant_gemm_table_floats(t, cols, M, false));
          quant_gemm_tables(t, xa.data(), cols, M, tables.data(), false);
          std::vector<float> from_rows(M * rows, -1.0f), from_groups(M * rows, -2.0f);
          set_quant_gemm_lanes(false);  // the packed kernel on the rows too
          quant_gemm(t, w.data(), cols, xa.data(), M, from_rows.data(), rows, rows, tables.data());
          set_quant_gemm_lanes(true);
          quant_gemm(t, packed.data(), cols, xa.data(), M, from_groups.data(), rows, rows, tables.data(), 0, true);
          CHECK(from_groups == from_rows);
        }
      }
    }
  }
  std::vector<float> y(16 * 3), tables(1024);
  std::vector<uint8_t> buf(16 * 18 * 2), xa(3 * 36);
  CHECK(test::throws_with([&] { quant_gemm(DType::Q4_0, buf.data(), 64, xa.data(), 3, y.data(), 16, 16, nullptr, 0, true); },
                          "need a type with row groups, whole groups and the packed or lanes kernel's tables"));
  CHECK(test::throws_with([&] { quant_gemm(DType::Q4_0, buf.data(), 64, xa.data(), 3, y.data(), 20, 20, tables.data(), 0, true); },
                          "(20 rows)"));
  CHECK(test::throws_with([&] { quant_gemm(DType::Q3_K, buf.data(), 256, xa.data(), 3, y.data(), 16, 16, tables.data(), 0, true); },
                          "row groups of q3_k"));
}

TEST_CASE("matvec and matmul on a row-group matrix") {
  // matvec: row_group_dot's outputs. Batches under AVX-512 VNNI: from 3
  // inputs the packed block GEMM, equal to it on the rows (inputs-in-lanes
  // and few-input passes off); 2 inputs, or the packed kernel switched off:
  // input by input, row_group_dot's outputs. Under AVX2 (no AVX-512 VNNI):
  // from kAvx2LanesMinInputs the 256-bit lanes kernel, equal to it on the
  // rows and, for the 32-value types, whose terms come in the group matvec's
  // order, to row_group_dot input by input; below that input by input.
  const bool vnni = quant_gemm_available(DType::Q4_0);
  const bool lanes8 = avx2_lanes_takes(DType::Q4_0, kAvx2LanesMinInputs);
  if (!vnni && !lanes8) {
    MESSAGE("SKIPPED: neither AVX-512 VNNI nor AVX2 here (row groups are laid out only where a block GEMM runs on them)");
    return;
  }
  std::mt19937 g(13);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (DType t : kLayoutTypes) {
    CAPTURE(dtype_name(t));
    const size_t rows = 48, cols = 18 * dtype_block_values(t);
    const std::vector<uint8_t> w = random_rows(t, rows, cols, g);
    std::vector<uint8_t> packed(w.size());
    pack_row_groups(t, w.data(), rows, cols, packed.data());
    Matrix on_rows{w.data(), t, int64_t(rows), int64_t(cols)};
    Matrix grouped{packed.data(), t, int64_t(rows), int64_t(cols)};
    grouped.row_groups = true;
    for (int64_t M : {1, 2, 3, 5, 8, 16, 40}) {
      for (bool packed_kernel : {true, false}) {
        CAPTURE(M);
        CAPTURE(packed_kernel);
        std::vector<float> X(size_t(M) * cols);
        for (auto& v : X) v = nd(g);
        std::vector<float> y(size_t(M) * rows, -1.0f), want(size_t(M) * rows, -2.0f);
        set_quant_gemm_packed(packed_kernel);
        // Whether the block GEMM takes the batch (in a build without the
        // AVX2 target the lanes kernel runs but rows take no block GEMM).
        const bool gemm = detail::matmul_takes_block_gemm(grouped, M);
        matmul(grouped, X.data(), M, y.data());
        set_quant_gemm_packed(true);
        std::vector<float> per_input(size_t(M) * rows, -3.0f);
        std::vector<uint8_t> xa(act_bytes(t, cols));
        for (int64_t m = 0; m < M; ++m) {
          quantize_activation(t, X.data() + m * cols, cols, xa.data());
          row_group_dot(t, packed.data(), cols, xa.data(), per_input.data() + m * rows, rows / kRowGroup);
        }
        CHECK(gemm == (vnni ? M >= 3 && packed_kernel : M >= int64_t(kAvx2LanesMinInputs) &&
                                                             detail::block_gemm_type(t, M)));
        if (gemm) {
          set_quant_gemm_lanes(false);
          set_quant_gemm_few(false);
          matmul(on_rows, X.data(), M, want.data());
          set_quant_gemm_few(true);
          set_quant_gemm_lanes(true);
          if (!vnni && dtype_block_values(t) == 32) CHECK(y == per_input);
        } else {
          want = per_input;
        }
        CHECK(y == want);
      }
    }
    Matrix bad = grouped;
    bad.rows = 40;
    std::vector<float> x(cols, 1.0f), y(rows);
    CHECK(test::throws_with([&] { matvec(bad, x.data(), y.data()); }, "40 rows of " + std::string(dtype_name(t)) + " cannot be row groups"));
  }
}

TEST_CASE("row groups refuse bad shapes and types by name") {
  std::vector<uint8_t> buf(64 * 1024), out(64 * 1024);
  std::vector<float> y(64);
  CHECK(test::throws_with([&] { pack_row_groups(DType::Q4_0, buf.data(), 15, 64, out.data()); }, "15 rows (a multiple of 16)"));
  CHECK(test::throws_with([&] { pack_row_groups(DType::Q4_0, buf.data(), 16, 48, out.data()); }, "48 columns of q4_0"));
  CHECK(test::throws_with([&] { unpack_row_groups(DType::Q2_K, buf.data(), 16, 256, out.data()); }, "q2_k has no row-group layout"));
  CHECK(test::throws_with([&] { pack_row_groups(DType::Q6_K, buf.data(), 16, 128, out.data()); }, "128 columns of q6_k (a multiple of 256)"));
  CHECK(test::throws_with([&] { row_group_dot(DType::Q3_K, buf.data(), 256, out.data(), y.data(), 1); }, "256 columns of q3_k"));
  CHECK(test::throws_with([&] { row_group_dot(DType::Q4_K, buf.data(), 288, out.data(), y.data(), 1); }, "288 columns of q4_k"));
  CHECK(test::throws_with([&] { row_group_dot(DType::Q5_1, buf.data(), 48, out.data(), y.data(), 1); }, "48 columns of q5_1"));
  CHECK(test::throws_with([&] { row_group_row(DType::IQ4_XS, buf.data(), 256, 0, out.data()); }, "iq4_xs has no row-group layout"));
}

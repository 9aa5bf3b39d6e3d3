// ctest-labels: kernels asan
// The AMX int8 GEMM of the block types (kernels/quant/gemm_amx.h).
//
// Its kernel body runs here on the scalar model of the tile instructions
// (kernels/quant/gemm_amx_model.h) on every CPU, and on the instructions
// themselves where the CPU has AMX-INT8 (else that case skips with a
// message). The model's instructions are checked first against the SDM's
// definitions on small hand-made tiles. Then, for every block type, at M = 1,
// 5, 16, 17, 40 inputs (partial and several input tiles) and 16, 17, 32, 33
// rows (partial row tiles; 16 and 32 also as row groups where the type has
// them), on rows of one and several groups of four sub-blocks (cols 96 and
// 512 of the 32-value types, whose 3 sub-blocks leave C tiles unused; 256 and
// 512 of the K-quants):
//  - against the fp64 reference on each input's activation blocks
//    (tests/quant_fixture.h), within the packed VNNI GEMM's f32 bound
//    (tests/test_quant_matmul.cc check_packed: the same terms in the same
//    order), and against quant_dot_rows_scalar (ggml's 8-lane order) within
//    twice it;
//  - bit for bit against the packed VNNI GEMM (quant_gemm with tables) where
//    the CPU has AVX-512 VNNI, whose epilogue order the AMX kernel follows;
//  - on AMX hosts, the instructions against the model bit for bit;
//  - block_gemm's AMX path (matmul, its row blocks, input panels and 1 or 2
//    threads; rows and row groups) with the kernel on the model: each output
//    equal to the kernel's over the whole matrix, bit for bit.
#include <doctest/doctest.h>
#include <omp.h>

#include <array>
#include <climits>
#include <initializer_list>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "kernels/linear.h"
#include "kernels/linear_internal.h"
#include "kernels/machine/cpu_features.h"
#include "kernels/quant/gemm_amx.h"
#include "kernels/quant/gemm_amx_model.h"
#include "kernels/quant/row_groups.h"
#include "kernels/quant/vec_dot.h"
#include "tests/quant_fixture.h"

using namespace qkv;
using namespace qkv::testing;

namespace {

AmxTileConfig config_of(std::initializer_list<std::array<int, 3>> tiles) {
  AmxTileConfig c;
  for (const auto& t : tiles) c.set(t[0], static_cast<uint8_t>(t[1]), static_cast<uint16_t>(t[2]));
  return c;
}

}  // namespace

TEST_CASE("AMX tile model: TDPBUSD is u8 rows of A times s8 columns of B, 4-byte interleaved") {
  // C (3 x 2 int32) += A (3 rows x 8 u8) . B (2 rows x 2 columns of 4 s8): C[m][n]
  // adds sum over k < 2, i < 4 of A[m][4k + i] * B[k][4n + i].
  AmxTileModel tm;
  tm.configure(config_of({{0, 3, 8}, {1, 3, 8}, {2, 2, 8}}));
  uint8_t a[3][8];
  int8_t b[2][8];
  for (int m = 0; m < 3; ++m) {
    for (int k = 0; k < 8; ++k) a[m][k] = static_cast<uint8_t>(200 + 7 * m + k);  // above 127: unsigned
  }
  for (int k = 0; k < 2; ++k) {
    for (int j = 0; j < 8; ++j) b[k][j] = static_cast<int8_t>(-100 + 13 * k + 9 * j);  // both signs
  }
  int32_t c0[3][2] = {{1, -2}, {3, -4}, {5, -6}};
  tm.load<0>(c0, sizeof(c0[0]));
  tm.load<1>(a, sizeof(a[0]));
  tm.load<2>(b, sizeof(b[0]));
  tm.dpbusd<0, 1, 2>();
  int32_t c[3][2];
  tm.store<0>(c, sizeof(c[0]));
  for (int m = 0; m < 3; ++m) {
    for (int n = 0; n < 2; ++n) {
      int64_t want = c0[m][n];
      for (int k = 0; k < 2; ++k) {
        for (int i = 0; i < 4; ++i) want += int64_t(a[m][4 * k + i]) * int64_t(b[k][4 * n + i]);
      }
      CHECK(c[m][n] == want);
    }
  }
}

TEST_CASE("AMX tile model: the int32 sums wrap; loads zero what the shape leaves out") {
  AmxTileModel tm;
  tm.configure(config_of({{0, 1, 4}, {1, 1, 4}, {2, 1, 4}}));
  const int32_t big = INT32_MAX;
  const uint8_t a[4] = {255, 255, 0, 0};
  const int8_t b[4] = {1, 1, 0, 0};
  tm.load<0>(&big, 4);
  tm.load<1>(a, 4);
  tm.load<2>(b, 4);
  tm.dpbusd<0, 1, 2>();
  int32_t c = 0;
  tm.store<0>(&c, 4);
  CHECK(c == static_cast<int32_t>(static_cast<uint32_t>(INT32_MAX) + 510u));
  // Tile 1 holds one row of 4 bytes: a store of it writes those only.
  uint8_t out[8];
  std::memset(out, 0xAB, sizeof(out));
  tm.store<1>(out, 4);
  CHECK(out[0] == 255);
  CHECK(out[4] == 0xAB);
}

TEST_CASE("AMX tile model: what the CPU refuses (#UD) throws, naming the problem") {
  AmxTileModel tm;
  uint8_t buf[1024] = {};
  CHECK_THROWS_WITH_AS(tm.load<0>(buf, 64), doctest::Contains("without a tile configuration"), Error);
  CHECK_THROWS_WITH_AS(tm.configure(config_of({{0, 17, 64}})), doctest::Contains("16 of 64 at most"), Error);
  tm.configure(config_of({{0, 16, 64}, {1, 16, 64}, {2, 8, 64}}));
  CHECK_THROWS_WITH_AS((tm.dpbusd<0, 1, 2>()), doctest::Contains("TDPBUSD shapes"), Error);  // K 16 vs B's 8 rows
  CHECK_THROWS_WITH_AS(tm.load<3>(buf, 64), doctest::Contains("leaves unused"), Error);
  tm.release();
  CHECK_THROWS_WITH_AS(tm.zero<0>(), doctest::Contains("without a tile configuration"), Error);
}

namespace {

struct Case {
  DType t;
  size_t cols, rows, M;
};

std::string describe(const Case& c) {
  return std::string(dtype_name(c.t)) + " cols " + std::to_string(c.cols) + " rows " + std::to_string(c.rows) +
         " M " + std::to_string(c.M);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  const DType types[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::IQ4_NL,
                         DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS};
  for (DType t : types) {
    const size_t col_list[2] = {dtype_block_values(t) == 32 ? size_t{96} : size_t{256}, 512};
    for (size_t cols : col_list) {
      for (size_t rows : {16, 17, 32, 33}) {
        for (size_t M : {1, 5, 16, 17, 40}) out.push_back({t, cols, rows, M});
      }
    }
  }
  return out;
}

struct Problem {
  std::vector<uint8_t> w, xa;
  size_t ab = 0;
};

Problem make_problem(const Case& c, std::mt19937& g) {
  Problem p;
  p.w = random_rows(c.t, c.rows, c.cols, g);
  p.ab = act_bytes(c.t, c.cols);
  p.xa.resize(p.ab * c.M);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(c.cols);
  for (size_t m = 0; m < c.M; ++m) {
    for (auto& v : x) v = nd(g);
    quantize_activation(c.t, x.data(), c.cols, p.xa.data() + m * p.ab);
  }
  return p;
}

// y (M x ldy, ldy = rows + 3 so that the stride is exercised) against the fp64
// reference, quant_dot_rows_scalar and, where it runs, the packed VNNI GEMM.
void check_outputs(const Case& c, const Problem& p, const std::vector<float>& y, size_t ldy) {
  const size_t rb = dtype_row_bytes(c.t, c.cols);
  std::vector<float> ys(c.rows), yp(c.M * c.rows, 0.0f);
  const bool packed = quant_gemm_available(c.t) && c.M >= kQuantGemmPackedMinInputs;
  if (packed) {
    set_quant_gemm_lanes(false);  // the packed layout at every M (the lanes kernel equals it)
    std::vector<float> tables(quant_gemm_table_floats(c.t, c.cols, c.M, false));
    quant_gemm_tables(c.t, p.xa.data(), c.cols, c.M, tables.data(), false);
    quant_gemm(c.t, p.w.data(), c.cols, p.xa.data(), c.M, yp.data(), c.rows, c.rows, tables.data(), c.M);
    set_quant_gemm_lanes(true);
  }
  int bad = 0;
  for (size_t m = 0; m < c.M; ++m) {
    const std::vector<uint8_t> xm(p.xa.begin() + m * p.ab, p.xa.begin() + (m + 1) * p.ab);
    const ActRef a = dequantized_activation(c.t, xm, c.cols);
    quant_dot_rows_scalar(c.t, p.w.data(), c.cols, xm.data(), ys.data(), c.rows);
    for (size_t r = 0; r < c.rows; ++r) {
      const double got = y[m * ldy + r];
      const RowRef ref = row_reference(c.t, p.w.data() + r * rb, c.cols, a);
      const double tol = (double(c.cols) / 8 + double(c.cols) / 256 + 16) * 0x1p-24 * ref.mag + 1e-30;
      const bool ok = std::fabs(got - ref.value) <= tol && std::fabs(got - double(ys[r])) <= 2 * tol &&
                      (!packed || y[m * ldy + r] == yp[m * c.rows + r]);
      if (!ok && bad++ < 3) {
        CHECK_MESSAGE(false, describe(c), " m=", m, " r=", r, " got ", got, " fp64 ", ref.value, " tol ", tol,
                      " scalar ", ys[r], packed ? " packed " : "", packed ? std::to_string(yp[m * c.rows + r]) : "");
      }
    }
  }
  CHECK_MESSAGE(bad == 0, describe(c));
}

// The same weights as row groups, where t has them and the rows fill groups:
// the kernel (gemm, the model's or the instructions') must give y bit for bit.
template <class Gemm>
void check_row_groups(const Case& c, const Problem& p, const std::vector<float>& y, size_t ldy, Gemm gemm) {
  if (!row_groups_layout(c.t) || c.rows % kRowGroup != 0) return;
  std::vector<uint8_t> groups(p.w.size());
  pack_row_groups(c.t, p.w.data(), c.rows, c.cols, groups.data());
  std::vector<float> yg(y.size(), -1.0f);
  gemm(c.t, groups.data(), c.cols, p.xa.data(), c.M, yg.data(), ldy, c.rows, true);
  int bad = 0;
  for (size_t i = 0; i < y.size(); ++i) bad += !(y[i] == yg[i]);
  CHECK_MESSAGE(bad == 0, describe(c), " in row groups");
}

}  // namespace

TEST_CASE("AMX int8 GEMM on the modelled tiles: every block type against the references") {
  std::mt19937 g(52);
  for (const Case& c : cases()) {
    const Problem p = make_problem(c, g);
    const size_t ldy = c.rows + 3;
    std::vector<float> y(c.M * ldy, -1.0f);
    quant_gemm_amx_model(c.t, p.w.data(), c.cols, p.xa.data(), c.M, y.data(), ldy, c.rows);
    check_outputs(c, p, y, ldy);
    check_row_groups(c, p, y, ldy, quant_gemm_amx_model);
    // The gaps of the output stride untouched.
    for (size_t m = 0; m < c.M; ++m) {
      for (size_t r = c.rows; r < ldy; ++r) REQUIRE_MESSAGE(y[m * ldy + r] == -1.0f, describe(c));
    }
  }
}

TEST_CASE("AMX int8 GEMM on the tile instructions: equal to the model bit for bit") {
  if (!cpu_features().amx_int8 || !quant_gemm_amx_usable()) {
    MESSAGE("no AMX-INT8 on this CPU (or not granted): ", std::string(quant_gemm_amx_status()), "; the real-instruction case skips");
    CHECK_THROWS_WITH_AS(quant_gemm_amx(DType::Q4_0, nullptr, 32, nullptr, 16, nullptr, 16, 16),
                         doctest::Contains("quant_gemm_amx"), Error);
    CHECK_FALSE(quant_gemm_amx_takes(DType::Q4_0, 256, false));
    return;
  }
  CHECK(quant_gemm_amx_takes(DType::Q4_0, 256, true));
  CHECK_FALSE(quant_gemm_amx_takes(DType::Q2_K, 256, true));  // no row groups of Q2_K
  CHECK(quant_gemm_amx_takes(DType::Q4_K, kQuantGemmAmxMinInputs, false));
  CHECK_FALSE(quant_gemm_amx_takes(DType::Q4_K, kQuantGemmAmxMinInputs - 1, false));
  std::mt19937 g(52);
  for (const Case& c : cases()) {
    const Problem p = make_problem(c, g);
    const size_t ldy = c.rows + 3;
    std::vector<float> y(c.M * ldy, -1.0f), ym(c.M * ldy, -1.0f);
    quant_gemm_amx(c.t, p.w.data(), c.cols, p.xa.data(), c.M, y.data(), ldy, c.rows);
    quant_gemm_amx_model(c.t, p.w.data(), c.cols, p.xa.data(), c.M, ym.data(), ldy, c.rows);
    int bad = 0;
    for (size_t i = 0; i < y.size(); ++i) bad += !(y[i] == ym[i]);
    CHECK_MESSAGE(bad == 0, describe(c));
    check_outputs(c, p, y, ldy);
    check_row_groups(c, p, y, ldy, quant_gemm_amx);
  }
}

TEST_CASE("AMX int8 GEMM: bad arguments are refused") {
  CHECK_THROWS_WITH_AS(quant_gemm_amx_model(DType::F16, nullptr, 32, nullptr, 1, nullptr, 1, 1),
                       doctest::Contains("columns of"), Error);
  CHECK_THROWS_WITH_AS(quant_gemm_amx_model(DType::Q4_K, nullptr, 100, nullptr, 1, nullptr, 1, 1),
                       doctest::Contains("100 columns of"), Error);
  CHECK_THROWS_WITH_AS(quant_gemm_amx_model(DType::Q4_0, nullptr, 32, nullptr, 2, nullptr, 3, 4),
                       doctest::Contains("output stride"), Error);
  CHECK_THROWS_WITH_AS(quant_gemm_amx_model(DType::Q2_K, nullptr, 256, nullptr, 1, nullptr, 16, 16, true),
                       doctest::Contains("row groups of q2_k"), Error);
  CHECK_THROWS_WITH_AS(quant_gemm_amx_model(DType::Q4_0, nullptr, 32, nullptr, 1, nullptr, 17, 17, true),
                       doctest::Contains("whole groups"), Error);
}

namespace {

// While alive, quant_gemm_amx runs on the model (and block_gemm takes it).
struct OnModel {
  OnModel() { set_quant_gemm_amx_on_model(true); }
  ~OnModel() { set_quant_gemm_amx_on_model(false); }
};

}  // namespace

TEST_CASE("block_gemm's AMX path on the modelled tiles: equal to one kernel call over the matrix") {
  std::mt19937 g(520);
  const OnModel on_model;
  const int threads_before = omp_get_max_threads();
  int checked = 0;
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
    const size_t cols = 512, rows = 48;
    for (size_t M : {15, 16, 40, 100}) {
      const Case c{t, cols, rows, M};
      for (bool groups : {false, true}) {
        if (groups && !row_groups_layout(t)) continue;
        Problem p = make_problem(c, g);
        std::vector<uint8_t> data = p.w;
        if (groups) pack_row_groups(t, p.w.data(), rows, cols, data.data());
        Matrix W{data.data(), t, static_cast<int64_t>(rows), static_cast<int64_t>(cols), groups};
        if (!detail::matmul_takes_block_gemm(W, static_cast<int64_t>(M))) {
          MESSAGE(describe(c), ": no block GEMM for this batch on this CPU; case skipped");
          continue;
        }
        // The inputs as floats whose activation blocks are p.xa's: random, quantized by matmul itself.
        std::normal_distribution<float> nd(0.0f, 1.0f);
        std::vector<float> X(M * cols);
        for (auto& v : X) v = nd(g);
        for (size_t m = 0; m < M; ++m) quantize_activation(t, X.data() + m * cols, cols, p.xa.data() + m * p.ab);
        std::vector<float> want(M * rows);
        quant_gemm_amx_model(t, p.w.data(), cols, p.xa.data(), M, want.data(), rows, rows);
        const bool amx = M >= kQuantGemmAmxMinInputs;
        for (int threads : {1, 2}) {
          omp_set_num_threads(threads);
          std::vector<float> Y(M * rows, -1.0f);
          const size_t calls = quant_gemm_amx_calls();
          matmul(W, X.data(), static_cast<int64_t>(M), Y.data());
          const std::string what = describe(c) + (groups ? " groups" : "") + " threads " + std::to_string(threads);
          // Below the threshold the other kernels run (on AVX-512 VNNI the
          // packed or lanes kernel, whose outputs these equal too).
          CHECK_MESSAGE((quant_gemm_amx_calls() > calls) == amx, what, amx ? ": AMX not taken" : ": AMX taken");
          if (!amx) continue;
          int same = 0;
          for (size_t i = 0; i < Y.size(); ++i) same += Y[i] == want[i];
          CHECK_MESSAGE(same == static_cast<int>(Y.size()), what);
          ++checked;
        }
      }
    }
  }
  omp_set_num_threads(threads_before);
  MESSAGE(checked, " block_gemm calls checked");
}

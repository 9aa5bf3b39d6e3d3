// ctest-labels: kernels asan
// Batches (matmul, M >= 2) of the ggml block types: every type at M = 2, 3,
// 5, 16 (the small-batch kernel), 17, 33, 64, 300 (oneDNN on decoded tiles), on
// row counts that leave partial row blocks and rows of one, several and
// unequal column passes, on 1 and 2 threads, against the fp64 reference
// matmul_reference (rows dequantized by decode_row, ggml's values) on the
// inputs as ggml's activation blocks hold them (quantized and dequantized,
// kernels/batch_activations.h), which is what the batch GEMMs multiply.
//
// Tolerance. The batch paths decode each weight to f32 with ggml's operations
// in ggml's order (d * q, (d * sc) * q - dmin * m: no fused multiply-add),
// i.e. exactly decode_row's value, then round weight and input to bf16
// (nearest even, a relative error of at most 2^-9 each): each product is then
// within 2^-8 + 2^-18 of its value, and the f32 sums add (cols + 4) * 2^-24
// (see tests/linear_fixture.h): in all (cols + 4) * 2^-24 + 2^-8 + 2^-17 of
// sum |w x| per output (the small-batch kernel). Above 16 inputs (oneDNN's
// f32 GEMM) weights and inputs enter exactly: (cols + 4) * 2^-24 alone. Where the small-batch
// kernel has no bf16 path, batches of up to 16 go input by input through the
// decode matvec (quantized activations): there the result must equal that
// matvec's bit for bit (its own accuracy is tests/test_quant_matvec.cc's).
// A wrong nibble, bit plane, scale, min or sub-block shows as an error of the
// order of a whole weight, far outside the bound. On CPUs with AVX-512 VNNI
// the block types go through the integer block GEMMs instead (ggml's integer
// sums on each input's activation blocks): from kQuantGemmPackedMinInputs
// inputs the packed-weight kernel (at 8-16 inputs of the 32-value types the
// inputs-in-lanes kernel, which must equal it bit for bit), within
// check_packed's f32 bound of the fp64 reference on those blocks; below it
// (and at every size with set_quant_gemm_packed(false)) the tile kernel,
// whose every output must equal quant_dot_rows_scalar's for its input bit for
// bit; the other paths are tested too, with set_block_gemm(false).
#include <doctest/doctest.h>
#include <omp.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/linear.h"
#include "kernels/batch_activations.h"
#include "kernels/linear_internal.h"
#include "kernels/quant/row_groups.h"
#include "kernels/quant/gemm_avx2_lanes.h"
#include "kernels/quant/vec_dot.h"
#include "kernels/threads/team.h"
#include "tests/linear_fixture.h"
#include "tests/quant_fixture.h"

using namespace qkv;
using namespace qkv::testing;

namespace {

TestMatrix random_matrix(DType t, int64_t rows, int64_t cols, std::mt19937& g) {
  TestMatrix tm;
  tm.bytes = random_rows(t, static_cast<size_t>(rows), static_cast<size_t>(cols), g);
  tm.decoded.resize(static_cast<size_t>(rows * cols));
  const size_t rb = dtype_row_bytes(t, static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    decode_row(t, tm.bytes.data() + r * rb, static_cast<size_t>(cols), tm.decoded.data() + r * cols);
  }
  tm.m = Matrix{tm.bytes.data(), t, rows, cols};
  return tm;
}

// Whether matmul with M inputs goes input by input (no batch kernel for t here,
// or a batch below the packed kernel's; Q8_0 always has the f32 small-batch
// kernel).
bool per_input(DType t, int64_t M) {
  if (t != DType::Q8_0 && quant_gemm_available(t) && static_cast<size_t>(M) < kQuantGemmPackedMinInputs) return true;
  return t != DType::Q8_0 && M <= kMatmulSmallMaxM && detail::matmul_small_precision(t) == detail::GemmPrecision::kF32;
}

double extra_tolerance(DType t, int64_t M) {
  // Above 16 inputs block types run oneDNN's f32 GEMM (Q8_0 its default precision).
  const detail::GemmPrecision p = M <= kMatmulSmallMaxM ? detail::matmul_small_precision(t)
                                  : t == DType::Q8_0    ? detail::default_gemm_precision(t)
                                                        : detail::GemmPrecision::kF32;
  return p == detail::GemmPrecision::kBF16 ? 0x1p-8 + 0x1p-17 : 0.0;
}

// The packed-weight kernel of prefill-sized batches: ggml's exact integer
// sub-block sums, then per sub-block one f32 product of the two scales (the
// K-quants: none) and one fused multiply-add into the accumulator (the
// K-quants: into the super-block's sum), one for the min term, and per
// K-quant super-block one more (its sum times da), each rounding within
// 2^-24 of a partial sum below sum |terms|: (2 * sub-blocks + super-blocks
// + 16) * 2^-24 of it, sub-blocks of at least 16 values, against the fp64
// reference on each input's own activation blocks. A wrong nibble, scale,
// min or sub-block is of the order of a whole term, far outside it.
void check_packed(const TestMatrix& w, const std::vector<float>& X, int64_t M, const std::vector<float>& Y) {
  const int64_t rows = w.m.rows, cols = w.m.cols;
  const DType t = w.m.type;
  std::vector<uint8_t> xa(act_bytes(t, static_cast<size_t>(cols)));
  const size_t rb = dtype_row_bytes(t, static_cast<size_t>(cols));
  int64_t bad = 0;
  for (int64_t m = 0; m < M; ++m) {
    quantize_activation(t, X.data() + m * cols, static_cast<size_t>(cols), xa.data());
    const ActRef a = dequantized_activation(t, xa, static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      const RowRef ref = row_reference(t, w.bytes.data() + r * rb, static_cast<size_t>(cols), a);
      const double tol = (double(cols) / 8 + double(cols) / 256 + 16) * 0x1p-24 * ref.mag + 1e-30;
      const double err = std::fabs(double(Y[m * rows + r]) - ref.value);
      if (!(err <= tol) && bad++ < 3) {
        CHECK_MESSAGE(false, "m=", m, " r=", r, " got ", Y[m * rows + r], " want ", ref.value, " tol ", tol);
      }
    }
  }
  CHECK(bad == 0);
}

// The integer block GEMM (AVX-512 VNNI CPUs) must give, for every input, the
// scalar ggml kernel's result on that input's activation blocks bit for bit
// (the tile kernel, and its one pass over a few inputs), or be within
// check_packed's bound (the packed kernel).
void check_block_gemm(const TestMatrix& w, const std::vector<float>& X, int64_t M, const std::vector<float>& Y) {
  if (quant_gemm_packed(static_cast<size_t>(M)) && !quant_gemm_few(w.m.type, static_cast<size_t>(M))) {
    return check_packed(w, X, M, Y);
  }
  const int64_t rows = w.m.rows, cols = w.m.cols;
  const DType t = w.m.type;
  if (avx2_lanes_takes(t, static_cast<size_t>(M))) {
    // The 256-bit inputs-in-lanes kernel: its reference's bits (kernels/quant/gemm_avx2_lanes.h).
    const size_t ab = act_bytes(t, static_cast<size_t>(cols));
    std::vector<uint8_t> xs(ab * static_cast<size_t>(M));
    for (int64_t m = 0; m < M; ++m) {
      quantize_activation(t, X.data() + m * cols, static_cast<size_t>(cols), xs.data() + static_cast<size_t>(m) * ab);
    }
    std::vector<float> ref(Y.size());
    avx2_lanes_gemm_scalar(t, w.bytes.data(), static_cast<size_t>(cols), xs.data(), static_cast<size_t>(M), ref.data(),
                           static_cast<size_t>(rows), static_cast<size_t>(rows));
    int64_t differ = 0;
    for (size_t i = 0; i < Y.size(); ++i) differ += !(Y[i] == ref[i]);
    CHECK(differ == 0);
    return;
  }
  std::vector<uint8_t> xa(act_bytes(t, static_cast<size_t>(cols)));
  std::vector<float> y(static_cast<size_t>(rows));
  int64_t bad = 0;
  for (int64_t m = 0; m < M; ++m) {
    quantize_activation(t, X.data() + m * cols, static_cast<size_t>(cols), xa.data());
    quant_dot_rows_scalar(t, w.bytes.data(), static_cast<size_t>(cols), xa.data(), y.data(), static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      if (!(Y[m * rows + r] == y[r]) && bad++ < 3) CHECK_MESSAGE(false, "m=", m, " r=", r, " got ", Y[m * rows + r], " want ", y[r]);
    }
  }
  CHECK(bad == 0);
}

void check_batch(const TestMatrix& w, int64_t M, int threads) {
  const int64_t rows = w.m.rows, cols = w.m.cols;
  const auto X = make_inputs(M, cols, static_cast<uint32_t>(M + cols));
  std::vector<float> Y(static_cast<size_t>(M * rows), NAN);
  with_threads(threads, [&] { matmul(w.m, X.data(), M, Y.data()); });
  if (detail::block_gemm_type(w.m.type, M)) return check_block_gemm(w, X, M, Y);
  if (per_input(w.m.type, M)) {
    std::vector<float> y(static_cast<size_t>(rows));
    for (int64_t m = 0; m < M; ++m) {
      matvec(w.m, X.data() + m * cols, y.data());
      for (int64_t r = 0; r < rows; ++r) CHECK(Y[m * rows + r] == y[r]);
    }
    return;
  }
  check_result(w, batch_inputs(w.m.type, X, M, cols), M, Y, extra_tolerance(w.m.type, M));
}

}  // namespace

TEST_CASE("matmul of every block type matches the fp64 reference at every batch path") {
  std::mt19937 g(11);
  std::vector<DType> types(std::begin(kTypes), std::end(kTypes));
  types.push_back(DType::Q8_0);
  for (DType t : types) {
    CAPTURE(dtype_name(t));
    // Columns: one pass; several passes (the bf16 kernel's passes of at most
    // 768 columns, whole super-blocks: 1280 = 768 + 512); 2304 = 3 x 768.
    const std::vector<int64_t> cols_list = dtype_block_values(t) == 32 ? std::vector<int64_t>{64, 608, 2080}
                                                                      : std::vector<int64_t>{256, 1280, 2304};
    for (int64_t cols : cols_list) {
      // 43 rows: row blocks of every kernel plus a partial one.
      const TestMatrix w = random_matrix(t, 43, cols, g);
      // The integer block GEMM where the CPU has it (packed kernel from
      // kQuantGemmPackedMinInputs, then the tile kernel at every size), then
      // the other paths.
      // Modes: 0 the default kernels (inputs-in-lanes for 8-16 inputs of the
      // 32-value types and 12-16 of the K-quants, packed otherwise), 3 the
      // packed kernel at every batch.
      for (int mode : {0, 3, 1, 2}) {
        detail::set_block_gemm(mode != 2);
        set_quant_gemm_packed(mode == 0 || mode == 3);
        set_quant_gemm_lanes(mode == 0);
        set_avx2_lanes(mode == 0);
        for (int64_t M : {2, 3, 5, 16, 17, 33, 64, 300}) {
          for (int threads : {1, 2}) {
            CAPTURE(cols);
            CAPTURE(mode);
            CAPTURE(M);
            CAPTURE(threads);
            check_batch(w, M, threads);
          }
        }
      }
      detail::set_block_gemm(true);
      set_quant_gemm_packed(true);
      set_quant_gemm_lanes(true);
      set_avx2_lanes(true);
    }
  }
}

TEST_CASE("the inputs-in-lanes kernel equals the packed kernel bit for bit") {
  // The same f32 operations per output in the same order, whichever of the
  // two lays the rows or the inputs along the lanes: row counts with partial
  // 8-row tiles and 16-row blocks, short and long rows, 8 to 16 inputs. And a
  // batch of the packed kernel whose last panel (of the block GEMM's slices,
  // 234 inputs at 2080 columns) has 12 inputs, which stay packed.
  // The K-quants the same from 12 inputs (11: the few-input pass both times),
  // at one, six and nine super-blocks per row.
  std::mt19937 g(23);
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::IQ4_NL, DType::Q8_0, DType::Q2_K,
                  DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS}) {
    if (!quant_gemm_lanes(t, 16)) continue;  // no AVX-512 VNNI here
    CAPTURE(dtype_name(t));
    const bool k = dtype_block_values(t) == 256;
    const std::vector<int64_t> widths = k ? std::vector<int64_t>{256, 1536, 2304} : std::vector<int64_t>{32, 608, 2080};
    for (int64_t cols : widths) {
      for (int64_t rows : {5, 43}) {
        const TestMatrix w = random_matrix(t, rows, cols, g);
        for (int64_t M : {8, 11, 12, 16, 246}) {
          if (M == 246 && cols != widths.back()) continue;
          for (int threads : {1, 2}) {
            CAPTURE(cols);
            CAPTURE(rows);
            CAPTURE(M);
            CAPTURE(threads);
            const auto X = make_inputs(M, cols, static_cast<uint32_t>(M * 7 + rows));
            std::vector<float> lanes(static_cast<size_t>(M * rows), NAN), packed(lanes.size(), NAN);
            with_threads(threads, [&] { matmul(w.m, X.data(), M, lanes.data()); });
            set_quant_gemm_lanes(false);
            with_threads(threads, [&] { matmul(w.m, X.data(), M, packed.data()); });
            set_quant_gemm_lanes(true);
            int64_t differ = 0;
            for (size_t i = 0; i < lanes.size(); ++i) differ += !(lanes[i] == packed[i]);
            CHECK(differ == 0);
          }
        }
      }
    }
  }
}

TEST_CASE("the integer block GEMM equals the scalar ggml kernel per input at tile-unfriendly shapes") {
  std::mt19937 g(16);
  std::vector<DType> types(std::begin(kTypes), std::end(kTypes));
  types.push_back(DType::Q8_0);
  for (DType t : types) {
    if (!detail::block_gemm_type(t, 61)) continue;  // no AVX-512 VNNI here
    CAPTURE(dtype_name(t));
    // Rows of one tile minus one, of several row blocks (and a partial one),
    // and columns past one group of 16 scale blocks (32-value types). The
    // K-quants' 2 .. 11 inputs take one pass (9 and 11: two groups of inputs
    // over blocks of rows).
    const int64_t cols = dtype_block_values(t) == 32 ? 1056 : 3072;
    for (int64_t rows : {3, 5, 203}) {
      const TestMatrix w = random_matrix(t, rows, cols, g);
      for (int64_t M : {2, 7, 9, 11, 61}) {
        for (int threads : {1, 2}) {
          CAPTURE(rows);
          CAPTURE(M);
          CAPTURE(threads);
          if (!detail::block_gemm_type(t, M)) continue;  // the small-batch kernel's bf16 path
          const auto X = make_inputs(M, cols, static_cast<uint32_t>(M + rows));
          std::vector<float> Y(static_cast<size_t>(M * rows), NAN);
          with_threads(threads, [&] { matmul(w.m, X.data(), M, Y.data()); });
          check_block_gemm(w, X, M, Y);
        }
      }
    }
  }
}

TEST_CASE("block-type batches are the same on 1 and 2 threads, and inside a parallel region") {
  std::mt19937 g(12);
  for (DType t : {DType::Q4_0, DType::Q4_K, DType::Q6_K, DType::IQ4_XS}) {
    CAPTURE(dtype_name(t));
    const TestMatrix w = random_matrix(t, 130, 1024, g);
    for (int64_t M : {5, 16, 40}) {
      CAPTURE(M);
      const auto X = make_inputs(M, w.m.cols, 3);
      std::vector<float> y1(static_cast<size_t>(M * w.m.rows)), y2(y1.size()), y3(y1.size());
      with_threads(1, [&] { matmul(w.m, X.data(), M, y1.data()); });
      with_threads(2, [&] { matmul(w.m, X.data(), M, y2.data()); });
      CHECK(y1 == y2);
      // In a parallel region (no oneDNN there: the small-batch kernel on slices).
#pragma omp parallel num_threads(2)
      {
#pragma omp single
        matmul(w.m, X.data(), M, y3.data());
      }
      if (M <= kMatmulSmallMaxM || detail::block_gemm_type(t, M)) {
        CHECK(y3 == y1);
      } else if (!per_input(t, kMatmulSmallMaxM)) {
        check_result(w, batch_inputs(t, X, M, w.m.cols), M, y3, extra_tolerance(t, kMatmulSmallMaxM));
      }
    }
  }
}

TEST_CASE("matmul_multi of mixed block types equals separate matmuls") {
  std::mt19937 g(13);
  const TestMatrix a = random_matrix(DType::Q4_K, 40, 512, g), b = random_matrix(DType::Q6_K, 24, 512, g),
                   c = random_matrix(DType::Q5_0, 9, 512, g);
  const Matrix Ws[3] = {a.m, b.m, c.m};
  for (int64_t M : {4, 16, 33}) {
    CAPTURE(M);
    const auto X = make_inputs(M, 512, 5);
    std::vector<float> Y[3], R[3];
    float* ys[3];
    for (int i = 0; i < 3; ++i) {
      Y[i].assign(static_cast<size_t>(M * Ws[i].rows), NAN);
      R[i].assign(Y[i].size(), NAN);
      ys[i] = Y[i].data();
      matmul(Ws[i], X.data(), M, R[i].data());
    }
    matmul_multi(Ws, ys, 3, X.data(), M);
    for (int i = 0; i < 3; ++i) CHECK(Y[i] == R[i]);
  }
}

TEST_CASE("decode_rows_bf16 gives decode_rows_f32's values rounded to bf16 (nearest even)") {
  std::mt19937 g(14);
  for (DType t : {DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                  DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS}) {
    CAPTURE(dtype_name(t));
    const TestMatrix w = dtype_is_quantized(t) && t != DType::Q8_0 ? random_matrix(t, 5, 512, g)
                                                                   : make_matrix(t, 5, 512, 3);
    std::vector<uint16_t> got(5 * 512, 0xFFFF), want(5 * 512);
    std::vector<float> f(5 * 512);
    detail::decode_rows_f32(w.m, 1, 4, f.data());
    detail::round_to_bf16(f.data(), 3 * 512, want.data());
    if (!detail::decode_rows_bf16(w.m, 1, 4, got.data())) continue;  // no AVX512_BF16 here
    want.resize(3 * 512);
    got.resize(3 * 512);
    CHECK(got == want);
  }
}

TEST_CASE("decode_rows_f32_blocks gives decode_row's values exactly") {
  std::mt19937 g(15);
  for (DType t : kTypes) {
    CAPTURE(dtype_name(t));
    const TestMatrix w = random_matrix(t, 5, 512, g);
    std::vector<float> got(3 * 512, NAN);
    if (!detail::decode_rows_f32_blocks(w.m, 1, 4, got.data())) continue;  // no AVX-512 decoders here
    const std::vector<float> want(w.decoded.begin() + 512, w.decoded.begin() + 4 * 512);
    CHECK(got == want);
  }
}

TEST_CASE("the packed kernel's tables refuse types and row lengths they cannot take, and calls off their batch") {
  std::vector<uint8_t> xa(act_bytes(DType::Q4_K, 512));
  // Per input: 3 floats per sub-block and the activation bytes (one float per 4).
  std::vector<float> tables(3 * 512 / 16 + 512 / 4);
  CHECK_THROWS_WITH(quant_gemm_tables(DType::F32, xa.data(), 512, 1, tables.data()),
                    doctest::Contains("quant_gemm_tables: 512 columns of f32"));
  CHECK_THROWS_WITH(quant_gemm_tables(DType::Q4_K, xa.data(), 96, 1, tables.data()),
                    doctest::Contains("quant_gemm_tables: 96 columns of q4_k"));
  if (quant_gemm_available(DType::Q4_K)) {
    CHECK(quant_gemm_table_floats(DType::Q4_K, 512, 1) == 3 * 512 / 32 + 512 / 4);
    CHECK(quant_gemm_table_floats(DType::Q6_K, 512, 7) == 7 * (3 * 512 / 16 + 512 / 4));
    CHECK(quant_gemm_table_floats(DType::Q4_0, 512, 20) == 20 * (3 * 512 / 32 + 512 / 4));
    // The lanes layout of the 32-value types: 16 input lanes whatever the batch.
    CHECK(quant_gemm_table_floats(DType::Q4_0, 512, 9) == 16 * (3 * 512 / 32 + 512 / 4));
    CHECK(quant_gemm_table_floats(DType::Q4_0, 512, 5) == 5 * (3 * 512 / 32 + 512 / 4));
    CHECK(quant_gemm_table_floats(DType::Q4_K, 512, 9) == 9 * (3 * 512 / 32 + 512 / 4));
    CHECK(quant_gemm_table_floats(DType::Q4_K, 512, 12) == 16 * (3 * 512 / 32 + 512 / 4));
    CHECK_NOTHROW(quant_gemm_tables(DType::Q4_K, xa.data(), 512, 1, tables.data()));
    // A call that does not match the batch the tables were made for: a clear error.
    if (quant_gemm_lanes(DType::Q4_0, 16)) {
      std::vector<uint8_t> xa16(16 * act_bytes(DType::Q4_0, 512));
      std::vector<float> lanes(quant_gemm_table_floats(DType::Q4_0, 512, 16));
      quant_gemm_tables(DType::Q4_0, xa16.data(), 512, 16, lanes.data());
      std::vector<uint8_t> rows(dtype_row_bytes(DType::Q4_0, 512));
      std::vector<float> y(16);
      CHECK_THROWS_WITH(quant_gemm(DType::Q4_0, rows.data(), 512, xa16.data(), 8, y.data(), 1, 1, lanes.data(), 16),
                        doctest::Contains("8 of a batch of 16 inputs in the inputs-in-lanes layout"));
      CHECK_THROWS_WITH(quant_gemm(DType::Q4_0, rows.data(), 512, xa16.data(), 16, y.data(), 1, 1, lanes.data(), 8),
                        doctest::Contains("16 inputs from tables made for 8"));
      CHECK_NOTHROW(quant_gemm(DType::Q4_0, rows.data(), 512, xa16.data(), 16, y.data(), 1, 1, lanes.data(), 16));
      // The K-quants' lanes layout (from 12 inputs) the same.
      std::vector<uint8_t> xk(16 * act_bytes(DType::Q4_K, 512));
      std::vector<float> lanes_k(quant_gemm_table_floats(DType::Q4_K, 512, 16));
      quant_gemm_tables(DType::Q4_K, xk.data(), 512, 16, lanes_k.data());
      std::vector<uint8_t> row_k(dtype_row_bytes(DType::Q4_K, 512));
      CHECK_THROWS_WITH(quant_gemm(DType::Q4_K, row_k.data(), 512, xk.data(), 12, y.data(), 1, 1, lanes_k.data(), 16),
                        doctest::Contains("12 of a batch of 16 inputs in the inputs-in-lanes layout"));
      CHECK_NOTHROW(quant_gemm(DType::Q4_K, row_k.data(), 512, xk.data(), 16, y.data(), 1, 1, lanes_k.data(), 16));
    }
  } else {
    // No packed kernel on this CPU: a clear error, not garbage.
    CHECK_THROWS_WITH(quant_gemm_tables(DType::Q4_K, xa.data(), 512, 1, tables.data()),
                      doctest::Contains("no packed kernel"));
  }
}

// Inputs quantized ahead (QuantizedInputs), as a batched decode step's norm
// and activation passes do, each thread its own rows: the same outputs bit for
// bit as the block GEMM quantizing them itself, and what it reads where it
// takes them (a stale object shows in the outputs).
TEST_CASE("inputs quantized ahead give the block GEMM's outputs bit for bit, and are what it reads") {
  std::mt19937 g(14);
  const int64_t cols = 512;
  TestMatrix ms[5] = {random_matrix(DType::Q4_K, 40, cols, g), random_matrix(DType::Q6_K, 24, cols, g),
                      random_matrix(DType::Q5_0, 9, cols, g), random_matrix(DType::Q4_1, 20, cols, g),
                      random_matrix(DType::Q8_0, 33, cols, g)};
  // A row-group copy of a Q5_0 matrix (what the loader lays out for the VNNI kernels).
  const TestMatrix rg = random_matrix(DType::Q5_0, 48, cols, g);
  std::vector<uint8_t> grouped(rg.bytes.size());
  pack_row_groups(DType::Q5_0, rg.bytes.data(), 48, cols, grouped.data());
  Matrix rgm{grouped.data(), DType::Q5_0, 48, cols};
  rgm.row_groups = true;
  const Matrix Ws[6] = {ms[0].m, ms[1].m, ms[2].m, ms[3].m, ms[4].m, rgm};
  for (int64_t M : {2, 3, 8, 12, 16}) {
    CAPTURE(M);
    const auto X = make_inputs(M, cols, 6), X2 = make_inputs(M, cols, 7);
    bool any = false;
    for (const Matrix& W : Ws) any |= detail::matmul_takes_block_gemm(W, M);
    QuantizedInputs xq;
    xq.reserve(Ws, 6, M);
    CHECK(xq.empty() == !any);
    std::vector<float> Y[6], R[6], S[6];
    float* ys[6];
    float* ss[6];
    for (int i = 0; i < 6; ++i) {
      Y[i].assign(static_cast<size_t>(M * Ws[i].rows), NAN);
      S[i].assign(Y[i].size(), NAN);
      R[i].assign(Y[i].size(), NAN);
      ys[i] = Y[i].data();
      ss[i] = S[i].data();
    }
    run_team(2, [&] {
      matmul_multi(Ws, ss, 6, X2.data(), M);  // X2's outputs, for the stale check
      int64_t lo = 0, hi = M;
      current_team()->share(M, &lo, &hi);
      xq.quantize_rows(X.data(), lo, hi, Ws, 6);
      current_team()->sync();
      matmul_multi(Ws, ys, 6, X.data(), M, &xq);
    });
    for (int i = 0; i < 6; ++i) {
      CAPTURE(i);
      matmul(Ws[i], X.data(), M, R[i].data());
      CHECK(Y[i] == R[i]);
    }
    // The object says X2 (not X): where the block GEMM takes it, the outputs are X2's.
    if (any) {
      xq.quantize_rows(X2.data(), 0, M, Ws, 6);
      for (int i = 0; i < 6; ++i) {
        CAPTURE(i);
        std::vector<float> y(Y[i].size(), NAN);
        matmul(Ws[i], X.data(), M, y.data(), &xq);
        CHECK((y == (detail::matmul_takes_block_gemm(Ws[i], M) ? S[i] : R[i])));
      }
    }
    // Held for another batch size: not taken.
    QuantizedInputs other;
    other.reserve(Ws, 6, M + 1);
    if (!other.empty()) {
      other.quantize_rows(X2.data(), 0, M, Ws, 6);
      std::vector<float> y(Y[0].size(), NAN);
      matmul(Ws[0], X.data(), M, y.data(), &other);
      CHECK(y == R[0]);
    }
    const std::string outside = "outside the " + std::to_string(M) + " reserved";
    CHECK_THROWS_WITH(xq.quantize_rows(X.data(), 0, M + 1, Ws, 6), doctest::Contains(outside.c_str()));
  }
}

TEST_CASE("QuantizedInputs refuses matrices of unequal columns and null arguments, by name") {
  std::mt19937 g(15);
  const TestMatrix a = random_matrix(DType::Q4_0, 8, 256, g), b = random_matrix(DType::Q4_0, 8, 512, g);
  const Matrix Ws[2] = {a.m, b.m};
  QuantizedInputs xq;
  CHECK_THROWS_WITH(xq.reserve(Ws, 2, 4), doctest::Contains("matrix 1 has 512 columns but matrix 0 has 256"));
  CHECK_THROWS_WITH(xq.reserve(nullptr, 1, 4), doctest::Contains("QuantizedInputs::reserve: bad arguments"));
  CHECK_THROWS_WITH(xq.reserve(Ws, 1, -1), doctest::Contains("QuantizedInputs::reserve: bad arguments"));
  xq.reserve(Ws, 1, 4);
  CHECK_THROWS_WITH(xq.quantize_rows(nullptr, 0, 2, Ws, 1), doctest::Contains("quantize_rows: null argument"));
  const auto X = make_inputs(4, 256, 8);
  CHECK_THROWS_WITH(xq.quantize_rows(X.data(), 0, 2, nullptr, 1), doctest::Contains("quantize_rows: null argument"));
  CHECK_THROWS_WITH(xq.quantize_rows(X.data(), 3, 2, Ws, 1), doctest::Contains("rows [3, 2) outside the 4 reserved"));
}

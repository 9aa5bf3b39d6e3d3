// Batches (matmul, M >= 2) of the ggml block types on CPUs with AVX-512 VNNI
// or AVX2: ggml's integer arithmetic, each input quantized once per call. On
// AVX2 (and AVX-512 without VNNI) the tile kernel only
// (kernels/quant/gemm_hwy-inl.h; quant_gemm_packed is false there). From
// kQuantGemmPackedMinInputs inputs the packed-weight kernel
// (kernels/quant/gemm_vnni_packed-inl.h; each output within f32 rounding of
// the decode matvec's), below it the tile kernel (gemm_vnni-inl.h; each output
// equal to the decode matvec's, quant_dot_rows, bit for bit).
//
// Work items are (matrix, block of rows, panel of inputs), panels fastest: a
// thread taking a range of items keeps its rows' weights (about
// kMinChunkBytes) in L2 while the panels' activation blocks (about
// kPanelBytes each) stream past; within an item the kernel walks the inputs
// in tiles of 4 and the rows in tiles of 4 below them, so each input tile's
// blocks stay in L1. Which thread computes an item does not change its result.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/error.h"
#include "kernels/linear_internal.h"
#include "kernels/quant/gemm_amx.h"
#include "kernels/quant/gemm_avx2_lanes.h"
#include "kernels/quant/vec_dot_avxvnni.h"
#include "kernels/quant/gemm_arm_dotprod.h"
#include "kernels/quant/gemm_arm_i8mm.h"
#include "kernels/quant/row_groups.h"
#include "kernels/quant/vec_dot.h"
#include "kernels/threads/block_queue.h"

namespace qkv {
namespace detail {

namespace {

bool g_block_gemm_allowed = true;

// Whether W's batch of M takes the tile kernel's one pass over a few inputs.
bool takes_few(const Matrix& W, int64_t M) { return !W.row_groups && quant_gemm_few(W.type, static_cast<size_t>(M)); }

// Whether W's batch of M takes the 256-bit inputs-in-lanes kernel
// (kernels/quant/gemm_avx2_lanes.h: CPUs without AVX-512 VNNI; rows or row groups).
bool takes_lanes8(const Matrix& W, int64_t M) { return avx2_lanes_takes(W.type, static_cast<size_t>(M)); }

// Activation bytes of one panel of inputs (L2 holds a panel and a row block).
constexpr size_t kPanelBytes = 128 * 1024;

// Activation bytes of one panel for the packed kernel, which decodes a row
// block once per panel: larger panels, fewer decodes. Its tiles stream the
// panel's tables from L2 or L3 well enough: 1.1B Q4_K_M prefill 256 (Zen 5
// guest, 2 threads, three alternated runs) went from 418-449 tok/s with 512
// KiB (2 panels per matrix, ffn_down's 4) to 446-481 with 2 MiB (one
// panel each); 8 MiB gave the same, 436-467.
constexpr size_t kPackedPanelBytes = 2048 * 1024;

// The inputs quantized per activation type the matrices need (here, or ahead
// in a QuantizedInputs), and with `packed` the packed kernel's tables per
// weight type.
struct BatchActivations {
  std::vector<uint8_t> buf[3];                       // indexed by ActType: quantized here
  const uint8_t* act[3] = {nullptr, nullptr, nullptr};  // buf's or the QuantizedInputs'
  size_t bytes[3] = {0, 0, 0};                       // per input
  // Per weight type and layout (row groups take the packed kernel's tables
  // whatever the batch, rows may take the inputs-in-lanes kernel's).
  std::vector<std::pair<DType, bool>> table_types;
  std::vector<std::vector<float>> tables;  // [i]: for weights of table_types[i]
  std::vector<size_t> table_floats;        // [i]: per input
  const float* tables_for(const Matrix& W, int64_t m0) const {
    for (size_t i = 0; i < table_types.size(); ++i) {
      if (table_types[i] == std::make_pair(W.type, W.row_groups)) return tables[i].data() + static_cast<size_t>(m0) * table_floats[i];
    }
    return nullptr;
  }
  void prepare(const Matrix* Ws, int count, const float* X, int64_t M, bool packed, const QuantizedInputs* xq) {
    const size_t cols = static_cast<size_t>(Ws[0].cols);
    bool done[3] = {false, false, false};
    for (int i = 0; i < count; ++i) {
      const DType t = Ws[i].type;
      const int a = static_cast<int>(act_type(t));
      if (done[a]) continue;
      done[a] = true;
      bytes[a] = act_bytes(t, cols);
      act[a] = xq != nullptr ? xq->for_type(t, M, Ws[0].cols) : nullptr;
      if (act[a] != nullptr) continue;
      buf[a].resize(bytes[a] * static_cast<size_t>(M));
      act[a] = buf[a].data();
      uint8_t* out = buf[a].data();
      const size_t n = bytes[a];
      // Inside a region or team every thread has its own copy (as matvec_multi).
      // Prefill-sized batches quantize in a region of their own; at batched
      // decode sizes that region's join cost more than the work (perf, 16
      // inputs of 2048 on the busy 2-core machine: half the call spent
      // waiting in libgomp).
#pragma omp parallel for if (M * Ws[0].cols >= (int64_t{1} << 18) && !omp_in_parallel() && current_team() == nullptr)
      for (int64_t m = 0; m < M; ++m) quantize_activation(t, X + m * Ws[0].cols, cols, out + m * n);
    }
    table_types.clear();
    for (int i = 0; i < count; ++i) {
      const bool lanes8 = takes_lanes8(Ws[i], M);
      if (!lanes8 && (!packed || takes_few(Ws[i], M))) continue;
      const DType t = Ws[i].type;
      const auto key = std::make_pair(t, Ws[i].row_groups);
      if (std::find(table_types.begin(), table_types.end(), key) != table_types.end()) continue;
      const size_t k = table_types.size();
      table_types.push_back(key);
      if (tables.size() <= k) tables.resize(k + 1), table_floats.resize(k + 1);
      if (lanes8) {
        prepare_lanes8(t, cols, M, k);
        continue;
      }
      // Floats per input of the packed layout (its tiles start at multiples of
      // them); a batch small enough for the lanes layout is one panel.
      const bool lanes = !Ws[i].row_groups;
      table_floats[k] = quant_gemm_table_floats(t, cols, 1);
      tables[k].resize(quant_gemm_table_floats(t, cols, static_cast<size_t>(M), lanes));
      const uint8_t* in = act[static_cast<int>(act_type(t))];
      const size_t ab = bytes[static_cast<int>(act_type(t))];
      // The packed layout's tiles are independent: a prefill-sized batch
      // builds them in a region (on one thread they were 1.6% of a
      // 256-token prefill of 1.1B Q4_K_M, the other thread waiting).
      const int64_t C = static_cast<int64_t>(kQuantGemmTileInputs);
      if (!(lanes && quant_gemm_lanes(t, static_cast<size_t>(M))) && M * Ws[i].cols >= (int64_t{1} << 18) &&
          !omp_in_parallel() && current_team() == nullptr) {
#pragma omp parallel for schedule(static)
        for (int64_t m0 = 0; m0 < M; m0 += C) {
          quant_gemm_tables(t, in + static_cast<size_t>(m0) * ab, cols, static_cast<size_t>(std::min(C, M - m0)),
                            tables[k].data() + static_cast<size_t>(m0) * table_floats[k], false);
        }
      } else {
        quant_gemm_tables(t, in, cols, static_cast<size_t>(M), tables[k].data(), lanes);
      }
    }
  }
  // The 256-bit inputs-in-lanes layout of t's inputs in tables[k]: groups of
  // 8, independent, so a prefill-sized batch lays them out in a region.
  void prepare_lanes8(DType t, size_t cols, int64_t M, size_t k) {
    table_floats[k] = avx2_lanes_table_floats(t, cols);
    const int64_t G = static_cast<int64_t>(kAvx2LanesGroup), groups = (M + G - 1) / G;
    tables[k].resize(table_floats[k] * static_cast<size_t>(groups * G));
    const uint8_t* in = act[static_cast<int>(act_type(t))];
    const size_t ab = bytes[static_cast<int>(act_type(t))];
#pragma omp parallel for schedule(static) if (M * static_cast<int64_t>(cols) >= (int64_t{1} << 18) && \
                                                  !omp_in_parallel() && current_team() == nullptr)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t m0 = g * G;
      avx2_lanes_tables(t, in + static_cast<size_t>(m0) * ab, cols, static_cast<size_t>(std::min(G, M - m0)),
                        tables[k].data() + static_cast<size_t>(m0) * table_floats[k]);
    }
  }
};

}  // namespace

bool block_gemm_type(DType t, int64_t M) {
#if defined(__aarch64__)
  // Cores with i8mm, or else the dot product: every batch of the block types
  // (kernels/quant/gemm_arm_i8mm.h, gemm_arm_dotprod.h).
  if (g_block_gemm_allowed && (arm_i8mm_takes(t) || arm_dotprod_gemm_takes(t))) return true;
#endif
  if (!g_block_gemm_allowed || !dtype_is_quantized(t) || !quant_gemm_rows_available(t)) return false;
  // Without the packed kernel (AVX2, AVX-512 without VNNI: the 256-bit tile
  // kernel only), the 32-value types take prefill-sized batches only. qkv
  // bench --synthetic 1.1B -t 2 under QKV_ISA=avx2 (2-core Zen 4 guest, load
  // average 5-9 from other work), against oneDNN f32 and one matvec per
  // input: Q4_0 prefill 256 at 19.0 against 10.8 tok/s but 16 sequences at
  // 8.1 against 11.6; Q4_K_M prefill 15.6 against 14.7, 16 sequences 12.9
  // against 11.7.
  // From kAvx2LanesMinInputs the 256-bit inputs-in-lanes kernel takes them
  // (kernels/quant/gemm_avx2_lanes.h), and on AVX-VNNI CPUs the {vex}
  // vpdpbusd tiles below that.
  if (!quant_gemm_available(t) && dtype_block_values(t) == 32 && M <= kMatmulSmallMaxM && !avxvnni_takes(t) &&
      !avx2_lanes_takes(t, static_cast<size_t>(M))) {
    return false;
  }
  if (quant_gemm_few(t, static_cast<size_t>(M))) return true;
  // Batches too small for the packed kernel go input by input through the
  // decode matvec (kernels/linear.cc); Q8_0's own matvec is not ggml's.
  if (t != DType::Q8_0 && static_cast<size_t>(M) < kQuantGemmPackedMinInputs) return false;
  // The packed kernel wherever it applies (bench_linear
  // '^matmul(_vnni_tile)?/q4_0/5632x2048/16/2': 1.23 against 3.93 ms). With
  // it off, the tile kernel's 32-value blocks cost one f32 fused multiply-add
  // per 32 values and lane half (ggml's arithmetic): at batched-decode sizes
  // the small-batch kernel's bf16 dot products on decoded tiles were faster
  // where the CPU has them (matmul/q4_0/2048x768/16/1, CPU time: 0.58 ms here,
  // 0.48 ms matmul_tiles), the K-quants not (Q4_K 0.50 vs 0.61, Q6_K 0.38 vs
  // 0.48); prefill sizes take the block GEMM always (Q4_0 5632x2048, 512
  // inputs, 2 threads: 32-38 GFLOP/s against oneDNN f32's 12-19).
  return M > kMatmulSmallMaxM || dtype_block_values(t) != 32 || matmul_small_precision(t) != GemmPrecision::kBF16 ||
         quant_gemm_packed(static_cast<size_t>(M));
}

void set_block_gemm(bool allowed) { g_block_gemm_allowed = allowed; }

bool matmul_takes_block_gemm(const Matrix& W, int64_t M) {
  return M >= 2 && block_gemm_type(W.type, M) &&
         (!W.row_groups || quant_gemm_packed(static_cast<size_t>(M)) || takes_lanes8(W, M));
}

void matmul_block_gemm(const Matrix* Ws, float* const* Ys, int count, const float* X, int64_t M,
                       const QuantizedInputs* xq) {
  // The packed kernel decodes a row block once per panel for all its inputs
  // (groups of 32 rows); the tile kernel re-decodes each block per 4 inputs.
  // A few inputs of the 256-value types take the tile kernel's one pass
  // (kernels/quant/vec_dot.h, takes_few), whichever matrices share the call.
  // On AMX-INT8 CPUs batches of kQuantGemmAmxMinInputs take the AMX kernel
  // (kernels/quant/gemm_amx.h) when every matrix of the call can: blocks of
  // its 16-row tiles, panels of its 16-input tiles, no packed tables.
  bool all_few = true, amx = true;
  for (int i = 0; i < count; ++i) all_few = all_few && takes_few(Ws[i], M);
  for (int i = 0; i < count; ++i) amx = amx && quant_gemm_amx_takes(Ws[i].type, static_cast<size_t>(M), Ws[i].row_groups);
  const bool packed = !all_few && !amx && quant_gemm_packed(static_cast<size_t>(M));
  // (Row groups in the lanes kernel: whole groups.)
  bool any_groups = false;
  for (int i = 0; i < count; ++i) any_groups = any_groups || Ws[i].row_groups;
  const int64_t row_unit = amx ? 16 : packed ? 32 : any_groups ? static_cast<int64_t>(kRowGroup) : 4;
  // Inputs per panel: a multiple of the tile kernel's 4, or of the packed
  // kernel's tiles, which its tables are laid out in (kernels/quant/vec_dot.h).
  // (The 256-bit lanes layout: groups of 8.)
  bool any_lanes8 = false;
  for (int i = 0; i < count; ++i) any_lanes8 = any_lanes8 || takes_lanes8(Ws[i], M);
  const int64_t unit = amx ? 16 : packed ? static_cast<int64_t>(kQuantGemmTileInputs) : any_lanes8 ? 8 : 4;
  static thread_local BatchActivations xa_buf;
  xa_buf.prepare(Ws, count, X, M, packed, xq);
  const BatchActivations& xa = xa_buf;  // the caller's copy, read by every thread
  const size_t cols = static_cast<size_t>(Ws[0].cols);
  const size_t panel_bytes = packed || amx ? kPackedPanelBytes : kPanelBytes;
  // Per matrix: rows per block (a multiple of row_unit), inputs per panel (of unit).
  std::vector<int64_t> rows_per(static_cast<size_t>(count)), first(static_cast<size_t>(count) + 1, 0);
  int64_t panel = M;
  size_t bytes = 0;
  for (int i = 0; i < count; ++i) {
    const size_t rb = dtype_row_bytes(Ws[i].type, cols);
    // At most a sixteenth of the rows, so that small matrices still give
    // the threads enough items to balance (batched decode of a 143M model:
    // 768 rows).
    const int64_t by_bytes = static_cast<int64_t>(kMinChunkBytes / std::max<size_t>(1, rb));
    rows_per[i] = std::max<int64_t>(row_unit, std::min(by_bytes, (Ws[i].rows + 15) / 16) / row_unit * row_unit);
    const size_t ab = xa.bytes[static_cast<int>(act_type(Ws[i].type))];
    panel = std::min<int64_t>(panel, std::max<int64_t>(unit, static_cast<int64_t>(panel_bytes / std::max<size_t>(1, ab)) / unit * unit));
    bytes += rb * static_cast<size_t>(Ws[i].rows);
  }
  // The inputs-in-lanes kernel takes its batch whole.
  if (M <= static_cast<int64_t>(kQuantGemmLanesMaxInputs)) panel = M;
  const int64_t panels = (M + panel - 1) / panel;
  for (int i = 0; i < count; ++i) first[i + 1] = first[i] + (Ws[i].rows + rows_per[i] - 1) / rows_per[i] * panels;
  const int64_t items = first[count];
  if (items == 0) return;
  share_blocks(items, 1, bytes * static_cast<size_t>(M) >= kMinParallelBytes, [&](BlockQueue& queue) {
    int64_t b0, b1;
    while (queue.take(&b0, &b1)) {
      for (int64_t it = b0, next; it < b1; it = next) {
        int i = 0;
        while (first[i + 1] <= it) ++i;
        const Matrix& W = Ws[i];
        const int64_t local = it - first[i], rblock = local / panels, p = local % panels;
        // With one panel, the range's consecutive blocks of a matrix go in one
        // call: the packed kernel prepares each block during the previous
        // one's tiles (kernels/quant/gemm_vnni_packed-inl.h).
        next = panels == 1 ? std::min(b1, first[i + 1]) : it + 1;
        const int64_t r0 = rblock * rows_per[i], r1 = std::min(W.rows, (rblock + next - it) * rows_per[i]);
        const int64_t m0 = p * panel, m1 = std::min(M, m0 + panel);
        const int a = static_cast<int>(act_type(W.type));
        const size_t rb = dtype_row_bytes(W.type, cols);
        if (amx) {
          quant_gemm_amx(W.type, static_cast<const uint8_t*>(W.data) + r0 * rb, cols,
                         xa.act[a] + static_cast<size_t>(m0) * xa.bytes[a], static_cast<size_t>(m1 - m0),
                         Ys[i] + m0 * W.rows + r0, static_cast<size_t>(W.rows), static_cast<size_t>(r1 - r0),
                         W.row_groups);
          continue;
        }
        quant_gemm(W.type, static_cast<const uint8_t*>(W.data) + r0 * rb, cols,
                   xa.act[a] + static_cast<size_t>(m0) * xa.bytes[a], static_cast<size_t>(m1 - m0),
                   Ys[i] + m0 * W.rows + r0, static_cast<size_t>(W.rows), static_cast<size_t>(r1 - r0),
                   (packed && !takes_few(W, M)) || takes_lanes8(W, M) ? xa.tables_for(W, m0) : nullptr,
                   static_cast<size_t>(M), W.row_groups);
      }
    }
  });
}

}  // namespace detail

void QuantizedInputs::reserve(const Matrix* Ws, int count, int64_t M) {
  QKV_CHECK(M >= 0 && count >= 0 && (Ws != nullptr || count == 0), "QuantizedInputs::reserve: bad arguments");
  types_.clear();
  M_ = M;
  cols_ = count > 0 ? Ws[0].cols : 0;
  bool held[3] = {false, false, false};
  for (int i = 0; i < count; ++i) {
    QKV_CHECK(Ws[i].cols == cols_, "QuantizedInputs::reserve: matrix ", i, " has ", Ws[i].cols,
              " columns but matrix 0 has ", cols_);
    if (cols_ == 0 || !detail::matmul_takes_block_gemm(Ws[i], M)) continue;
    const int a = static_cast<int>(act_type(Ws[i].type));
    if (held[a]) continue;
    held[a] = true;
    types_.push_back(Ws[i].type);
  }
  if (bufs_.size() < types_.size()) bufs_.resize(types_.size());
  for (size_t k = 0; k < types_.size(); ++k) {
    bufs_[k].resize(act_bytes(types_[k], static_cast<size_t>(cols_)) * static_cast<size_t>(M));
  }
}

void QuantizedInputs::quantize_rows(const float* X, int64_t m0, int64_t m1, const Matrix* Ws, int count) {
  QKV_CHECK(0 <= m0 && m0 <= m1 && m1 <= M_, "QuantizedInputs::quantize_rows: rows [", m0, ", ", m1,
            ") outside the ", M_, " reserved");
  QKV_CHECK((X != nullptr || m0 == m1) && (Ws != nullptr || count == 0), "QuantizedInputs::quantize_rows: null argument");
  const size_t cols = static_cast<size_t>(cols_);
  for (size_t k = 0; k < types_.size(); ++k) {
    bool taken = false;
    for (int i = 0; i < count && !taken; ++i) {
      taken = Ws[i].cols == cols_ && detail::matmul_takes_block_gemm(Ws[i], M_) &&
              act_type(Ws[i].type) == act_type(types_[k]);
    }
    if (!taken) continue;
    const size_t n = act_bytes(types_[k], cols);
    for (int64_t m = m0; m < m1; ++m) {
      quantize_activation(types_[k], X + m * cols_, cols, bufs_[k].data() + static_cast<size_t>(m) * n);
    }
  }
}

const uint8_t* QuantizedInputs::for_type(DType t, int64_t M, int64_t cols) const {
  if (M != M_ || cols != cols_ || !dtype_is_quantized(t)) return nullptr;
  for (size_t k = 0; k < types_.size(); ++k) {
    if (act_type(types_[k]) == act_type(t)) return bufs_[k].data();
  }
  return nullptr;
}

}  // namespace qkv

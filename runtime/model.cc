#include "runtime/model.h"

#include <sys/mman.h>
#include <unistd.h>

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "kernels/error.h"
#include "kernels/quant/row_groups.h"
#include "runtime/huge_pages.h"

namespace qkv {

namespace {

uint64_t matrix_bytes(const Matrix& m) {
  return static_cast<uint64_t>(m.rows) * dtype_row_bytes(m.type, static_cast<size_t>(m.cols));
}
uint64_t matrix_params(const Matrix& m) { return static_cast<uint64_t>(m.rows) * m.cols; }

// Calls f on every distinct weight matrix (weight_matrices).
template <typename F>
void for_each_weight(const Model& m, F f) {
  for (const Matrix* w : weight_matrices(m)) f(*w);
}

template <typename L, typename M>
std::vector<M*> present(L& l) {
  std::vector<M*> out;
  for (M* w : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_norm, &l.ffn_gate, &l.ffn_up, &l.ffn_down, &l.bq,
               &l.bk, &l.bv, &l.q_norm, &l.k_norm, &l.post_attn_norm, &l.post_ffn_norm, &l.attn_out_norm,
               &l.attn_out_norm_b, &l.layer_out_norm, &l.layer_out_norm_b, &l.bo, &l.ffn_up_b, &l.ffn_down_b}) {
    if (w->data != nullptr) out.push_back(w);
  }
  return out;
}

}  // namespace

// A tied output (same data as the embedding) is listed once; absent ones (an
// encoder's output, a decoder's position_embd) not at all.
std::vector<const Matrix*> weight_matrices(const Model& m) {
  std::vector<const Matrix*> out;
  for (const Matrix* w : {&m.token_embd, &m.output_norm, &m.position_embd, &m.token_types, &m.token_embd_norm,
                          &m.token_embd_norm_b, &m.cls, &m.cls_b, &m.cls_out, &m.cls_out_b}) {
    if (w->data != nullptr) out.push_back(w);
  }
  if (m.output.data != nullptr && m.output.data != m.token_embd.data) out.push_back(&m.output);
  for (const LayerWeights& l : m.layers) {
    for (const Matrix* w : layer_matrices(l)) out.push_back(w);
  }
  return out;
}

std::vector<const Matrix*> layer_matrices(const LayerWeights& l) { return present<const LayerWeights, const Matrix>(l); }
std::vector<Matrix*> layer_matrices(LayerWeights& l) { return present<LayerWeights, Matrix>(l); }

int lay_out_weights(Model& m, bool row_groups) {
  auto keep = std::make_shared<std::vector<std::shared_ptr<const void>>>();
  keep->push_back(m.storage);
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto map_lo = reinterpret_cast<uintptr_t>(m.file_mapping), map_hi = map_lo + m.file_mapping_bytes;
  auto give_back = [&](uintptr_t lo, uintptr_t hi) {
    void* p = reinterpret_cast<void*>(lo);
    madvise(p, hi - lo, MADV_DONTNEED);
    // A file mapping's dropped pages would come back resident as the
    // kernel maps neighbours of a faulting page (fault-around, large
    // folios) when the norm weights beside them are read; in their own
    // inaccessible mapping they stay out. Nothing reads them any more.
    if (m.file_mapping && lo >= map_lo && hi <= map_hi) mprotect(p, hi - lo, PROT_NONE);
  };
  auto qualifies = [&](const Matrix* w) {
    return row_groups && !w->row_groups && row_groups_chosen(w->type) &&
           w->rows % static_cast<int64_t>(kRowGroup) == 0 && w->rows != 0;
  };
  // Quantized matrices in rows inside a file mapping: copied, so that the
  // kernels stream them from huge pages too (a 4 KiB page of Q4_K weights
  // is streamed in ~0.1 us: 1.1B Q4_K_M decode 2-3% and 143M Q4_K_M 3-5%
  // faster, docs/design.md). Weights built in memory stay where they are.
  auto in_mapping = [&](const Matrix* w) {
    const auto a = reinterpret_cast<uintptr_t>(w->data);
    return m.file_mapping != nullptr && a >= map_lo && a + matrix_bytes(*w) <= map_hi;
  };
  auto copies = [&](const Matrix* w) {
    return !qualifies(w) && !w->row_groups && w->data != nullptr && dtype_is_quantized(w->type) && in_mapping(w);
  };
  auto rounded = [](uint64_t b) { return (b + 63) / 64 * 64; };
  const bool tied = m.output.data == m.token_embd.data;
  // Each matrix's place in the arena first, then the matrices laid out on
  // all threads (they touch disjoint pages of the source and the arena):
  // 1.1B Q4_K_M's 631 MB took ~220 ms on one thread, most of a cold start.
  struct Job {
    Matrix* w;
    bool groups;
    uint64_t offset;  // in the arena
  };
  std::vector<Job> jobs;
  uint64_t total = 0;
  auto plan = [&](Matrix* w) {
    const bool groups = qualifies(w);
    if (!groups && !copies(w)) return;
    jobs.push_back({w, groups, total});
    total += rounded(matrix_bytes(*w));
  };
  for (LayerWeights& l : m.layers) {
    for (Matrix* w : layer_matrices(l)) plan(w);
  }
  plan(&m.output);  // a tied embedding follows it (the decoder gathers its rows)
  if (total == 0) return 0;
  const bool output_laid_out = jobs.back().w == &m.output;
  std::shared_ptr<uint8_t> arena = allocate_huge_pages(total, "laying out the weights");
  keep->push_back(arena);
  auto lay_out = [&](const Job& job) {
    Matrix* w = job.w;
    uint8_t* buf = arena.get() + job.offset;
    const size_t bytes = matrix_bytes(*w), cols = static_cast<size_t>(w->cols), rows = static_cast<size_t>(w->rows);
    // The source's pages that lie wholly inside this matrix: a file
    // mapping's are dropped (re-read if touched), a heap copy's zeroed;
    // nothing reads them once the matrix points at its row groups. They go
    // as the groups are made, about 1 MiB at a time, so that a matrix is
    // never resident twice over (a 32000-row output is 20-55 MB).
    const auto src = reinterpret_cast<uintptr_t>(w->data);
    const uintptr_t lo = (src + page - 1) / page * page, hi = (src + bytes) / page * page;
    const size_t rb = dtype_row_bytes(w->type, cols);
    const size_t chunk = kRowGroup * std::max<size_t>(1, (size_t{1} << 20) / (kRowGroup * rb));
    uintptr_t dropped = lo;
    for (size_t r = 0; r < rows; r += chunk) {
      const size_t n = std::min(chunk, rows - r);
      if (job.groups) {
        pack_row_groups(w->type, static_cast<const uint8_t*>(w->data) + r * rb, n, cols, buf + r * rb);
      } else {
        std::memcpy(buf + r * rb, static_cast<const uint8_t*>(w->data) + r * rb, n * rb);
      }
      const uintptr_t upto = std::min(hi, (src + (r + n) * rb) / page * page);
      if (upto > dropped) {
        give_back(dropped, upto);
        dropped = upto;
      }
    }
    w->data = buf;
    w->row_groups = job.groups;
  };
  std::exception_ptr error;
  std::mutex error_mutex;
  const auto n_jobs = static_cast<int64_t>(jobs.size());
#pragma omp parallel for schedule(dynamic, 1) if (n_jobs > 1 && !omp_in_parallel())
  for (int64_t j = 0; j < n_jobs; ++j) {
    try {
      lay_out(jobs[static_cast<size_t>(j)]);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
  int grouped = 0;
  for (const Job& job : jobs) grouped += job.groups;
  if (output_laid_out && tied) m.token_embd = m.output;
  m.storage = keep;
  return grouped;
}

uint64_t Model::weight_bytes() const {
  uint64_t total = 0;
  for_each_weight(*this, [&](const Matrix& w) { total += matrix_bytes(w); });
  return total;
}

uint64_t Model::parameter_count() const {
  uint64_t total = 0;
  for_each_weight(*this, [&](const Matrix& w) { total += matrix_params(w); });
  return total;
}

}  // namespace qkv

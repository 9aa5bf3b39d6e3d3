#include "kernels/quant/row_groups.h"

#include <cstring>

#include "kernels/error.h"

// The kernels on row groups (row_group_dot) are in kernels/quant/vec_dot.cc
// beside the other block dot products; this file holds the layout.
namespace qkv {

namespace {

struct GroupLayout {
  size_t halves;    // 2-byte fields (d; Q4_1 / Q5_1: d, m; Q4_K / Q5_K: d, dmin)
  size_t half_at;   // where they start in the block (Q6_K: its d at the end)
  size_t words_at;  // where the 4-byte words (the rest of the block) start
  size_t words;
};

bool layout_of(DType t, GroupLayout* out) {
  switch (t) {
    case DType::Q4_1:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K: out->halves = 2; break;
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0:
    case DType::IQ4_NL:
    case DType::Q6_K: out->halves = 1; break;
    default: return false;
  }
  const size_t bb = dtype_block_bytes(t);
  out->half_at = t == DType::Q6_K ? bb - 2 : 0;
  out->words_at = t == DType::Q6_K ? 0 : 2 * out->halves;
  out->words = (bb - 2 * out->halves) / 4;
  return true;
}

void check_groups(const char* what, DType t, size_t n_rows, size_t cols) {
  QKV_CHECK(row_groups_layout(t), what, ": ", dtype_name(t),
            " has no row-group layout (32-value block types, Q4_K, Q5_K, Q6_K)");
  QKV_CHECK(dtype_row_ok(t, cols), what, ": ", cols, " columns of ", dtype_name(t), " (a multiple of ",
            dtype_block_values(t), ")");
  QKV_CHECK(n_rows % kRowGroup == 0, what, ": ", n_rows, " rows (a multiple of ", kRowGroup, ")");
}

// Calls f(row byte offset, group byte offset, size) for every field and word
// of every block of rows [r0, r1) (whole groups, or rows of one group): the
// one map every direction uses.
template <class F>
void for_each_piece(DType t, size_t r0, size_t r1, size_t cols, F&& f) {
  GroupLayout l{};
  layout_of(t, &l);
  const size_t bb = dtype_block_bytes(t), nb = cols / dtype_block_values(t), rb = nb * bb;
  for (size_t row = r0; row < r1; ++row) {
    const size_t g = row / kRowGroup, r = row % kRowGroup;
    for (size_t i = 0; i < nb; ++i) {
      const size_t column = g * kRowGroup * rb + i * kRowGroup * bb;
      const size_t block = row * rb + i * bb;
      for (size_t h = 0; h < l.halves; ++h) f(block + l.half_at + 2 * h, column + h * 32 + 2 * r, size_t{2});
      for (size_t j = 0; j < l.words; ++j) f(block + l.words_at + 4 * j, column + l.halves * 32 + j * 64 + 4 * r, size_t{4});
    }
  }
}

}  // namespace

bool row_groups_layout(DType t) {
  GroupLayout l{};
  return layout_of(t, &l);
}

void pack_row_groups(DType t, const void* rows, size_t n_rows, size_t cols, void* out) {
  check_groups("pack_row_groups", t, n_rows, cols);
  const auto* src = static_cast<const uint8_t*>(rows);
  auto* dst = static_cast<uint8_t*>(out);
  for_each_piece(t, 0, n_rows, cols, [&](size_t row_at, size_t group_at, size_t n) { std::memcpy(dst + group_at, src + row_at, n); });
}

void unpack_row_groups(DType t, const void* groups, size_t n_rows, size_t cols, void* rows) {
  check_groups("unpack_row_groups", t, n_rows, cols);
  const auto* src = static_cast<const uint8_t*>(groups);
  auto* dst = static_cast<uint8_t*>(rows);
  for_each_piece(t, 0, n_rows, cols, [&](size_t row_at, size_t group_at, size_t n) { std::memcpy(dst + row_at, src + group_at, n); });
}

void row_group_row(DType t, const void* groups, size_t cols, size_t r, void* row) {
  check_groups("row_group_row", t, 0, cols);
  const size_t rb = dtype_row_bytes(t, cols);
  const auto* src = static_cast<const uint8_t*>(groups);
  auto* dst = static_cast<uint8_t*>(row);
  // Offsets from row r's own: the map's row offsets start at r * rb.
  for_each_piece(t, r, r + 1, cols, [&](size_t row_at, size_t group_at, size_t n) { std::memcpy(dst + row_at - r * rb, src + group_at, n); });
}

}  // namespace qkv

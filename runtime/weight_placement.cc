#include "runtime/weight_placement.h"

#include "kernels/dtype.h"
#include "kernels/threads/placement.h"

namespace qkv {

int place_weights(const Model& m) {
  int asked = 0;
  for (const Matrix* w : weight_matrices(m)) {
    const size_t bytes = static_cast<size_t>(w->rows) * dtype_row_bytes(w->type, static_cast<size_t>(w->cols));
    asked += place_rows(w->data, bytes, w->rows);
  }
  return asked;
}

}  // namespace qkv

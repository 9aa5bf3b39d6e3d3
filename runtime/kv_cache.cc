#include "runtime/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>

#include "kernels/error.h"
#include "runtime/huge_pages.h"
#include "runtime/kv_encode.h"

namespace qkv {
namespace {

// a * b, or fail naming the quantity when it does not fit in 63 bits (strides are int64).
uint64_t checked_mul(uint64_t a, uint64_t b, const char* what) {
  uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r) || r > uint64_t(std::numeric_limits<int64_t>::max())) {
    fail("KV cache size overflows computing ", what, " (", a, " * ", b, ")");
  }
  return r;
}

void check_config(const KVCacheConfig& c) {
  QKV_CHECK(c.n_layers > 0, "KV cache: n_layers must be > 0 (got ", c.n_layers, ")");
  QKV_CHECK(c.n_kv_heads > 0, "KV cache: n_kv_heads must be > 0 (got ", c.n_kv_heads, ")");
  QKV_CHECK(c.head_dim > 0, "KV cache: head_dim must be > 0 (got ", c.head_dim, ")");
  QKV_CHECK(c.capacity > 0, "KV cache: capacity must be > 0 positions (got ", c.capacity, ")");
  QKV_CHECK(c.n_seqs > 0, "KV cache: n_seqs must be > 0 (got ", c.n_seqs, ")");
  const int t = static_cast<int>(c.type);
  QKV_CHECK(t >= 0 && t <= static_cast<int>(DType::Q8_0), "KV cache: unknown element type ", t);
  QKV_CHECK(dtype_row_ok(c.type, static_cast<size_t>(c.head_dim)), "KV cache: head_dim ", c.head_dim,
            " cannot be stored as ", dtype_name(c.type), " (needs a multiple of ",
            dtype_block_values(c.type), ")");
}

}  // namespace

uint64_t KVCache::bytes_for(const KVCacheConfig& c) {
  check_config(c);
  const uint64_t row = dtype_row_bytes(c.type, static_cast<size_t>(c.head_dim));
  uint64_t total = checked_mul(row, uint64_t(c.capacity), "capacity rows");
  total = checked_mul(total, uint64_t(c.n_kv_heads), "KV heads");
  total = checked_mul(total, uint64_t(c.n_seqs), "sequences");
  total = checked_mul(total, 2, "K and V");
  total = checked_mul(total, uint64_t(c.n_layers), "layers");
  return total;
}

uint64_t KVCache::bytes_per_token() const {
  return uint64_t(row_bytes_) * uint64_t(config_.n_kv_heads) * 2 * uint64_t(config_.n_layers);
}

KVCache::KVCache(const KVCacheConfig& config) : config_(config) {
  const uint64_t total = bytes_for(config);  // validates and checks for overflow
  if (config.memory_limit != 0 && total > config.memory_limit) {
    fail_as(ErrorKind::kOutOfMemory, "KV cache needs ", total, " bytes (", config.n_layers, " layers x ",
            config.n_seqs, " sequences x ", config.n_kv_heads, " KV heads x ", config.capacity, " positions x ",
            config.head_dim, " ", dtype_name(config.type), "), over the memory limit of ", config.memory_limit,
            " bytes");
  }
  row_bytes_ = static_cast<int64_t>(dtype_row_bytes(config.type, static_cast<size_t>(config.head_dim)));
  head_bytes_ = row_bytes_ * config.capacity;
  seq_bytes_ = head_bytes_ * config.n_kv_heads;

  QKV_CHECK(total <= std::numeric_limits<size_t>::max(), "KV cache of ", total,
            " bytes does not fit in the address space");
  storage_ = allocate_small_pages(static_cast<size_t>(total), "KV cache");
  data_ = storage_.get();
  // The bookkeeping is allocated only once the cache itself exists: it is O(layers
  // x sequences), which an absurd configuration could make large too.
  try {
    lengths_.assign(static_cast<size_t>(config.n_seqs), 0);
    stored_.assign(static_cast<size_t>(config.n_seqs * config.n_layers), 0);
  } catch (const std::bad_alloc&) {
    fail("KV cache: cannot allocate the length tables for ", config.n_seqs, " sequences x ",
         config.n_layers, " layers");
  }
}

KVCache::~KVCache() = default;

void KVCache::check_layer(int64_t layer, const char* what) const {
  QKV_CHECK(layer >= 0 && layer < config_.n_layers, "KV cache ", what, ": layer ", layer,
            " out of range (", config_.n_layers, " layers)");
}

void KVCache::check_seq(int64_t seq, const char* what) const {
  QKV_CHECK(seq >= 0 && seq < config_.n_seqs, "KV cache ", what, ": sequence ", seq,
            " out of range (", config_.n_seqs, " sequences)");
}

uint8_t* KVCache::seq_base(int64_t layer, int kv, int64_t seq) const {
  return data_ + ((layer * 2 + kv) * config_.n_seqs + seq) * seq_bytes_;
}

int64_t KVCache::length(int64_t seq) const {
  check_seq(seq, "length");
  return lengths_[static_cast<size_t>(seq)];
}

int64_t KVCache::stored(int64_t layer, int64_t seq) const {
  check_layer(layer, "stored");
  check_seq(seq, "stored");
  return stored_[static_cast<size_t>(layer * config_.n_seqs + seq)];
}

void KVCache::store(int64_t layer, int64_t seq, int64_t pos, int64_t n, const float* k,
                    const float* v) {
  check_layer(layer, "store");
  check_seq(seq, "store");
  const int64_t len = lengths_[static_cast<size_t>(seq)];
  QKV_CHECK(n >= 0, "KV cache store: negative count ", n);
  QKV_CHECK(pos >= 0 && pos <= len, "KV cache store: position ", pos, " of sequence ", seq,
            " is past its length ", len, " (positions must be written in order)");
  QKV_CHECK(n <= config_.capacity - pos, "KV cache store: positions ", pos, "..", pos + n - 1,
            " of sequence ", seq, " exceed the capacity of ", config_.capacity, " positions");
  if (n == 0) return;
  QKV_CHECK(k != nullptr && v != nullptr, "KV cache store: null K or V data");
  const int64_t hkv = config_.n_kv_heads, d = config_.head_dim;
  const float* src[2] = {k, v};
  for (int kv = 0; kv < 2; ++kv) {
    uint8_t* base = seq_base(layer, kv, seq) + pos * row_bytes_;
    for (int64_t h = 0; h < hkv; ++h) {
      // Source rows of one head are kv_dim floats apart; destination rows are
      // contiguous within the head.
      encode_rows(config_.type, src[kv] + h * d, hkv * d, n, d, base + h * head_bytes_);
    }
  }
  int64_t& extent = stored_ref(layer, seq);
  extent = std::max(extent, pos + n);
}

void KVCache::prefetch_store(int64_t layer, int64_t seq, int64_t pos) const {
  if (layer < 0 || layer >= config_.n_layers || seq < 0 || seq >= config_.n_seqs || pos < 0 ||
      pos >= config_.capacity) {
    return;
  }
  for (int kv = 0; kv < 2; ++kv) {
    const uint8_t* row = seq_base(layer, kv, seq) + pos * row_bytes_;
    for (int64_t h = 0; h < config_.n_kv_heads; ++h, row += head_bytes_) {
      // Each line the row touches once (a row need not start a line: Q8_0's 68 bytes).
      const uintptr_t first = reinterpret_cast<uintptr_t>(row) & ~uintptr_t{63};
      for (uintptr_t a = first; a < reinterpret_cast<uintptr_t>(row + row_bytes_); a += 64) {
        __builtin_prefetch(reinterpret_cast<const void*>(a), 1, 3);
      }
    }
  }
}

void KVCache::commit(int64_t seq, int64_t new_length) {
  check_seq(seq, "commit");
  QKV_CHECK(new_length >= 0 && new_length <= config_.capacity, "KV cache commit: length ",
            new_length, " for sequence ", seq, " outside 0..", config_.capacity);
  for (int64_t l = 0; l < config_.n_layers; ++l) {
    const int64_t extent = stored_[static_cast<size_t>(l * config_.n_seqs + seq)];
    QKV_CHECK(new_length <= extent, "KV cache commit: sequence ", seq, " to length ", new_length,
              " but layer ", l, " holds only ", extent, " stored positions (store every layer first)");
  }
  const int64_t old_length = lengths_[static_cast<size_t>(seq)];
  lengths_[static_cast<size_t>(seq)] = new_length;
  // Committing a shorter length forgets the rest, as truncate() does, so a later
  // attend cannot read rows that belonged to the discarded tokens.
  if (new_length < old_length) {
    for (int64_t l = 0; l < config_.n_layers; ++l) {
      int64_t& extent = stored_ref(l, seq);
      extent = std::min(extent, new_length);
    }
  }
}

void KVCache::append(int64_t seq, int64_t n, const float* k, const float* v) {
  check_seq(seq, "append");
  const int64_t len = lengths_[static_cast<size_t>(seq)];
  QKV_CHECK(n >= 0, "KV cache append: negative count ", n);
  // Checked up front so a failing append leaves every layer untouched.
  QKV_CHECK(n <= config_.capacity - len, "KV cache append: ", n, " positions after ", len,
            " in sequence ", seq, " exceed the capacity of ", config_.capacity, " positions");
  if (n == 0) return;
  QKV_CHECK(k != nullptr && v != nullptr, "KV cache append: null K or V data");
  const int64_t layer_floats = n * config_.n_kv_heads * config_.head_dim;
  for (int64_t l = 0; l < config_.n_layers; ++l) {
    store(l, seq, len, n, k + l * layer_floats, v + l * layer_floats);
  }
  commit(seq, len + n);
}

void KVCache::truncate(int64_t seq, int64_t new_length) {
  check_seq(seq, "truncate");
  const int64_t len = lengths_[static_cast<size_t>(seq)];
  QKV_CHECK(new_length >= 0 && new_length <= len, "KV cache truncate: sequence ", seq,
            " to length ", new_length, " but it holds ", len, " positions");
  lengths_[static_cast<size_t>(seq)] = new_length;
  for (int64_t l = 0; l < config_.n_layers; ++l) {
    int64_t& extent = stored_ref(l, seq);
    extent = std::min(extent, new_length);
  }
}

void KVCache::clear(int64_t seq) {
  check_seq(seq, "clear");
  truncate(seq, 0);
}

void KVCache::copy_prefix(int64_t src, int64_t dst, int64_t n) {
  check_seq(src, "copy_prefix (source)");
  check_seq(dst, "copy_prefix (destination)");
  const int64_t src_len = lengths_[static_cast<size_t>(src)];
  QKV_CHECK(n >= 0 && n <= src_len, "KV cache copy_prefix: ", n, " positions from sequence ", src,
            " which holds ", src_len);
  if (src != dst && n > 0) {
    // Each head's positions are contiguous, so a prefix is one block per (layer, K|V, head).
    for (int64_t l = 0; l < config_.n_layers; ++l) {
      for (int kv = 0; kv < 2; ++kv) {
        const uint8_t* from = seq_base(l, kv, src);
        uint8_t* to = seq_base(l, kv, dst);
        for (int64_t h = 0; h < config_.n_kv_heads; ++h) {
          std::memcpy(to + h * head_bytes_, from + h * head_bytes_, static_cast<size_t>(n * row_bytes_));
        }
      }
    }
  }
  lengths_[static_cast<size_t>(dst)] = n;
  for (int64_t l = 0; l < config_.n_layers; ++l) stored_ref(l, dst) = n;
}

KVView KVCache::view(int64_t layer, int kv) const {
  KVView v;
  v.data = seq_base(layer, kv, 0);
  v.type = config_.type;
  v.batch_stride = seq_bytes_;
  v.head_stride = head_bytes_;
  v.row_stride = row_bytes_;
  return v;
}

KVView KVCache::keys(int64_t layer) const {
  check_layer(layer, "keys");
  return view(layer, 0);
}

KVView KVCache::values(int64_t layer) const {
  check_layer(layer, "values");
  return view(layer, 1);
}

void KVCache::attend_decode(int64_t layer, const int64_t* seqs, const int64_t* len, int64_t n,
                            int64_t n_heads, const float* q, float* out, float scale, int64_t window,
                            float softcap) const {
  check_layer(layer, "attend_decode");
  QKV_CHECK(n >= 0, "KV cache attend_decode: negative sequence count ", n);
  if (n == 0) return;
  QKV_CHECK(seqs != nullptr && len != nullptr && q != nullptr && out != nullptr,
            "KV cache attend_decode: null argument");
  const int64_t hkv = config_.n_kv_heads, d = config_.head_dim;
  QKV_CHECK(n_heads > 0 && n_heads % hkv == 0, "KV cache attend_decode: ", n_heads,
            " query heads is not a multiple of the cache's ", hkv, " KV heads");
  for (int64_t i = 0; i < n; ++i) {
    check_seq(seqs[i], "attend_decode");
    const int64_t extent = stored_[static_cast<size_t>(layer * config_.n_seqs + seqs[i])];
    QKV_CHECK(len[i] >= 1 && len[i] <= extent, "KV cache attend_decode: length ", len[i],
              " for sequence ", seqs[i], " but layer ", layer, " holds ", extent,
              " stored positions (store the new token first)");
  }

  // The kernel addresses batch row b at base + b*batch_stride, so any run of
  // sequence ids in arithmetic progression (0,1,2,... being the usual one) is
  // one call with per-row key counts, read in place; other lists split into
  // such runs. Each call parallelizes over (row, KV head, key chunk) itself.
  const KVView kall = view(layer, 0), vall = view(layer, 1);
  const int64_t q_row = n_heads * d;
  int64_t i = 0;
  while (i < n) {
    int64_t j = i + 1;
    // Non-negative steps only, so no stride handed to the kernel is negative.
    const int64_t step = j < n ? seqs[j] - seqs[i] : 0;
    if (step >= 0) {
      while (j < n && seqs[j] - seqs[j - 1] == step) ++j;
    }
    const int64_t rows = j - i;

    AttentionShape shape;
    shape.B = rows;
    shape.Hq = n_heads;
    shape.Hkv = hkv;
    shape.Lq = 1;
    shape.Lk = *std::max_element(len + i, len + j);
    shape.d = d;

    KVView kv[2] = {kall, vall};
    for (KVView& view : kv) {
      view.data = static_cast<const uint8_t*>(view.data) + seqs[i] * seq_bytes_;
      view.batch_stride = step * seq_bytes_;
    }
    QueryView qv{q + i * q_row, q_row, d, q_row};
    OutputView ov{out + i * q_row, q_row, d, q_row};
    // The query is the newest position, so it sees exactly the keys 0..len-1 of
    // its own sequence: a per-row key count is the whole mask.
    AttentionMask mask;
    mask.kv_len_per_batch = len + i;
    // A window needs each query's position (len - 1) as well.
    thread_local std::vector<int64_t> qpos;
    if (window > 0) {
      qpos.assign(len + i, len + j);
      for (int64_t& p : qpos) --p;
      mask.causal = true;
      mask.q_pos0_per_batch = qpos.data();
      mask.window = window;
    }
    AttentionOptions opts;
    opts.scale = scale;
    opts.softcap = softcap;
    attention(shape, qv, kv[0], kv[1], mask, ov, opts);
    i = j;
  }
}

}  // namespace qkv

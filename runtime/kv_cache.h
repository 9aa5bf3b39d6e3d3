// The KV cache: K and V for the model's KV heads only (Hkv, not Hq), per layer,
// for several sequences (slots) of fixed capacity.
//
// Layout (per layer, for K and likewise V):
//   [seq][kv_head][position][row of head_dim values in the cache's DType]
// One KV head's positions of one sequence are contiguous, so the attention
// kernel streams them front to back with no gaps, and every query head of a
// GQA group reads the same contiguous run while it is hot. This maps onto the
// kernel's KVView directly: batch_stride = one sequence, head_stride = capacity
// rows, row_stride = one row; nothing is copied to attend.
//
// Rows are packed (row_stride == dtype_row_bytes(type, head_dim), no padding), so
// bytes() is exactly n_layers * 2 * n_seqs * n_kv_heads * capacity * row bytes:
// padding would only add bytes the streaming reads must skip. The whole cache is
// one anonymous mapping aligned to 2 MiB and advised for transparent huge pages
// (a long KV stream touches fewer TLB entries); its pages are committed by the
// kernel on first write, so RSS grows with the tokens actually stored.
//
// Besides the committed length of each sequence, the cache tracks per (layer,
// sequence) how many positions hold stored data ("stored extent"). That lets
// commit() and attend_decode() reject a length whose K/V were never written for
// some layer, instead of silently reading stale rows.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/attention.h"
#include "kernels/dtype.h"

namespace qkv {

struct KVCacheConfig {
  int64_t n_layers = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t capacity = 0;  // positions per sequence
  int64_t n_seqs = 1;    // sequences (slots)
  DType type = DType::F16;
  uint64_t memory_limit = 0;  // bytes; 0: no limit. Creation over it fails before allocating.
};

class KVCache {
 public:
  // Throws qkv::Error on impossible shapes, a byte size over memory_limit, or an
  // overflow in the size arithmetic, before allocating anything.
  explicit KVCache(const KVCacheConfig& config);

  // Exact bytes a cache of this configuration holds (K and V, all layers and sequences).
  static uint64_t bytes_for(const KVCacheConfig& config);
  uint64_t bytes() const { return bytes_for(config_); }
  // Bytes of K and V per position per sequence (all layers).
  uint64_t bytes_per_token() const;
  const KVCacheConfig& config() const { return config_; }

  int64_t length(int64_t seq) const;  // positions stored for seq

  // Writes K and V of n positions starting at pos (pos <= length(seq),
  // pos + n <= capacity) for one layer; k and v are [n][n_kv_heads*head_dim] f32,
  // converted to the cache's type. The length is not changed: the decoder writes
  // every layer, then commit()s.
  void store(int64_t layer, int64_t seq, int64_t pos, int64_t n, const float* k, const float* v);
  // Asks for the cache lines that store(layer, seq, pos, 1, ...) will write,
  // for writing (a hint: no effect on results; out-of-range arguments are
  // ignored). A decode step's row is in DRAM until then, and the store
  // would wait for each line in turn.
  void prefetch_store(int64_t layer, int64_t seq, int64_t pos) const;
  // Sets length(seq) to new_length (<= capacity) after every layer was stored.
  void commit(int64_t seq, int64_t new_length);
  // Appends n positions to every layer at once: k, v are [n_layers][n][kv_dim].
  void append(int64_t seq, int64_t n, const float* k, const float* v);
  void truncate(int64_t seq, int64_t new_length);  // new_length <= length(seq)
  void clear(int64_t seq);
  // Copies the first n positions of src into dst (a shared system prompt); dst's length becomes n.
  void copy_prefix(int64_t src, int64_t dst, int64_t n);

  // Views over all sequences of one layer (batch index == sequence index).
  KVView keys(int64_t layer) const;
  KVView values(int64_t layer) const;

  // Decode attention: one new query token for each of n sequences seqs[i], whose
  // K/V (including the new token's) are already stored up to length
  // len[i] (so that query sits at position len[i]-1). q and out are
  // [n][n_heads*head_dim]. Threads split over (sequence, KV head, key chunk)
  // with exact merging. scale 0: 1/sqrt(head_dim).
  // window > 0: each query sees only its last `window` keys (sliding-window layers).
  // softcap > 0: scores soft-capped (AttentionOptions::softcap).
  void attend_decode(int64_t layer, const int64_t* seqs, const int64_t* len, int64_t n,
                     int64_t n_heads, const float* q, float* out, float scale = 0.0f, int64_t window = 0,
                     float softcap = 0.0f) const;

  // Positions of seq holding stored K/V in layer (>= length(seq) once committed;
  // grows ahead of length() between store() and commit()).
  int64_t stored(int64_t layer, int64_t seq) const;
  // Bytes of one row (one position of one KV head) in the cache's type.
  int64_t row_bytes() const { return row_bytes_; }

 private:
  void check_layer(int64_t layer, const char* what) const;
  void check_seq(int64_t seq, const char* what) const;
  // Start of K (kv = 0) or V (kv = 1) of sequence seq in layer.
  uint8_t* seq_base(int64_t layer, int kv, int64_t seq) const;
  KVView view(int64_t layer, int kv) const;
  int64_t& stored_ref(int64_t layer, int64_t seq) { return stored_[layer * config_.n_seqs + seq]; }

  KVCacheConfig config_;
  std::vector<int64_t> lengths_;
  std::vector<int64_t> stored_;  // [layer][seq] stored extent
  int64_t row_bytes_ = 0;        // one position of one KV head
  int64_t head_bytes_ = 0;       // capacity rows
  int64_t seq_bytes_ = 0;        // n_kv_heads heads
  std::shared_ptr<uint8_t> storage_;  // runtime/huge_pages.h
  uint8_t* data_ = nullptr;           // storage_: [layer][K|V][seq][head][pos][row]
  // (implementation detail; see kv_cache.cc)
 public:
  ~KVCache();
  KVCache(const KVCache&) = delete;
  KVCache& operator=(const KVCache&) = delete;
};

}  // namespace qkv

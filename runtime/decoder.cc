#include "runtime/decoder.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "kernels/attention.h"
#include "kernels/error.h"
#include "kernels/linear.h"
#include "kernels/ops.h"
#include "kernels/quant/row_groups.h"
#include "kernels/threads/cores.h"
#include "kernels/threads/team.h"

namespace qkv {

namespace {

KVCacheConfig cache_config(const Model& model, const DecoderOptions& o) {
  const ModelConfig& c = model.config;
  KVCacheConfig kv;
  kv.n_layers = c.n_layers;
  kv.n_kv_heads = c.n_kv_heads;
  kv.head_dim = c.head_dim;
  kv.capacity = o.context > 0 ? o.context : c.context_length;
  kv.n_seqs = o.n_seqs;
  kv.type = o.kv_type;
  kv.memory_limit = o.memory_limit;
  QKV_CHECK(kv.capacity > 0, "context size must be positive (the model states none; pass one)");
  return kv;
}

const float* norm_weights(const Matrix& m) { return static_cast<const float*>(m.data); }

// Decode steps of up to this many rows run in one team (the small-batch
// kernels' limit); larger batches go to oneDNN, which threads itself.
constexpr int64_t kMaxTeamRows = 16;
// Outside a team, per-row steps over fewer floats than this stay on one thread.
constexpr int64_t kMinParallelFloats = int64_t{1} << 16;
// Inside a team, the smallest range of a per-row step a thread takes at once.
constexpr int64_t kMinTakeFloats = 512;

// fn(lo, hi) over the ranges of n rows or elements this thread takes when a
// team runs the forward pass (then a sync, so every range is done before the
// next step); otherwise over all n, in a parallel region of contiguous shares
// when the n units of `width` floats are worth it (a prefill's norms,
// RoPE and activations: run on one thread they left the other idle, ~7% of
// the samples of a 256-token prefill of 1.1B Q4_K_M in libgomp's wait).
template <class Fn>
void each_share(int64_t n, int64_t width, Fn&& fn) {
  Team* const team = current_team();
  if (team == nullptr) {
    const int threads = omp_get_max_threads();
    if (threads == 1 || omp_in_parallel() || n < 2 * threads || n * width < kMinParallelFloats) return fn(int64_t{0}, n);
#pragma omp parallel num_threads(threads)
    {
      const int64_t t = omp_get_thread_num(), k = omp_get_num_threads();
      const int64_t lo = n * t / k, hi = n * (t + 1) / k;
      if (lo < hi) fn(lo, hi);
    }
    return;
  }
  // Ranges from the team's queue rather than a fixed share, so that a thread
  // the scheduler holds back (a busy machine) leaves its rows to the others.
  team->begin_call();
  const int64_t min_units = std::max<int64_t>(1, kMinTakeFloats / std::max<int64_t>(1, width));
  int64_t lo, hi;
  while (team->take(n, min_units, &lo, &hi)) fn(lo, hi);
  team->sync();
}

}  // namespace

Decoder::Decoder(const Model& model, const DecoderOptions& options)
    : model_(model), options_(options), cache_(cache_config(model, options)) {
  QKV_CHECK(options.prefill_batch >= 1, "prefill batch must be at least 1");
  QKV_CHECK(options.n_seqs >= 1, "a decoder needs at least one sequence");
  const ModelConfig& c = model.config;
  QKV_CHECK(c.causal, "a ", c.architecture, " model is an encoder (runtime/encoder.h): it embeds; it does not generate");
  QKV_CHECK(c.n_layers >= 1 && c.dim >= 1 && c.vocab_size >= 1 && c.n_heads >= 1 && c.head_dim >= 1 &&
                c.n_kv_heads >= 1 && c.n_heads % c.n_kv_heads == 0 &&
                static_cast<int64_t>(model.layers.size()) == c.n_layers,
            "model configuration is inconsistent");
  // LongRoPE: the short factors serve contexts up to the original one
  // (llama.cpp: n_ctx per sequence > n_ctx_orig picks the long factors).
  if (!c.rope_factors.empty()) {
    const bool use_short = !c.rope_factors_short.empty() && context() <= c.rope_orig_context;
    rope_factors_ = use_short ? &c.rope_factors_short : &c.rope_factors;
  }
  for (const LayerWeights& w : model.layers) {
    xb_readers_.insert(xb_readers_.end(), {w.wq, w.wk, w.wv, w.ffn_gate, w.ffn_up});
    hb_readers_.push_back(w.ffn_down);
    att_readers_.push_back(w.wo);
  }
  ensure_rows(std::max<int64_t>(1, options.n_seqs));
  // Logits are needed for one row per sequence of a step (a prefill keeps only
  // its last token's), so they are sized by sequences, not by prefill rows.
  logits_.resize(static_cast<size_t>(options.n_seqs * c.vocab_size));
}

uint64_t Decoder::activation_bytes(const ModelConfig& c, const DecoderOptions& o) {
  const uint64_t rows = static_cast<uint64_t>(std::max<int64_t>({1, o.prefill_batch, o.n_seqs}));
  // x_, xb_, q_, k_, v_, att_, hb_, hb2_, rope_cs_ (and rope_cs_local_) of ensure_rows.
  const uint64_t per_row = 2 * uint64_t(c.dim) + 2 * uint64_t(c.q_dim()) + 2 * uint64_t(c.kv_dim()) +
                           2 * uint64_t(c.hidden_dim) + uint64_t(c.rope_dim) * (c.rope_theta_local > 0 ? 2 : 1);
  // A batched decode step's xb, att and hb quantized ahead (QuantizedInputs): up to
  // 3 activation types of at most 2 bytes a value (ggml's int8 blocks take
  // 1.06-1.14).
  const uint64_t per_seq = (uint64_t(c.dim) + uint64_t(c.q_dim()) + uint64_t(c.hidden_dim)) * 2 * 3;
  const uint64_t quantized = o.n_seqs >= 2 ? uint64_t(o.n_seqs) * per_seq : 0;
  return (rows * per_row + uint64_t(o.n_seqs) * uint64_t(c.vocab_size)) * sizeof(float) + quantized;
}

Decoder::ResidentBytes Decoder::resident_bytes(const Model& model, const DecoderOptions& o) {
  DecoderOptions unlimited = o;
  unlimited.memory_limit = 0;
  ResidentBytes r;
  r.weights = model.weight_bytes();
  r.kv_cache = KVCache::bytes_for(cache_config(model, unlimited));
  r.activations = activation_bytes(model.config, o);
  return r;
}

std::string Decoder::over_memory_limit(const Model& model, const DecoderOptions& o, uint64_t limit) {
  const ResidentBytes r = resident_bytes(model, o);
  if (limit == 0 || r.total() <= limit) return "";
  const int64_t capacity = cache_config(model, o).capacity;
  return "needs " + std::to_string(r.total()) + " bytes: weights " + std::to_string(r.weights) + ", KV cache " +
         std::to_string(r.kv_cache) + " (" + std::to_string(o.n_seqs) + " sequences x " + std::to_string(capacity) +
         " positions, " + dtype_name(o.kv_type) + "), activations " + std::to_string(r.activations) +
         "; over the memory limit of " + std::to_string(limit) + " bytes";
}

int64_t Decoder::prepare_prefill() {
  const int64_t rows = std::max<int64_t>(1, options_.prefill_batch);
  ensure_rows(rows);
  int64_t built = 0;
  for (const LayerWeights& w : model_.layers) {
    for (const Matrix* m : {&w.wq, &w.wk, &w.wv, &w.wo, &w.ffn_gate, &w.ffn_up, &w.ffn_down}) {
      if (m->rows > 0 && m->cols > 0) built += prepare_matmul(*m, rows);
    }
  }
  return built;
}

void Decoder::ensure_rows(int64_t M) {
  if (M <= rows_) return;
  const ModelConfig& c = model_.config;
  const auto n = static_cast<size_t>(M);
  x_.resize(n * c.dim);
  xb_.resize(n * c.dim);
  q_.resize(n * c.q_dim());
  k_.resize(n * c.kv_dim());
  v_.resize(n * c.kv_dim());
  att_.resize(n * c.q_dim());
  hb_.resize(n * c.hidden_dim);
  hb2_.resize(n * c.hidden_dim);
  rope_cs_.resize(n * c.rope_dim);
  if (c.rope_theta_local > 0) rope_cs_local_.resize(n * c.rope_dim);
  rows_ = M;
}

void Decoder::check_tokens(const int32_t* tokens, int64_t n) const {
  QKV_CHECK(tokens != nullptr || n == 0, "null token array");
  for (int64_t i = 0; i < n; ++i) {
    QKV_CHECK(tokens[i] >= 0 && tokens[i] < model_.config.vocab_size, "token id ", tokens[i],
              " is outside the vocabulary (size ", model_.config.vocab_size, ")");
  }
}

void Decoder::embed(const int32_t* tokens, int64_t M) {
  const Matrix& E = model_.token_embd;
  const size_t row_bytes = dtype_row_bytes(E.type, static_cast<size_t>(E.cols));
  // Row groups (a tied output laid out for the matvec): the row gathered first.
  std::vector<uint8_t> gathered(E.row_groups ? row_bytes : 0);
  for (int64_t m = 0; m < M; ++m) {
    const uint8_t* row = static_cast<const uint8_t*>(E.data) + static_cast<size_t>(tokens[m]) * row_bytes;
    if (E.row_groups) {
      row_group_row(E.type, E.data, static_cast<size_t>(E.cols), static_cast<size_t>(tokens[m]), gathered.data());
      row = gathered.data();
    }
    float* x = &x_[m * model_.config.dim];
    decode_row(E.type, row, static_cast<size_t>(E.cols), x);
    if (model_.config.embed_scale != 1.0f) {
      for (int64_t i = 0; i < E.cols; ++i) x[i] *= model_.config.embed_scale;
    }
  }
}

const float* Decoder::prefill(int64_t seq, const int32_t* tokens, int64_t n) {
  return prefill_impl(seq, tokens, n, nullptr, nullptr);
}

void Decoder::prefill_all_logits(int64_t seq, const int32_t* tokens, int64_t n, float* all_logits) {
  QKV_CHECK(all_logits != nullptr, "prefill_all_logits: null logits buffer");
  prefill_impl(seq, tokens, n, all_logits, nullptr);
}

void Decoder::prefill_hidden(int64_t seq, const int32_t* tokens, int64_t n, float* hidden) {
  QKV_CHECK(hidden != nullptr, "prefill_hidden: null hidden-state buffer");
  prefill_impl(seq, tokens, n, nullptr, hidden);
}

const float* Decoder::prefill_impl(int64_t seq, const int32_t* tokens, int64_t n, float* all_logits,
                                   float* hidden) {
  const OmpThreadsScope batch_threads(options_.threads_batch);
  QKV_CHECK(n >= 1, "prefill needs at least one token");
  check_tokens(tokens, n);
  const int64_t start = cache_.length(seq);
  if (start + n > context()) {
    fail_as(ErrorKind::kContextOverflow, "context overflow: ", start, " + ", n,
            " tokens exceed the context of ", context(), " positions");
  }
  for (int64_t done = 0; done < n;) {
    const int64_t M = std::min(options_.prefill_batch, n - done);
    ensure_rows(M);
    embed(tokens + done, M);
    std::vector<int64_t> seqs(M, seq), pos(M);
    for (int64_t m = 0; m < M; ++m) pos[m] = start + done + m;
    forward(M, seqs.data(), pos.data());
    if (all_logits) logits_for(0, M, all_logits + done * vocab_size());
    if (hidden) hidden_for(0, M, hidden + done * model_.config.dim);
    done += M;
    if (done == n && !all_logits && !hidden) logits_for(M - 1, 1);
  }
  return logits_.data();
}

const float* Decoder::step_batch(const int64_t* seqs, const int32_t* tokens, int64_t n) {
  QKV_CHECK(n >= 1 && seqs != nullptr, "a step needs at least one sequence");
  check_tokens(tokens, n);
  std::vector<int64_t> pos(n);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < i; ++j) QKV_CHECK(seqs[i] != seqs[j], "sequence ", seqs[i], " appears twice in one step");
    pos[i] = cache_.length(seqs[i]);
    if (pos[i] >= context()) {
      fail_as(ErrorKind::kContextOverflow, "context overflow: sequence ", seqs[i], " already holds all ",
              context(), " positions");
    }
  }
  ensure_rows(n);
  embed(tokens, n);
  forward(n, seqs, pos.data());
  logits_for(0, n);
  return logits_.data();
}

// The transformer block, for M rows: runs of rows of one sequence each at
// consecutive positions (prefill) or each row its own sequence (decode). What
// the block does beyond llama's pre-norm attention + SwiGLU (biases, QK-norm,
// NEOX RoPE and its factors, post-norms, GELU, soft-caps, sliding windows) is
// read from the configuration, never from the family's name.
//
// A decode step runs all its layers in one team of threads (kernels/threads/team.h):
// the kernels share each call's work among the team, and the per-row steps
// (norms, RoPE and cache writes, activations, residuals) are split over it too.
// Each of these ends with a spinning sync, instead of a parallel region per
// kernel call (whose fork and join cost system calls here). A prefill keeps a
// region per call: its GEMMs go to oneDNN, which threads itself.
void Decoder::forward(int64_t M, const int64_t* seqs, const int64_t* pos) {
  const ModelConfig& c = model_.config;
  const int64_t dim = c.dim, q_dim = c.q_dim(), kv_dim = c.kv_dim(), hidden = c.hidden_dim, hd = c.head_dim;
  bool decode = true;  // every row its own sequence
  for (int64_t m = 1; m < M; ++m) decode = decode && seqs[m] != seqs[m - 1];
  // Decode: each row's sequence length once its new token is stored (the same for every layer).
  std::vector<int64_t> len(static_cast<size_t>(M));
  for (int64_t m = 0; m < M; ++m) len[m] = pos[m] + 1;
  // Each row's RoPE angles, shared by every layer (and by every sliding layer
  // when those have their own base).
  const int64_t rd = c.rope_dim;
  RopeParams rp;
  rp.base = c.rope_theta;
  rp.freq_scale = c.rope_freq_scale;
  rp.attn_factor = c.rope_attn_factor;
  rp.factors = rope_factors_ ? rope_factors_->data() : nullptr;
  for (int64_t m = 0; m < M; ++m) rope_angles(rd, pos[m], rp, &rope_cs_[m * rd]);
  if (c.rope_theta_local > 0) {
    RopeParams local = rp;
    local.base = c.rope_theta_local;
    local.freq_scale = 1.0f;
    for (int64_t m = 0; m < M; ++m) rope_angles(rd, pos[m], local, &rope_cs_local_[m * rd]);
  }
  auto vec = [](const Matrix& m) { return norm_weights(m); };
  auto qkv_of = [&](int64_t l) {
    const LayerWeights& w = model_.layers[l];
    return std::array<Matrix, 3>{w.wq, w.wk, w.wv};
  };
  auto gate_up_of = [&](int64_t l) {
    const LayerWeights& w = model_.layers[l];
    return std::array<Matrix, 2>{w.ffn_gate, w.ffn_up};
  };

  // A batched decode step in a team: the passes that write xb and hb, and a
  // row pass after the attention for att, quantize their rows for the block
  // GEMMs that read them.
  const bool quantize_ahead = decode && M >= 2 && M <= kMaxTeamRows && options_.decode_team;
  xb_quantized_.reserve(xb_readers_.data(), quantize_ahead ? static_cast<int>(xb_readers_.size()) : 0, M);
  hb_quantized_.reserve(hb_readers_.data(), quantize_ahead ? static_cast<int>(hb_readers_.size()) : 0, M);
  att_quantized_.reserve(att_readers_.data(), quantize_ahead ? static_cast<int>(att_readers_.size()) : 0, M);
  const QuantizedInputs* xbq = xb_quantized_.empty() ? nullptr : &xb_quantized_;
  const QuantizedInputs* hbq = hb_quantized_.empty() ? nullptr : &hb_quantized_;
  const QuantizedInputs* attq = att_quantized_.empty() ? nullptr : &att_quantized_;

  auto layers = [&] {
    // The residual stream x of rows [lo, hi): x += delta (when given; first
    // normed by post_norm when that is given), then xb = norm(x), quantized
    // for the matrices `next` (count of them) when xbq is set.
    auto add_norm = [&](float* delta, const Matrix* post_norm, const Matrix* norm, const Matrix* next, int count) {
      each_share(M, dim, [&](int64_t lo, int64_t hi) {
        if (delta != nullptr) {
          if (post_norm != nullptr) rmsnorm(&delta[lo * dim], vec(*post_norm), &delta[lo * dim], dim, c.norm_eps, hi - lo);
          add_inplace(&x_[lo * dim], &delta[lo * dim], (hi - lo) * dim);
        }
        if (norm != nullptr) rmsnorm(&x_[lo * dim], vec(*norm), &xb_[lo * dim], dim, c.norm_eps, hi - lo);
        if (norm != nullptr && xbq != nullptr) xb_quantized_.quantize_rows(xb_.data(), lo, hi, next, count);
      });
    };
    const std::array<Matrix, 3> first_qkv = qkv_of(0);
    add_norm(nullptr, nullptr, &model_.layers[0].attn_norm, first_qkv.data(), 3);
    for (int64_t l = 0; l < c.n_layers; ++l) {
      const LayerWeights& w = model_.layers[l];
      const bool slides = c.layer_slides(l);
      const float* cs = slides && c.rope_theta_local > 0 ? rope_cs_local_.data() : rope_cs_.data();

      // Attention: x += Wo · attention(rope(Wq·xb), rope(Wk·xb), Wv·xb), xb = norm(x)
      const std::array<Matrix, 3> qkv = qkv_of(l);
      float* const qkv_out[3] = {q_.data(), k_.data(), v_.data()};
      matmul_multi(qkv.data(), qkv_out, 3, xb_.data(), M, xbq);
      each_share(M, q_dim + 2 * kv_dim, [&](int64_t lo, int64_t hi) {
        // The rows' cache lines are requested first, so their reads from
        // DRAM overlap the RoPE instead of each store waiting for its own.
        if (decode) {
          for (int64_t m = lo; m < hi; ++m) cache_.prefetch_store(l, seqs[m], pos[m]);
        }
        for (int64_t m = lo; m < hi; ++m) {
          float* q = &q_[m * q_dim];
          float* k = &k_[m * kv_dim];
          if (c.qkv_bias) {
            add_inplace(q, vec(w.bq), q_dim);
            add_inplace(k, vec(w.bk), kv_dim);
            add_inplace(&v_[m * kv_dim], vec(w.bv), kv_dim);
          }
          if (c.qk_norm) {  // per head, before RoPE
            rmsnorm(q, vec(w.q_norm), q, hd, c.norm_eps, c.n_heads);
            rmsnorm(k, vec(w.k_norm), k, hd, c.norm_eps, c.n_kv_heads);
          }
          rope_rotate(q, c.n_heads, hd, rd, &cs[m * rd], c.rope_style);
          rope_rotate(k, c.n_kv_heads, hd, rd, &cs[m * rd], c.rope_style);
          if (decode) cache_.store(l, seqs[m], pos[m], 1, k, &v_[m * kv_dim]);
        }
      });
      const int64_t window = slides ? c.sliding_window : 0;
      if (decode) {
        cache_.attend_decode(l, seqs, len.data(), M, c.n_heads, q_.data(), att_.data(), c.attn_scale, window,
                             c.attn_softcap);
      } else {
        for (int64_t r0 = 0, r1; r0 < M; r0 = r1) {  // each sequence's run of rows
          for (r1 = r0 + 1; r1 < M && seqs[r1] == seqs[r0];) ++r1;
          cache_.store(l, seqs[r0], pos[r0], r1 - r0, &k_[r0 * kv_dim], &v_[r0 * kv_dim]);
          attention_prefill(l, seqs[r0], pos[r0], r1 - r0, window, r0);
        }
      }
      // wo's input quantized by rows, each thread the rows whose attention
      // items it mostly ran (Team::take): the GEMM then reads the other
      // thread's rows as int8 blocks, not as floats.
      if (attq != nullptr) {
        each_share(M, q_dim, [&](int64_t lo, int64_t hi) { att_quantized_.quantize_rows(att_.data(), lo, hi, &w.wo, 1); });
      }
      matmul(w.wo, att_.data(), M, xb_.data(), attq);
      // (add_inplace reads xb before the norm overwrites it)
      const std::array<Matrix, 2> gate_up = gate_up_of(l);
      add_norm(xb_.data(), c.post_norms ? &w.post_attn_norm : nullptr, &w.ffn_norm, gate_up.data(), 2);

      // Feed-forward: x += W_down · (act(W_gate·xb) * (W_up·xb)), xb = the next norm of x
      float* const gate_up_out[2] = {hb_.data(), hb2_.data()};
      matmul_multi(gate_up.data(), gate_up_out, 2, xb_.data(), M, xbq);
      // By elements, or by rows when each thread quantizes the rows it wrote.
      const int64_t units = hbq != nullptr ? M : M * hidden, width = hbq != nullptr ? hidden : 1;
      each_share(units, width, [&](int64_t lo, int64_t hi) {
        if (c.activation == Activation::SiLU) {
          silu_mul(&hb_[lo * width], &hb2_[lo * width], (hi - lo) * width);
        } else {
          gelu_tanh_mul(&hb_[lo * width], &hb2_[lo * width], (hi - lo) * width);
        }
        if (hbq != nullptr) hb_quantized_.quantize_rows(hb_.data(), lo, hi, &w.ffn_down, 1);
      });
      matmul(w.ffn_down, hb_.data(), M, xb_.data(), hbq);
      // The final norm is the classifier's (logits_for).
      const bool last = l + 1 == c.n_layers;
      const std::array<Matrix, 3> next_qkv = qkv_of(last ? l : l + 1);
      add_norm(xb_.data(), c.post_norms ? &w.post_ffn_norm : nullptr,
               last ? nullptr : &model_.layers[l + 1].attn_norm, next_qkv.data(), 3);
    }
  };
  if (decode && M <= kMaxTeamRows && options_.decode_team) {
    run_team(omp_get_max_threads(), layers);
  } else {
    layers();
  }

  for (int64_t m = 0; m < M; ++m) {
    const int64_t s = seqs[m];
    if (m + 1 == M || seqs[m + 1] != s) cache_.commit(s, pos[m] + 1);
  }
}

// Causal attention (within `window` keys when > 0) of M consecutive query rows
// of one sequence against every key the sequence holds, straight from the cache.
void Decoder::attention_prefill(int64_t layer, int64_t seq, int64_t pos0, int64_t M, int64_t window,
                                int64_t row0) {
  const ModelConfig& c = model_.config;
  AttentionShape shape;
  shape.B = 1;
  shape.Hq = c.n_heads;
  shape.Hkv = c.n_kv_heads;
  shape.Lq = M;
  shape.Lk = pos0 + M;
  shape.d = c.head_dim;

  KVView k = cache_.keys(layer), v = cache_.values(layer);
  k.data = static_cast<const uint8_t*>(k.data) + seq * k.batch_stride;
  v.data = static_cast<const uint8_t*>(v.data) + seq * v.batch_stride;

  QueryView q{&q_[row0 * c.q_dim()], 0, c.head_dim, c.q_dim()};
  OutputView out{&att_[row0 * c.q_dim()], 0, c.head_dim, c.q_dim()};
  AttentionMask mask;
  mask.causal = true;
  mask.q_pos0 = pos0;
  mask.window = window;
  AttentionOptions opts;
  opts.scale = c.attn_scale;
  opts.softcap = c.attn_softcap;
  if (capture_ && capture_->layer == layer) {
    capture_->rows = M;
    capture_->keys = shape.Lk;
    capture_->weights.assign(static_cast<size_t>(c.n_heads * M * shape.Lk), 0.0f);
    capture_->queries.assign(q.data, q.data + M * c.q_dim());
    opts.weights = capture_->weights.data();
  }
  attention(shape, q, k, v, mask, out, opts);
}

void Decoder::hidden_for(int64_t first_row, int64_t rows, float* out) {
  const ModelConfig& c = model_.config;
  rmsnorm(&x_[first_row * c.dim], norm_weights(model_.output_norm), out, c.dim, c.norm_eps, rows);
}

// Final norm and classifier for activation rows [first_row, first_row + rows),
// written to `out` (default logits_) rows 0 .. rows-1 (soft-capped when the model says so).
void Decoder::logits_for(int64_t first_row, int64_t rows, float* out) {
  const ModelConfig& c = model_.config;
  float* x = &x_[first_row * c.dim];
  float* y = out ? out : logits_.data();
  rmsnorm(x, norm_weights(model_.output_norm), xb_.data(), c.dim, c.norm_eps, rows);
  matmul(model_.output, xb_.data(), rows, y);
  if (c.final_softcap > 0) softcap(y, static_cast<size_t>(rows * c.vocab_size), c.final_softcap);
}

}  // namespace qkv

#include "runtime/embed.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/error.h"
#include "runtime/decoder.h"
#include "runtime/encoder.h"

namespace qkv {

namespace {

// Runners of each kind a pool keeps between calls: enough for a few threads
// embedding at once without every call allocating, few enough that a one-off
// large call does not pin its buffers for long.
constexpr size_t kPooledRunners = 2;
// Most inputs a decoder runs at once: each sequence also holds a row of
// logits (vocab floats) in the Decoder, 0.6 MB for a 150k vocabulary.
constexpr int64_t kMaxDecoderSequences = 64;

int64_t total_tokens(const std::vector<EmbedInput>& inputs) {
  int64_t n = 0;
  for (const EmbedInput& in : inputs) n += in.count;
  return n;
}

int64_t longest(const std::vector<EmbedInput>& inputs) {
  int64_t n = 0;
  for (const EmbedInput& in : inputs) n = std::max(n, in.count);
  return n;
}

// The vectors of one input from its hidden states h [count][dim]: pooled (or,
// with NONE, every row), cut to `width` values and normalized; RANK: the score.
// Returns the floats written.
int64_t pool_input(const float* h, int64_t count, int64_t dim, const EmbedOptions& o, int64_t width,
                   const Encoder* ranker, float* out) {
  switch (o.pooling) {
    case Pooling::Rank:
      QKV_CHECK(ranker != nullptr, "RANK pooling needs an encoder with a classifier head");
      out[0] = ranker->rank_score(h);
      return 1;
    case Pooling::None:
      for (int64_t t = 0; t < count; ++t) normalize_embedding(h + t * dim, out + t * width, width, o.normalize);
      return count * width;
    case Pooling::Cls:
      normalize_embedding(h, out, width, o.normalize);
      return width;
    case Pooling::Last:
      normalize_embedding(h + (count - 1) * dim, out, width, o.normalize);
      return width;
    case Pooling::Mean: {
      // Summed in double: the average of up to a context of rows keeps float precision.
      std::vector<double> sum(static_cast<size_t>(width), 0.0);
      for (int64_t t = 0; t < count; ++t) {
        const float* row = h + t * dim;
        for (int64_t i = 0; i < width; ++i) sum[i] += row[i];
      }
      for (int64_t i = 0; i < width; ++i) out[i] = static_cast<float>(sum[i] / static_cast<double>(count));
      normalize_embedding(out, out, width, o.normalize);
      return width;
    }
  }
  fail("unknown pooling ", static_cast<int>(o.pooling));
}

// Runners handed back to the pool (or dropped without one) when a call ends,
// also by an exception.
template <typename Runner>
struct Lease {
  EmbedPool* pool;
  std::unique_ptr<Runner> runner;
  ~Lease() {
    if (pool != nullptr && runner) pool->give_back(std::move(runner));
  }
};

void embed_encoder(const Model& model, EmbedPool* pool, const std::vector<EmbedInput>& inputs,
                   const EmbedOptions& o, int64_t width, float* out) {
  const int64_t dim = model.config.dim;
  const int64_t budget = std::max<int64_t>(1, o.batch_tokens);
  // Packs of whole inputs up to the budget; an input over it runs alone, so
  // the encoder holds the larger of the two.
  const int64_t rows = std::max(std::min(budget, total_tokens(inputs)), longest(inputs));
  Lease<Encoder> lease{pool, pool != nullptr ? pool->take_encoder(model, rows)
                                             : std::make_unique<Encoder>(model, rows)};
  Encoder& enc = *lease.runner;
  std::vector<float> hidden;
  std::vector<const int32_t*> toks;
  std::vector<int64_t> counts;
  for (size_t first = 0; first < inputs.size();) {
    size_t last = first;
    int64_t pack = 0;
    toks.clear();
    counts.clear();
    while (last < inputs.size() && (last == first || pack + inputs[last].count <= budget)) {
      toks.push_back(inputs[last].tokens);
      counts.push_back(inputs[last].count);
      pack += inputs[last].count;
      ++last;
    }
    hidden.resize(static_cast<size_t>(pack * dim));
    enc.forward(toks.data(), counts.data(), static_cast<int64_t>(counts.size()), hidden.data());
    const float* h = hidden.data();
    for (size_t k = 0; k < counts.size(); ++k) {
      out += pool_input(h, counts[k], dim, o, width, &enc, out);
      h += counts[k] * dim;
    }
    first = last;
  }
}

void embed_decoder(const Model& model, EmbedPool* pool, const std::vector<EmbedInput>& inputs,
                   const EmbedOptions& o, int64_t width, float* out) {
  const int64_t dim = model.config.dim;
  const int64_t budget = std::max<int64_t>(1, o.batch_tokens);
  const int64_t context = longest(inputs);
  // Each input of a group holds a cache slot of `context` positions, so a
  // group's caches hold at most max(budget, context) positions.
  const auto n = static_cast<int64_t>(inputs.size());
  const int64_t group = std::min({n, kMaxDecoderSequences, std::max<int64_t>(1, budget / context)});
  const int64_t batch = std::min(budget, total_tokens(inputs));
  Lease<Decoder> lease{pool, nullptr};
  if (pool != nullptr) {
    lease.runner = pool->take_decoder(model, group, context, batch);
  } else {
    DecoderOptions d;
    d.context = context;
    d.kv_type = DType::F32;
    d.n_seqs = group;
    d.prefill_batch = batch;
    lease.runner = std::make_unique<Decoder>(model, d);
  }
  Decoder& dec = *lease.runner;
  std::vector<float> hidden;
  std::vector<int64_t> seqs;
  std::vector<const int32_t*> toks;
  std::vector<int64_t> counts;
  for (int64_t first = 0; first < n; first += group) {
    const int64_t size = std::min(group, n - first);
    seqs.clear();
    toks.clear();
    counts.clear();
    int64_t rows = 0;
    for (int64_t k = 0; k < size; ++k) {
      dec.cache().clear(k);  // each input from position 0, seeing only itself
      seqs.push_back(k);
      toks.push_back(inputs[first + k].tokens);
      counts.push_back(inputs[first + k].count);
      rows += inputs[first + k].count;
    }
    hidden.resize(static_cast<size_t>(rows * dim));
    dec.prefill_hidden_multi(seqs.data(), toks.data(), counts.data(), size, hidden.data());
    const float* h = hidden.data();
    for (int64_t k = 0; k < size; ++k) {
      out += pool_input(h, counts[k], dim, o, width, nullptr, out);
      h += counts[k] * dim;
    }
  }
}

}  // namespace

const char* pooling_name(Pooling p) {
  switch (p) {
    case Pooling::None: return "none";
    case Pooling::Mean: return "mean";
    case Pooling::Cls: return "cls";
    case Pooling::Last: return "last";
    case Pooling::Rank: return "rank";
  }
  return "?";
}

Pooling model_pooling(const ModelConfig& c) {
  if (c.pooling_type >= 0 && c.pooling_type <= static_cast<int>(Pooling::Rank)) {
    return static_cast<Pooling>(c.pooling_type);
  }
  return c.causal ? Pooling::Last : Pooling::Mean;
}

void normalize_embedding(const float* in, float* out, int64_t n, int mode) {
  QKV_CHECK(mode >= -1, "normalization ", mode, " is not one of -1 (none), 0 (max-abs), 1 (taxicab), 2 (L2), > 2 (p-norm)");
  double sum = 0.0;
  if (mode == -1) {
    sum = 1.0;
  } else if (mode == 0) {  // the largest magnitude maps to 32760: int16 range
    for (int64_t i = 0; i < n; ++i) sum = std::max(sum, static_cast<double>(std::fabs(in[i])));
    sum /= 32760.0;
  } else if (mode == 2) {
    for (int64_t i = 0; i < n; ++i) sum += in[i] * in[i];  // float squares, summed in double (as llama.cpp)
    sum = std::sqrt(sum);
  } else {
    for (int64_t i = 0; i < n; ++i) sum += std::pow(std::fabs(in[i]), mode);
    sum = std::pow(sum, 1.0 / mode);
  }
  const float scale = sum > 0.0 ? static_cast<float>(1.0 / sum) : 0.0f;
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] * scale;
}

int64_t embed_width(const ModelConfig& c, const EmbedOptions& o) {
  if (o.pooling == Pooling::Rank) return 1;
  QKV_CHECK(o.dimensions >= 0, "dimensions must not be negative (got ", o.dimensions, "; 0 means all ", c.dim, ")");
  QKV_CHECK(o.dimensions <= c.dim, "dimensions ", o.dimensions, " is more than the model's embedding width ", c.dim);
  return o.dimensions > 0 ? o.dimensions : c.dim;
}

std::vector<EmbedInput> prepare_inputs(const ModelConfig& c, const std::vector<EmbedInput>& inputs,
                                       const EmbedOptions& o, std::vector<std::vector<int32_t>>* storage) {
  QKV_CHECK(!inputs.empty(), "nothing to embed: no inputs");
  const int64_t context = c.context_length;
  std::vector<EmbedInput> out = inputs;
  storage->clear();
  storage->reserve(inputs.size());  // no reallocation: out points into its vectors
  for (size_t i = 0; i < inputs.size(); ++i) {
    const EmbedInput& in = inputs[i];
    QKV_CHECK(in.count >= 1, "input ", i, " is empty: an embedding input needs at least one token");
    QKV_CHECK(in.tokens != nullptr, "input ", i, " has ", in.count, " tokens but a null token array");
    for (int64_t t = 0; t < in.count; ++t) {
      QKV_CHECK(in.tokens[t] >= 0 && in.tokens[t] < c.vocab_size, "input ", i, ": token id ", in.tokens[t],
                " at position ", t, " is outside the vocabulary (size ", c.vocab_size, ")");
    }
    if (context <= 0 || in.count <= context) continue;
    if (!o.truncate) {
      fail_as(ErrorKind::kContextOverflow, "input ", i, " has ", in.count, " tokens, more than the model's context of ",
              context, " (truncation would keep its first ", context - 1, " and its last)");
    }
    std::vector<int32_t> cut(in.tokens, in.tokens + (context - 1));
    cut.push_back(in.tokens[in.count - 1]);
    storage->push_back(std::move(cut));
    out[i] = EmbedInput{storage->back().data(), context};
  }
  return out;
}

int64_t embed_vector_count(const std::vector<EmbedInput>& inputs, Pooling pooling) {
  return pooling == Pooling::None ? total_tokens(inputs) : static_cast<int64_t>(inputs.size());
}

EmbedPool::EmbedPool() = default;
EmbedPool::~EmbedPool() = default;

std::unique_ptr<Encoder> EmbedPool::take_encoder(const Model& model, int64_t max_tokens) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = encoders_.begin(); it != encoders_.end(); ++it) {
      if (&(*it)->model() == &model && (*it)->max_tokens() >= max_tokens) {
        std::unique_ptr<Encoder> e = std::move(*it);
        encoders_.erase(it);
        return e;
      }
    }
  }
  return std::make_unique<Encoder>(model, max_tokens);
}

void EmbedPool::give_back(std::unique_ptr<Encoder> encoder) {
  std::lock_guard<std::mutex> lock(mu_);
  encoders_.push_back(std::move(encoder));
  if (encoders_.size() > kPooledRunners) encoders_.erase(encoders_.begin());
}

std::unique_ptr<Decoder> EmbedPool::take_decoder(const Model& model, int64_t n_seqs, int64_t context, int64_t batch) {
  std::unique_ptr<Decoder> d;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = decoders_.begin(); it != decoders_.end(); ++it) {
      const KVCacheConfig& kv = (*it)->cache().config();
      if (&(*it)->model() == &model && kv.n_seqs >= n_seqs && kv.capacity >= context) {
        d = std::move(*it);
        decoders_.erase(it);
        break;
      }
    }
  }
  if (!d) {
    // F32 keys and values: llama.cpp's embedding references are computed with
    // -ctk f32 -ctv f32; its default F16 cache moves a LAST embedding by
    // ~1.4e-3 from a float64 forward pass (F32: ~7e-6). An embedding's cache
    // lives for one call and is sized to its inputs, so the doubled bytes are cheap.
    DecoderOptions o;
    o.context = context;
    o.kv_type = DType::F32;
    o.n_seqs = n_seqs;
    o.prefill_batch = batch;
    d = std::make_unique<Decoder>(model, o);
  }
  for (int64_t s = 0; s < d->cache().config().n_seqs; ++s) d->cache().clear(s);
  return d;
}

void EmbedPool::give_back(std::unique_ptr<Decoder> decoder) {
  std::lock_guard<std::mutex> lock(mu_);
  decoders_.push_back(std::move(decoder));
  if (decoders_.size() > kPooledRunners) decoders_.erase(decoders_.begin());
}

void embed(const Model& model, EmbedPool* pool, const std::vector<EmbedInput>& inputs, const EmbedOptions& o,
           float* out) {
  QKV_CHECK(!inputs.empty(), "nothing to embed: no inputs");
  QKV_CHECK(out != nullptr, "embed: null output buffer");
  QKV_CHECK(o.normalize >= -1, "normalization ", o.normalize,
            " is not one of -1 (none), 0 (max-abs), 1 (taxicab), 2 (L2), > 2 (p-norm)");
  const int64_t width = embed_width(model.config, o);
  QKV_CHECK(o.pooling != Pooling::Rank || (model.config.rank_head && !model.config.causal),
            "RANK pooling needs a rank model (a bert with the classifier head cls/cls.output); this ",
            model.config.architecture, " model has none");
  if (model.config.causal) {
    embed_decoder(model, pool, inputs, o, width, out);
  } else {
    embed_encoder(model, pool, inputs, o, width, out);
  }
}

}  // namespace qkv

#include "tools/serve/embeddings.h"

#include <charconv>
#include <cmath>
#include <cstring>

#include "tools/serve/server.h"

namespace qkv::serve {

namespace {

using Clock = std::chrono::steady_clock;

// Tokens of one request, all inputs together: 2048 inputs of ~128 tokens. A
// body of 1 MB of text holds at most ~1M tokens; this bounds the buffers
// (tokens x width floats with pooling none) a request can make.
constexpr int64_t kMaxRequestTokens = INT64_C(1) << 18;

void finish(EmbedJob& job, int status, const std::string& error, const std::string& code = "") {
  {
    std::lock_guard<std::mutex> lock(job.mu);
    job.done = true;
    job.status = status;
    job.error = error;
    job.error_code = code;
  }
  job.cv.notify_all();
}

bool same_options(const qkv_embed_options& a, const qkv_embed_options& b) {
  return a.pooling == b.pooling && a.normalize == b.normalize && a.dimensions == b.dimensions &&
         a.truncate == b.truncate;
}

int64_t job_tokens(const EmbedJob& job) {
  int64_t n = 0;
  for (const auto& in : job.inputs) n += static_cast<int64_t>(in.size());
  return n;
}

int status_of(qkv_status s) {
  switch (s) {
    case QKV_ERR_INVALID_ARGUMENT:
    case QKV_ERR_CONTEXT_OVERFLOW: return 400;
    case QKV_ERR_OUT_OF_MEMORY: return 503;
    default: return 500;
  }
}

}  // namespace

EmbedWorker::EmbedWorker(qkv_model* model, Options options, Metrics& metrics)
    : model_(model), options_(options), metrics_(metrics) {
  thread_ = std::thread([this] { loop(); });
}

EmbedWorker::~EmbedWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

EmbedWorker::Submit EmbedWorker::submit(const std::shared_ptr<EmbedJob>& job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!accepting_) return Submit::kStopping;
    // An idle worker takes a job at once; otherwise up to max_queue wait.
    if ((running_ || !queue_.empty()) && queue_.size() >= options_.max_queue) return Submit::kQueueFull;
    queue_.push_back(job);
  }
  cv_.notify_all();
  return Submit::kOk;
}

void EmbedWorker::drain(Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  accepting_ = false;
  cancel_at_ = deadline;
  cv_.notify_all();
  cv_.wait(lock, [&] { return !running_ && queue_.empty(); });
}

size_t EmbedWorker::queue_depth() {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

void EmbedWorker::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return quit_ || !queue_.empty(); });
    if (queue_.empty()) return;  // quit_
    const auto now = Clock::now();
    const bool cancel_all = quit_ || now >= cancel_at_;
    std::vector<std::shared_ptr<EmbedJob>> batch, dropped;
    int64_t tokens = 0;
    for (auto it = queue_.begin(); it != queue_.end();) {
      const std::shared_ptr<EmbedJob>& job = *it;
      if (cancel_all || job->cancelled || now >= job->deadline) {
        dropped.push_back(job);
        it = queue_.erase(it);
        continue;
      }
      // The first live job sets the options; later ones with the same options
      // join while the token budget allows (the first always runs).
      const int64_t n = job_tokens(*job);
      if (batch.empty() || (same_options(job->options, batch[0]->options) && tokens + n <= options_.batch_tokens)) {
        batch.push_back(job);
        tokens += n;
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
    running_ = true;
    lock.unlock();
    for (const auto& job : dropped) {
      if (cancel_all) {
        finish(*job, 503, "the server is shutting down", "shutting_down");
      } else if (job->cancelled) {
        finish(*job, 499, "the client closed the connection");
      } else {
        finish(*job, 504, "the request took longer than the server's timeout", "timeout");
      }
    }
    if (!batch.empty()) run(batch);
    lock.lock();
    running_ = false;
    cv_.notify_all();
  }
}

void EmbedWorker::run(std::vector<std::shared_ptr<EmbedJob>>& batch) {
  const qkv_status s = embed(batch);
  if (s == QKV_OK) return;
  // The callers checked sizes and ids; what remains is the model refusing the
  // options (RANK without a classifier head) or memory running out.
  if (batch.size() == 1) {
    finish(*batch[0], status_of(s), std::string("cannot embed: ") + qkv_last_error());
    return;
  }
  // The packed call failed: each job runs alone, so that only the one at
  // fault gets the error.
  for (const auto& job : batch) {
    std::vector<std::shared_ptr<EmbedJob>> one{job};
    const qkv_status s1 = embed(one);
    if (s1 != QKV_OK) finish(*job, status_of(s1), std::string("cannot embed: ") + qkv_last_error());
  }
}

qkv_status EmbedWorker::embed(std::vector<std::shared_ptr<EmbedJob>>& batch) {
  std::vector<const int32_t*> tokens;
  std::vector<int64_t> counts;
  int64_t total_tokens = 0;
  for (const auto& job : batch) {
    for (const auto& in : job->inputs) {
      tokens.push_back(in.data());
      counts.push_back(static_cast<int64_t>(in.size()));
      total_tokens += static_cast<int64_t>(in.size());
    }
  }
  qkv_embed_options o = batch[0]->options;
  o.batch_tokens = options_.batch_tokens;
  o.threads = options_.threads;
  o.truncate = 0;
  int64_t dim = 0;
  qkv_status s = qkv_embed_dimension(model_, &o, &dim);
  if (s != QKV_OK) return s;
  const bool per_token = o.pooling == QKV_POOLING_NONE;
  const int64_t n_vectors = per_token ? total_tokens : static_cast<int64_t>(counts.size());
  std::vector<float> out(static_cast<size_t>(n_vectors * dim));
  // One qkv_embed call per group of inputs within the token budget, each in
  // its own compute turn, so that a request of many inputs does not hold the
  // cores from the decode steps for all of its passes.
  int64_t got = 0;
  for (size_t first = 0; first < counts.size();) {
    size_t end = first + 1;
    int64_t group_tokens = counts[first];
    while (end < counts.size() && group_tokens + counts[end] <= options_.batch_tokens) group_tokens += counts[end++];
    const int64_t group_vectors = per_token ? group_tokens : static_cast<int64_t>(end - first);
    int64_t group_got = 0, used = 0;
    {
      ComputeTurns::Turn turn(options_.turns);
      s = qkv_embed(model_, tokens.data() + first, counts.data() + first, static_cast<int64_t>(end - first), &o,
                    out.data() + got * dim, group_vectors * dim, &group_got, &used);
    }
    if (s != QKV_OK) return s;
    got += group_got;
    first = end;
  }
  if (got != n_vectors) {
    for (const auto& job : batch) {
      finish(*job, 500, "internal error: qkv_embed gave " + std::to_string(got) + " vectors, not " +
                            std::to_string(n_vectors));
    }
    return QKV_OK;
  }
  metrics_.embedded(static_cast<int64_t>(batch.size()), static_cast<int64_t>(counts.size()), total_tokens);
  size_t at = 0;
  for (const auto& job : batch) {
    std::vector<int64_t> vectors;
    int64_t floats = 0;
    for (const auto& in : job->inputs) {
      const int64_t v = o.pooling == QKV_POOLING_NONE ? static_cast<int64_t>(in.size()) : 1;
      vectors.push_back(v);
      floats += v * dim;
    }
    {
      std::lock_guard<std::mutex> lock(job->mu);
      job->values.assign(out.begin() + static_cast<std::ptrdiff_t>(at),
                         out.begin() + static_cast<std::ptrdiff_t>(at + static_cast<size_t>(floats)));
      job->vectors = std::move(vectors);
      job->dimension = dim;
      job->tokens = job_tokens(*job);
      job->done = true;
    }
    job->cv.notify_all();
    at += static_cast<size_t>(floats);
  }
  return QKV_OK;
}

ApiError embedding_only_error(const ServedModel& st) {
  std::string msg = "model " + st.options.model_id + " is an embedding model: it serves /v1/embeddings";
  if (st.pooling == QKV_POOLING_RANK) msg += " and /v1/rerank";
  return ApiError(400, msg + ", not generation", "invalid_request_error", "model", "model_not_supported");
}

EmbedLimits embed_limits(const ServedModel& st) {
  EmbedLimits l;
  l.vocab_size = st.info.vocab_size;
  l.width = st.info.dim;
  return l;
}

std::vector<int32_t> embed_tokens(const ServedModel& st, const std::string& text) {
  int64_t n = 0;
  qkv_embed_tokenize(st.model, text.c_str(), nullptr, 0, &n);
  if (n < 0 || n > kMaxRequestTokens) {
    throw ApiError(400, "a text of " + std::to_string(text.size()) + " bytes has more tokens than a request may");
  }
  std::vector<int32_t> ids(static_cast<size_t>(n));
  if (qkv_embed_tokenize(st.model, text.c_str(), ids.data(), n, &n) != QKV_OK) {
    throw ApiError(400, std::string("cannot tokenize: ") + qkv_last_error());
  }
  ids.resize(static_cast<size_t>(n));
  return ids;
}

std::vector<std::vector<int32_t>> embed_inputs(const ServedModel& st, const EmbedRequest& r) {
  std::vector<std::vector<int32_t>> out;
  out.reserve(r.inputs.size());
  int64_t total = 0;
  for (const EmbedInput& in : r.inputs) {
    out.push_back(in.is_tokens ? in.tokens : embed_tokens(st, in.text));
    total += static_cast<int64_t>(out.back().size());
    if (total > kMaxRequestTokens) {
      throw bad_field("input", "the inputs have more than " + std::to_string(kMaxRequestTokens) +
                                   " tokens together: split the request");
    }
  }
  return out;
}

qkv_embed_options embed_options(const ServedModel& st, qkv_pooling pooling, bool normalize, int64_t dimensions) {
  qkv_embed_options o;
  qkv_embed_options_init(&o);
  o.pooling = pooling == QKV_POOLING_DEFAULT ? st.pooling : pooling;
  o.normalize = normalize && o.pooling != QKV_POOLING_RANK ? 2 : -1;
  if (o.pooling == QKV_POOLING_RANK && dimensions > 0) {
    throw bad_field("dimensions", "'dimensions' does not apply to rank pooling: its output is one score");
  }
  o.dimensions = dimensions;
  o.truncate = 0;
  return o;
}

EmbedWorker& embed_worker(ServedModel& st) {
  if (!st.embedder_counted.load() && st.before_embedder) {
    // Room for the worker's buffers under --memory-limit, before they exist
    // (outside embed_mu: the registry's lock comes first).
    st.before_embedder(st);
  }
  std::lock_guard<std::mutex> lock(st.embed_mu);
  if (st.stopping) {
    throw ApiError(503, "the server is shutting down and takes no new requests", "server_error", "", "shutting_down");
  }
  if (!st.embedder) {
    EmbedWorker::Options o;
    o.batch_tokens = std::max(st.options.prefill_batch, st.embed_context);
    o.max_queue = st.options.max_queue;
    o.threads = st.options.threads;
    o.turns = &st.turns;
    st.embedder = std::make_unique<EmbedWorker>(st.model, o, st.metrics);
  }
  return *st.embedder;
}

EmbedOutcome run_embedding(ServedModel& st, std::vector<std::vector<int32_t>> inputs, const qkv_embed_options& options,
                           bool truncate, const std::string& param, httplib::Response& res) {
  const int64_t ctx = st.embed_context;
  int64_t total = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<int32_t>& in = inputs[i];
    const auto n = static_cast<int64_t>(in.size());
    const std::string where = param + "[" + std::to_string(i) + "]";
    if (n == 0) throw bad_field(param, "'" + where + "' has no tokens: there is nothing to embed");
    if (n > ctx) {
      if (!truncate) {
        throw ApiError(400,
                       "'" + where + "' has " + std::to_string(n) + " tokens, more than the model's context of " +
                           std::to_string(ctx) + ": shorten it, or send \"truncate\": true to embed its first " +
                           std::to_string(ctx) + " tokens",
                       "invalid_request_error", param, "context_length_exceeded");
      }
      // The first ctx - 1 tokens and the last: a WordPiece input keeps its [SEP].
      in[static_cast<size_t>(ctx - 1)] = in.back();
      in.resize(static_cast<size_t>(ctx));
    }
    total += static_cast<int64_t>(in.size());
  }
  if (total > kMaxRequestTokens) {
    throw bad_field(param, "the inputs have " + std::to_string(total) + " tokens together, more than the " +
                               std::to_string(kMaxRequestTokens) + " a request may have: split it");
  }
  auto job = std::make_shared<EmbedJob>();
  job->inputs = std::move(inputs);
  job->options = options;
  job->deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(st.options.timeout_s * 1000));
  switch (embed_worker(st).submit(job)) {
    case EmbedWorker::Submit::kOk: break;
    case EmbedWorker::Submit::kQueueFull:
      res.set_header("Retry-After", "1");
      throw ApiError(503, "the server is busy: the embedding queue is full; retry later", "server_error", "",
                     "queue_full");
    case EmbedWorker::Submit::kStopping:
      throw ApiError(503, "the server is shutting down and takes no new requests", "server_error", "",
                     "shutting_down");
  }
  std::unique_lock<std::mutex> lock(job->mu);
  if (!job->cv.wait_until(lock, job->deadline, [&] { return job->done; })) {
    job->cancelled = true;
    throw ApiError(504, "the request took longer than the server's timeout", "timeout_error", "", "timeout");
  }
  if (job->status != 0) {
    const std::string type = job->status >= 500 ? "server_error" : "invalid_request_error";
    throw ApiError(job->status, job->error, job->status == 504 ? "timeout_error" : type, "", job->error_code);
  }
  EmbedOutcome out;
  out.values = std::move(job->values);
  out.vectors = std::move(job->vectors);
  out.dimension = job->dimension;
  out.tokens = job->tokens;
  return out;
}

void append_json_floats(std::string& out, const float* x, int64_t n) {
  out += '[';
  char buf[32];
  for (int64_t i = 0; i < n; ++i) {
    if (i) out += ',';
    if (!std::isfinite(x[i])) {
      out += "null";
      continue;
    }
    const auto r = std::to_chars(buf, buf + sizeof buf, x[i]);
    out.append(buf, r.ptr);
  }
  out += ']';
}

std::string base64_floats(const float* x, int64_t n) {
  static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(static_cast<size_t>(n) * 4, '\0');
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, &x[i], 4);
    for (int b = 0; b < 4; ++b) bytes[static_cast<size_t>(i * 4 + b)] = static_cast<char>((u >> (8 * b)) & 0xff);
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = (static_cast<uint8_t>(bytes[i]) << 16) | (static_cast<uint8_t>(bytes[i + 1]) << 8) |
                       static_cast<uint8_t>(bytes[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (i < bytes.size()) {
    const bool two = i + 1 < bytes.size();
    const uint32_t v = (static_cast<uint8_t>(bytes[i]) << 16) | (two ? static_cast<uint8_t>(bytes[i + 1]) << 8 : 0);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += two ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

}  // namespace qkv::serve

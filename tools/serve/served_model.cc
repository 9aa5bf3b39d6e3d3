// Loading and unloading one served model (tools/serve/served_model.h).
#include "tools/serve/served_model.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <vector>

#include "kernels/error.h"
#include "runtime/gguf.h"
#include "tools/args.h"
#include "tools/thread_flags.h"

namespace qkv::serve {

namespace {

// Encoders embed; qkv_context_create refuses them.
bool is_encoder(const qkv_model_info& info) {
  const std::string arch = info.architecture;
  return arch == "bert" || arch == "nomic-bert";
}

int64_t header_int(const GGUFFile& g, const std::string& key) {
  const GGUFValue* v = g.find(key);
  return v != nullptr && v->is_integer() ? v->as_int() : 0;
}

uint64_t file_size(const std::string& path) {
  struct stat sb {};
  return ::stat(path.c_str(), &sb) == 0 ? static_cast<uint64_t>(sb.st_size) : 0;
}

// The other parts of a split model: NAME-00001-of-0000N.gguf -> every NAME-0000i-of-0000N.gguf.
uint64_t split_parts_bytes(const std::string& path) {
  const std::string tail = ".gguf";
  const size_t of = path.rfind("-of-");
  if (of == std::string::npos || of < 6 || path.size() != of + 4 + 5 + tail.size() ||
      path.compare(of - 6, 6, "-00001") != 0) {
    return file_size(path);
  }
  const int parts = std::atoi(path.substr(of + 4, 5).c_str());
  uint64_t total = 0;
  for (int i = 1; i <= std::max(parts, 1); ++i) {
    char num[8];
    std::snprintf(num, sizeof num, "%05d", i);
    total += file_size(path.substr(0, of - 5) + num + path.substr(of));
  }
  return total;
}

}  // namespace

double kv_element_bytes(qkv_type t) {
  switch (t) {
    case QKV_TYPE_F32: return 4;
    case QKV_TYPE_Q8_0: return 34.0 / 32.0;
    default: return 2;
  }
}

ModelHeader read_model_header(const std::string& path) {
  ModelHeader h;
  h.file_bytes = split_parts_bytes(path);
  if (!GGUFFile::has_magic(path)) return h;
  try {
    const GGUFFile g = GGUFFile::open(path);
    const GGUFValue* a = g.find("general.architecture");
    if (a == nullptr || a->type != GGUFType::STRING) return h;
    const std::string arch = a->str;
    h.architecture = arch;
    h.context_length = header_int(g, arch + ".context_length");
    h.layers = header_int(g, arch + ".block_count");
    const int64_t heads = header_int(g, arch + ".attention.head_count");
    h.kv_heads = header_int(g, arch + ".attention.head_count_kv");
    if (h.kv_heads == 0) h.kv_heads = heads;
    h.head_dim = header_int(g, arch + ".attention.key_length");
    if (h.head_dim == 0 && heads > 0) h.head_dim = header_int(g, arch + ".embedding_length") / heads;
  } catch (const qkv::Error&) {  // unreadable: what it is shows when a load is tried
    h.architecture.clear();
  }
  return h;
}

const char* load_state_name(LoadState s) {
  switch (s) {
    case LoadState::kUnloaded: return "unloaded";
    case LoadState::kLoading: return "loading";
    case LoadState::kLoaded: return "loaded";
  }
  return "?";
}

bool ServedModel::load(std::string& msg) {
  const ServeOptions& o = options;
  qkv_model_options mopts;
  qkv_model_options_init(&mopts);
  if (!o.tokenizer_path.empty()) mopts.tokenizer_path = o.tokenizer_path.c_str();
  if (qkv_model_load(o.model_path.c_str(), &mopts, &model) != QKV_OK) {
    msg = std::string("loading the model: ") + qkv_last_error();
    model = nullptr;
    return false;
  }
  qkv_model_get_info(model, &info);
  if (!info.has_tokenizer) {
    msg = "the model has no vocabulary: a llama2.c checkpoint needs -z TOKENIZER";
    unload();
    return false;
  }
  slot_context = o.context > 0 ? o.context : std::min<int64_t>(info.context_length, 4096);
  embed_context = std::min(slot_context, info.context_length);
  pooling = o.pooling != QKV_POOLING_DEFAULT ? o.pooling : qkv_model_pooling(model);
  embedding_only = o.embedding_only || is_encoder(info);
  limits = RequestLimits{};
  limits.vocab_size = info.vocab_size;
  limits.max_prompt_tokens = slot_context;
  if (embedding_only) {
    slot_context = embed_context;
    // A first pass: a pooling the model cannot give (rank without a
    // classifier head) fails the load, and the worker runs when the first
    // request comes.
    int64_t n = 0;
    qkv_embed_tokenize(model, "a", nullptr, 0, &n);
    std::vector<int32_t> ids(static_cast<size_t>(std::max<int64_t>(n, 0)));
    qkv_embed_options eo;
    qkv_embed_options_init(&eo);
    eo.pooling = pooling;
    eo.threads = o.threads;
    int64_t dim = 0, got = 0;
    if (n < 1 || qkv_embed_tokenize(model, "a", ids.data(), n, &n) != QKV_OK ||
        qkv_embed_dimension(model, &eo, &dim) != QKV_OK) {
      msg = std::string("the model cannot embed: ") + qkv_last_error();
      unload();
      return false;
    }
    const int32_t* tokens = ids.data();
    std::vector<float> out(static_cast<size_t>(dim * n));
    if (qkv_embed(model, &tokens, &n, 1, &eo, out.data(), static_cast<int64_t>(out.size()), &got, nullptr) !=
        QKV_OK) {
      msg = std::string("the model cannot embed with pooling ") + pooling_name(pooling) + ": " + qkv_last_error();
      unload();
      return false;
    }
    embed_worker(*this);
    measured_bytes = header.file_bytes;
    return true;
  }
  // The context of the slots, its GEMM kernels built before requests come
  // (what the first prompts would otherwise build inside their requests).
  qkv_context_options copts;
  qkv_context_options_init(&copts);
  copts.context = slot_context;
  copts.kv_type = o.kv_type;
  copts.threads = o.threads;
  copts.threads_batch = tools::threads_batch_flag();
  copts.prefill_batch = std::max(o.prefill_chunk, o.prefill_batch);  // rows of one pass
  copts.memory_limit = o.memory_limit;
  if (qkv_context_create(model, o.slots, &copts, &context) != QKV_OK) {
    msg = std::string("creating the context: ") + qkv_last_error();
    context = nullptr;
    unload();
    return false;
  }
  const auto prepare_start = std::chrono::steady_clock::now();
  int64_t built = 0;
  if (qkv_context_prepare(context, &built) != QKV_OK) {
    msg = std::string("preparing the context: ") + qkv_last_error();
    unload();
    return false;
  }
  std::fprintf(stderr, "qkv serve: %s: prompt passes of up to %" PRId64 " rows prepared: %" PRId64
               " GEMM kernels built in %.0f ms\n",
               o.model_id.c_str(), copts.prefill_batch, built,
               std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - prepare_start).count());
  Scheduler::Options so;
  so.prefill_chunk = o.prefill_chunk;
  so.prefill_batch = o.prefill_batch;
  so.max_queue = o.max_queue;
  so.turns = &turns;
  scheduler = std::make_unique<Scheduler>(model, context, o.slots, slot_context, so, metrics);
  measured_bytes = std::max<uint64_t>(header.file_bytes, info.weight_bytes) + qkv_context_kv_bytes(context);
  return true;
}

void ServedModel::unload() {
  scheduler.reset();
  {
    std::lock_guard<std::mutex> lock(embed_mu);
    embedder.reset();
  }
  {
    std::lock_guard<std::mutex> lock(card_mu);
    ollama_card.reset();
  }
  grammars.clear();
  qkv_context_free(context);
  context = nullptr;
  qkv_model_free(model);
  model = nullptr;
}

bool ServedModel::busy() {
  if (open_streams.load() > 0) return true;
  if (scheduler && (scheduler->queue_depth() > 0 || scheduler->busy_slots() > 0)) return true;
  std::lock_guard<std::mutex> lock(embed_mu);
  return embedder && embedder->queue_depth() > 0;
}

uint64_t ServedModel::memory_bytes() const {
  if (measured_bytes > 0) return measured_bytes;
  const int64_t ctx = options.context > 0 ? options.context : std::min<int64_t>(header.context_length, 4096);
  const double kv = 2.0 * static_cast<double>(header.layers * header.kv_heads * header.head_dim) *
                    static_cast<double>(ctx) * options.slots * kv_element_bytes(options.kv_type);
  return header.file_bytes + static_cast<uint64_t>(std::max(kv, 0.0));
}

}  // namespace qkv::serve

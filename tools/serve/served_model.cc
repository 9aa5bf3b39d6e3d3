// Loading and unloading one served model (tools/serve/served_model.h).
#include "tools/serve/served_model.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <vector>

#include "kernels/error.h"
#include "runtime/gguf.h"
#include "runtime/quant_plan.h"
#include "tools/args.h"
#include "tools/thread_flags.h"

namespace qkv::serve {

namespace {

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
    char num[16];
    std::snprintf(num, sizeof num, "%05d", i);
    total += file_size(path.substr(0, of - 5) + num + path.substr(of));
  }
  return total;
}

// The preset name of llama.cpp's general.file_type, or the type most of the
// weight bytes have (a file without general.file_type).
std::string quantization_of(const GGUFFile& f) {
  if (const GGUFValue* ft = f.find("general.file_type"); ft && ft->is_integer()) {
    const int64_t t = ft->as_int();
    if (t == 0) return "F32";
    const std::string names = quant_preset_names();
    size_t at = 0;
    while (at < names.size()) {
      size_t comma = names.find(", ", at);
      if (comma == std::string::npos) comma = names.size();
      const QuantPreset* p = find_quant_preset(names.substr(at, comma - at));
      if (p && static_cast<int64_t>(quant_preset_file_type(*p)) == t) return quant_preset_name(*p);
      at = comma + 2;
    }
  }
  std::map<uint32_t, uint64_t> bytes;
  for (const GGUFTensorInfo& t : f.tensors()) {
    if (t.ne.size() >= 2) bytes[t.type] += t.n_bytes;
  }
  uint32_t best = ggml_type::F32;
  uint64_t most = 0;
  for (const auto& [type, n] : bytes) {
    if (n > most) {
      most = n;
      best = type;
    }
  }
  return ggml_type_name(best);
}

// The vocabulary's size: <arch>.vocab_size, else the token list's length.
int64_t vocab_size_of(const GGUFFile& g, const std::string& arch) {
  const int64_t n = header_int(g, arch + ".vocab_size");
  if (n > 0) return n;
  const GGUFValue* tokens = g.find("tokenizer.ggml.tokens");
  return tokens != nullptr && tokens->type == GGUFType::ARRAY ? static_cast<int64_t>(tokens->count) : 0;
}

// The runners an embedding pass takes from its model's pool (runtime/embed.cc):
// the one of the pass and the two the pool keeps between calls.
constexpr uint64_t kEmbedRunners = 3;
// A decoder's embedding runner serves at most this many sequences (runtime/embed.cc kMaxDecoderSequences).
constexpr int64_t kEmbedDecoderSequences = 64;

}  // namespace

bool is_encoder_architecture(const std::string& architecture) {
  return architecture == "bert" || architecture == "nomic-bert";
}

ModelShape shape_of(const ModelHeader& h) {
  ModelShape s;
  s.dim = h.dim;
  s.hidden_dim = h.hidden_dim;
  s.layers = h.layers;
  s.heads = h.heads;
  s.kv_heads = h.kv_heads;
  s.head_dim = h.head_dim;
  s.vocab_size = h.vocab_size;
  s.encoder = is_encoder_architecture(h.architecture);
  return s;
}

ModelShape shape_of(const qkv_model_info& info) {
  ModelShape s;
  s.dim = info.dim;
  s.hidden_dim = info.hidden_dim;
  s.layers = info.n_layers;
  s.heads = info.n_heads;
  s.kv_heads = info.n_kv_heads;
  s.head_dim = info.head_dim;
  s.vocab_size = info.vocab_size;
  s.encoder = is_encoder_architecture(info.architecture);
  return s;
}

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
  h.gguf = GGUFFile::has_magic(path);
  if (!h.gguf) return h;
  try {
    const GGUFFile g = GGUFFile::open(path);
    const GGUFValue* a = g.find("general.architecture");
    if (a == nullptr || a->type != GGUFType::STRING) return h;
    const std::string arch = a->str;
    h.architecture = arch;
    h.context_length = header_int(g, arch + ".context_length");
    h.layers = header_int(g, arch + ".block_count");
    h.heads = header_int(g, arch + ".attention.head_count");
    h.kv_heads = header_int(g, arch + ".attention.head_count_kv");
    if (h.kv_heads == 0) h.kv_heads = h.heads;
    h.dim = header_int(g, arch + ".embedding_length");
    h.hidden_dim = header_int(g, arch + ".feed_forward_length");
    h.head_dim = header_int(g, arch + ".attention.key_length");
    if (h.head_dim == 0 && h.heads > 0) h.head_dim = h.dim / h.heads;
    h.vocab_size = vocab_size_of(g, arch);
    for (const GGUFTensorInfo& t : g.tensors()) h.parameters += t.n_elements;
    h.quantization = quantization_of(g);
  } catch (const qkv::Error&) {  // unreadable: what it is shows when a load is tried
    h = ModelHeader{};
    h.gguf = true;
    h.file_bytes = split_parts_bytes(path);
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
  embedding_only = o.embedding_only || is_encoder_architecture(info.architecture);
  measured_embed_bytes = embed_worker_bytes_for(shape_of(info), std::max(o.prefill_batch, embed_context));
  measured_embeds_only = embedding_only ? 1 : 0;
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
    embedder_counted = true;  // in memory_bytes() from the start: the registry made room for it
    embed_worker(*this);
    measured_bytes = std::max<uint64_t>(header.file_bytes, info.weight_bytes);
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
  so.speculative = o.speculative;
  so.draft_kv_type = o.kv_type;
  so.draft_threads = o.threads;
  try {
    scheduler = std::make_unique<Scheduler>(model, context, o.slots, slot_context, so, metrics);
  } catch (const qkv::Error& e) {  // the draft model
    msg = e.what();
    unload();
    return false;
  }
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
  embedder_counted = false;
}

bool ServedModel::busy() {
  if (open_streams.load() > 0) return true;
  if (scheduler && (scheduler->queue_depth() > 0 || scheduler->busy_slots() > 0)) return true;
  std::lock_guard<std::mutex> lock(embed_mu);
  return embedder && embedder->queue_depth() > 0;
}

uint64_t ServedModel::model_bytes() const {
  if (const uint64_t measured = measured_bytes.load(); measured > 0) return measured;
  const int64_t ctx = options.context > 0 ? options.context : std::min<int64_t>(header.context_length, 4096);
  const double kv = 2.0 * static_cast<double>(header.layers * header.kv_heads * header.head_dim) *
                    static_cast<double>(ctx) * options.slots * kv_element_bytes(options.kv_type);
  return header.file_bytes + static_cast<uint64_t>(std::max(kv, 0.0));
}

uint64_t embed_worker_bytes_for(const ModelShape& s, int64_t budget) {
  const auto b = static_cast<uint64_t>(std::max<int64_t>(budget, 1));
  const auto dim = static_cast<uint64_t>(std::max<int64_t>(s.dim, 0));
  const auto hidden = static_cast<uint64_t>(std::max<int64_t>(s.hidden_dim, 0));
  const auto head = static_cast<uint64_t>(std::max<int64_t>(s.head_dim, 0));
  const auto q = static_cast<uint64_t>(std::max<int64_t>(s.heads, 0)) * head;
  const auto kv = static_cast<uint64_t>(std::max<int64_t>(s.kv_heads, 0)) * head;
  // One runner of b rows, as runtime/encoder.cc and runtime/decoder.cc size
  // theirs (the larger variant where a family differs: gated FFN, RoPE
  // tables), and the b x dim hidden states the pass pools from.
  uint64_t runner = 0;
  if (s.encoder) {
    runner = b * (2 * dim + 2 * q + 2 * kv + 2 * hidden + head) * 4;
  } else {
    const uint64_t seqs = std::min<uint64_t>(static_cast<uint64_t>(kEmbedDecoderSequences), b);
    const uint64_t kv_cache = 2 * static_cast<uint64_t>(std::max<int64_t>(s.layers, 0)) * kv * b * 4;  // F32
    const uint64_t activations =
        (b * (2 * dim + 2 * q + 2 * kv + 2 * hidden + 2 * head) + seqs * static_cast<uint64_t>(std::max<int64_t>(s.vocab_size, 0))) * 4 +
        seqs * (dim + q + hidden) * 2 * 3;
    runner = kv_cache + activations;
  }
  runner += b * dim * 4;
  // And the vectors of one pass (b of them with pooling none).
  return kEmbedRunners * runner + b * dim * 4;
}

uint64_t ServedModel::embed_worker_bytes() const {
  if (const uint64_t measured = measured_embed_bytes.load(); measured > 0) return measured;
  // Before a load: the budget load() and embed_worker() set, from the header.
  const int64_t trained = header.context_length;
  const int64_t slot = options.context > 0 ? options.context : std::min<int64_t>(trained > 0 ? trained : 4096, 4096);
  const int64_t embed_context = trained > 0 ? std::min(slot, trained) : slot;
  return embed_worker_bytes_for(shape_of(header), std::max(options.prefill_batch, embed_context));
}

uint64_t ServedModel::embed_bytes() const {
  const int only = measured_embeds_only.load();
  const bool only_embeds =
      only >= 0 ? only == 1 : options.embedding_only || is_encoder_architecture(header.architecture);
  return only_embeds || embedder_counted.load() ? embed_worker_bytes() : 0;
}

uint64_t ServedModel::memory_bytes() const { return model_bytes() + embed_bytes(); }

bool names_model(const std::string& requested, const std::string& id) {
  if (requested == id) return true;
  const std::string tag = ":latest";
  const auto tagged = [&](const std::string& s) {
    return s.size() > tag.size() && s.compare(s.size() - tag.size(), tag.size(), tag) == 0;
  };
  if (tagged(requested) && !tagged(id)) return requested == id + tag;
  if (tagged(id) && !tagged(requested)) return id == requested + tag;
  return false;
}

}  // namespace qkv::serve

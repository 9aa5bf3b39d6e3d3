// qkv serve: an OpenAI-compatible HTTP server over the C API, with continuous
// batching over --slots sequences of one context, and embeddings (an encoder
// model, or --embeddings, serves them alone). SIGTERM/SIGINT: stop
// accepting, let running requests finish within --grace seconds (then cancel
// them), exit 0.
#include <malloc.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tools/args.h"
#include "tools/commands.h"
#include "tools/models/model_ref.h"
#include "tools/serve/connection_threads.h"
#include "tools/serve/server.h"

namespace qkv::tools {

namespace {

const char* kServeUsage =
    "usage: qkv serve -m MODEL [options]\n"
    "  -m, --model PATH      GGUF file or llama2.c checkpoint (-z TOKENIZER for the latter)\n"
    "  --host ADDR           address to bind (default 127.0.0.1; 0.0.0.0 for every interface)\n"
    "  --port N              port (default 8080; 0 picks a free one, printed on stderr)\n"
    "  --slots N             sequences decoded together (default 4)\n"
    "  -c, --ctx-size N      positions per slot (default: the model's, at most 4096)\n"
    "  --kv-type T           KV cache type: f32, f16 (default), bf16, q8_0\n"
    "  -t, --threads N       threads (default: one per physical core)\n"
    "  --memory-limit BYTES  fail at start when weights + KV cache of every slot + activations exceed\n"
    "                        BYTES (K, M, G suffixes: 512M, 8G; default: no limit)\n"
    "  --api-key KEY         require 'Authorization: Bearer KEY'\n"
    "  --max-queue N         requests waiting for a slot before 503 (default 64)\n"
    "  --timeout S           per-request time limit in seconds (default 600)\n"
    "  --grace S             seconds running requests get to finish on SIGTERM (default 10)\n"
    "  --io-timeout S        seconds a connection may stall while sending its request or reading\n"
    "                        the response before it is closed (default 30)\n"
    "  --prefill-chunk N     prompt tokens per step while the generating requests are at least as\n"
    "                        many as the waiting prompts, all of these in one pass (default 256)\n"
    "  --prefill-batch N     prompt tokens per pass when the waiting prompts outnumber them\n"
    "                        (default 512)\n"
    "  --max-body BYTES      request body limit (default 1048576)\n"
    "  --alias NAME          the model id in the API (default: the file name)\n"
    "  --chat-template-file FILE  this Jinja chat template instead of the model's (its tool-call\n"
    "                        and reasoning format is the one the replies are parsed with)\n"
    "  --embeddings          serve embeddings only (/v1/embeddings, /api/embed), no generation;\n"
    "                        an encoder model (bert, nomic-bert) always does\n"
    "  --rerank              serve reranking (/v1/rerank) and embeddings only: --pooling rank\n"
    "  --pooling P           pooling of the embeddings: none, mean, cls, last, rank (default: the\n"
    "                        model's; a decoder's is last)\n"
    "An embedding input may have up to -c tokens (at most the model's context); embedding\n"
    "requests share the --max-queue, --timeout and -b (tokens per pass) of generation.\n";

std::atomic<int> g_signal{0};
void on_signal(int sig) { g_signal = sig; }

// Encoders embed; qkv_context_create refuses them.
bool is_encoder(const qkv_model_info& info) {
  const std::string arch = info.architecture;
  return arch == "bert" || arch == "nomic-bert";
}

// The context of the slots, its GEMM kernels built before the server listens
// (what the first prompts would otherwise build inside their requests), and
// the scheduler over it.
qkv_context* start_generation(serve::ServerState& st) {
  const serve::ServeOptions& o = st.options;
  qkv_context_options copts;
  qkv_context_options_init(&copts);
  copts.context = st.slot_context;
  copts.kv_type = o.kv_type;
  copts.threads = o.threads;
  copts.prefill_batch = std::max(o.prefill_chunk, o.prefill_batch);  // rows of one pass
  copts.memory_limit = o.memory_limit;
  qkv_context* ctx = nullptr;
  if (qkv_context_create(st.model, o.slots, &copts, &ctx) != QKV_OK) {
    const std::string msg = qkv_last_error();
    qkv_model_free(st.model);
    fail("creating the context: ", msg);
  }
  const auto prepare_start = std::chrono::steady_clock::now();
  int64_t built = 0;
  if (qkv_context_prepare(ctx, &built) != QKV_OK) {
    const std::string msg = qkv_last_error();
    qkv_context_free(ctx);
    qkv_model_free(st.model);
    fail("preparing the context: ", msg);
  }
  std::fprintf(stderr, "qkv serve: prompt passes of up to %" PRId64 " rows prepared: %" PRId64 " GEMM kernels built in %.0f ms\n",
               copts.prefill_batch, built,
               std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - prepare_start).count());
  serve::Scheduler::Options so;
  so.prefill_chunk = o.prefill_chunk;
  so.prefill_batch = o.prefill_batch;
  so.max_queue = o.max_queue;
  so.turns = &st.turns;
  st.scheduler = std::make_unique<serve::Scheduler>(st.model, ctx, o.slots, st.slot_context, so, st.metrics);
  return ctx;
}

// An embedding server's first pass, run before it listens: a pooling the
// model cannot give (rank without a classifier head) fails the start, and
// the worker is running when the first request comes.
bool check_embedding(serve::ServerState& st, std::string& msg) {
  int64_t n = 0;
  qkv_embed_tokenize(st.model, "a", nullptr, 0, &n);
  std::vector<int32_t> ids(static_cast<size_t>(std::max<int64_t>(n, 0)));
  qkv_embed_options eo;
  qkv_embed_options_init(&eo);
  eo.pooling = st.pooling;
  eo.threads = st.options.threads;
  int64_t dim = 0, got = 0;
  if (n < 1 || qkv_embed_tokenize(st.model, "a", ids.data(), n, &n) != QKV_OK ||
      qkv_embed_dimension(st.model, &eo, &dim) != QKV_OK) {
    msg = std::string("the model cannot embed: ") + qkv_last_error();
    return false;
  }
  const int32_t* tokens = ids.data();
  std::vector<float> out(static_cast<size_t>(dim * n));
  if (qkv_embed(st.model, &tokens, &n, 1, &eo, out.data(), static_cast<int64_t>(out.size()), &got, nullptr) !=
      QKV_OK) {
    msg = std::string("the model cannot embed with pooling ") + serve::pooling_name(st.pooling) + ": " +
          qkv_last_error();
    return false;
  }
  serve::embed_worker(st);
  return true;
}

std::string base_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

int cmd_serve(int argc, char** argv) {
  serve::ServeOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kServeUsage, stdout);
      return 0;
    } else if (a == "-m" || a == "--model") {
      o.model_path = models::resolve_model_argument(flag_value(argc, argv, i));
    } else if (a == "-z" || a == "--tokenizer") {
      o.tokenizer_path = flag_value(argc, argv, i);
    } else if (a == "--host") {
      o.host = flag_value(argc, argv, i);
    } else if (a == "--port") {
      o.port = static_cast<int>(parse_int(a.c_str(), flag_value(argc, argv, i), 0, 65535));
    } else if (a == "--slots" || a == "-np" || a == "--parallel") {
      o.slots = static_cast<int>(parse_int(a.c_str(), flag_value(argc, argv, i), 1, 256));
    } else if (a == "-c" || a == "--ctx-size") {
      o.context = parse_int(a.c_str(), flag_value(argc, argv, i), 2, INT64_C(1) << 24);
    } else if (a == "--kv-type") {
      o.kv_type = parse_kv_type(flag_value(argc, argv, i));
    } else if (a == "-t" || a == "--threads") {
      o.threads = static_cast<int>(parse_int(a.c_str(), flag_value(argc, argv, i), 1, 1024));
    } else if (a == "--memory-limit") {
      o.memory_limit = parse_bytes(a.c_str(), flag_value(argc, argv, i));
    } else if (a == "--chat-template-file") {
      o.chat_template = read_file(flag_value(argc, argv, i));
      if (o.chat_template.empty()) fail("--chat-template-file: the file is empty");
    } else if (a == "--api-key") {
      o.api_key = flag_value(argc, argv, i);
      if (o.api_key.empty()) fail("flag --api-key needs a non-empty key");
    } else if (a == "--max-queue") {
      o.max_queue = static_cast<size_t>(parse_int(a.c_str(), flag_value(argc, argv, i), 0, 1 << 20));
    } else if (a == "--timeout") {
      o.timeout_s = parse_float(a.c_str(), flag_value(argc, argv, i), 0.001, 1e7);
    } else if (a == "--io-timeout") {
      o.io_timeout_s = parse_float(a.c_str(), flag_value(argc, argv, i), 0.001, 1e6);
    } else if (a == "--grace") {
      o.grace_s = parse_float(a.c_str(), flag_value(argc, argv, i), 0, 1e6);
    } else if (a == "--prefill-chunk") {
      o.prefill_chunk = parse_int(a.c_str(), flag_value(argc, argv, i), 1, 1 << 16);
    } else if (a == "--prefill-batch" || a == "-b" || a == "--batch-size") {
      o.prefill_batch = parse_int(a.c_str(), flag_value(argc, argv, i), 1, 1 << 16);
    } else if (a == "--max-body") {
      o.max_body = static_cast<size_t>(parse_int(a.c_str(), flag_value(argc, argv, i), 256, INT64_C(1) << 32));
    } else if (a == "--embeddings" || a == "--embedding") {
      o.embedding_only = true;
    } else if (a == "--rerank" || a == "--reranking") {
      o.embedding_only = true;
      o.pooling = QKV_POOLING_RANK;
    } else if (a == "--pooling") {
      const std::string name = flag_value(argc, argv, i);
      if (!serve::pooling_from_name(name, &o.pooling)) {
        fail("flag --pooling takes none, mean, cls, last or rank, not '", name, "'");
      }
    } else if (a == "--alias") {
      o.model_id = flag_value(argc, argv, i);
    } else {
      std::fprintf(stderr, "qkv serve: unknown flag '%s'\n\n%s", argv[i], kServeUsage);
      return 2;
    }
  }
  if (o.model_path.empty()) {
    std::fprintf(stderr, "qkv serve: -m MODEL is required\n\n%s", kServeUsage);
    return 2;
  }
  if (o.model_id.empty()) o.model_id = base_name(o.model_path);

  serve::ServerState st;
  st.options = o;
  qkv_model_options mopts;
  qkv_model_options_init(&mopts);
  if (!o.tokenizer_path.empty()) mopts.tokenizer_path = o.tokenizer_path.c_str();
  if (qkv_model_load(o.model_path.c_str(), &mopts, &st.model) != QKV_OK) fail("loading the model: ", qkv_last_error());
  qkv_model_get_info(st.model, &st.info);
  if (!st.info.has_tokenizer) {
    qkv_model_free(st.model);
    fail("the model has no vocabulary: a llama2.c checkpoint needs -z TOKENIZER");
  }
  st.slot_context = o.context > 0 ? o.context : std::min<int64_t>(st.info.context_length, 4096);
  st.embed_context = std::min(st.slot_context, st.info.context_length);
  st.pooling = o.pooling != QKV_POOLING_DEFAULT ? o.pooling : qkv_model_pooling(st.model);
  st.embedding_only = o.embedding_only || is_encoder(st.info);
  st.limits.vocab_size = st.info.vocab_size;
  st.limits.max_prompt_tokens = st.slot_context;
  qkv_context* ctx = st.embedding_only ? nullptr : start_generation(st);
  if (st.embedding_only) {
    st.slot_context = st.embed_context;
    std::string msg;
    if (!check_embedding(st, msg)) {
      qkv_model_free(st.model);
      fail(msg);
    }
  }

  httplib::Server svr;
  // Enough handler threads for every slot, the whole queue and a few quick
  // requests besides; each lives as long as its connection.
  const size_t threads = std::min<size_t>(static_cast<size_t>(o.slots) + o.max_queue + 16, 1024);
  svr.new_task_queue = [threads] { return new serve::ConnectionThreads(threads); };
  svr.set_payload_max_length(o.max_body);
  // A stalled client holds a handler thread until this runs out.
  const auto io_sec = static_cast<time_t>(o.io_timeout_s);
  const auto io_usec = static_cast<time_t>((o.io_timeout_s - static_cast<double>(io_sec)) * 1e6);
  svr.set_read_timeout(io_sec, io_usec);
  svr.set_write_timeout(io_sec, io_usec);
  svr.set_keep_alive_timeout(5);
  serve::install_routes(svr, st);
  // cpp-httplib listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, fixed
  // in Debian's compiled library): a burst of clients then overflows the
  // accept queue, the kernel drops their SYNs and each retries after 1, 3,
  // 7, 15, ... s. The listening socket is kept here and listen() is called
  // again after the bind with the system's maximum.
  int listen_fd = -1;
  svr.set_socket_options([&listen_fd](socket_t sock) {
    httplib::default_socket_options(sock);
    listen_fd = sock;
  });

  int port = o.port;
  const bool bound = port == 0 ? (port = svr.bind_to_any_port(o.host)) > 0 : svr.bind_to_port(o.host, port);
  if (!bound) {
    st.scheduler.reset();
    st.embedder.reset();
    qkv_context_free(ctx);
    qkv_model_free(st.model);
    fail("cannot listen on ", o.host, ":", o.port, " (address in use, or not an address of this host)");
  }

  if (listen_fd >= 0 && ::listen(listen_fd, SOMAXCONN) != 0) {
    std::fprintf(stderr, "qkv serve: warning: widening the listen backlog: %s\n", std::strerror(errno));
  }

  signal(SIGPIPE, SIG_IGN);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    auto trim_at = std::chrono::steady_clock::now();
    while (!done && g_signal == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
#ifdef __GLIBC__
      // glibc keeps what the handler threads free in up to 8 arenas per core
      // (a soak's server, scripts/soak_serve.sh, held 8.3 MB in them with 5.8
      // MB in use, the gap growing by ~0.25 MB per 2.5 minutes): every 30 s
      // the free pages go back to the system.
      if (std::chrono::steady_clock::now() >= trim_at) {
        malloc_trim(0);
        trim_at = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      }
#endif
    }
    if (done) return;
    std::fprintf(stderr, "qkv serve: signal %d: finishing running requests (up to %.0f s)\n", g_signal.load(),
                 o.grace_s);
    st.stopping = true;
    const auto grace_end = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(o.grace_s * 1000));
    if (st.scheduler) {
      st.scheduler->drain(std::chrono::duration_cast<std::chrono::milliseconds>(grace_end - std::chrono::steady_clock::now()));
    }
    serve::EmbedWorker* embedder = nullptr;
    {
      std::lock_guard<std::mutex> lock(st.embed_mu);
      embedder = st.embedder.get();
    }
    if (embedder) embedder->drain(grace_end);
    // Every job has ended; give the streams up to 2 s to write their last
    // events (a cancelled stream's error event and [DONE]) before closing.
    const auto flush_by = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (st.open_streams.load() > 0 && std::chrono::steady_clock::now() < flush_by) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    svr.stop();
  });

  if (ctx) {
    std::fprintf(stderr, "qkv serve: %s, %d slots x %" PRId64 " positions (%s KV, %.1f MiB), listening on http://%s:%d\n",
                 o.model_id.c_str(), o.slots, st.slot_context, kv_type_name(o.kv_type),
                 static_cast<double>(qkv_context_kv_bytes(ctx)) / (1024.0 * 1024.0), o.host.c_str(), port);
  } else {
    std::fprintf(stderr, "qkv serve: %s, embeddings only (pooling %s, %" PRId64 " floats, inputs up to %" PRId64
                 " tokens), listening on http://%s:%d\n",
                 o.model_id.c_str(), serve::pooling_name(st.pooling),
                 st.pooling == QKV_POOLING_RANK ? INT64_C(1) : st.info.dim, st.embed_context, o.host.c_str(), port);
  }
  std::fflush(stderr);
  svr.listen_after_bind();
  done = true;
  watcher.join();
  st.scheduler.reset();
  st.embedder.reset();
  qkv_context_free(ctx);
  qkv_model_free(st.model);
  std::fprintf(stderr, "qkv serve: stopped\n");
  return 0;
}

}  // namespace qkv::tools

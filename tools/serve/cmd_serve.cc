// qkv serve: an OpenAI-compatible HTTP server over the C API, with continuous
// batching over --slots sequences of one context per model, and embeddings
// (an encoder model, or --embeddings, serves them alone). One -m: the model
// loads before the server listens; several (-m again, --models-dir): each
// loads on first use (tools/serve/model_registry.h). SIGTERM/SIGINT: stop
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
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tools/args.h"
#include "tools/commands.h"
#include "tools/models/model_ref.h"
#include "tools/serve/connection_threads.h"
#include "tools/serve/server.h"
#include "tools/thread_flags.h"

namespace qkv::tools {

namespace {

const char* kServeUsage =
    "usage: qkv serve -m MODEL [-m MODEL ...] [--models-dir DIR] [options]\n"
    "  -m, --model PATH      GGUF file or llama2.c checkpoint (-z TOKENIZER for the latter); again\n"
    "                        for more models, each named after its file without .gguf\n"
    "  --models-dir DIR      serve every *.gguf of DIR (a split model's parts once), by file name\n"
    "                        without .gguf; with several models a request's 'model' picks (none:\n"
    "                        the first listed), each loaded on first use\n"
    "  --models-max N        models loaded at once (Ollama's OLLAMA_MAX_LOADED_MODELS; default:\n"
    "                        no limit); loading another unloads the least recently used idle one\n"
    "  --idle-unload S       unload a model after S seconds without requests (default: never)\n"
    "                        (GET /v1/models: each model's status; POST /models/load and\n"
    "                        /models/unload {\"model\": NAME}, 409 while it has requests in flight)\n"
    "  --host ADDR           address to bind (default 127.0.0.1; 0.0.0.0 for every interface)\n"
    "  --port N              port (default 8080; 0 picks a free one, printed on stderr)\n"
    "  --slots N             sequences decoded together (default 4)\n"
    "  -c, --ctx-size N      positions per slot (default: the model's, at most 4096)\n"
    "  --kv-type T           KV cache type: f32, f16 (default), bf16, q8_0\n"
    "  -t, --threads N       threads (default: one per physical core)\n"
    "  --memory-limit BYTES  one model: fail at start when weights + KV cache of every slot +\n"
    "                        activations exceed BYTES (K, M, G suffixes: 512M, 8G; default: no\n"
    "                        limit); several: the loaded models' weights + KV caches, loading one\n"
    "                        over it unloads the least recently used idle ones first\n"
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
    "  --alias NAME          the model id in the API of a single -m (default: the file name)\n"
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

std::string base_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A model's name among several: its file name without .gguf (and without a
// split model's -00001-of-0000N).
std::string model_name(const std::string& path) {
  std::string name = base_name(path);
  if (name.size() > 5 && name.compare(name.size() - 5, 5, ".gguf") == 0) name.resize(name.size() - 5);
  const size_t of = name.rfind("-of-");
  if (of != std::string::npos && of >= 6 && name.size() == of + 9 && name.compare(of - 6, 6, "-00001") == 0) {
    name.resize(of - 6);
  }
  return name;
}

// Every *.gguf of dir, sorted, a split model by its first part only.
std::vector<std::string> gguf_files_in(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= 5 || name.compare(name.size() - 5, 5, ".gguf") != 0) continue;
    const size_t of = name.rfind("-of-");
    const bool split = of != std::string::npos && of >= 6 && name.size() == of + 14 && name[of - 6] == '-';
    if (split && name.compare(of - 6, 6, "-00001") != 0) continue;  // a later part of a split model
    files.push_back(entry.path().string());
  }
  if (ec) fail("--models-dir: cannot read '", dir, "': ", ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

int cmd_serve(int argc, char** argv) {
  serve::ServeOptions o;
  std::vector<std::string> model_paths;
  std::vector<std::string> model_names;  // per -m: the name its reference gives (ollama:NAME:TAG), else ""
  std::string models_dir;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kServeUsage, stdout);
      std::fputs(serve::kSpeculativeUsage, stdout);
      return 0;
    } else if (a == "-m" || a == "--model") {
      const models::ResolvedModel resolved = models::resolve_model_reference(flag_value(argc, argv, i));
      model_paths.push_back(resolved.path);
      model_names.push_back(resolved.name);
    } else if (a == "--models-dir") {
      models_dir = flag_value(argc, argv, i);
      if (models_dir.empty()) fail("flag --models-dir needs a directory");
    } else if (a == "--models-max") {
      o.models_max = static_cast<int>(parse_int(a.c_str(), flag_value(argc, argv, i), 1, 4096));
    } else if (a == "--idle-unload") {
      o.idle_unload_s = parse_float(a.c_str(), flag_value(argc, argv, i), 0.001, 1e7);
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
    } else if (serve::parse_speculative_flag(argc, argv, i, o.speculative)) {
    } else if (a == "--alias") {
      o.model_id = flag_value(argc, argv, i);
    } else {
      std::fprintf(stderr, "qkv serve: unknown flag '%s'\n\n%s", argv[i], kServeUsage);
      return 2;
    }
  }
  std::vector<std::pair<std::string, std::string>> models;  // (name, path)
  if (!models_dir.empty()) {
    const std::vector<std::string> files = gguf_files_in(models_dir);
    if (files.empty()) fail("--models-dir: '", models_dir, "' holds no .gguf file");
    model_paths.insert(model_paths.end(), files.begin(), files.end());
  }
  if (model_paths.empty()) {
    std::fprintf(stderr, "qkv serve: -m MODEL (or --models-dir DIR) is required\n\n%s", kServeUsage);
    return 2;
  }
  serve::check_speculative_flags(o.speculative);
  const bool single = model_paths.size() == 1 && models_dir.empty();
  if (!single && !o.model_id.empty()) fail("--alias names the model of a single -m; several models are named by file");
  if (!single && !o.tokenizer_path.empty()) fail("-z TOKENIZER goes with a single -m (a llama2.c checkpoint)");
  model_names.resize(model_paths.size());  // --models-dir's files go by their file names
  for (size_t k = 0; k < model_paths.size(); ++k) {
    const std::string& path = model_paths[k];
    const std::string default_name = !model_names[k].empty() ? model_names[k] : single ? base_name(path) : model_name(path);
    const std::string name = single && !o.model_id.empty() ? o.model_id : default_name;
    for (const auto& m : models) {
      if (m.first == name) fail("two models are named '", name, "' ('", m.second, "' and '", path, "')");
    }
    models.emplace_back(name, path);
  }
  o.model_path = models.front().second;
  o.model_id = models.front().first;

  serve::ServerState st;
  st.options = o;
  st.models = std::make_unique<serve::ModelRegistry>(o, models, st.metrics, st.stopping);
  if (single) {  // loaded before listening: a model that cannot load fails the start
    try {
      st.models->load("");
    } catch (const serve::ApiError& e) {
      const std::string msg = e.what();
      const std::string prefix = "model '" + o.model_id + "' could not be loaded: ";
      fail(msg.rfind(prefix, 0) == 0 ? msg.substr(prefix.size()) : msg);
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
    st.models.reset();
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
    // Every job ends by grace_end; the streams then get up to 2 s to write their last events.
    st.models->drain(grace_end, std::max(grace_end, std::chrono::steady_clock::now()) + std::chrono::seconds(2));
    svr.stop();
  });

  if (single) {
    st.models->for_each([&](const serve::ModelStatus& m) {
      const serve::ServedModel& sm = *m.model;
      if (sm.context) {
        std::fprintf(stderr, "qkv serve: %s, %d slots x %" PRId64 " positions (%s KV, %.1f MiB), listening on http://%s:%d\n",
                     o.model_id.c_str(), o.slots, sm.slot_context, kv_type_name(o.kv_type),
                     static_cast<double>(qkv_context_kv_bytes(sm.context)) / (1024.0 * 1024.0), o.host.c_str(), port);
      } else {
        std::fprintf(stderr, "qkv serve: %s, embeddings only (pooling %s, %" PRId64 " floats, inputs up to %" PRId64
                     " tokens), listening on http://%s:%d\n",
                     o.model_id.c_str(), serve::pooling_name(sm.pooling),
                     sm.pooling == QKV_POOLING_RANK ? INT64_C(1) : sm.info.dim, sm.embed_context, o.host.c_str(), port);
      }
    });
  } else {
    std::string names;
    for (const auto& m : models) names += (names.empty() ? "" : ", ") + m.first;
    std::fprintf(stderr, "qkv serve: %zu models (%s), each loaded on first use, listening on http://%s:%d\n",
                 models.size(), names.c_str(), o.host.c_str(), port);
  }
  std::fflush(stderr);
  svr.listen_after_bind();
  done = true;
  watcher.join();
  st.models.reset();
  std::fprintf(stderr, "qkv serve: stopped\n");
  return 0;
}

}  // namespace qkv::tools

// qkv chat: a conversation with a model, one user turn per line (terminal or
// pipe), as llama-cli's conversation mode and `ollama run`. Each turn renders
// the whole conversation through the chat template and prefills only the
// tokens after the longest prefix the KV cache already holds (the cache is
// rewound to it when the render changed earlier text), then streams the reply.
// A client of the public C API only.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "qkv.h"
#include "runtime/stop_strings.h"
#include "tools/args.h"
#include "tools/chat/cmd_chat.h"
#include "tools/commands.h"
#include "tools/models/model_ref.h"
#include "tools/thread_flags.h"

namespace qkv::tools {

namespace {

const char* kUsage =
    "usage: qkv chat -m MODEL [--system TEXT] [-n N] [options]\n"
    "  a conversation: each line read from the terminal or a pipe is a user turn; the reply\n"
    "  streams to stdout. /clear starts over, /exit or end of input quits; Ctrl-C stops a\n"
    "  reply (at the prompt it quits).\n"
    "  -m, --model PATH      GGUF file, or a llama2.c checkpoint with -z\n"
    "  -z, --tokenizer PATH  llama2.c tokenizer.bin (or a GGUF vocabulary) for a llama2.c checkpoint\n"
    "  --system TEXT         a system message before the conversation\n"
    "  --chat-template FILE  a Jinja chat template instead of the model's (default: the model's;\n"
    "                        ChatML when it has none)\n"
    "  -n, --n-predict N     most tokens per reply (default -1: until end of turn or full context)\n"
    "  --verbose             per-turn timings on stderr (prompt, cache reuse, prefill, generation)\n";

volatile std::sig_atomic_t g_interrupted = 0;

void on_sigint(int) { g_interrupted = 1; }

// At the prompt a Ctrl-C must end the read (no SA_RESTART); during a reply it
// only sets the flag, and interrupted writes to stdout resume (SA_RESTART).
void install_sigint(bool restart) {
  struct sigaction sa = {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = restart ? SA_RESTART : 0;
  sigaction(SIGINT, &sa, nullptr);
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double per_second(int64_t n, double ms) { return ms > 0 ? 1000.0 * static_cast<double>(n) / ms : 0.0; }

void out(const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

enum class Input { kLine, kEnd, kInterrupted };

// One line of stdin through read(2), so a Ctrl-C at the prompt interrupts it.
class LineReader {
 public:
  Input next(std::string* line) {
    line->clear();
    for (;;) {
      if (pos_ == buf_.size()) {
        if (eof_) return line->empty() ? Input::kEnd : Input::kLine;
        if (g_interrupted) return Input::kInterrupted;  // a Ctrl-C just before the read
        char chunk[4096];
        const ssize_t n = ::read(STDIN_FILENO, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) return Input::kInterrupted;
        if (n < 0) fail("reading the input: ", std::strerror(errno));
        if (n == 0) eof_ = true;
        buf_.assign(chunk, static_cast<size_t>(n));
        pos_ = 0;
        continue;
      }
      const char c = buf_[pos_++];
      if (c == '\n') {
        if (!line->empty() && line->back() == '\r') line->pop_back();
        return Input::kLine;
      }
      *line += c;
    }
  }

 private:
  std::string buf_;
  size_t pos_ = 0;
  bool eof_ = false;
};

struct Options {
  std::string model, tokenizer, system, chat_template;
  int64_t n_predict = -1;
  bool verbose = false, seed_given = false;
  qkv_context_options context;
  qkv_sampler_options sampler;
  LogitBias bias;
};

// The conversation and the tokens its KV cache holds.
class Chat {
 public:
  Chat(qkv_model* model, qkv_session* session, const Options& o, int64_t n_ctx)
      : model_(model), session_(session), o_(o), n_ctx_(n_ctx), prompt_(model, o.chat_template, "chat") {}

  void clear() {
    check(qkv_session_truncate(session_, 0), "clearing the KV cache");
    cached_.clear();
    turns_.clear();
    n_turn_ = 0;
  }

  // One user turn: renders, prefills what the cache lacks, streams the reply.
  void turn(const std::string& user) {
    turns_.push_back(user);
    const std::string text = prompt_.render(conversation_json(o_.system, turns_), true);
    const std::vector<int32_t> tokens = prompt_.tokenize(text);
    const auto n = static_cast<int64_t>(tokens.size());
    if (n == 0) fail("the chat template rendered an empty prompt and the vocabulary adds no BOS");
    if (n >= n_ctx_) {
      turns_.pop_back();
      std::fprintf(stderr,
                   "qkv chat: the context is full: the conversation needs %" PRId64
                   " tokens and the context holds %" PRId64 " positions; /clear starts over (or raise -c)\n",
                   n + 1, n_ctx_);
      return;
    }
    ++n_turn_;
    // The longest common prefix stays; at least one token runs, for the logits.
    size_t keep = 0;
    while (keep < cached_.size() && keep < tokens.size() && cached_[keep] == tokens[keep]) ++keep;
    keep = std::min(keep, tokens.size() - 1);
    check(qkv_session_truncate(session_, static_cast<int64_t>(keep)), "rewinding the KV cache");
    cached_.resize(keep);

    auto t0 = std::chrono::steady_clock::now();
    const int64_t n_prefill = n - static_cast<int64_t>(keep);
    check(qkv_session_prefill(session_, tokens.data() + keep, n_prefill, nullptr, 0), "prefilling the prompt");
    cached_.insert(cached_.end(), tokens.begin() + static_cast<std::ptrdiff_t>(keep), tokens.end());
    const double prefill_ms = ms_since(t0);

    t0 = std::chrono::steady_clock::now();
    std::string reply;
    int64_t generated = 0;
    const char* reason = reply_into(&reply, &generated);
    const double generate_ms = ms_since(t0);
    out("\n");
    turns_.push_back(reply);

    if (std::string(reason) == "interrupted") std::fprintf(stderr, "qkv chat: reply stopped (Ctrl-C)\n");
    if (std::string(reason) == "context") {
      std::fprintf(stderr,
                   "qkv chat: the context is full (%" PRId64 " positions): the reply stops here; /clear starts over\n",
                   n_ctx_);
    }
    if (o_.verbose) {
      std::fprintf(stderr,
                   "qkv chat: turn %d: prompt %" PRId64 " tokens, %zu reused from the cache, prefilled %" PRId64
                   " tokens in %.2f ms (%.2f tokens per second); generated %" PRId64
                   " tokens in %.2f ms (%.2f tokens per second); stopped by %s; cache %zu of %" PRId64 " positions\n",
                   n_turn_, n, keep, n_prefill, prefill_ms, per_second(n_prefill, prefill_ms), generated, generate_ms,
                   per_second(generated, generate_ms), reason, cached_.size(), n_ctx_);
    }
  }

 private:
  // Samples and streams until an end of the turn; the shown text goes to
  // *reply. Each token shown is fed back (room permitting), so the cache holds
  // the reply as shown and the next turn's render continues it.
  const char* reply_into(std::string* reply, int64_t* generated) {
    StopMatcher stops(prompt_.stops());
    int32_t prev = cached_.back();
    const char* reason = "n_predict";
    for (;;) {
      if (g_interrupted) {
        reason = "interrupted";
        break;
      }
      if (o_.n_predict >= 0 && *generated >= o_.n_predict) break;
      int32_t token = 0;
      check(qkv_session_sample(session_, &token), "sampling");
      if (qkv_is_eog(model_, token)) {
        reason = "eos";
        break;
      }
      ++*generated;
      const std::string shown = stops.feed(piece(prev, token));
      *reply += shown;
      out(shown);
      if (stops.stopped()) {
        reason = "stop";
        break;
      }
      if (static_cast<int64_t>(cached_.size()) >= n_ctx_) {
        reason = "context";
        break;
      }
      check(qkv_session_step(session_, token, nullptr, 0), "generating");
      cached_.push_back(token);
      prev = token;
    }
    if (!stops.stopped()) {
      const std::string rest = stops.flush();
      *reply += rest;
      out(rest);
    }
    g_interrupted = 0;
    return reason;
  }

  std::string piece(int32_t prev, int32_t token) {
    int64_t n = 0;
    char buf[256];
    qkv_status st = qkv_token_piece(model_, prev, token, 0, buf, sizeof buf, &n);
    if (st == QKV_ERR_BUFFER_TOO_SMALL) {
      std::string big(static_cast<size_t>(n) + 1, '\0');
      check(qkv_token_piece(model_, prev, token, 0, big.data(), n + 1, &n), "decoding a token");
      big.resize(static_cast<size_t>(n));
      return big;
    }
    check(st, "decoding a token");
    return std::string(buf, static_cast<size_t>(n));
  }

  qkv_model* model_;
  qkv_session* session_;
  const Options& o_;
  int64_t n_ctx_;
  ChatPrompt prompt_;
  std::vector<int32_t> cached_;     // the tokens the KV cache holds
  std::vector<std::string> turns_;  // user, assistant, user, ...
  int n_turn_ = 0;
};

int parse(int argc, char** argv, Options* o) {
  qkv_context_options_init(&o->context);
  qkv_sampler_options_init(&o->sampler);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::printf("%s%s%s", kUsage, kSamplerFlagsUsage, kContextFlagsUsage);
      return 0;
    } else if (a == "-m" || a == "--model") {
      o->model = models::resolve_model_argument(flag_value(argc, argv, i));
    } else if (a == "-z" || a == "--tokenizer") {
      o->tokenizer = flag_value(argc, argv, i);
    } else if (a == "--system") {
      o->system = flag_value(argc, argv, i);
    } else if (a == "--chat-template") {
      o->chat_template = flag_value(argc, argv, i);
    } else if (a == "-n" || a == "--n-predict") {
      o->n_predict = parse_int(a.c_str(), flag_value(argc, argv, i), -1, INT64_C(1) << 40);
    } else if (a == "--verbose") {
      o->verbose = true;
    } else if (!parse_sampler_flag(argc, argv, i, &o->sampler, &o->seed_given) &&
               !parse_logit_bias_flag(argc, argv, i, &o->bias) && !parse_context_flag(argc, argv, i, &o->context)) {
      std::fprintf(stderr, "qkv chat: unknown flag '%s'\n\n%s", argv[i], kUsage);
      return 2;
    }
  }
  if (o->model.empty()) {
    std::fprintf(stderr, "qkv chat: -m MODEL is required\n\n%s", kUsage);
    return 2;
  }
  if (!o->seed_given) {
    o->sampler.seed = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  }
  return -1;
}

// The conversation loop over stdin; returns the exit code.
int converse(Chat& chat) {
  const bool tty = isatty(STDIN_FILENO) != 0;
  LineReader input;
  std::string line;
  for (;;) {
    if (tty) out("> ");
    g_interrupted = 0;
    install_sigint(false);
    const Input got = input.next(&line);
    install_sigint(true);
    if (got == Input::kInterrupted) {
      if (tty) out("\n");
      return 0;
    }
    if (got == Input::kEnd) {
      if (tty) out("\n");
      return 0;
    }
    if (line == "/exit") return 0;
    if (line == "/clear") {
      chat.clear();
      std::fprintf(stderr, "qkv chat: conversation cleared\n");
      continue;
    }
    if (line.empty()) continue;
    chat.turn(line);
  }
}

}  // namespace

int cmd_chat(int argc, char** argv) {
  Options o;
  if (const int rc = parse(argc, argv, &o); rc >= 0) return rc;
  o.context.threads_batch = threads_batch_flag();

  qkv_model_options mopts;
  qkv_model_options_init(&mopts);
  if (!o.tokenizer.empty()) mopts.tokenizer_path = o.tokenizer.c_str();
  qkv_model* model = nullptr;
  check(qkv_model_load(o.model.c_str(), &mopts, &model), "loading the model");
  qkv_model_info info;
  qkv_session* session = nullptr;
  int rc = 1;
  try {
    check(qkv_model_get_info(model, &info), "describing the model");
    if (!info.has_tokenizer) fail("the model '", o.model, "' has no vocabulary (name its tokenizer with -z)");
    check(qkv_session_create(model, &o.context, &session), "creating the session");
    check(qkv_session_set_sampler(session, &o.sampler), "setting the sampler");
    apply_logit_bias(session, o.bias);
    Chat chat(model, session, o, o.context.context > 0 ? o.context.context : info.context_length);
    rc = converse(chat);
  } catch (...) {
    qkv_session_free(session);
    qkv_model_free(model);
    throw;
  }
  qkv_session_free(session);
  qkv_model_free(model);
  return rc;
}

}  // namespace qkv::tools

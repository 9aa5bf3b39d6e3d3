// qkv run: load a model, generate from a prompt, stream the text to stdout and
// llama.cpp-style timings to stderr. A client of the public C API only.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "qkv.h"
#include "tools/args.h"
#include "tools/chat/cmd_chat.h"
#include "tools/commands.h"
#include "tools/models/model_ref.h"
#include "tools/thread_flags.h"

namespace qkv::tools {

namespace {

const char* kRunUsage =
    "usage: qkv run -m MODEL [-z TOKENIZER] [-p PROMPT] [options]\n"
    "  -m, --model PATH      GGUF file or llama2.c checkpoint\n"
    "  -z, --tokenizer PATH  llama2.c tokenizer.bin (needed for llama2.c checkpoints)\n"
    "  -p, -i, --prompt TEXT prompt (default: empty, BOS only)\n"
    "  -f, --file FILE       the prompt is FILE's text (one trailing newline dropped, as llama.cpp)\n"
    "  -n, --n-predict N     new tokens to generate, like llama.cpp (default: until EOS or full context)\n"
    "  --ignore-eos          never end at an end-of-generation token or BOS (each gets the logit bias -inf)\n"
    "  --steps N             total positions incl. BOS and prompt, like llama2.c's -n\n"
    "  -r, --reverse-prompt S stop before the text S (repeatable; S is never printed)\n"
    "  --no-bos              do not prepend BOS (by default as the vocabulary's add_bos_token says)\n"
    "  --special             control tokens written in the prompt (<|im_start|>) become their ids\n"
    "  --no-display-prompt   print only the generated text, not the prompt first\n"
    "  --chat                -p is one user turn of the chat template (the model's, or ChatML);\n"
    "                        only the reply is printed\n"
    "  --system TEXT         with --chat: a system message first\n"
    "  --chat-template FILE  with --chat: this Jinja template instead of the model's\n"
    "  --grammar TEXT        the output follows this GBNF grammar (llama.cpp's syntax; start rule root)\n"
    "  --grammar-file FILE   the GBNF grammar from a file\n"
    "  -j, --json-schema S   the output is JSON valid under this JSON Schema (JSON text)\n"
    "  -jf, --json-schema-file FILE  the JSON Schema from a file\n"
    "  -q, --quiet           no timings on stderr\n"
    "speculative decoding (same output distribution; greedy: the same tokens; not with a grammar):\n"
    "  -md, --model-draft FILE   a draft model of the same vocabulary drafts greedily\n"
    "  --spec-type ngram     prompt lookup drafts instead: the last N tokens matched earlier in the text\n"
    "  --spec-ngram-size N   the longest n-gram prompt lookup matches, 1 .. 64 (default 3; then N-1 .. 1)\n"
    "  --draft-max, --draft, --draft-n N  tokens drafted per verify pass, 1 .. 256 (default 16)\n"
    "  --draft-min N         fewer drafted tokens run a plain step (default 0)\n"
    "  --draft-p-min P       the draft model stops before a token below probability P (default 0.75)\n";

// Streams the text after the first `skip` bytes (the prompt's echo under --chat).
int write_piece(const char* piece, size_t length, void* user) {
  size_t& skip = *static_cast<size_t*>(user);
  const size_t n = std::min(skip, length);
  skip -= n;
  piece += n;
  length -= n;
  std::fwrite(piece, 1, length, stdout);
  std::fflush(stdout);
  return 0;
}

// The bytes qkv_generate echoes of a prompt: the pieces after the first token,
// less the lone bytes it does not show (neither printable nor white space).
size_t echo_size(const qkv_model* model, const std::string& prompt, const qkv_generate_options& o) {
  const int flags = (o.add_bos ? QKV_TOKENIZE_ADD_SPECIAL : 0) | (o.parse_special ? QKV_TOKENIZE_PARSE_SPECIAL : 0);
  const auto length = static_cast<int64_t>(prompt.size());
  int64_t n_tokens = 0;
  qkv_status st = qkv_tokenize_text(model, prompt.data(), length, flags, nullptr, 0, &n_tokens);
  std::vector<int32_t> tokens(static_cast<size_t>(n_tokens));
  if (st == QKV_ERR_BUFFER_TOO_SMALL) {
    st = qkv_tokenize_text(model, prompt.data(), length, flags, tokens.data(), n_tokens, &n_tokens);
  }
  check(st, "tokenizing the prompt");
  size_t bytes = 0;
  char buf[256];
  for (size_t i = 1; i < tokens.size(); ++i) {
    int64_t n = 0;
    const qkv_status st = qkv_token_piece(model, tokens[i - 1], tokens[i], 0, buf, sizeof buf, &n);
    if (st != QKV_OK && st != QKV_ERR_BUFFER_TOO_SMALL) check(st, "decoding the prompt");
    const auto b = static_cast<unsigned char>(buf[0]);
    if (n > 1 || (n == 1 && st == QKV_OK && (std::isprint(b) || std::isspace(b)))) bytes += static_cast<size_t>(n);
  }
  return bytes;
}

}  // namespace

int cmd_run(int argc, char** argv) {
  std::string model_path, tokenizer_path, prompt, system, chat_template;
  qkv_context_options copts;
  qkv_context_options_init(&copts);
  copts.threads_batch = threads_batch_flag();
  qkv_generate_options gopts;
  qkv_generate_options_init(&gopts);
  bool seed_given = false, quiet = false, chat = false, display_prompt = true, ignore_eos = false;
  std::vector<std::string> stops;
  LogitBias bias;
  int grammar_kind = -1;  // a qkv_grammar_kind
  std::string grammar_source;
  std::string draft_path, spec_type;

  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::printf("%s%s%s", kRunUsage, kSamplerFlagsUsage, kContextFlagsUsage);
      return 0;
    } else if (a == "-m" || a == "--model") {
      model_path = models::resolve_model_argument(flag_value(argc, argv, i));
    } else if (a == "-z" || a == "--tokenizer") {
      tokenizer_path = flag_value(argc, argv, i);
    } else if (a == "-p" || a == "-i" || a == "--prompt") {
      prompt = flag_value(argc, argv, i);
    } else if (a == "-f" || a == "--file") {
      prompt = read_file(flag_value(argc, argv, i));
      if (!prompt.empty() && prompt.back() == '\n') prompt.pop_back();
    } else if (a == "--ignore-eos") {
      ignore_eos = true;
    } else if (a == "-n" || a == "--n-predict") {
      gopts.n_predict = parse_int(a.c_str(), flag_value(argc, argv, i), -1, INT64_C(1) << 40);
    } else if (a == "--steps") {
      gopts.steps = parse_int(a.c_str(), flag_value(argc, argv, i), 1, INT64_C(1) << 40);
    } else if (a == "-r" || a == "--reverse-prompt") {
      stops.emplace_back(flag_value(argc, argv, i));
    } else if (a == "--no-bos") {
      gopts.add_bos = 0;
    } else if (a == "--special") {
      gopts.parse_special = 1;
    } else if (a == "--no-display-prompt") {
      display_prompt = false;
    } else if (a == "--chat") {
      chat = true;
    } else if (a == "--system") {
      system = flag_value(argc, argv, i);
    } else if (a == "--chat-template") {
      chat_template = flag_value(argc, argv, i);
    } else if (a == "--grammar" || a == "--grammar-file" || a == "-j" || a == "--json-schema" || a == "-jf" ||
               a == "--json-schema-file") {
      if (grammar_kind >= 0) {
        std::fprintf(stderr, "qkv run: give one grammar (%s follows another grammar flag)\n", a.c_str());
        return 2;
      }
      const bool from_file = a == "--grammar-file" || a == "-jf" || a == "--json-schema-file";
      const std::string value = flag_value(argc, argv, i);
      grammar_source = from_file ? read_file(value) : value;
      grammar_kind = a == "--grammar" || a == "--grammar-file" ? QKV_GRAMMAR_GBNF : QKV_GRAMMAR_JSON_SCHEMA;
    } else if (a == "-q" || a == "--quiet") {
      quiet = true;
    } else if (a == "-md" || a == "--model-draft") {
      draft_path = flag_value(argc, argv, i);
    } else if (a == "--spec-type") {
      spec_type = flag_value(argc, argv, i);
      if (spec_type != "ngram") {
        std::fprintf(stderr, "qkv run: --spec-type '%s' is not known (ngram is; a draft model is -md FILE)\n",
                     spec_type.c_str());
        return 2;
      }
      gopts.spec_ngram = 1;
    } else if (a == "--spec-ngram-size") {
      gopts.spec_ngram_size = parse_int(a.c_str(), flag_value(argc, argv, i), 1, 64);
    } else if (a == "--draft-max" || a == "--draft" || a == "--draft-n") {
      gopts.draft_max = parse_int(a.c_str(), flag_value(argc, argv, i), 1, 256);
    } else if (a == "--draft-min") {
      gopts.draft_min = parse_int(a.c_str(), flag_value(argc, argv, i), 0, 256);
    } else if (a == "--draft-p-min") {
      gopts.draft_p_min = static_cast<float>(parse_float(a.c_str(), flag_value(argc, argv, i), 0.0, 1.0));
    } else if (!parse_sampler_flag(argc, argv, i, &gopts.sampler, &seed_given) &&
               !parse_logit_bias_flag(argc, argv, i, &bias) && !parse_context_flag(argc, argv, i, &copts)) {
      std::fprintf(stderr, "qkv run: unknown flag '%s'\n\n%s", argv[i], kRunUsage);
      return 2;
    }
  }
  if (model_path.empty()) {
    std::fprintf(stderr, "qkv run: -m MODEL is required\n\n%s", kRunUsage);
    return 2;
  }
  if (!draft_path.empty() && gopts.spec_ngram) {
    std::fprintf(stderr, "qkv run: -md FILE and --spec-type ngram exclude each other (give one drafter)\n");
    return 2;
  }
  if (gopts.draft_min > gopts.draft_max) {
    std::fprintf(stderr, "qkv run: --draft-min %" PRId64 " exceeds --draft-max %" PRId64 "\n", gopts.draft_min,
                 gopts.draft_max);
    return 2;
  }
  if (!seed_given) {
    gopts.sampler.seed = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  }

  std::vector<const char*> stop_ptrs;
  for (const std::string& s : stops) stop_ptrs.push_back(s.c_str());
  gopts.stop = stop_ptrs.data();
  gopts.n_stop = static_cast<int64_t>(stop_ptrs.size());

  const auto t0 = std::chrono::steady_clock::now();
  qkv_model_options mopts;
  qkv_model_options_init(&mopts);
  if (!tokenizer_path.empty()) mopts.tokenizer_path = tokenizer_path.c_str();
  qkv_model* model = nullptr;
  check(qkv_model_load(model_path.c_str(), &mopts, &model), "loading the model");
  qkv_session* session = nullptr;
  const qkv_status st = qkv_session_create(model, &copts, &session);
  if (st != QKV_OK) {
    const std::string msg = qkv_last_error();
    qkv_model_free(model);
    fail("creating the session: ", msg);
  }
  qkv_model* draft = nullptr;
  if (!draft_path.empty()) {
    const qkv_status dst = qkv_model_load(draft_path.c_str(), &mopts, &draft);
    if (dst != QKV_OK) {
      const std::string msg = qkv_last_error();
      qkv_session_free(session);
      qkv_model_free(model);
      fail("loading the draft model: ", msg);
    }
    gopts.draft_model = draft;
  }
  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  size_t echo_bytes = 0;
  std::vector<std::string> chat_stops;
  qkv_grammar* grammar = nullptr;
  try {
    if (ignore_eos) {
      qkv_model_info info;
      qkv_model_get_info(model, &info);
      for (int32_t t = 0; t < info.vocab_size; ++t) {
        if (!qkv_is_eog(model, t) && t != info.bos_id) continue;  // generation also ends at BOS (llama2.c)
        bias.tokens.push_back(t);
        bias.biases.push_back(-std::numeric_limits<float>::infinity());
      }
    }
    apply_logit_bias(session, bias);
    if (grammar_kind >= 0) {
      check(qkv_grammar_create(model, static_cast<qkv_grammar_kind>(grammar_kind), grammar_source.c_str(), &grammar),
            "compiling the grammar");
      gopts.grammar = grammar;
    }
  } catch (...) {
    qkv_grammar_free(grammar);
    qkv_session_free(session);
    qkv_model_free(draft);
    qkv_model_free(model);
    throw;
  }
  if (chat || !display_prompt) {
    try {
      if (chat) {
        const ChatPrompt chat_prompt(model, chat_template, "run");
        prompt = chat_prompt.render(conversation_json(system, {prompt}), true);
        gopts.parse_special = 1;
        if (chat_prompt.writes_bos(prompt)) gopts.add_bos = 0;
        chat_stops = chat_prompt.stops();
      }
      echo_bytes = echo_size(model, prompt, gopts);
    } catch (...) {
      qkv_grammar_free(grammar);
      qkv_session_free(session);
      qkv_model_free(draft);
      qkv_model_free(model);
      throw;
    }
    for (const std::string& s : chat_stops) stop_ptrs.push_back(s.c_str());
    gopts.stop = stop_ptrs.data();
    gopts.n_stop = static_cast<int64_t>(stop_ptrs.size());
  }

  qkv_generate_stats stats;
  const qkv_status gen = qkv_generate(session, prompt.c_str(), &gopts, write_piece, &echo_bytes, &stats);
  const std::string gen_error = gen == QKV_OK ? "" : qkv_last_error();
  std::printf("\n");
  std::fflush(stdout);

  if (gen == QKV_OK && !quiet) {
    auto per_second = [](int64_t n, double ms) { return ms > 0 ? 1000.0 * static_cast<double>(n) / ms : 0.0; };
    auto per_token = [](int64_t n, double ms) { return n > 0 ? ms / static_cast<double>(n) : 0.0; };
    std::fprintf(stderr, "\nqkv: load time        = %10.2f ms\n", load_ms);
    std::fprintf(stderr,
                 "qkv: prompt eval time = %10.2f ms / %5" PRId64 " tokens (%8.2f ms per token, %9.2f tokens per second)\n",
                 stats.prompt_ms, stats.prompt_tokens, per_token(stats.prompt_tokens, stats.prompt_ms),
                 per_second(stats.prompt_tokens, stats.prompt_ms));
    // The first generated token's logits are ready when the prompt's pass ends.
    std::fprintf(stderr, "qkv: load to first token = %7.2f ms\n", load_ms + stats.prompt_ms);
    std::fprintf(stderr,
                 "qkv: eval time        = %10.2f ms / %5" PRId64 " tokens (%8.2f ms per token, %9.2f tokens per second)\n",
                 stats.generate_ms, stats.generated_tokens, per_token(stats.generated_tokens, stats.generate_ms),
                 per_second(stats.generated_tokens, stats.generate_ms));
    if (gopts.draft_model || gopts.spec_ngram) {
      const double rate = stats.drafted_tokens > 0 ? 100.0 * static_cast<double>(stats.accepted_tokens) /
                                                         static_cast<double>(stats.drafted_tokens)
                                                   : 0.0;
      std::fprintf(stderr,
                   "qkv: speculative      = %s: %" PRId64 " drafted, %" PRId64 " accepted (%.1f%%), %" PRId64
                   " verify passes, %.2f tokens per second\n",
                   gopts.draft_model ? "draft model" : "n-gram lookup", stats.drafted_tokens, stats.accepted_tokens,
                   rate, stats.verify_passes, per_second(stats.generated_tokens, stats.generate_ms));
    }
    std::fprintf(stderr, "qkv: KV cache         = %10.2f MiB (%s)\n",
                 static_cast<double>(qkv_session_kv_bytes(session)) / (1024.0 * 1024.0),
                 kv_type_name(copts.kv_type));
    std::fprintf(stderr, "qkv: stopped by %s after %" PRId64 " forward passes\n", stats.stop_reason,
                 stats.forward_passes);
  }
  qkv_grammar_free(grammar);
  qkv_session_free(session);
  qkv_model_free(draft);
  qkv_model_free(model);
  if (gen != QKV_OK) fail("generating: ", gen_error);
  return 0;
}

}  // namespace qkv::tools

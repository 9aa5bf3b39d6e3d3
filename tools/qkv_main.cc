// qkv: the command line. Each subcommand lives in its own cmd_*.cc and is listed
// in kCommands below; this file only dispatches and turns errors into exit codes.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "kernels/machine/isa_cap.h"
#include "tools/commands.h"
#include "tools/llama_flags.h"
#include "tools/models/commands.h"
#include "tools/models/model_ref.h"
#include "tools/thread_flags.h"
#include "tools/wait_policy.h"

namespace {

struct Command {
  const char* name;
  int (*run)(int argc, char** argv);  // argv[0] is the subcommand's name
  const char* help;
};

const Command kCommands[] = {
    {"version", qkv::tools::cmd_version, "print the version and the SIMD target"},
    {"run", qkv::tools::cmd_run, "generate text from a prompt"},
    {"chat", qkv::tools::cmd_chat, "a conversation with a model through its chat template"},
    {"info", qkv::tools::cmd_info, "describe a model file (or --cpu: this machine's SIMD targets)"},
    {"tokenize", qkv::tools::cmd_tokenize, "print the token ids of a text"},
    {"detokenize", qkv::tools::cmd_detokenize, "print the text of token ids"},
    {"bench", qkv::tools::cmd_bench, "measure prefill, decode and batched decode throughput"},
    {"make-model", qkv::tools::cmd_make_model, "write a synthetic random-weight model as GGUF"},
    {"quantize", qkv::tools::cmd_quantize, "quantize a GGUF model with a llama-quantize preset (Q4_K_M, Q8_0, ...)"},
    {"plot", qkv::tools::cmd_plot, "draw qkv bench --json results as SVG"},
    {"perplexity", qkv::tools::cmd_perplexity, "perplexity and KL divergence on a text, as llama-perplexity"},
    {"explain", qkv::tools::cmd_explain, "scaled dot-product attention, step by step, from qkv's kernels"},
    {"attention", qkv::tools::cmd_attention, "heatmaps of a model's attention weights on a prompt (SVG, JSON)"},
    {"embed", qkv::tools::cmd_embed, "embeddings or rerank scores of texts, as llama-embedding"},
    {"serve", qkv::tools::cmd_serve, "an OpenAI-compatible HTTP server with continuous batching"},
    {"template", qkv::tools::cmd_template, "print the chat prompt a model's template makes of a conversation"},
    {"pull", qkv::tools::models::cmd_pull, "download a GGUF model from a Hugging Face hub into its cache"},
    {"list", qkv::tools::models::cmd_list, "the GGUF models of the Hugging Face cache and Ollama's store"},
    {"rm", qkv::tools::models::cmd_rm, "remove a model from the Hugging Face cache"},
};

void print_usage(FILE* out) {
  std::fprintf(out, "usage: qkv <command> [options]\n\ncommands:\n");
  for (const Command& c : kCommands) std::fprintf(out, "  %-12s %s\n", c.name, c.help);
  std::fprintf(out, "\n'qkv <command> --help' describes a command's options. Every command also takes\n"
                    "  --poll N     how long a waiting thread spins before it blocks: 0..100 microseconds\n"
                    "               (default 50; 0 suits a machine busy with other work)\n"
                    "%s"
                    "Commands that load a model (-m PATH) also take -m hf:OWNER/REPO[:QUANT] or -hf OWNER/REPO[:QUANT]\n"
                    "(pulled first, as 'qkv pull') and -m ollama:NAME[:TAG] (Ollama's store, read in place).\n",
               qkv::tools::kThreadFlagsHelp);
}

}  // namespace

int main(int argc, char** argv) {
  // A QKV_ISA that cannot be honoured ends every command (kernels/machine/isa_cap.h).
  if (const std::string& isa_error = qkv::isa_cap_env_error(); !isa_error.empty()) {
    std::fprintf(stderr, "qkv: %s\n", isa_error.c_str());
    return 2;
  }
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  const std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    print_usage(stdout);
    return 0;
  }
  if (name == "--version" || name == "-v") return qkv::tools::cmd_version(argc - 1, argv + 1);
  for (const Command& c : kCommands) {
    if (name == c.name) {
      int command_argc = argc - 1;
      if (qkv::tools::take_poll_flag(&command_argc, argv + 1) < 0) return 2;
      if (!qkv::tools::take_thread_flags(&command_argc, argv + 1)) return 2;
      qkv::tools::apply_llama_flags(&command_argc, argv + 1);
      try {
        char** command_argv = qkv::tools::models::apply_model_flags(&command_argc, argv + 1);
        return c.run(command_argc, command_argv);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "qkv %s: error: %s\n", c.name, e.what());
        return 1;
      }
    }
  }
  std::fprintf(stderr, "qkv: unknown command '%s'\n\n", name.c_str());
  print_usage(stderr);
  return 2;
}

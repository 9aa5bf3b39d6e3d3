// The subcommands of the qkv command line, one cmd_*.cc each.
// Each takes (argc, argv) with argv[0] the subcommand name, returns the exit
// code (0 ok, 1 runtime error, 2 bad usage), and may throw qkv::Error.
#pragma once

namespace qkv::tools {

int cmd_version(int argc, char** argv);
int cmd_info(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_detokenize(int argc, char** argv);
int cmd_run(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_make_model(int argc, char** argv);
int cmd_quantize(int argc, char** argv);
int cmd_plot(int argc, char** argv);
int cmd_perplexity(int argc, char** argv);
int cmd_explain(int argc, char** argv);
int cmd_attention(int argc, char** argv);
int cmd_serve(int argc, char** argv);
int cmd_template(int argc, char** argv);
int cmd_chat(int argc, char** argv);
int cmd_embed(int argc, char** argv);

}  // namespace qkv::tools

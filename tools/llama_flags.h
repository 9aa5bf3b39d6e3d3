// llama.cpp's command-line spellings that qkv's commands do not parse
// themselves: flags with no meaning on a CPU runtime that always streams its
// attention and batches continuously (accepted, ignored with a one-line note
// on stderr), and flags that name a qkv flag under another spelling
// (rewritten to it). A table, so that one place lists them (README.md,
// "llama.cpp's flags").
#pragma once

namespace qkv::tools {

struct LlamaFlag {
  const char* names[3];  // spellings (unused ones null)
  bool takes_value;
  const char* qkv_flag;  // the qkv flag it is rewritten to; null: ignored
  const char* note;      // why it is ignored (for the stderr line)
  const char* commands;  // the commands it applies to, space-separated; null: every one
};

extern const LlamaFlag kLlamaFlags[];
extern const int kLlamaFlagCount;

// Rewrites argv[1..argc) (argv[0] is the command's name) in place: ignored
// flags and their values are removed, each with a note on stderr; renamed
// ones become their qkv flag. A value-taking one without its value, or one
// that does not apply to this command, is left for the command to refuse.
void apply_llama_flags(int* argc, char** argv);

}  // namespace qkv::tools

#include "tools/llama_flags.h"

#include <cstdio>
#include <cstring>

namespace qkv::tools {

const LlamaFlag kLlamaFlags[] = {
    {{"-ngl", "--n-gpu-layers", "--gpu-layers"}, true, nullptr, "qkv runs on the CPU", nullptr},
    {{"-fa", "--flash-attn", nullptr}, false, nullptr, "qkv's attention always streams its softmax (flash-style)", nullptr},
    {{"-cb", "--cont-batching", nullptr}, false, nullptr, "qkv serve always batches continuously", nullptr},
    {{"--jinja", nullptr, nullptr}, false, nullptr, "chat templates always run through qkv's Jinja interpreter", nullptr},
    {{"--mlock", nullptr, nullptr}, false, nullptr, "qkv does not lock the model in memory", nullptr},
    {{"--no-mmap", nullptr, nullptr}, false, nullptr, "qkv maps the file and copies only what it lays out", nullptr},
    {{"--log-disable", nullptr, nullptr}, false, nullptr, "qkv logs nothing but errors and timings", nullptr},
    {{"--no-warmup", nullptr, nullptr}, false, nullptr, "qkv runs no warm-up pass", nullptr},
    {{"--keep", nullptr, nullptr}, true, nullptr, "qkv does not shift the context; a full context ends generation", nullptr},
    {{"-ctk", "--cache-type-k", nullptr}, true, "--kv-type", nullptr, "run chat serve bench perplexity"},
    {{"-ctv", "--cache-type-v", nullptr}, true, "--kv-type", nullptr, "run chat serve bench perplexity"},
    {{"-sys", "--system-prompt", nullptr}, true, "--system", nullptr, "run chat"},
    {{"--chat-template-file", nullptr, nullptr}, true, "--chat-template", nullptr, "run chat"},
    {{"--ctx-size", nullptr, nullptr}, true, "-c", nullptr, "run chat serve perplexity"},
};
const int kLlamaFlagCount = static_cast<int>(sizeof(kLlamaFlags) / sizeof(kLlamaFlags[0]));

namespace {

// Whether `command` is one of the space-separated names in `list`.
bool listed(const char* list, const char* command) {
  const size_t n = std::strlen(command);
  for (const char* p = list; (p = std::strstr(p, command)) != nullptr; p += n) {
    if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return true;
  }
  return false;
}

const LlamaFlag* find(const char* word, const char* command) {
  for (const LlamaFlag& f : kLlamaFlags) {
    if (f.commands != nullptr && !listed(f.commands, command)) continue;
    for (const char* name : f.names) {
      if (name != nullptr && std::strcmp(name, word) == 0) return &f;
    }
  }
  return nullptr;
}

}  // namespace

void apply_llama_flags(int* argc, char** argv) {
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    const LlamaFlag* f = find(argv[i], argv[0]);
    if (f == nullptr || (f->takes_value && i + 1 >= *argc)) {
      argv[out++] = argv[i];
      continue;
    }
    if (f->qkv_flag != nullptr) {
      argv[out++] = const_cast<char*>(f->qkv_flag);
      continue;  // the value, if any, is copied as the next word
    }
    if (f->takes_value) {
      std::fprintf(stderr, "qkv: %s %s ignored: %s\n", argv[i], argv[i + 1], f->note);
      ++i;
    } else {
      std::fprintf(stderr, "qkv: %s ignored: %s\n", argv[i], f->note);
    }
  }
  argv[out] = nullptr;
  *argc = out;
}

}  // namespace qkv::tools

#include "tools/thread_flags.h"

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "kernels/error.h"
#include "kernels/threads/placement.h"
#include "tools/args.h"

namespace qkv::tools {

namespace {

int g_threads_batch = 0;

constexpr const char* kCommands[] = {"run", "chat", "serve", "bench", "embed", "perplexity"};

bool is(const char* word, const char* a, const char* b) {
  return std::strcmp(word, a) == 0 || (b != nullptr && std::strcmp(word, b) == 0);
}

}  // namespace

const char kThreadFlagsHelp[] =
    "  -tb, --threads-batch N      threads of prompt passes (run chat serve bench embed perplexity; default: -t)\n"
    "  -C, --cpu-mask HEX          pin the threads to these CPUs (bit i: CPU i), -Cr, --cpu-range LO-HI likewise\n"
    "  --cpu-strict 0|1            1: each thread on a CPU of its own\n"
    "  --numa distribute|isolate|numactl\n"
    "                              threads spread over the NUMA nodes with the weights' rows they read,\n"
    "                              kept on the starting node, or left on numactl's CPUs\n";

int threads_batch_flag() { return g_threads_batch; }

int batch_threads(int threads) { return g_threads_batch > 0 ? g_threads_batch : threads; }

bool take_thread_flags(int* argc, char** argv) {
  bool applies = false;
  for (const char* c : kCommands) applies = applies || std::strcmp(argv[0], c) == 0;
  if (!applies) return true;
  Placement p;
  bool place = false;
  int out = 1;
  try {
    for (int i = 1; i < *argc; ++i) {
      const char* flag = argv[i];
      if (is(flag, "-tb", "--threads-batch")) {
        g_threads_batch = static_cast<int>(parse_int(flag, flag_value(*argc, argv, i), 1, 1024));
      } else if (is(flag, "-C", "--cpu-mask")) {
        p.cpus = parse_cpu_mask(flag_value(*argc, argv, i));
        place = true;
      } else if (is(flag, "-Cr", "--cpu-range")) {
        p.cpus = parse_cpu_range(flag_value(*argc, argv, i));
        place = true;
      } else if (is(flag, "--cpu-strict", nullptr)) {
        p.strict = parse_int(flag, flag_value(*argc, argv, i), 0, 1) == 1;
        place = true;
      } else if (is(flag, "--numa", nullptr)) {
        p.numa = parse_numa_mode(flag_value(*argc, argv, i));
        place = true;
      } else {
        argv[out++] = argv[i];
      }
    }
    if (place) set_placement(p);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qkv %s: %s\n", argv[0], e.what());
    return false;
  }
  argv[out] = nullptr;
  *argc = out;
  return true;
}

}  // namespace qkv::tools

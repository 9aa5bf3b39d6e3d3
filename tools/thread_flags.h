// The thread and placement flags of the commands that run a model (run, chat,
// serve, bench, embed, perplexity), as llama.cpp spells them:
//   -tb, --threads-batch N   threads of prompt passes (default: as -t)
//   -C, --cpu-mask HEX       the CPUs the threads may run on (bit i: CPU i)
//   -Cr, --cpu-range LO-HI   the same as a range
//   --cpu-strict 0|1         1: each thread on one CPU of the set
//   --numa MODE              distribute, isolate or numactl
// (kernels/threads/placement.h says what each does.)
#pragma once

namespace qkv::tools {

// For the commands above (argv[0] names it; others are left alone): removes
// these flags from argv[1..], checks them and sets the process's placement.
// On a bad flag prints an error naming it and returns false (exit 2).
bool take_thread_flags(int* argc, char** argv);

// --threads-batch's value; 0 when not given.
int threads_batch_flag();
// The thread count of a command's batch-only work (embeddings, perplexity):
// --threads-batch when given, else `threads` (its -t).
int batch_threads(int threads);

// The lines --help shows for these flags.
extern const char kThreadFlagsHelp[];

}  // namespace qkv::tools

// qkv bench --embed: embedding throughput and latency of an encoder (bert,
// nomic-bert), through the same batching as qkv_embed, `qkv embed` and the
// server's embedding endpoints (runtime/embed.h), judged against the machine's
// measured FMA peak and DRAM read bandwidth (kernels/machine/probe.h).
#pragma once

namespace qkv::tools {

// argv as cmd_bench's (argv[0] "bench", "--embed" among the flags).
int cmd_bench_embed(int argc, char** argv);

}  // namespace qkv::tools

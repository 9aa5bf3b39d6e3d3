// qkv bench --verify-cost: what speculative decoding's verify pass costs
// against a decode step (runtime/speculative.h).
#pragma once

namespace qkv::tools {

// argv as cmd_bench's (argv[0] "bench", "--verify-cost" among the flags).
int cmd_bench_verify(int argc, char** argv);

}  // namespace qkv::tools

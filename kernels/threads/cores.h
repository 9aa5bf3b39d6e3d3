// How many threads qkv runs by default: one per physical core it may use.
//
// Why not one per logical CPU: the two hyperthreads of a core share its FMA
// and load ports, which a decode step already fills from one thread, and a
// team of threads moves at its slowest member's pace, so a second thread per
// core adds a sync partner, not throughput (llama.cpp defaults the same way).
#pragma once

namespace qkv {

// Physical cores among the CPUs this process may run on (its affinity mask),
// each (package, core) pair counted once; at least 1. Falls back to the
// logical CPU count where the topology cannot be read.
int physical_cores();

// The thread count a call given `requested` (0: the default) runs on: never
// more than the CPUs the process may use (usable_cpus(), placement.h). Threads
// beyond the CPUs add no arithmetic, only members that wait for a CPU at each
// of a step's syncs: on a 2-core guest -t 8 decoded the 143M model at half the
// speed of -t 2 even with the team blocking at once. A capped request prints
// one note on stderr per process.
int threads_or_default(int requested);

// Sets the calling thread's OpenMP thread count to threads_or_default(threads)
// for the scope's life (0: leaves it as it is), then puts the previous count back: a prompt
// pass on --threads-batch threads inside a call that runs on -t.
class OmpThreadsScope {
 public:
  explicit OmpThreadsScope(int threads);
  ~OmpThreadsScope();
  OmpThreadsScope(const OmpThreadsScope&) = delete;
  OmpThreadsScope& operator=(const OmpThreadsScope&) = delete;

 private:
  int saved_ = 0;  // 0: nothing was changed
};

}  // namespace qkv

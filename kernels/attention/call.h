// One validated attention call and the per-thread scratch buffers: the
// target-independent part of kernels/attention/attention.cc, shared by every
// SIMD target's copy of the kernel.
#pragma once

#include <cstddef>

#include "hwy/aligned_allocator.h"
#include "kernels/attention.h"
#include "kernels/attention/validate.h"
#include "kernels/error.h"

namespace qkv {
namespace attn {

// One validated call.
struct Call {
  AttentionShape s;
  QueryView q;
  KVView k, v;
  MaskInfo mi;
  OutputView out;
  float scale = 1.0f;
  float softcap = 0.0f;  // AttentionOptions::softcap (0: off)
  float* lse = nullptr;
  int threads = 1;
};

// The calling thread's reusable buffer of at least n floats, 64-byte aligned. A
// decoder calls attention once per layer and token; allocating the scratch and
// the split-merge partials anew each time costs page faults and first-touch
// misses on every call. Each caller thread owns one buffer (concurrent calls
// from different threads never share it); `which` picks one of two buffers.
inline float* ThreadBuffer(int which, size_t n) {
  static thread_local hwy::AlignedFreeUniquePtr<float[]> buf[2];
  static thread_local size_t cap[2] = {0, 0};
  if (cap[which] < n) {
    buf[which] = hwy::AllocateAligned<float>(n);
    QKV_CHECK(buf[which] != nullptr, "attention: cannot allocate ", n * sizeof(float), " bytes of scratch");
    cap[which] = n;
  }
  return buf[which].get();
}

}  // namespace attn
}  // namespace qkv

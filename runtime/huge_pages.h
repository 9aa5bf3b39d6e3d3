// Anonymous memory on 2 MiB boundaries with transparent huge pages requested,
// for the large buffers the kernels stream every step (weights laid out at
// load, the KV cache).
#pragma once

#include <cstddef>
#include <memory>

namespace qkv {

constexpr size_t kHugePageBytes = size_t{2} << 20;

// `bytes` (> 0) of zeroed memory starting on a huge-page boundary when it is
// at least one huge page long (page-aligned otherwise), unmapped when the
// last owner lets go. Fails with ErrorKind::kOutOfMemory naming `what`.
// The huge pages are advisory: without THP the memory works the same.
std::shared_ptr<uint8_t> allocate_huge_pages(size_t bytes, const char* what);

}  // namespace qkv

#include "runtime/huge_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/error.h"

namespace qkv {

std::shared_ptr<uint8_t> allocate_huge_pages(size_t bytes, const char* what) {
  QKV_CHECK(bytes > 0, "allocate_huge_pages: no bytes for ", what);
  // Large buffers: over-map by one huge page so that the data can start on a
  // 2 MiB boundary, then return the unused head and tail.
  const bool huge = bytes >= kHugePageBytes;
  const size_t slack = huge ? kHugePageBytes : 0;
  if (bytes > std::numeric_limits<size_t>::max() - slack) {
    fail_as(ErrorKind::kOutOfMemory, what, ": ", bytes, " bytes do not fit in the address space");
  }
  const size_t map_bytes = bytes + slack;
  void* p = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    fail_as(ErrorKind::kOutOfMemory, what, ": cannot allocate ", bytes, " bytes: ", std::strerror(errno));
  }
  auto* base = static_cast<uint8_t*>(p);
  uint8_t* start = base;
  size_t keep = map_bytes;
  if (huge) {
    const auto a = reinterpret_cast<uintptr_t>(base);
    start = reinterpret_cast<uint8_t*>((a + kHugePageBytes - 1) & ~uintptr_t{kHugePageBytes - 1});
    const size_t head = static_cast<size_t>(start - base);
    const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t used = (bytes + page - 1) / page * page;
    if (head > 0) munmap(base, head);
    if (head + used < map_bytes) munmap(start + used, map_bytes - head - used);
    keep = used;
    madvise(start, keep, MADV_HUGEPAGE);  // advisory: fine if unsupported
  }
  return std::shared_ptr<uint8_t>(start, [keep](uint8_t* q) { munmap(q, keep); });
}

std::shared_ptr<uint8_t> allocate_small_pages(size_t bytes, const char* what) {
  QKV_CHECK(bytes > 0, "allocate_small_pages: no bytes for ", what);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    fail_as(ErrorKind::kOutOfMemory, what, ": cannot allocate ", bytes, " bytes: ", std::strerror(errno));
  }
  madvise(p, bytes, MADV_NOHUGEPAGE);  // advisory: fine if unsupported
  return std::shared_ptr<uint8_t>(static_cast<uint8_t*>(p), [bytes](uint8_t* q) { munmap(q, bytes); });
}

}  // namespace qkv

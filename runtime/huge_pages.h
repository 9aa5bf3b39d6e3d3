// Anonymous memory for the large buffers the kernels stream every step: on
// 2 MiB boundaries with transparent huge pages requested (weights laid out at
// load), or in 4 KiB pages committed as they are first written (the KV cache).
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

// `bytes` (> 0) of zeroed, page-aligned memory that stays in 4 KiB pages
// (MADV_NOHUGEPAGE, also where THP is "always"), for the KV cache: its layout
// gives each KV head of a sequence a region of capacity x row bytes, and a
// sequence's first tokens write the first page of every region. In huge pages
// that committed and zeroed the whole cache at the first prompt: 143M F16,
// 8192 positions (180 MiB), a cold `qkv run` of 18 tokens took 57-510 ms
// against 42-48 ms in small pages, with decode at depth 8000 and 16
// sequences at depth 1024 within the noise of each other.
std::shared_ptr<uint8_t> allocate_small_pages(size_t bytes, const char* what);

}  // namespace qkv

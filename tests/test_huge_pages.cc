// ctest-labels: asan
// allocate_huge_pages: alignment, zeroed and writable memory, and its errors;
// allocate_small_pages: the same, committed a 4 KiB page at a time as written.
#include <doctest/doctest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "runtime/huge_pages.h"

using namespace qkv;

namespace {

ErrorKind kind_of_failure(size_t bytes, std::string* message) {
  try {
    allocate_huge_pages(bytes, "the test buffer");
  } catch (const Error& e) {
    *message = e.what();
    return e.kind();
  }
  *message = "no error";
  return ErrorKind::kInvalid;  // not the kind expected: the check fails
}

}  // namespace

TEST_CASE("allocate_huge_pages gives zeroed, writable memory on a huge-page boundary from one huge page up") {
  for (size_t bytes : {size_t{1}, size_t{4096} + 1, kHugePageBytes - 1, kHugePageBytes, 3 * kHugePageBytes + 12345}) {
    CAPTURE(bytes);
    auto p = allocate_huge_pages(bytes, "the test buffer");
    REQUIRE(p != nullptr);
    const auto a = reinterpret_cast<uintptr_t>(p.get());
    CHECK(a % 4096 == 0);
    if (bytes >= kHugePageBytes) CHECK(a % kHugePageBytes == 0);
    bool zero = true;
    for (size_t i = 0; i < bytes; i += 509) zero = zero && p.get()[i] == 0;
    CHECK(zero);
    CHECK(p.get()[bytes - 1] == 0);
    std::memset(p.get(), 0xA5, bytes);  // every byte is ours (ASan would see a stray one)
    CHECK(p.get()[bytes - 1] == 0xA5);
  }
}

TEST_CASE("allocate_huge_pages names what it allocates when it cannot") {
  std::string msg;
  CHECK_THROWS_WITH_AS(allocate_huge_pages(0, "the test buffer"), doctest::Contains("no bytes for the test buffer"),
                       Error);
  // Past the address space once the alignment slack is added.
  CHECK(kind_of_failure(std::numeric_limits<size_t>::max() - 7, &msg) == ErrorKind::kOutOfMemory);
  CHECK(msg.find("the test buffer") != std::string::npos);
  CHECK(msg.find("do not fit") != std::string::npos);
  // Larger than any x86-64 or AArch64 address space: mmap refuses it.
  CHECK(kind_of_failure(size_t{1} << 60, &msg) == ErrorKind::kOutOfMemory);
  CHECK(msg.find("the test buffer: cannot allocate 1152921504606846976 bytes") != std::string::npos);
}

TEST_CASE("allocate_small_pages commits only the pages written, as the KV cache writes them") {
  // 128 regions of 256 KiB (a KV head's positions each), the first bytes of each written.
  constexpr size_t kRegion = size_t{256} << 10, kRegions = 128, kBytes = kRegion * kRegions;
  auto p = allocate_small_pages(kBytes, "the test cache");
  REQUIRE(p != nullptr);
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  CHECK(reinterpret_cast<uintptr_t>(p.get()) % page == 0);
  for (size_t r = 0; r < kRegions; ++r) {
    CHECK(p.get()[r * kRegion] == 0);
    std::memset(p.get() + r * kRegion, 0x5A, 300);  // a few rows of a fresh sequence
  }
  std::vector<unsigned char> resident(kBytes / page);
  REQUIRE(mincore(p.get(), kBytes, resident.data()) == 0);
  size_t pages = 0;
  for (unsigned char v : resident) pages += v & 1;
  CAPTURE(pages);
  CHECK(pages >= kRegions);
  CHECK(pages <= 4 * kRegions);  // in huge pages this would be all kBytes / page = 8192
  CHECK(p.get()[kBytes - 1] == 0);
  CHECK_THROWS_WITH_AS(allocate_small_pages(0, "the test cache"), doctest::Contains("no bytes for the test cache"),
                       Error);
  CHECK_THROWS_WITH_AS(allocate_small_pages(size_t{1} << 60, "the test cache"),
                       doctest::Contains("the test cache: cannot allocate"), Error);
}

#include "runtime/mapped_file.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/error.h"

namespace qkv {

MappedFile MappedFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_as(ErrorKind::kIO, "cannot open '", path, "': ", std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail_as(ErrorKind::kIO, "cannot stat '", path, "': ", std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail_as(ErrorKind::kIO, "'", path, "' is not a regular file");
  }
  MappedFile f;
  f.path = path;
  f.size = static_cast<uint64_t>(st.st_size);
  if (f.size == 0) {  // mmap of length 0 is an error; an empty file is simply empty
    ::close(fd);
    return f;
  }
  void* p = ::mmap(nullptr, f.size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping stays valid without the descriptor
  if (p == MAP_FAILED) fail_as(ErrorKind::kIO, "cannot mmap '", path, "': ", std::strerror(err));
  const uint64_t size = f.size;
  f.data = static_cast<const uint8_t*>(p);
  f.keep_alive = std::shared_ptr<const void>(p, [size](const void* q) {
    ::munmap(const_cast<void*>(q), size);
  });
  return f;
}

}  // namespace qkv

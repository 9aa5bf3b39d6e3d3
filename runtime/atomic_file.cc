#include "runtime/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "kernels/error.h"

namespace qkv {

AtomicFile::AtomicFile(const std::string& path)
    : path_(path), tmp_(path + ".tmp." + std::to_string(::getpid())) {
  QKV_CHECK(!path.empty(), "output file: empty path");
  f_ = std::fopen(tmp_.c_str(), "wb");
  if (!f_) fail_as(ErrorKind::kIO, "cannot write '", tmp_, "': ", std::strerror(errno));
}

AtomicFile::~AtomicFile() { discard(); }

void AtomicFile::discard() {
  if (!f_) return;
  std::fclose(f_);
  f_ = nullptr;
  ::unlink(tmp_.c_str());
}

void AtomicFile::write(const void* data, size_t bytes) {
  QKV_CHECK(f_ != nullptr, "writing '", path_, "' after it was committed or abandoned");
  if (bytes == 0) return;
  if (std::fwrite(data, 1, bytes, f_) != bytes) {
    const std::string why = std::strerror(errno);
    discard();
    fail_as(ErrorKind::kIO, "writing '", tmp_, "' failed: ", why);
  }
  written_ += bytes;
}

void AtomicFile::commit() {
  QKV_CHECK(f_ != nullptr, "committing '", path_, "' twice or after a failed write");
  FILE* f = f_;
  f_ = nullptr;
  const bool flushed = std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  const std::string why = flushed ? std::string() : std::strerror(errno);
  if (std::fclose(f) != 0 || !flushed) {
    ::unlink(tmp_.c_str());
    fail_as(ErrorKind::kIO, "writing '", tmp_, "' failed: ", flushed ? std::strerror(errno) : why);
  }
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const std::string err = std::strerror(errno);
    ::unlink(tmp_.c_str());
    fail_as(ErrorKind::kIO, "cannot rename '", tmp_, "' to '", path_, "': ", err);
  }
}

void write_file_atomically(const std::string& path, const std::string& bytes) {
  AtomicFile out(path);
  out.write(bytes);
  out.commit();
}

}  // namespace qkv

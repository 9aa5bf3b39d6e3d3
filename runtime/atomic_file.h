// A file that appears whole or not at all.
//
// Bytes go to a temporary file beside the target (PATH.tmp.<pid>); commit()
// flushes it, fsyncs it and renames it onto PATH. Destroying an uncommitted
// AtomicFile (an error, an exception, a closed pipe) removes the temporary
// file, so a reader never sees a partial output. A failed write (disk full)
// is a kIO error naming the file and the system's reason.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

namespace qkv {

class AtomicFile {
 public:
  explicit AtomicFile(const std::string& path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t bytes);
  void write(const std::string& s) { write(s.data(), s.size()); }
  // Bytes written so far.
  size_t size() const { return written_; }
  // Flushes, fsyncs and renames onto the target path; afterwards write() is an error.
  void commit();

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return tmp_; }

 private:
  void discard();

  std::string path_, tmp_;
  FILE* f_ = nullptr;
  size_t written_ = 0;
};

// The whole of `bytes` as the file at path, through an AtomicFile.
void write_file_atomically(const std::string& path, const std::string& bytes);

}  // namespace qkv

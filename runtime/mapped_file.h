// A read-only memory map of a whole file. Model weights point straight into it
// (zero-copy), so its lifetime is shared: Model::storage holds `keep_alive`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace qkv {

struct MappedFile {
  const uint8_t* data = nullptr;  // nullptr for an empty file
  uint64_t size = 0;
  std::string path;
  std::shared_ptr<const void> keep_alive;  // munmaps when the last owner goes

  // Maps `path` read-only; throws qkv::Error naming the file if it cannot be
  // opened, is not a regular file, or cannot be mapped.
  static MappedFile open(const std::string& path);
};

}  // namespace qkv

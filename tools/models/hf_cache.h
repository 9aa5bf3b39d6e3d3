// The Hugging Face hub cache on disk, laid out as huggingface_hub writes it
// (https://huggingface.co/docs/hub/local-cache), so that files are shared with
// huggingface-cli, llama.cpp and Python tools:
//   <cache>/models--OWNER--REPO/blobs/<sha256>            the file's bytes
//   <cache>/models--OWNER--REPO/blobs/<sha256>.incomplete a download under way
//   <cache>/models--OWNER--REPO/snapshots/<rev>/<FILE>    a relative symlink ../../blobs/<sha256>
//   <cache>/models--OWNER--REPO/refs/main                 the revision main points at
// <cache> is $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace qkv::tools::models {

std::string hub_cache_dir();
// <cache>/models--OWNER--REPO
std::string repo_cache_dir(const std::string& cache, const std::string& repo);

// The revision refs/<name> holds; "" when absent.
std::string read_ref(const std::string& repo_dir, const std::string& name);
// Writes refs/<name> (atomically: a temporary file renamed into place).
void write_ref(const std::string& repo_dir, const std::string& name, const std::string& revision);

std::string blob_path(const std::string& repo_dir, const std::string& sha256);
std::string snapshot_path(const std::string& repo_dir, const std::string& revision, const std::string& file);
// Points snapshots/<revision>/<file> at blobs/<sha256> with a relative link
// (replacing a link already there); creates the folders it needs.
void link_snapshot(const std::string& repo_dir, const std::string& revision, const std::string& file,
                   const std::string& sha256);

// A GGUF file of a cached snapshot.
struct CachedFile {
  std::string repo;      // OWNER/REPO
  std::string revision;  // the snapshot folder's name
  std::string file;      // path in the repository
  std::string path;      // the snapshot link
  std::string blob;      // what the link points at ("" when the link is broken)
  uint64_t size = 0;     // the blob's size
};

// The GGUF files of one repository's snapshots (every revision; those of
// refs/main first), and of every cached repository.
std::vector<CachedFile> cached_gguf_files(const std::string& repo_dir, const std::string& repo);
std::vector<CachedFile> all_cached_gguf_files(const std::string& cache);

// Removes the given snapshot links, then every blob no snapshot links to any
// more, then empty snapshot folders. Returns the bytes freed.
uint64_t remove_cached(const std::string& repo_dir, const std::vector<CachedFile>& files);

}  // namespace qkv::tools::models

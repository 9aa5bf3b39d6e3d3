#include "tools/models/hf_cache.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <system_error>

#include "kernels/error.h"

namespace qkv::tools::models {

namespace fs = std::filesystem;

namespace {

bool is_gguf_name(const std::string& s) {
  if (s.size() <= 5) return false;
  std::string ext = s.substr(s.size() - 5);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".gguf";
}

// OWNER/REPO from a cache folder name models--OWNER--REPO ("" for other folders).
std::string repo_of_folder(const std::string& name) {
  if (name.rfind("models--", 0) != 0) return "";
  const std::string rest = name.substr(8);
  const size_t sep = rest.find("--");
  if (sep == std::string::npos) return rest;  // a repository without an owner (gpt2)
  return rest.substr(0, sep) + "/" + rest.substr(sep + 2);
}

}  // namespace

std::string hub_cache_dir() {
  if (const char* c = std::getenv("HF_HUB_CACHE"); c != nullptr && *c != '\0') return c;
  if (const char* h = std::getenv("HF_HOME"); h != nullptr && *h != '\0') return std::string(h) + "/hub";
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0') fail("cannot find the Hugging Face cache: HOME, HF_HOME and HF_HUB_CACHE are all unset");
  return std::string(home) + "/.cache/huggingface/hub";
}

std::string repo_cache_dir(const std::string& cache, const std::string& repo) {
  std::string folder = "models--";
  for (char c : repo) {
    if (c == '/') {
      folder += "--";
    } else {
      folder += c;
    }
  }
  return cache + "/" + folder;
}

std::string read_ref(const std::string& repo_dir, const std::string& name) {
  std::ifstream in(repo_dir + "/refs/" + name);
  std::string rev;
  if (!in || !std::getline(in, rev)) return "";
  while (!rev.empty() && (rev.back() == '\r' || rev.back() == ' ')) rev.pop_back();
  return rev;
}

void write_ref(const std::string& repo_dir, const std::string& name, const std::string& revision) {
  const fs::path refs = fs::path(repo_dir) / "refs";
  std::error_code ec;
  fs::create_directories(refs, ec);
  if (ec) fail("cannot create ", refs.string(), ": ", ec.message());
  const fs::path tmp = refs / (name + ".tmp");
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << revision;  // no newline, as huggingface_hub writes it
    if (!out.flush()) fail("cannot write ", tmp.string());
  }
  fs::rename(tmp, refs / name, ec);
  if (ec) fail("cannot write ", (refs / name).string(), ": ", ec.message());
}

std::string blob_path(const std::string& repo_dir, const std::string& sha256) { return repo_dir + "/blobs/" + sha256; }

std::string snapshot_path(const std::string& repo_dir, const std::string& revision, const std::string& file) {
  return repo_dir + "/snapshots/" + revision + "/" + file;
}

void link_snapshot(const std::string& repo_dir, const std::string& revision, const std::string& file,
                   const std::string& sha256) {
  const fs::path link = snapshot_path(repo_dir, revision, file);
  std::error_code ec;
  fs::create_directories(link.parent_path(), ec);
  if (ec) fail("cannot create ", link.parent_path().string(), ": ", ec.message());
  // snapshots/<rev>/a/b.gguf is 2 + (folders in the file's path) levels below the repository folder.
  std::string target = "../../";
  for (char c : file) {
    if (c == '/') target += "../";
  }
  target += "blobs/" + sha256;
  const fs::path tmp = link.string() + ".link-tmp";
  fs::remove(tmp, ec);
  fs::create_symlink(target, tmp, ec);
  if (ec) fail("cannot create the link ", tmp.string(), ": ", ec.message());
  fs::rename(tmp, link, ec);
  if (ec) fail("cannot create the link ", link.string(), ": ", ec.message());
}

std::vector<CachedFile> cached_gguf_files(const std::string& repo_dir, const std::string& repo) {
  std::vector<CachedFile> out;
  const fs::path snapshots = fs::path(repo_dir) / "snapshots";
  std::error_code ec;
  if (!fs::is_directory(snapshots, ec)) return out;
  const std::string main_rev = read_ref(repo_dir, "main");
  for (const fs::directory_entry& rev : fs::directory_iterator(snapshots, ec)) {
    if (!rev.is_directory(ec)) continue;
    for (auto it = fs::recursive_directory_iterator(rev.path(), ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (!it->is_symlink(ec) && !it->is_regular_file(ec)) continue;
      const std::string name = it->path().filename().string();
      if (!is_gguf_name(name)) continue;
      CachedFile f;
      f.repo = repo;
      f.revision = rev.path().filename().string();
      f.file = it->path().lexically_relative(rev.path()).string();
      f.path = it->path().string();
      std::error_code ec2;
      const fs::path blob = fs::canonical(it->path(), ec2);
      if (!ec2) {
        f.blob = blob.string();
        f.size = fs::file_size(blob, ec2);
      }
      out.push_back(f);
    }
  }
  std::sort(out.begin(), out.end(), [&](const CachedFile& a, const CachedFile& b) {
    const bool am = a.revision == main_rev, bm = b.revision == main_rev;
    if (am != bm) return am;
    return a.revision != b.revision ? a.revision < b.revision : a.file < b.file;
  });
  return out;
}

std::vector<CachedFile> all_cached_gguf_files(const std::string& cache) {
  std::vector<CachedFile> out;
  std::error_code ec;
  if (!fs::is_directory(cache, ec)) return out;
  std::vector<fs::path> repos;
  for (const fs::directory_entry& e : fs::directory_iterator(cache, ec)) repos.push_back(e.path());
  std::sort(repos.begin(), repos.end());
  for (const fs::path& p : repos) {
    const std::string repo = repo_of_folder(p.filename().string());
    if (repo.empty()) continue;
    const std::vector<CachedFile> files = cached_gguf_files(p.string(), repo);
    out.insert(out.end(), files.begin(), files.end());
  }
  return out;
}

uint64_t remove_cached(const std::string& repo_dir, const std::vector<CachedFile>& files) {
  std::error_code ec;
  for (const CachedFile& f : files) {
    fs::remove(f.path, ec);
    if (ec) fail("cannot remove ", f.path, ": ", ec.message());
  }
  // Blobs still linked from any snapshot (of any file type) stay.
  std::set<std::string> linked;
  const fs::path snapshots = fs::path(repo_dir) / "snapshots";
  if (fs::is_directory(snapshots, ec)) {
    for (auto it = fs::recursive_directory_iterator(snapshots, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      std::error_code ec2;
      if (it->is_symlink(ec2)) {
        const fs::path target = fs::weakly_canonical(it->path(), ec2);
        if (!ec2) linked.insert(target.string());
      }
    }
  }
  uint64_t freed = 0;
  const fs::path blobs = fs::path(repo_dir) / "blobs";
  if (fs::is_directory(blobs, ec)) {
    for (const fs::directory_entry& b : fs::directory_iterator(blobs, ec)) {
      std::error_code ec2;
      const std::string canon = fs::weakly_canonical(b.path(), ec2).string();
      // A partial download of another file stays for its resume.
      const std::string name = b.path().filename().string();
      const bool partial = name.size() > 11 && name.compare(name.size() - 11, 11, ".incomplete") == 0;
      if (ec2 || partial || linked.count(canon) != 0) continue;
      const uint64_t size = b.is_regular_file(ec2) ? b.file_size(ec2) : 0;
      if (fs::remove(b.path(), ec2)) freed += size;
    }
  }
  // Empty folders under snapshots/, deepest first.
  std::vector<fs::path> dirs;
  for (auto it = fs::recursive_directory_iterator(snapshots, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    std::error_code ec2;
    if (it->is_directory(ec2) && !it->is_symlink(ec2)) dirs.push_back(it->path());
  }
  std::sort(dirs.begin(), dirs.end(), [](const fs::path& a, const fs::path& b) { return a.string().size() > b.string().size(); });
  for (const fs::path& d : dirs) {
    std::error_code ec2;
    if (fs::is_empty(d, ec2)) fs::remove(d, ec2);
  }
  return freed;
}

}  // namespace qkv::tools::models

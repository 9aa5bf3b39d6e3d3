#include "tools/models/hub_pull.h"

#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "kernels/error.h"
#include "tools/models/hf_cache.h"
#include "tools/models/http_client.h"

namespace qkv::tools::models {

namespace {

constexpr uint64_t kMaxApiReply = 64ull << 20;  // the JSON of a repository with thousands of files

bool env_true(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return false;
  std::string s = v;
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s == "1" || s == "true" || s == "yes" || s == "on";
}

// Percent-encodes a repository path for a URL, keeping '/' between its parts.
std::string url_path(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

std::string mib(uint64_t b) {
  char s[32];
  std::snprintf(s, sizeof(s), "%.1f MiB", static_cast<double>(b) / (1024.0 * 1024.0));
  return s;
}

[[noreturn]] void fail_status(long status, const std::string& what, const HubSettings& s, const std::string& body) {
  if (status == 401 || status == 403) {
    fail(what, ": HTTP ", status, s.token.empty() ? " (the repository is gated or private, or does not exist: set HF_TOKEN to an access token that may read it)"
                                                  : " (the token in HF_TOKEN may not read it: accept the repository's terms on the hub, or use another token)");
  }
  if (status == 404) fail(what, ": HTTP 404, not found at ", s.endpoint);
  std::string excerpt = body.substr(0, 200);
  for (char& c : excerpt) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  fail(what, ": HTTP ", status, excerpt.empty() ? "" : " (" + excerpt + ")");
}

// A revision names a snapshot folder: letters, digits, '-', '_', '.' only.
void check_revision(const std::string& rev, const std::string& repo) {
  bool ok = !rev.empty() && rev.size() <= 128 && rev[0] != '.';
  for (char c : rev) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.');
  if (!ok) fail("the hub's revision for ", repo, " is not a usable name: '", rev, "'");
}

bool is_sha256_hex(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// The LFS sha256 from X-Linked-Etag ("<hex>", maybe W/"<hex>").
std::string linked_sha256(const HttpReply& r) {
  const auto it = r.headers.find("x-linked-etag");
  if (it == r.headers.end()) return "";
  std::string v = it->second;
  if (v.rfind("W/", 0) == 0) v = v.substr(2);
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return v;
}

uint64_t file_size_or_zero(const std::string& path, bool* exists) {
  struct stat st {};
  *exists = stat(path.c_str(), &st) == 0;
  return *exists ? static_cast<uint64_t>(st.st_size) : 0;
}

// Brings one file of the repository at revision into the cache.
void pull_file(const HubRef& ref, const std::string& revision, const std::string& file, const HubSettings& s) {
  const std::string repo_dir = repo_cache_dir(s.cache, ref.repo);
  const std::string url = s.endpoint + "/" + url_path(ref.repo) + "/resolve/" + url_path(revision) + "/" + url_path(file);
  const HttpReply head = http_head_first_hop(url, s.token);
  if (!head.transport_error.empty()) fail("cannot reach ", url, ": ", head.transport_error);
  if (head.status >= 400) fail_status(head.status, ref.repo + "/" + file, s, "");
  const std::string sha = linked_sha256(head);
  const auto size_it = head.headers.find("x-linked-size");
  if (!is_sha256_hex(sha) || size_it == head.headers.end()) {
    fail("the hub sent no usable X-Linked-Etag and X-Linked-Size for ", ref.repo, "/", file,
         " (a Git LFS file's sha256 and size), so qkv cannot verify it");
  }
  char* end = nullptr;
  errno = 0;
  const unsigned long long size = std::strtoull(size_it->second.c_str(), &end, 10);
  if (errno != 0 || end == size_it->second.c_str() || *end != '\0' || size == 0) {
    fail("the hub's X-Linked-Size for ", file, " is not a byte count: '", size_it->second, "'");
  }
  const std::string blob = blob_path(repo_dir, sha);
  bool exists = false;
  const uint64_t have = file_size_or_zero(blob, &exists);
  if (!exists || have != size) {
    std::error_code ec;
    std::filesystem::create_directories(repo_dir + "/blobs", ec);
    if (ec) fail("cannot create ", repo_dir, "/blobs: ", ec.message());
    std::fprintf(stderr, "qkv: pulling %s/%s (%s)\n", ref.repo.c_str(), file.c_str(), mib(size).c_str());
    DownloadTarget t;
    t.url = url;
    t.bearer_token = s.token;
    t.partial_path = blob + ".incomplete";
    t.size = size;
    t.sha256 = sha;
    t.label = file;
    download_verified(t);
    if (std::rename(t.partial_path.c_str(), blob.c_str()) != 0) {
      fail("cannot move ", t.partial_path, " to ", blob, ": ", std::strerror(errno));
    }
  }
  link_snapshot(repo_dir, revision, file, sha);
}

}  // namespace

HubSettings HubSettings::from_environment() {
  HubSettings s;
  const char* e = std::getenv("HF_ENDPOINT");
  s.endpoint = e != nullptr && *e != '\0' ? e : "https://huggingface.co";
  while (!s.endpoint.empty() && s.endpoint.back() == '/') s.endpoint.pop_back();
  if (s.endpoint.rfind("http://", 0) != 0 && s.endpoint.rfind("https://", 0) != 0) {
    fail("HF_ENDPOINT must be an http:// or https:// address, not '", s.endpoint, "'");
  }
  if (const char* t = std::getenv("HF_TOKEN"); t != nullptr) {
    s.token = t;
  } else {
    // The file 'huggingface-cli login' writes: $HF_TOKEN_PATH, else $HF_HOME/token, else ~/.cache/huggingface/token.
    const char* path = std::getenv("HF_TOKEN_PATH");
    const char* home = std::getenv("HF_HOME");
    const char* user_home = std::getenv("HOME");
    const std::string file = path != nullptr && *path != '\0'   ? std::string(path)
                             : home != nullptr && *home != '\0' ? std::string(home) + "/token"
                             : user_home != nullptr           ? std::string(user_home) + "/.cache/huggingface/token"
                                                              : std::string();
    std::ifstream in(file);
    if (in && std::getline(in, s.token)) {
      while (!s.token.empty() && (s.token.back() == '\r' || s.token.back() == ' ')) s.token.pop_back();
    }
  }
  s.cache = hub_cache_dir();
  s.offline = env_true("HF_HUB_OFFLINE");
  return s;
}

std::vector<std::string> cached_model(const HubRef& ref, const HubSettings& s) {
  const std::string repo_dir = repo_cache_dir(s.cache, ref.repo);
  const std::vector<CachedFile> cached = cached_gguf_files(repo_dir, ref.repo);
  if (cached.empty()) fail(ref.repo, " is not in the Hugging Face cache at ", s.cache);
  // The snapshot of refs/main if it holds the model, else the first that does.
  std::map<std::string, std::vector<std::string>> by_revision;
  std::vector<std::string> order;
  for (const CachedFile& f : cached) {
    if (by_revision.count(f.revision) == 0) order.push_back(f.revision);
    by_revision[f.revision].push_back(f.file);
  }
  std::string first_error;
  for (const std::string& rev : order) {
    try {
      const GgufChoice c = choose_gguf(gguf_choices(by_revision[rev]), ref);
      std::vector<std::string> paths;
      for (const std::string& f : c.files) paths.push_back(snapshot_path(repo_dir, rev, f));
      return paths;
    } catch (const Error& e) {
      if (first_error.empty()) first_error = e.what();
    }
  }
  fail("in the Hugging Face cache at ", s.cache, ": ", first_error);
}

std::vector<std::string> pull_model(const HubRef& ref, const HubSettings& s) {
  if (s.offline) {
    try {
      return cached_model(ref, s);
    } catch (const Error& e) {
      fail("HF_HUB_OFFLINE is set, so qkv looks only in the cache, and ", e.what());
    }
  }
  const std::string api = s.endpoint + "/api/models/" + url_path(ref.repo);
  const HttpReply reply = http_get(api, s.token, kMaxApiReply);
  if (!reply.transport_error.empty()) {
    try {
      std::vector<std::string> paths = cached_model(ref, s);
      std::fprintf(stderr, "qkv: cannot reach %s (%s): using the cached copy\n", s.endpoint.c_str(), reply.transport_error.c_str());
      return paths;
    } catch (const Error& e) {
      fail("cannot reach ", s.endpoint, " (", reply.transport_error, "), and ", e.what());
    }
  }
  if (reply.status != 200) fail_status(reply.status, "repository " + ref.repo, s, reply.body);
  nlohmann::json info;
  try {
    info = nlohmann::json::parse(reply.body);
  } catch (const std::exception& e) {
    fail("the hub's reply about ", ref.repo, " is not JSON: ", e.what());
  }
  if (!info.is_object() || !info.contains("sha") || !info["sha"].is_string() || !info.contains("siblings") ||
      !info["siblings"].is_array()) {
    fail("the hub's reply about ", ref.repo, " lacks its revision ('sha') or its file list ('siblings')");
  }
  const std::string revision = info["sha"].get<std::string>();
  check_revision(revision, ref.repo);
  std::vector<std::string> files;
  for (const nlohmann::json& f : info["siblings"]) {
    if (f.is_object() && f.contains("rfilename") && f["rfilename"].is_string()) files.push_back(f["rfilename"].get<std::string>());
  }
  const GgufChoice choice = choose_gguf(gguf_choices(files), ref);
  const std::string repo_dir = repo_cache_dir(s.cache, ref.repo);
  std::vector<std::string> paths;
  for (const std::string& f : choice.files) {
    parse_hub_ref(ref.repo + "/" + f);  // the same path rules as a file the user names
    pull_file(ref, revision, f, s);
    paths.push_back(snapshot_path(repo_dir, revision, f));
  }
  write_ref(repo_dir, "main", revision);
  return paths;
}

}  // namespace qkv::tools::models

#include "tools/models/http_client.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <signal.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/error.h"

namespace qkv::tools::models {

namespace {

// curl_global_init once, before the first handle (libcurl asks for it while
// the program has one thread).
struct CurlGlobal {
  CurlGlobal() { curl_global_init(CURL_GLOBAL_DEFAULT); }
  ~CurlGlobal() { curl_global_cleanup(); }
};

struct CurlDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
using CurlHandle = std::unique_ptr<CURL, CurlDeleter>;
using CurlList = std::unique_ptr<curl_slist, SlistDeleter>;

CurlHandle new_handle(const std::string& url, const std::string& token, CurlList* headers) {
  static CurlGlobal global;
  CurlHandle h(curl_easy_init());
  if (!h) fail("libcurl could not create a transfer handle");
  CURL* c = h.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_USERAGENT, "qkv");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
  // A stalled transfer (under 1 byte/s for 60 s) counts as a dropped connection.
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  // libcurl reads no CA variable itself: the curl tool's, then OpenSSL's, then
  // Python requests' (which huggingface_hub users may have set), in that order.
  for (const char* var : {"CURL_CA_BUNDLE", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"}) {
    const char* bundle = std::getenv(var);
    if (bundle != nullptr && *bundle != '\0') {
      curl_easy_setopt(c, CURLOPT_CAINFO, bundle);
      break;
    }
  }
  if (!token.empty()) {
    const std::string auth = "Authorization: Bearer " + token;
    headers->reset(curl_slist_append(headers->release(), auth.c_str()));
  }
  if (*headers) curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers->get());
  return h;
}

// Collects the headers of the last reply (each redirect's reply starts the set afresh).
size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* reply = static_cast<HttpReply*>(user);
  const std::string line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) {
    reply->headers.clear();
    return size * n;
  }
  const size_t colon = line.find(':');
  if (colon == std::string::npos) return size * n;
  std::string name = line.substr(0, colon);
  for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  size_t b = colon + 1, e = line.size();
  while (b < e && (line[b] == ' ' || line[b] == '\t')) ++b;
  while (e > b && (line[e - 1] == '\r' || line[e - 1] == '\n' || line[e - 1] == ' ')) --e;
  reply->headers[name] = line.substr(b, e - b);
  return size * n;
}

struct BodySink {
  std::string* body;
  uint64_t max_bytes;
  bool too_big = false;
};

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* sink = static_cast<BodySink*>(user);
  if (sink->body->size() + size * n > sink->max_bytes) {
    sink->too_big = true;
    return 0;
  }
  sink->body->append(data, size * n);
  return size * n;
}

std::string host_of(const std::string& url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return "";
  const size_t b = scheme + 3;
  return url.substr(0, url.find('/', b));
}

std::string hex(const unsigned char* d, unsigned n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (unsigned i = 0; i < n; ++i) {
    s += digits[d[i] >> 4];
    s += digits[d[i] & 15];
  }
  return s;
}

struct Sha256 {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  Sha256() {
    if (ctx == nullptr || EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) != 1) fail("OpenSSL could not start a sha256");
  }
  ~Sha256() { EVP_MD_CTX_free(ctx); }
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void reset() { EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr); }
  void add(const void* p, size_t n) { EVP_DigestUpdate(ctx, p, n); }
  std::string hex_digest() {
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    EVP_DigestFinal_ex(ctx, d, &n);
    return hex(d, n);
  }
};

// Feeds the file's first `bytes` bytes to the hash.
void hash_prefix(int fd, uint64_t bytes, Sha256* sha, const std::string& path) {
  std::vector<char> buf(1 << 20);
  uint64_t done = 0;
  while (done < bytes) {
    const ssize_t got = pread(fd, buf.data(), std::min<uint64_t>(buf.size(), bytes - done), static_cast<off_t>(done));
    if (got <= 0) fail("reading ", path, ": ", got == 0 ? "unexpected end of file" : std::strerror(errno));
    sha->add(buf.data(), static_cast<size_t>(got));
    done += static_cast<uint64_t>(got);
  }
}

std::string mib(uint64_t b) {
  char s[32];
  std::snprintf(s, sizeof(s), "%.1f MiB", static_cast<double>(b) / (1024.0 * 1024.0));
  return s;
}

struct Transfer {
  int fd = -1;
  const DownloadTarget* target = nullptr;
  CURL* curl = nullptr;
  Sha256 sha;
  uint64_t have = 0;      // bytes in the file
  uint64_t resumed = 0;   // bytes there before this transfer
  bool started = false;   // the first body byte arrived and the reply was checked
  std::string refusal;    // why the transfer was stopped by us
  int write_errno = 0;
  bool progress = false;  // draw a bar (stderr is a terminal)
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now(), last_draw;
  HttpReply reply;        // the last reply's headers
};

// Checks the reply once, on its first body bytes: a 206 must continue where the
// file ends; a 200 to a Range request restarts the file.
bool accept_reply(Transfer* t) {
  long status = 0;
  curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
  if (status == 206) {
    const auto it = t->reply.headers.find("content-range");
    unsigned long long first = 0;
    if (it == t->reply.headers.end() || std::sscanf(it->second.c_str(), "bytes %llu-", &first) != 1 || first != t->have) {
      t->refusal = "the server answered the resume request with a byte range that does not start at " +
                   std::to_string(t->have);
      return false;
    }
  } else if (status == 200) {
    if (t->have > 0) {
      if (ftruncate(t->fd, 0) != 0) {
        t->write_errno = errno;
        return false;
      }
      t->sha.reset();
      t->have = 0;
      t->resumed = 0;
    }
  } else {
    t->refusal = "unexpected HTTP status " + std::to_string(status);
    return false;
  }
  t->started = true;
  return true;
}

size_t on_file_body(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * n;
  if (!t->started && !accept_reply(t)) return 0;
  if (t->have + bytes > t->target->size) {
    t->refusal = "the server sent more than the " + std::to_string(t->target->size) + " bytes the hub announced";
    return 0;
  }
  size_t done = 0;
  while (done < bytes) {
    const ssize_t w = pwrite(t->fd, data + done, bytes - done, static_cast<off_t>(t->have + done));
    if (w < 0) {
      if (errno == EINTR) continue;
      t->write_errno = errno;
      // What did reach the file stays there for the resume (which hashes the file again).
      t->sha.add(data, done);
      t->have += done;
      return 0;
    }
    done += static_cast<size_t>(w);
  }
  t->sha.add(data, bytes);
  t->have += bytes;
  return bytes;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  if (!t->progress) return 0;
  const auto now = std::chrono::steady_clock::now();
  if (now - t->last_draw < std::chrono::milliseconds(200)) return 0;
  t->last_draw = now;
  const double secs = std::chrono::duration<double>(now - t->t0).count();
  const double rate = secs > 0 ? static_cast<double>(t->have - t->resumed) / secs / (1024.0 * 1024.0) : 0.0;
  const uint64_t total = t->target->size;
  const int width = 30;
  const int filled = total > 0 ? static_cast<int>(static_cast<double>(t->have) * width / static_cast<double>(total)) : 0;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(width - filled), '.');
  std::fprintf(stderr, "\r%s [%s] %s / %s  %.1f MiB/s ", t->target->label.c_str(), bar.c_str(), mib(t->have).c_str(),
               mib(total).c_str(), rate);
  std::fflush(stderr);
  return 0;
}

}  // namespace

HttpReply http_get(const std::string& url, const std::string& bearer_token, uint64_t max_bytes) {
  HttpReply reply;
  CurlList headers(curl_slist_append(nullptr, "Accept: application/json"));
  CurlHandle h = new_handle(url, bearer_token, &headers);
  BodySink sink{&reply.body, max_bytes};
  curl_easy_setopt(h.get(), CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(h.get(), CURLOPT_MAXREDIRS, 5L);
  curl_easy_setopt(h.get(), CURLOPT_TIMEOUT, 120L);
  curl_easy_setopt(h.get(), CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h.get(), CURLOPT_HEADERDATA, &reply);
  curl_easy_setopt(h.get(), CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h.get(), CURLOPT_WRITEDATA, &sink);
  const CURLcode rc = curl_easy_perform(h.get());
  if (sink.too_big) fail("the reply from ", url, " is over ", max_bytes, " bytes");
  curl_easy_getinfo(h.get(), CURLINFO_RESPONSE_CODE, &reply.status);
  if (rc != CURLE_OK) reply.transport_error = curl_easy_strerror(rc);
  return reply;
}

HttpReply http_head_first_hop(const std::string& url, const std::string& bearer_token) {
  std::string at = url;
  for (int hop = 0; hop < 6; ++hop) {
    HttpReply reply;
    CurlList headers;
    CurlHandle h = new_handle(at, bearer_token, &headers);
    curl_easy_setopt(h.get(), CURLOPT_NOBODY, 1L);
    curl_easy_setopt(h.get(), CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(h.get(), CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h.get(), CURLOPT_HEADERDATA, &reply);
    const CURLcode rc = curl_easy_perform(h.get());
    curl_easy_getinfo(h.get(), CURLINFO_RESPONSE_CODE, &reply.status);
    if (rc != CURLE_OK) {
      reply.transport_error = curl_easy_strerror(rc);
      return reply;
    }
    const auto loc = reply.headers.find("location");
    if (reply.status < 300 || reply.status > 399 || loc == reply.headers.end()) return reply;
    // Relative, or absolute to the same host: the hub's redirect for a renamed repository.
    if (!loc->second.empty() && loc->second[0] == '/') {
      at = host_of(at) + loc->second;
    } else if (host_of(loc->second) == host_of(at) && reply.headers.count("x-linked-etag") == 0) {
      at = loc->second;
    } else {
      return reply;
    }
  }
  fail("too many redirects from ", url);
}

void download_verified(const DownloadTarget& target) {
  Transfer t;
  t.target = &target;
  t.fd = open(target.partial_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (t.fd < 0) fail("cannot open ", target.partial_path, ": ", std::strerror(errno));
  struct FdCloser {
    int fd;
    ~FdCloser() { close(fd); }
  } closer{t.fd};
  if (flock(t.fd, LOCK_EX | LOCK_NB) != 0) {
    fail("another process is downloading ", target.partial_path, " (it holds the file's lock); wait for it to finish");
  }
  struct stat st {};
  if (fstat(t.fd, &st) != 0) fail("cannot stat ", target.partial_path, ": ", std::strerror(errno));
  t.have = static_cast<uint64_t>(st.st_size);
  if (t.have > target.size) {
    if (ftruncate(t.fd, 0) != 0) fail("cannot truncate ", target.partial_path, ": ", std::strerror(errno));
    t.have = 0;
  }
  hash_prefix(t.fd, t.have, &t.sha, target.partial_path);
  t.resumed = t.have;

  struct statvfs vfs {};
  if (fstatvfs(t.fd, &vfs) == 0) {
    const uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
    if (target.size - t.have > free_bytes) {
      fail("not enough disk space for ", target.label, ": it needs ", mib(target.size - t.have), " more and ",
           target.partial_path, "'s file system has ", mib(free_bytes), " free");
    }
  }

  if (t.have < target.size) {
    if (t.have > 0) std::fprintf(stderr, "qkv: resuming %s at %s of %s\n", target.label.c_str(), mib(t.have).c_str(), mib(target.size).c_str());
    CurlList headers;
    CurlHandle h = new_handle(target.url, target.bearer_token, &headers);
    t.curl = h.get();
    t.progress = isatty(2) != 0;
    curl_easy_setopt(t.curl, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(t.curl, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(t.curl, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(t.curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(t.curl, CURLOPT_HEADERDATA, &t.reply);
    curl_easy_setopt(t.curl, CURLOPT_WRITEFUNCTION, on_file_body);
    curl_easy_setopt(t.curl, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(t.curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(t.curl, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(t.curl, CURLOPT_XFERINFODATA, &t);
    const std::string range = std::to_string(t.have) + "-";
    if (t.have > 0) curl_easy_setopt(t.curl, CURLOPT_RANGE, range.c_str());
    // Past RLIMIT_FSIZE a write fails with EFBIG only while SIGXFSZ is
    // ignored; its default action ends the process, partial file unexplained.
    struct sigaction ignore {}, previous {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    const bool swapped = sigaction(SIGXFSZ, &ignore, &previous) == 0;
    const CURLcode rc = curl_easy_perform(t.curl);
    if (swapped) sigaction(SIGXFSZ, &previous, nullptr);
    if (t.progress) {
      t.last_draw = {};  // the final state, past the redraw throttle
      on_progress(&t, 0, 0, 0, 0);
      std::fprintf(stderr, "\n");
    }
    long status = 0;
    curl_easy_getinfo(t.curl, CURLINFO_RESPONSE_CODE, &status);
    if (t.write_errno != 0) {
      const int e = t.write_errno;
      // ENOSPC: the file system is full; EFBIG: the file reached the process's
      // file size limit (RLIMIT_FSIZE, `ulimit -f`). Either way the bytes
      // written so far stay for the resume.
      const char* what = e == ENOSPC  ? "the disk is full"
                         : e == EFBIG ? "the file size limit (ulimit -f) was reached"
                         : e == EDQUOT ? "the disk quota is exceeded"
                                       : std::strerror(e);
      const char* remedy = e == EFBIG ? "raise the limit" : "free some space";
      fail(what, " while writing ", target.partial_path, " (", mib(t.have), " of ", mib(target.size), " kept; ", remedy,
           " and run the command again to resume)");
    }
    if (!t.refusal.empty()) {
      fail("downloading ", target.label, " from ", target.url, ": ", t.refusal);
    }
    if (rc == CURLE_HTTP_RETURNED_ERROR) {
      fail("downloading ", target.label, " from ", target.url, ": HTTP status ", status);
    }
    if (rc != CURLE_OK || t.have < target.size) {
      fail("the connection dropped while downloading ", target.label, " (", rc != CURLE_OK ? curl_easy_strerror(rc) : "short reply",
           "): ", mib(t.have), " of ", mib(target.size), " kept in ", target.partial_path,
           "; run the same command again to resume");
    }
  }
  const std::string got = t.sha.hex_digest();
  if (got != target.sha256) {
    if (unlink(target.partial_path.c_str()) != 0 && errno != ENOENT) {
      fail("the sha256 of ", target.label, " is ", got, " but the hub announced ", target.sha256,
           "; deleting the bad bytes at ", target.partial_path, " failed: ", std::strerror(errno));
    }
    fail("the sha256 of the downloaded ", target.label, " is ", got, " but the hub announced ", target.sha256,
         ": the ", mib(t.have), " downloaded were deleted; run the command again to download them afresh");
  }
}

std::string file_sha256(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open ", path, ": ", std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    close(fd);
    fail("cannot stat ", path, ": ", std::strerror(errno));
  }
  Sha256 sha;
  try {
    hash_prefix(fd, static_cast<uint64_t>(st.st_size), &sha, path);
  } catch (...) {
    close(fd);
    throw;
  }
  close(fd);
  return sha.hex_digest();
}

}  // namespace qkv::tools::models

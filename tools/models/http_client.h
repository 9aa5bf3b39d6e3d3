// HTTP(S) for qkv pull, through libcurl: small GET requests (the hub's JSON
// API), a HEAD that stops at the first redirect (where the hub puts a file's
// sha256 and size), and a resumable download into a file with its sha256
// computed on the way. libcurl reads the standard proxy variables
// (HTTPS_PROXY, NO_PROXY); TLS trusts the system CA store, or the file
// CURL_CA_BUNDLE, SSL_CERT_FILE or REQUESTS_CA_BUNDLE names (the first set).
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace qkv::tools::models {

struct HttpReply {
  long status = 0;                             // 0 when no reply arrived
  std::string body;                            // GET only
  std::map<std::string, std::string> headers;  // names in lower case; the last reply's
  std::string transport_error;                 // libcurl's message when the exchange failed
};

// GET url, following redirects; a body over max_bytes is an error.
HttpReply http_get(const std::string& url, const std::string& bearer_token, uint64_t max_bytes);

// HEAD url; follows redirects to the same host (a renamed repository) and stops
// at the first redirect to another host or at a non-redirect reply, whose
// headers it returns.
HttpReply http_head_first_hop(const std::string& url, const std::string& bearer_token);

struct DownloadTarget {
  std::string url;             // followed through redirects
  std::string bearer_token;    // sent to url's host only (libcurl drops it on other hosts)
  std::string partial_path;    // bytes so far; resumed with an HTTP Range request
  uint64_t size = 0;           // expected size in bytes
  std::string sha256;          // expected sha256, lower-case hex
  std::string label;           // the progress bar's name for the file
};

// Downloads target.url into target.partial_path (appending to what it holds
// when the server honours Range), then checks size and sha256. Throws
// qkv::Error on failure: a dropped connection keeps the partial file (the
// message says to run the command again to resume); a wrong sha256 deletes it
// (the message says so); a full disk (ENOSPC), the file size limit (EFBIG,
// RLIMIT_FSIZE) and HTTP errors are named, the partial file kept for the
// resume after a failed write. On success the
// partial file holds exactly the expected bytes.
void download_verified(const DownloadTarget& target);

// sha256 of a file's bytes as lower-case hex (reads the whole file).
std::string file_sha256(const std::string& path);

}  // namespace qkv::tools::models

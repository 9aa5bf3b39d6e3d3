# qkv pull: HTTP(S) from libcurl (redirects, TLS with the system CA store, HTTP
# Range resumes, the standard proxy variables) and sha256 from OpenSSL's
# libcrypto, both from Debian 12 packages. Included by tools/CMakeLists.txt.
find_package(CURL QUIET)
qkv_require(CURL_FOUND "libcurl (CURL::libcurl)" libcurl4-openssl-dev)
find_package(OpenSSL QUIET COMPONENTS Crypto)
qkv_require(OpenSSL_FOUND "OpenSSL's libcrypto (OpenSSL::Crypto)" libssl-dev)

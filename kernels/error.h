// qkv's one error type. Kernels and runtime throw qkv::Error with a message that
// names the problem (and the file, where there is one); the C API and the command
// line turn it into a status code or an exit code. Nothing aborts on bad input.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace qkv {

// What kind of failure an Error is, for callers that map errors to codes
// (the C API). Most errors are bad input of one kind or another: kInvalid.
enum class ErrorKind { kInvalid, kIO, kFormat, kContextOverflow, kOutOfMemory };

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, ErrorKind kind = ErrorKind::kInvalid)
      : std::runtime_error(what), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

namespace detail {
template <typename... Args>
std::string concat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
}  // namespace detail

// Throws qkv::Error whose message is the arguments streamed together.
template <typename... Args>
[[noreturn]] void fail(Args&&... args) {
  throw Error(detail::concat(std::forward<Args>(args)...));
}

// Like fail(), with a kind other than kInvalid.
template <typename... Args>
[[noreturn]] void fail_as(ErrorKind kind, Args&&... args) {
  throw Error(detail::concat(std::forward<Args>(args)...), kind);
}

}  // namespace qkv

// QKV_CHECK(cond, "message parts", value, ...): fail with the message unless cond holds.
#define QKV_CHECK(cond, ...)        \
  do {                              \
    if (!(cond)) ::qkv::fail(__VA_ARGS__); \
  } while (0)

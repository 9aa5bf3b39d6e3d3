// An error answered as OpenAI does: an HTTP status and
// {"error": {"message", "type", "param", "code"}}.
#pragma once

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace qkv::serve {

struct ApiError : std::runtime_error {
  int status;
  std::string type, param, code;
  ApiError(int status_, std::string message, std::string type_ = "invalid_request_error", std::string param_ = "",
           std::string code_ = "")
      : std::runtime_error(std::move(message)),
        status(status_),
        type(std::move(type_)),
        param(std::move(param_)),
        code(std::move(code_)) {}
};

// A 400 about one request field.
inline ApiError bad_field(const std::string& param, const std::string& message,
                          const std::string& code = "invalid_value") {
  return ApiError(400, message, "invalid_request_error", param, code);
}

inline nlohmann::json error_body(const std::string& message, const std::string& type, const std::string& param,
                                 const std::string& code) {
  nlohmann::json e = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (!param.empty()) e["param"] = param;
  if (!code.empty()) e["code"] = code;
  return {{"error", e}};
}

inline nlohmann::json error_body(const ApiError& e) { return error_body(e.what(), e.type, e.param, e.code); }

// Each API answers errors in its own shape: OpenAI's {"error": {...}},
// Anthropic's {"type": "error", "error": {"type", "message"}} (paths
// /v1/messages...), Ollama's {"error": "message"} (paths /api/...).
enum class ErrorStyle { kOpenAI, kAnthropic, kOllama };

inline ErrorStyle error_style(const std::string& path) {
  if (path.rfind("/v1/messages", 0) == 0) return ErrorStyle::kAnthropic;
  if (path.rfind("/api/", 0) == 0) return ErrorStyle::kOllama;
  return ErrorStyle::kOpenAI;
}

// Anthropic's error type for an HTTP status.
inline const char* anthropic_error_type(int status) {
  switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503:
    case 529: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

inline nlohmann::json error_body(ErrorStyle style, const ApiError& e) {
  switch (style) {
    case ErrorStyle::kAnthropic:
      return {{"type", "error"}, {"error", {{"type", anthropic_error_type(e.status)}, {"message", e.what()}}}};
    case ErrorStyle::kOllama:
      return {{"error", e.what()}};
    case ErrorStyle::kOpenAI:
      break;
  }
  return error_body(e);
}

}  // namespace qkv::serve

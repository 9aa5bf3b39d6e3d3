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

}  // namespace qkv::serve

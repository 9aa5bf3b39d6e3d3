// The request of OpenAI's Responses API (POST /v1/responses) read into the
// server's GenRequest (tools/serve/adapters/responses_request.cc), and the
// request fields its response object repeats.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "tools/serve/request.h"

namespace qkv::serve {

struct ResponsesRequest {
  GenRequest gen;
  // What the response object echoes: instructions, tools, tool_choice,
  // parallel_tool_calls, temperature, top_p, text, max_output_tokens,
  // reasoning, store, metadata, user, truncation...
  nlohmann::json echo = nlohmann::json::object();
};

// body_text: the request body; max_depth: the server's JSON nesting limit.
// Throws ApiError (400 naming the field) for anything malformed or refused.
ResponsesRequest parse_responses_request(const std::string& body_text, int max_depth);

}  // namespace qkv::serve

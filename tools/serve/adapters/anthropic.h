// Anthropic's Messages API on qkv serve (tools/serve/adapters/anthropic*.cc):
// the request body read into a GenRequest. The fields it reads and what it
// refuses are listed in anthropic.cc.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/serve/request.h"

namespace qkv::serve {

struct MessagesRequest {
  GenRequest gen;
  // The client's stop_sequences (gen.stop gains the template's own stop
  // strings when the job is made): a reply ended by one of these stops with
  // stop_reason "stop_sequence".
  std::vector<std::string> stop_sequences;
};

// POST /v1/messages (count_only false) or /v1/messages/count_tokens (true:
// max_tokens, sampling and streaming fields are not read). Throws ApiError
// (400) naming the field, in Anthropic's "path.to.field: problem" wording.
MessagesRequest parse_messages_request(const nlohmann::ordered_json& body, const RequestLimits& limits,
                                       bool count_only);

}  // namespace qkv::serve

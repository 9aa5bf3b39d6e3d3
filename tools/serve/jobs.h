// A request on its way through the scheduler, shared by every API the
// server speaks: the prompt (a chat rendered through its template with tools
// and reasoning), the grammar that constrains the output (response format,
// forced or lazily triggered tool calls), submission, and, for the adapters
// of other chat APIs (Anthropic messages, OpenAI responses, Ollama chat), the
// reply parsed into content, reasoning and tool calls, whole or streamed in
// the adapter's own event format.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <httplib.h>

#include "runtime/tool_calls/tool_calls.h"
#include "tools/serve/api_error.h"
#include "tools/serve/request.h"
#include "tools/serve/scheduler.h"

namespace qkv::serve {

struct ServedModel;

// How a chat reply is parsed: the template's family, and whether the prompt
// opened the thinking block.
struct ChatSetup {
  toolcall::Family family = toolcall::Family::kNone;
  bool starts_in_reasoning = false;
};

// The request as a job: the prompt's tokens checked against the context, the
// sampler, stops and grammar. prompt_text: the prompt (chat: as rendered).
std::shared_ptr<Job> make_job(ServedModel& st, GenRequest& r, std::string& prompt_text, ChatSetup& chat);
// Hands the job to the scheduler; a full queue or a stopping server is a 503.
void submit(ServedModel& st, const std::shared_ptr<Job>& job, httplib::Response& res);
// Starts a chunked streaming response of job's output: not cached nor
// buffered by proxies, waited for by a shutdown (open_streams), and the job
// cancelled when the client goes away before finished() says the stream ended.
void start_stream(ServedModel& st, httplib::Response& res, const std::string& content_type,
                  const std::shared_ptr<Job>& job, std::function<bool()> finished,
                  httplib::ContentProviderWithoutLength provider);
// The error a job that did not end normally answers with (status 0: none).
ApiError job_error(const Job& job);

struct Usage {
  int64_t prompt = 0, cached = 0, completion = 0;
  // Speculative decoding: whether the job's slot drafted, its tokens drafted
  // (and verified) and of those accepted.
  bool speculated = false;
  int64_t drafted = 0, accepted = 0;
};

// The job's counts so far (taken under its lock).
Usage usage_of(Job& job);

// Speculative decoding's counts in a usage object, when the job's slot
// drafted (never otherwise): draft_tokens and draft_accepted_tokens, as the
// OpenAI routes, Anthropic's Messages API and the Responses API report them.
// Ollama's final object spells them its own way (adapters/ollama_run.cc).
template <typename Json>
void add_draft_counts(const Usage& u, Json& usage) {
  if (!u.speculated) return;
  usage["draft_tokens"] = u.drafted;
  usage["draft_accepted_tokens"] = u.accepted;
}

// A finished chat reply.
struct ChatReply {
  toolcall::ParsedMessage message;
  std::vector<std::string> call_ids;  // per call
  std::string finish_reason;          // "stop", "length", "tool_calls"
  std::string stop_matched;           // the stop string that ended the reply, if one did
  Usage usage;
};

// Runs a chat request to its end (ApiError when it fails).
ChatReply run_chat(ServedModel& st, GenRequest& r, httplib::Response& res);

// An adapter's stream: the bytes of its events.
struct ChatStreamFormat {
  std::string content_type;                                            // text/event-stream, application/x-ndjson
  std::function<std::string()> begin;                                  // before anything is generated
  std::function<std::string(const toolcall::MessageDelta&)> delta;     // call deltas carry their ids
  std::function<std::string(const ChatReply&)> end;                    // the last event(s)
  std::function<std::string(const ApiError&)> error;                   // instead of end
};

// Streams a chat request (a chunked response). endpoint: for the metrics.
void stream_chat(ServedModel& st, GenRequest& r, httplib::Response& res, ChatStreamFormat format,
                 const std::string& endpoint);

}  // namespace qkv::serve

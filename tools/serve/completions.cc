// POST /v1/completions and /v1/chat/completions: a request becomes a Job for
// the scheduler; the answer is one JSON object or a server-sent event stream.
#include <chrono>
#include <memory>

#include "tools/serve/api_error.h"
#include "tools/serve/chat_prompt.h"
#include "tools/serve/responses.h"
#include "tools/serve/server.h"

namespace qkv::serve {

using nlohmann::json;

namespace {

std::vector<int32_t> tokenize(const qkv_model* model, const std::string& text) {
  int64_t n = 0;
  qkv_tokenize(model, text.c_str(), 1, nullptr, 0, &n);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  if (qkv_tokenize(model, text.c_str(), 1, ids.data(), n, &n) != QKV_OK) {
    throw ApiError(400, std::string("cannot tokenize the prompt: ") + qkv_last_error());
  }
  return ids;
}

// The request as a job: the prompt's tokens, checked against the context.
std::shared_ptr<Job> make_job(ServerState& st, GenRequest& r, std::string& prompt_text) {
  auto job = std::make_shared<Job>();
  if (r.chat) {
    ChatPrompt cp = render_chat(st.model, r.messages);
    prompt_text = cp.text;
    job->prompt = std::move(cp.tokens);
    for (std::string& s : cp.stop) r.stop.push_back(s);
  } else if (!r.prompt_tokens.empty()) {
    job->prompt = r.prompt_tokens;
  } else {
    prompt_text = r.prompt;
    job->prompt = tokenize(st.model, r.prompt);
  }
  if (job->prompt.empty()) throw bad_field("prompt", "the prompt has no tokens");
  const auto n = static_cast<int64_t>(job->prompt.size());
  if (n >= st.slot_context) {
    throw ApiError(400,
                   "This model's maximum context length is " + std::to_string(st.slot_context) +
                       " tokens. However, your prompt has " + std::to_string(n) +
                       " tokens, which leaves no room for a completion.",
                   "invalid_request_error", r.chat ? "messages" : "prompt", "context_length_exceeded");
  }
  job->max_tokens = r.max_tokens;  // the scheduler caps it to the room left
  job->sampler = r.sampler;
  if (!r.seed_given) job->sampler.seed = static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  job->logit_bias = r.logit_bias;
  job->stop = r.stop;
  job->logprobs = r.logprobs;
  job->top_logprobs = r.top_logprobs;
  job->arrival = Clock::now();
  job->deadline = job->arrival + std::chrono::milliseconds(static_cast<int64_t>(st.options.timeout_s * 1000));
  return job;
}

// The error a job that did not end normally answers with (status 0: none).
ApiError job_error(const Job& job) {
  if (job.finish_reason == "timeout") {
    return ApiError(504, "the request took longer than the server's timeout", "timeout_error", "", "timeout");
  }
  if (job.finish_reason == "cancelled") {
    return ApiError(503, "the server is shutting down", "server_error", "", "shutting_down");
  }
  if (job.finish_reason == "error") return ApiError(500, "generation failed: " + job.error, "server_error");
  return ApiError(0, "");
}

void stream(ServerState& st, const std::shared_ptr<Job>& job, const ResponseMeta& meta, const GenRequest& r,
            const std::string& echo, httplib::Response& res) {
  struct State {
    bool started = false, finished = false;
    int64_t offset = 0;
  };
  auto s = std::make_shared<State>();
  Metrics* metrics = &st.metrics;
  std::atomic<int>* open_streams = &st.open_streams;
  ++*open_streams;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [job, meta, r, echo, s, metrics](size_t, httplib::DataSink& sink) {
        auto write = [&](const std::string& x) {
          if (sink.write(x.data(), x.size())) return true;
          job->cancelled = true;  // the client is gone: free the slot
          return false;
        };
        if (!s->started) {
          s->started = true;
          if (meta.chat && !write(sse_event(chunk(meta, "", nullptr, "", "assistant")))) return false;
          if (!echo.empty() && !write(sse_event(chunk(meta, echo, nullptr, "")))) return false;
          s->offset = static_cast<int64_t>(echo.size());
        }
        const JobEvents e = job->take(std::chrono::milliseconds(50));
        if (r.logprobs && (!e.text.empty() || !e.tokens.empty())) {
          // One chunk with the tokens' logprobs.
          const json lp = logprobs_json(meta.chat, e.tokens, s->offset);
          s->offset += static_cast<int64_t>(e.text.size());
          if (!write(sse_event(chunk(meta, e.text, lp, "")))) return false;
        } else if (!r.logprobs) {
          for (const std::string& p : e.pieces) {  // a chunk per token's text
            if (!write(sse_event(chunk(meta, p, nullptr, "")))) return false;
          }
        }
        if (!e.done) return true;
        // Take what arrived together with the end.
        const JobEvents tail = job->take(std::chrono::milliseconds(0));
        std::string last = tail.text;
        std::string reason;
        int64_t prompt, cached, completion;
        {
          std::lock_guard<std::mutex> lock(job->mu);
          reason = job->finish_reason;
          prompt = job->prompt_tokens;
          cached = job->cached_tokens;
          completion = job->completion_tokens;
        }
        const ApiError err = job_error(*job);
        if (err.status != 0) {
          write(sse_event(error_body(err)));
        } else {
          const json lp = r.logprobs && !tail.tokens.empty() ? logprobs_json(meta.chat, tail.tokens, s->offset)
                                                             : json(nullptr);
          if (!write(sse_event(chunk(meta, last, lp, reason)))) return false;
          if (r.include_usage && !write(sse_event(usage_chunk(meta, usage_json(prompt, cached, completion))))) {
            return false;
          }
        }
        write(sse_done());
        s->finished = true;
        metrics->request_done(meta.chat ? "/v1/chat/completions" : "/v1/completions", err.status ? err.status : 200);
        sink.done();
        return true;
      },
      [job, s, open_streams](bool success) {
        if (!success || !s->finished) job->cancelled = true;
        --*open_streams;
      });
}

}  // namespace

void handle_generate(ServerState& st, bool chat, const httplib::Request& req, httplib::Response& res) {
  const char* endpoint = chat ? "/v1/chat/completions" : "/v1/completions";
  try {
    const json body = parse_body(req.body, st.options.max_json_depth);
    GenRequest r = chat ? parse_chat(body, st.limits) : parse_completion(body, st.limits);
    if (!r.model.empty() && r.model != st.options.model_id) {
      throw ApiError(404, "The model '" + r.model + "' does not exist (this server has '" + st.options.model_id + "')",
                     "invalid_request_error", "model", "model_not_found");
    }
    std::string prompt_text;
    std::shared_ptr<Job> job = make_job(st, r, prompt_text);
    const std::string echo = r.echo ? prompt_text : "";
    const ResponseMeta meta = new_meta(chat, st.options.model_id);
    switch (st.scheduler->submit(job)) {
      case Scheduler::Submit::kOk: break;
      case Scheduler::Submit::kQueueFull:
        res.set_header("Retry-After", "1");
        throw ApiError(503, "the server is busy: every slot is taken and the queue is full; retry later",
                       "server_error", "", "queue_full");
      case Scheduler::Submit::kStopping:
        throw ApiError(503, "the server is shutting down and takes no new requests", "server_error", "",
                       "shutting_down");
    }
    if (r.stream) {
      stream(st, job, meta, r, echo, res);
      return;
    }
    std::string text = echo;
    std::vector<TokenOut> tokens;
    for (;;) {
      JobEvents e = job->take(std::chrono::milliseconds(200));
      text += e.text;
      for (TokenOut& t : e.tokens) tokens.push_back(std::move(t));
      if (e.done) break;
    }
    const JobEvents tail = job->take(std::chrono::milliseconds(0));
    text += tail.text;
    const ApiError err = job_error(*job);
    if (err.status != 0) throw err;
    const json lp = r.logprobs ? logprobs_json(chat, tokens, static_cast<int64_t>(echo.size())) : json(nullptr);
    const json usage = usage_json(job->prompt_tokens, job->cached_tokens, job->completion_tokens);
    res.set_content(dump(full_response(meta, text, lp, job->finish_reason, usage)), "application/json");
    st.metrics.request_done(endpoint, 200);
  } catch (const ApiError& e) {
    send_error(res, e.status, e.what(), e.type, e.param, e.code);
    st.metrics.request_done(endpoint, e.status);
  } catch (const json::exception& e) {  // a value of an unexpected JSON type
    send_error(res, 400, std::string("unexpected JSON: ") + e.what());
    st.metrics.request_done(endpoint, 400);
  }
}

}  // namespace qkv::serve

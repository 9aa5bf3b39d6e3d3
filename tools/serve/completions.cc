// POST /v1/completions and /v1/chat/completions: a request becomes a Job for
// the scheduler; the answer is one JSON object or a server-sent event stream.
#include <chrono>
#include <memory>

#include "tools/serve/api_error.h"
#include "tools/serve/chat_output.h"
#include "tools/serve/jobs.h"
#include "tools/serve/responses.h"
#include "tools/serve/server.h"

namespace qkv::serve {

using nlohmann::json;

namespace {

// Speculative decoding's counts, when the job's slot drafted: usage gains
// them (add_draft_counts, jobs.h), and the response a llama-server style
// "timings" with draft_n and draft_n_accepted.
void add_timings(const Job& job, json& response) {
  if (!job.speculated) return;
  response["timings"] = {{"prompt_n", job.prompt_tokens - job.cached_tokens},
                         {"cache_n", job.cached_tokens},
                         {"predicted_n", job.completion_tokens},
                         {"draft_n", job.draft_tokens},
                         {"draft_n_accepted", job.draft_accepted}};
}

void stream(ServedModel& st, const std::shared_ptr<Job>& job, const ResponseMeta& meta, const GenRequest& r,
            const std::string& echo, const ChatSetup& chat, httplib::Response& res) {
  struct State {
    bool started = false, finished = false;
    int64_t offset = 0;
    std::unique_ptr<ChatOutput> out;  // chat: the text parsed into content, reasoning and calls
  };
  auto s = std::make_shared<State>();
  if (meta.chat) s->out = std::make_unique<ChatOutput>(chat.family, r, chat.starts_in_reasoning);
  Metrics* metrics = &st.metrics;
  start_stream(
      st, res, "text/event-stream", job, [s] { return s->finished; },
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
          const json c = s->out ? delta_chunk(meta, s->out->feed(e.text), lp, "") : chunk(meta, e.text, lp, "");
          if (!write(sse_event(c))) return false;
        } else if (!r.logprobs) {
          for (const std::string& p : e.pieces) {  // a chunk per token's text
            if (s->out) {
              const json delta = s->out->feed(p);
              if (!delta.empty() && !write(sse_event(delta_chunk(meta, delta, nullptr, "")))) return false;
            } else if (!write(sse_event(chunk(meta, p, nullptr, "")))) {
              return false;
            }
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
          json c;
          if (s->out) {
            json delta = s->out->feed(last);
            const json end = s->out->finish(reason);
            for (auto it = end.begin(); it != end.end(); ++it) {
              if (it.key() == "tool_calls" && delta.contains("tool_calls")) {
                for (const json& x : *it) delta["tool_calls"].push_back(x);
              } else if (delta.contains(it.key())) {
                delta[it.key()] = delta[it.key()].get<std::string>() + it->get<std::string>();
              } else {
                delta[it.key()] = *it;
              }
            }
            c = delta_chunk(meta, delta, lp, s->out->finish_reason());
          } else {
            c = chunk(meta, last, lp, reason);
          }
          json usage = usage_json(prompt, cached, completion);
          add_draft_counts(usage_of(*job), usage);
          {
            std::lock_guard<std::mutex> lock(job->mu);
            add_timings(*job, c);
          }
          if (!write(sse_event(c))) return false;
          if (r.include_usage && !write(sse_event(usage_chunk(meta, usage)))) return false;
        }
        write(sse_done());
        s->finished = true;
        metrics->request_done(meta.chat ? "/v1/chat/completions" : "/v1/completions", err.status ? err.status : 200);
        sink.done();
        return true;
      });
}

}  // namespace

void handle_generate(ServedModel& st, bool chat, const httplib::Request& req, httplib::Response& res) {
  const char* endpoint = chat ? "/v1/chat/completions" : "/v1/completions";
  try {
    const json body = parse_body(req.body, st.options.max_json_depth);
    GenRequest r = chat ? parse_chat(body, st.limits) : parse_completion(body, st.limits);
    keep_declared_order(req.body, r);
    if (!r.model.empty() && !names_model(r.model, st.options.model_id)) {
      throw ApiError(404, "The model '" + r.model + "' does not exist (this server has '" + st.options.model_id + "')",
                     "invalid_request_error", "model", "model_not_found");
    }
    std::string prompt_text;
    ChatSetup chat_setup;
    std::shared_ptr<Job> job = make_job(st, r, prompt_text, chat_setup);
    const std::string echo = r.echo ? prompt_text : "";
    const ResponseMeta meta = new_meta(chat, st.options.model_id);
    submit(st, job, res);
    if (r.stream) {
      stream(st, job, meta, r, echo, chat_setup, res);
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
    json usage = usage_json(job->prompt_tokens, job->cached_tokens, job->completion_tokens);
    add_draft_counts(usage_of(*job), usage);
    json response;
    if (chat) {
      ChatOutput out(chat_setup.family, r, chat_setup.starts_in_reasoning);
      out.feed(text);
      out.finish(job->finish_reason);
      response = chat_response(meta, out.message(), lp, out.finish_reason(), usage);
    } else {
      response = full_response(meta, text, lp, job->finish_reason, usage);
    }
    add_timings(*job, response);
    res.set_content(dump(response), "application/json");
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

#include "tools/serve/jobs.h"

#include <chrono>

#include "kernels/error.h"
#include "runtime/tool_calls/call_grammar.h"
#include "tools/serve/chat_output.h"
#include "tools/serve/chat_prompt.h"
#include "tools/serve/server.h"

namespace qkv::serve {

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

// Tools with tool_choice required or a named function: the reply is calls,
// forced by the family's call grammar. auto: the grammar waits for the
// family's call opener (the generic JSON format applies from the start).
void set_tool_grammar(ServedModel& st, const GenRequest& r, const ChatPrompt& cp, Job& job) {
  if (r.tools.empty() || r.tool_choice == "none") return;
  std::vector<toolcall::ToolSchema> tools;
  for (const ToolSpec& t : r.tools) {
    if (r.tool_choice != "function" || t.name == r.tool_choice_name) tools.push_back({t.name, t.parameters});
  }
  const bool forced = r.tool_choice != "auto";
  const bool parallel = r.parallel_tool_calls && r.tool_choice != "function";
  toolcall::CallGrammar g;
  try {
    g = toolcall::tool_call_grammar(cp.family, tools, parallel, !forced);
  } catch (const qkv::Error& e) {
    throw bad_field("tools", e.what());
  }
  job.grammar = st.grammars.get(st.model, QKV_GRAMMAR_GBNF, g.gbnf, "tools");
  job.triggers = g.triggers;
  // Forced calls of a reasoning model come after its thinking.
  if (job.triggers.empty() && cp.starts_in_reasoning) job.triggers = {"</think>"};
}

}  // namespace

std::shared_ptr<Job> make_job(ServedModel& st, GenRequest& r, std::string& prompt_text, ChatSetup& chat) {
  auto job = std::make_shared<Job>();
  if (r.chat) {
    ChatPrompt cp = render_chat(st.model, st.options.chat_template, r);
    prompt_text = cp.text;
    job->prompt = std::move(cp.tokens);
    for (std::string& s : cp.stop) r.stop.push_back(s);
    chat.family = cp.family;
    chat.starts_in_reasoning = cp.starts_in_reasoning;
    job->special_text = cp.family != toolcall::Family::kNone && cp.family != toolcall::Family::kGeneric;
    set_tool_grammar(st, r, cp, *job);
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
  job->speculative = r.speculative;
  if (r.grammar_kind >= 0 && !job->grammar) {
    job->grammar = st.grammars.get(st.model, r.grammar_kind, r.grammar_source, r.grammar_param);
    // A reasoning model's answer format applies after its thinking.
    if (r.chat && chat.starts_in_reasoning) job->triggers = {"</think>"};
  }
  job->arrival = Clock::now();
  job->deadline = job->arrival + std::chrono::milliseconds(static_cast<int64_t>(st.options.timeout_s * 1000));
  return job;
}

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


void submit(ServedModel& st, const std::shared_ptr<Job>& job, httplib::Response& res) {
  switch (st.scheduler->submit(job)) {
    case Scheduler::Submit::kOk: return;
    case Scheduler::Submit::kQueueFull:
      res.set_header("Retry-After", "1");
      throw ApiError(503, "the server is busy: every slot is taken and the queue is full; retry later",
                     "server_error", "", "queue_full");
    case Scheduler::Submit::kStopping:
      throw ApiError(503, "the server is shutting down and takes no new requests", "server_error", "",
                     "shutting_down");
  }
}

void start_stream(ServedModel& st, httplib::Response& res, const std::string& content_type,
                  const std::shared_ptr<Job>& job, std::function<bool()> finished,
                  httplib::ContentProviderWithoutLength provider) {
  std::atomic<int>* open_streams = &st.open_streams;
  ++*open_streams;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(content_type, std::move(provider),
                                   [job, finished = std::move(finished), open_streams](bool success) {
                                     if (!success || !finished()) job->cancelled = true;
                                     --*open_streams;
                                   });
}

Usage usage_of(Job& job) {
  std::lock_guard<std::mutex> lock(job.mu);
  return {job.prompt_tokens, job.cached_tokens, job.completion_tokens,
          job.speculated,   job.draft_tokens,  job.draft_accepted};
}

namespace {

ChatReply reply_of(const ChatOutput& out, Job& job) {
  ChatReply reply;
  reply.message = out.parsed();
  reply.call_ids = out.call_ids();
  reply.finish_reason = out.finish_reason();
  {
    std::lock_guard<std::mutex> lock(job.mu);
    reply.stop_matched = job.stop_matched;
  }
  reply.usage = usage_of(job);
  return reply;
}

}  // namespace

ChatReply run_chat(ServedModel& st, GenRequest& r, httplib::Response& res) {
  std::string prompt_text;
  ChatSetup setup;
  std::shared_ptr<Job> job = make_job(st, r, prompt_text, setup);
  submit(st, job, res);
  ChatOutput out(setup.family, r, setup.starts_in_reasoning);
  for (;;) {
    const JobEvents e = job->take(std::chrono::milliseconds(200));
    out.feed_delta(e.text);
    if (e.done) break;
  }
  out.feed_delta(job->take(std::chrono::milliseconds(0)).text);
  const ApiError err = job_error(*job);
  if (err.status != 0) throw err;
  out.finish_delta(job->finish_reason);
  return reply_of(out, *job);
}

void stream_chat(ServedModel& st, GenRequest& r, httplib::Response& res, ChatStreamFormat format,
                 const std::string& endpoint) {
  std::string prompt_text;
  ChatSetup setup;
  std::shared_ptr<Job> job = make_job(st, r, prompt_text, setup);
  submit(st, job, res);
  struct State {
    bool started = false, finished = false;
    std::unique_ptr<ChatOutput> out;
  };
  auto s = std::make_shared<State>();
  s->out = std::make_unique<ChatOutput>(setup.family, r, setup.starts_in_reasoning);
  Metrics* metrics = &st.metrics;
  start_stream(
      st, res, format.content_type, job, [s] { return s->finished; },
      [job, s, format, metrics, endpoint](size_t, httplib::DataSink& sink) {
        auto write = [&](const std::string& x) {
          if (x.empty() || sink.write(x.data(), x.size())) return true;
          job->cancelled = true;  // the client is gone: free the slot
          return false;
        };
        if (!s->started) {
          s->started = true;
          if (!write(format.begin())) return false;
        }
        const JobEvents e = job->take(std::chrono::milliseconds(50));
        for (const std::string& p : e.pieces) {
          const toolcall::MessageDelta d = s->out->feed_delta(p);
          if ((!d.content.empty() || !d.reasoning.empty() || !d.calls.empty()) && !write(format.delta(d))) return false;
        }
        if (!e.done) return true;
        const std::string tail = job->take(std::chrono::milliseconds(0)).text;
        const ApiError err = job_error(*job);
        if (err.status != 0) {
          write(format.error(err));
        } else {
          toolcall::MessageDelta d = s->out->feed_delta(tail);
          const toolcall::MessageDelta last = s->out->finish_delta(job->finish_reason);
          d.content += last.content;
          d.reasoning += last.reasoning;
          d.calls.insert(d.calls.end(), last.calls.begin(), last.calls.end());
          if ((!d.content.empty() || !d.reasoning.empty() || !d.calls.empty()) && !write(format.delta(d))) return false;
          if (!write(format.end(reply_of(*s->out, *job)))) return false;
        }
        s->finished = true;
        metrics->request_done(endpoint, err.status ? err.status : 200);
        sink.done();
        return true;
      });
}

}  // namespace qkv::serve

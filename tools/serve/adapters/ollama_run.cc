// The Ollama adapter's generation runner: a request's job, its text parsed
// into content, thinking and tool calls (chat templates) or passed on as it
// is (raw /api/generate), answered as Ollama does: one JSON object, or an
// NDJSON stream (application/x-ndjson, one object per line) of
// {model, created_at, message|response, done: false} chunks closed by a
// done: true object with done_reason and the counts and durations.
//
// Ollama streams a tool call whole, never in fragments: the calls are sent
// in one chunk once generation has ended, when it is certain they are
// complete (a call cut short is not reported as a call but as content).
// Durations are wall time in nanoseconds: load_duration covers reading the
// request, rendering and tokenizing the prompt (the model is loaded at
// start), prompt_eval_duration the wait for a slot and the prefill up to the
// first sampled token, eval_duration the rest. When the slot drafted
// (speculative decoding), draft_eval_count (drafted tokens the model
// verified) and draft_accepted_count (of those accepted) follow eval_count.
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>

#include "tools/serve/adapters/ollama.h"
#include "tools/serve/api_error.h"
#include "tools/serve/chat_output.h"
#include "tools/serve/jobs.h"

namespace qkv::serve::ollama {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

int64_t ns(Clock::duration d) { return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count(); }

// A generation under way: the job, the parser of a chat reply, the times.
struct Run {
  RunSpec spec;
  std::shared_ptr<Job> job;
  std::unique_ptr<ChatOutput> out;  // chat templates; null for a raw completion
  std::string raw_text;             // a raw completion's text so far
  Clock::time_point submitted, first_text, end;
  bool has_first_text = false;
  bool finished = false;  // the last object was written

  void saw(const JobEvents& e) {
    if (!has_first_text && !e.text.empty()) {
      has_first_text = true;
      first_text = Clock::now();
    }
  }

  // A chunk's frame: model, created_at, then the message or response.
  ordered_json object(const std::string& content, const std::string& thinking, bool done) const {
    ordered_json j = {{"model", spec.model}, {"created_at", rfc3339(std::chrono::system_clock::now())}};
    if (spec.chat_shape) {
      ordered_json m = {{"role", "assistant"}, {"content", content}};
      if (!thinking.empty()) m["thinking"] = thinking;
      j["message"] = std::move(m);
    } else {
      j["response"] = content;
      if (!thinking.empty()) j["thinking"] = thinking;
    }
    j["done"] = done;
    return j;
  }

  // The calls of the finished reply, arguments as objects (in the order the
  // model wrote their keys).
  ordered_json calls_json() const {
    ordered_json calls = ordered_json::array();
    if (!out) return calls;
    const toolcall::ParsedMessage& m = out->parsed();
    for (size_t i = 0; i < m.calls.size(); ++i) {
      ordered_json args;
      try {
        args = ordered_json::parse(m.calls[i].arguments);
      } catch (const json::exception&) {
        args = m.calls[i].arguments;  // not JSON (the parser reports only JSON calls): the text as it is
      }
      if (!args.is_object()) args = ordered_json{{"value", args}};
      const std::string& id = i < out->call_ids().size() ? out->call_ids()[i] : m.calls[i].id;
      calls.push_back({{"id", id},
                       {"function", {{"index", i}, {"name", m.calls[i].name}, {"arguments", std::move(args)}}}});
    }
    return calls;
  }

  // The statistics Ollama closes a reply with.
  void add_stats(ordered_json& j) const {
    std::string reason;
    {
      std::lock_guard<std::mutex> lock(job->mu);
      reason = job->finish_reason;
    }
    const Usage u = usage_of(*job);
    // Ollama says "stop" for a reply that ends in tool calls too.
    j["done_reason"] = reason == "length" ? "length" : "stop";
    // The first token's sampling time splits prefill from generation (the
    // time this side first saw text when the job has none).
    Clock::time_point first = has_first_text ? first_text : end;
    {
      std::lock_guard<std::mutex> lock(job->mu);
      if (job->first_token_at != Clock::time_point{}) first = job->first_token_at;
    }
    j["total_duration"] = ns(end - spec.start);
    j["load_duration"] = ns(submitted - spec.start);
    j["prompt_eval_count"] = u.prompt;
    j["prompt_eval_duration"] = ns(first - submitted);
    j["eval_count"] = u.completion;
    j["eval_duration"] = ns(end - first);
    if (u.speculated) {  // Ollama defines no such counts: qkv's names, in its style
      j["draft_eval_count"] = u.drafted;
      j["draft_accepted_count"] = u.accepted;
    }
  }
};

// dump() repairs invalid UTF-8 (a token holding part of a character); an
// ordered_json is dumped with the same repair.
std::string text_of(const ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::detail::error_handler_t::replace);
}

std::string ndjson(const ordered_json& j) { return text_of(j) + "\n"; }

void answer_whole(ServedModel& st, Run& run, httplib::Response& res) {
  for (;;) {
    const JobEvents e = run.job->take(std::chrono::milliseconds(200));
    run.saw(e);
    if (run.out) {
      run.out->feed_delta(e.text);
    } else {
      run.raw_text += e.text;
    }
    if (e.done) break;
  }
  const JobEvents tail = run.job->take(std::chrono::milliseconds(0));
  run.end = Clock::now();
  const ApiError err = job_error(*run.job);
  if (err.status != 0) throw err;
  ordered_json j;
  if (run.out) {
    run.out->feed_delta(tail.text);
    run.out->finish_delta(run.job->finish_reason);
    const toolcall::ParsedMessage& m = run.out->parsed();
    j = run.object(m.content, m.reasoning, true);
    if (!m.calls.empty()) j["message"]["tool_calls"] = run.calls_json();
  } else {
    j = run.object(run.raw_text + tail.text, "", true);
  }
  run.add_stats(j);
  res.set_content(text_of(j), "application/json; charset=utf-8");
  st.metrics.request_done(run.spec.endpoint, 200);
}

void answer_stream(ServedModel& st, std::shared_ptr<Run> run, httplib::Response& res) {
  Metrics* metrics = &st.metrics;
  start_stream(
      st, res, "application/x-ndjson", run->job, [run] { return run->finished; },
      [run, metrics](size_t, httplib::DataSink& sink) {
        Job& job = *run->job;
        auto write = [&](const ordered_json& j) {
          const std::string x = ndjson(j);
          if (sink.write(x.data(), x.size())) return true;
          job.cancelled = true;  // the client is gone: free the slot
          return false;
        };
        // Content and thinking as they come; call fragments wait for the end.
        auto write_delta = [&](const toolcall::MessageDelta& d) {
          if (d.content.empty() && d.reasoning.empty()) return true;
          return write(run->object(d.content, d.reasoning, false));
        };
        const JobEvents e = job.take(std::chrono::milliseconds(50));
        run->saw(e);
        for (const std::string& p : e.pieces) {
          if (run->out) {
            if (!write_delta(run->out->feed_delta(p))) return false;
          } else if (!p.empty() && !write(run->object(p, "", false))) {
            return false;
          }
        }
        if (!e.done) return true;
        const std::string tail = job.take(std::chrono::milliseconds(0)).text;
        run->end = Clock::now();
        const ApiError err = job_error(job);
        if (err.status != 0) {
          write(ordered_json{{"error", err.what()}});  // Ollama's mid-stream error line
        } else {
          if (run->out) {
            toolcall::MessageDelta d = run->out->feed_delta(tail);
            const toolcall::MessageDelta last = run->out->finish_delta(job.finish_reason);
            d.content += last.content;
            d.reasoning += last.reasoning;
            if (!write_delta(d)) return false;
            if (!run->out->parsed().calls.empty()) {
              ordered_json c = run->object("", "", false);
              c["message"]["tool_calls"] = run->calls_json();
              if (!write(c)) return false;
            }
          } else if (!tail.empty() && !write(run->object(tail, "", false))) {
            return false;
          }
          ordered_json last = run->object("", "", true);
          run->add_stats(last);
          if (!write(last)) return false;
        }
        run->finished = true;
        metrics->request_done(run->spec.endpoint, err.status ? err.status : 200);
        sink.done();
        return true;
      });
}

}  // namespace

void run(ServedModel& st, GenRequest& r, const RunSpec& spec, httplib::Response& res) {
  auto run = std::make_shared<Run>();
  run->spec = spec;
  std::string prompt_text;
  ChatSetup setup;
  run->job = make_job(st, r, prompt_text, setup);
  if (r.chat) run->out = std::make_unique<ChatOutput>(setup.family, r, setup.starts_in_reasoning);
  // Before submitting: the scheduler may sample the first token before
  // submit returns.
  run->submitted = Clock::now();
  submit(st, run->job, res);
  if (spec.stream) {
    answer_stream(st, run, res);
  } else {
    answer_whole(st, *run, res);
  }
}

void send_load_reply(const RunSpec& spec, httplib::Response& res) {
  ordered_json j = {{"model", spec.model}, {"created_at", rfc3339(std::chrono::system_clock::now())}};
  if (spec.chat_shape) {
    j["message"] = {{"role", "assistant"}, {"content", ""}};
  } else {
    j["response"] = "";
  }
  j["done_reason"] = "load";
  j["done"] = true;
  const std::string body = text_of(j);
  res.set_content(spec.stream ? body + "\n" : body,
                  spec.stream ? "application/x-ndjson" : "application/json; charset=utf-8");
}

}  // namespace qkv::serve::ollama

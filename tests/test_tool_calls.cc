// ctest-labels: asan
// Tool calls and reasoning parsed out of generated text (runtime/tool_calls):
// family detection on the shared chat templates, hand-written outputs for each
// family, malformed output kept as content, streaming cut at every byte and at
// random places agreeing with the whole-text parse, and (with
// QKV_TOOL_CALL_FIXTURES set by tests/tool_calls_oracle.sh) the assistant turns
// that Python's jinja2 renders from each template.
#include <doctest/doctest.h>
#include <dirent.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/tool_calls/tool_calls.h"
#include "tests/shared_data.h"

using namespace qkv::toolcall;
using nlohmann::json;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string show(const ParsedMessage& m) {
  std::string s = "content=" + json(m.content).dump() + " reasoning=" + json(m.reasoning).dump() + " calls=[";
  for (const ToolCall& c : m.calls) s += "{id=" + c.id + " name=" + c.name + " args=" + c.arguments + "}";
  return s + "]";
}

// Streams text cut at the given offsets; returns the message the deltas add up to.
ParsedMessage stream_pieces(Family family, const std::string& text, const std::vector<size_t>& cuts,
                            const ParseOptions& opts, bool* ok) {
  StreamParser p(family, opts);
  ParsedMessage sum;
  std::vector<bool> named;
  auto take = [&](const MessageDelta& d) {
    sum.content += d.content;
    sum.reasoning += d.reasoning;
    for (const CallDelta& c : d.calls) {
      if (c.index >= sum.calls.size()) {
        // A call's first delta carries its name; it comes in order.
        if (c.index != sum.calls.size() || c.name.empty()) *ok = false;
        sum.calls.push_back(ToolCall{c.id, c.name, ""});
      } else if (!c.name.empty() || !c.id.empty()) {
        *ok = false;
      }
      sum.calls[c.index].arguments += c.arguments;
    }
  };
  size_t prev = 0;
  for (size_t cut : cuts) {
    take(p.feed(text.substr(prev, cut - prev)));
    prev = cut;
  }
  take(p.feed(text.substr(prev)));
  take(p.finish(false));
  // Calls withdrawn at the end (unfinished) are not part of the message.
  if (sum.calls.size() > p.message().calls.size()) sum.calls.resize(p.message().calls.size());
  if (!(show(p.message()) == show(sum))) *ok = false;
  return sum;
}

// The whole-text parse, checked against streaming cut at every byte boundary,
// byte by byte, and at random places.
ParsedMessage parse_checked(Family family, const std::string& text, const ParseOptions& opts = {}) {
  ParsedMessage whole = parse_message(family, text, opts);
  const std::string want = show(whole);
  bool ok = true;
  for (size_t k = 0; k <= text.size(); ++k) {
    std::string got = show(stream_pieces(family, text, {k}, opts, &ok));
    if (got != want || !ok) {
      FAIL_CHECK("split at " << k << " of " << json(text).dump() << "\n  whole:    " << want << "\n  streamed: " << got);
      return whole;
    }
  }
  std::vector<size_t> every;
  for (size_t k = 1; k < text.size(); ++k) every.push_back(k);
  CHECK_MESSAGE(show(stream_pieces(family, text, every, opts, &ok)) == want, "byte by byte: " << json(text).dump());
  std::mt19937 rng(static_cast<unsigned>(text.size()));
  for (int round = 0; round < 20; ++round) {
    std::vector<size_t> cuts;
    for (size_t k = 1; k < text.size(); k += 1 + rng() % 7) cuts.push_back(k);
    CHECK_MESSAGE(show(stream_pieces(family, text, cuts, opts, &ok)) == want, "random cuts: " << json(text).dump());
  }
  CHECK(ok);
  return whole;
}

void check_calls(const ParsedMessage& m, const std::vector<std::pair<std::string, std::string>>& calls) {
  REQUIRE_MESSAGE(m.calls.size() == calls.size(), show(m));
  for (size_t i = 0; i < calls.size(); ++i) {
    CHECK(m.calls[i].name == calls[i].first);
    CHECK_MESSAGE(json::parse(m.calls[i].arguments) == json::parse(calls[i].second), m.calls[i].arguments);
  }
}

// Markup that must never reach content of well-formed output.
const std::vector<std::string> kMarkup = {
    "<tool_call>", "</tool_call>", "<think>", "</think>", "<|python_tag|>", "[TOOL_CALLS]", "[ARGS]", "<function=",
    "</function>", "functools", "<|START_", "<|END_", "Action:", "tool\xE2\x96\x81", "<|channel|>", "<|message|>",
    "<|call|>", "<|end|>", "<|start|>"};

void check_no_markup(const ParsedMessage& m) {
  for (const std::string& k : kMarkup) CHECK_MESSAGE(m.content.find(k) == std::string::npos, k << " in " << show(m));
}

#define DS(x) "<\xEF\xBD\x9C" x "\xEF\xBD\x9C>"
#define DS_CALLS_BEGIN DS("tool\xE2\x96\x81" "calls\xE2\x96\x81" "begin")
#define DS_CALLS_END DS("tool\xE2\x96\x81" "calls\xE2\x96\x81" "end")
#define DS_CALL_BEGIN DS("tool\xE2\x96\x81" "call\xE2\x96\x81" "begin")
#define DS_CALL_END DS("tool\xE2\x96\x81" "call\xE2\x96\x81" "end")
#define DS_SEP DS("tool\xE2\x96\x81" "sep")

}  // namespace

TEST_CASE("detect_family on the shared chat templates") {
  const std::map<std::string, Family> expected = {
      {"CohereForAI-c4ai-command-r-plus-tool_use.jinja", Family::kCommandRPlus},
      {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", Family::kCommandR7B},
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", Family::kHermes},
      {"Qwen-QwQ-32B.jinja", Family::kHermes},
      {"Qwen-Qwen2.5-7B-Instruct.jinja", Family::kHermes},
      {"Qwen-Qwen3-0.6B.jinja", Family::kHermes},
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", Family::kDeepSeekR1},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", Family::kDeepSeekR1},
      {"deepseek-ai-DeepSeek-V3.1.jinja", Family::kDeepSeekV31},
      {"fireworks-ai-llama-3-firefunction-v2.jinja", Family::kFirefunctionV2},
      {"google-gemma-2-2b-it.jinja", Family::kGeneric},
      {"llama-cpp-deepseek-r1.jinja", Family::kDeepSeekR1},
      {"meetkai-functionary-medium-v3.1.jinja", Family::kFunctionaryV31},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", Family::kLlama3},
      {"meta-llama-Llama-3.2-3B-Instruct.jinja", Family::kLlama3},
      {"meta-llama-Llama-3.3-70B-Instruct.jinja", Family::kLlama3},
      {"microsoft-Phi-3.5-mini-instruct.jinja", Family::kGeneric},
      {"openai-gpt-oss-120b.jinja", Family::kGptOss},
      {"unsloth-mistral-Devstral-Small-2507.jinja", Family::kMistral},
  };
  if (!qkv::test::have_shared("templates")) return;
  int seen = 0;
  for (const auto& entry : expected) {  // no structured binding: doctest's CHECK_MESSAGE captures it (clang-14)
    const std::string path = qkv::test::shared_path(std::string("templates/") + entry.first);
    if (!qkv::test::file_exists(path)) continue;
    ++seen;
    const Family found = detect_family(read_file(path));
    CHECK_MESSAGE(found == entry.second, entry.first << " detected as " << family_name(found));
  }
  MESSAGE(seen << " templates checked");
  CHECK(detect_family("{{ messages }}") == Family::kGeneric);
  CHECK(std::string(family_name(Family::kHermes)).size() > 0);
  CHECK(has_reasoning(Family::kDeepSeekR1));
  CHECK(!has_reasoning(Family::kLlama3));
  CHECK(prompt_opens_reasoning(Family::kHermes, "<|im_start|>assistant\n<think>\n"));
  CHECK(!prompt_opens_reasoning(Family::kHermes, "<|im_start|>assistant\n<think>\n\n</think>\n\n"));
}

TEST_CASE("Hermes / Qwen: <tool_call> blocks and <think>") {
  const Family f = Family::kHermes;
  auto m = parse_checked(f, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
  check_calls(m, {{"get_weather", R"({"city": "Paris"})"}});
  CHECK(m.content.empty());
  CHECK(m.calls[0].arguments == R"({"city": "Paris"})");
  m = parse_checked(f, "Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": [1, {\"y\": \"}\"}]}}\n</tool_call>\n"
                       "<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>");
  CHECK(m.content == "Let me check.");
  check_calls(m, {{"a", R"({"x": [1, {"y": "}"}]})"}, {"b", "{}"}});
  m = parse_checked(f, "<think>\nThe user wants weather.\n</think>\n\n<tool_call>\n{\"name\": \"w\", \"arguments\": {\"c\": \"Zürich\"}}\n</tool_call>");
  CHECK(m.reasoning == "The user wants weather.");
  check_calls(m, {{"w", R"({"c": "Zürich"})"}});
  check_no_markup(m);
  ParseOptions open;
  open.starts_in_reasoning = true;
  m = parse_checked(f, "Thinking <b>hard</b>.\n</think>\n\nThe answer is 4.", open);
  CHECK(m.reasoning == "Thinking <b>hard</b>.");
  CHECK(m.content == "The answer is 4.");
  ParseOptions inline_think;
  inline_think.extract_reasoning = false;
  m = parse_checked(f, "<think>hmm</think>Answer", inline_think);
  CHECK(m.content == "<think>hmm</think>Answer");
  CHECK(m.reasoning.empty());
  ParseOptions no_tools;
  no_tools.tools = false;
  m = parse_checked(f, "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>", no_tools);
  CHECK(m.calls.empty());
  CHECK(m.content == "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>");
  // Reasoning that never closes (cut off while thinking) stays reasoning.
  m = parse_checked(f, "<think>still going", {});
  CHECK(m.reasoning == "still going");
}

TEST_CASE("Llama 3.x: JSON calls, <|python_tag|> and builtin tools") {
  const Family f = Family::kLlama3;
  auto m = parse_checked(f, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}");
  check_calls(m, {{"get_weather", R"({"city": "Paris"})"}});
  CHECK(m.content.empty());
  m = parse_checked(f, "{\"type\": \"function\", \"name\": \"a\", \"parameters\": {\"q\": 1}}; {\"name\": \"b\", \"arguments\": {}}");
  check_calls(m, {{"a", R"({"q": 1})"}, {"b", "{}"}});
  m = parse_checked(f, "{\"name\": \"a\", \"parameters\": {}}\n{\"name\": \"b\", \"parameters\": {\"z\": null}}");
  check_calls(m, {{"a", "{}"}, {"b", R"({"z": null})"}});
  m = parse_checked(f, "Let me look.<|python_tag|>{\"name\": \"a\", \"parameters\": {\"k\": \"v\"}}");
  CHECK(m.content == "Let me look.");
  check_calls(m, {{"a", R"({"k": "v"})"}});
  m = parse_checked(f, "<|python_tag|>brave_search.call(query=\"weather in \\\"Paris\\\"\")");
  check_calls(m, {{"brave_search", R"({"query": "weather in \"Paris\""})"}});
  m = parse_checked(f, "<|python_tag|>wolfram_alpha.call(query='2+2', n=3)");
  check_calls(m, {{"wolfram_alpha", R"({"query": "2+2", "n": 3})"}});
  // A JSON answer that is not a call stays content.
  m = parse_checked(f, "{\"answer\": 42}");
  CHECK(m.calls.empty());
  CHECK(m.content == "{\"answer\": 42}");
  m = parse_checked(f, "The weather is {\"hot\": true}.");
  CHECK(m.content == "The weather is {\"hot\": true}.");
}

TEST_CASE("Mistral / Devstral: [TOOL_CALLS]name[ARGS]{...} and JSON arrays") {
  const Family f = Family::kMistral;
  auto m = parse_checked(f, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_time[ARGS]{\"tz\": \"CET\"}");
  check_calls(m, {{"get_weather", R"({"city": "Paris"})"}, {"get_time", R"({"tz": "CET"})"}});
  m = parse_checked(f, "Sure.[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"x\": 1}, \"id\": \"abc123def\"}, {\"name\": \"b\", \"arguments\": {}, \"id\": \"zzz999yyy\"}]");
  CHECK(m.content == "Sure.");
  check_calls(m, {{"a", R"({"x": 1})"}, {"b", "{}"}});
  CHECK(m.calls[0].id == "abc123def");
  CHECK(m.calls[1].id == "zzz999yyy");
  m = parse_checked(f, "[TOOL_CALLS]f[CALL_ID]a1b2c3d4e[ARGS]{\"k\": true}");
  check_calls(m, {{"f", R"({"k": true})"}});
  CHECK(m.calls[0].id == "a1b2c3d4e");
}

TEST_CASE("Functionary v3.1, Firefunction v2, Command R+ and R7B") {
  auto m = parse_checked(Family::kFunctionaryV31, "Checking.<function=get_weather>{\"city\": \"Paris\"}</function><function=b>{}</function>");
  CHECK(m.content == "Checking.");
  check_calls(m, {{"get_weather", R"({"city": "Paris"})"}, {"b", "{}"}});
  m = parse_checked(Family::kFunctionaryV31, "<|python_tag|>print(\"hi\")\nx = 1");
  check_calls(m, {{"python", R"({"code": "print(\"hi\")\nx = 1"})"}});

  m = parse_checked(Family::kFirefunctionV2, "I will call. functools[{\"name\": \"a\", \"arguments\": {\"x\": 1}}, {\"name\": \"b\", \"arguments\": {}}]");
  CHECK(m.content == "I will call.");
  check_calls(m, {{"a", R"({"x": 1})"}, {"b", "{}"}});

  m = parse_checked(Family::kCommandRPlus,
                    "I will look it up.\nAction:\n```json\n[\n    {\n        \"tool_name\": \"internet_search\",\n"
                    "        \"parameters\": {\"query\": \"x\"}\n    },\n    {\"tool_name\": \"b\", \"parameters\": {}}\n]```\n");
  CHECK(m.content == "I will look it up.");
  check_calls(m, {{"internet_search", R"({"query": "x"})"}, {"b", "{}"}});
  m = parse_checked(Family::kCommandRPlus, "Action: taken by the user.");
  CHECK(m.content == "Action: taken by the user.");

  m = parse_checked(Family::kCommandR7B,
                    "<|START_THINKING|>I need the weather.<|END_THINKING|><|START_ACTION|>[\n    {\"tool_call_id\": \"0\", "
                    "\"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}},\n    {\"tool_call_id\": \"1\", "
                    "\"tool_name\": \"b\", \"parameters\": {}}\n]<|END_ACTION|>");
  CHECK(m.reasoning == "I need the weather.");
  check_calls(m, {{"get_weather", R"({"city": "Paris"})"}, {"b", "{}"}});
  CHECK(m.calls[0].id == "0");
  m = parse_checked(Family::kCommandR7B, "<|START_RESPONSE|>Hello there.<|END_RESPONSE|>");
  CHECK(m.content == "Hello there.");
}

TEST_CASE("DeepSeek R1 and V3.1") {
  auto m = parse_checked(Family::kDeepSeekR1,
                         "<think>\nNeed weather.\n</think>\n\n" DS_CALLS_BEGIN DS_CALL_BEGIN "function" DS_SEP
                         "get_weather\n```json\n{\"city\": \"Paris\"}\n```" DS_CALL_END "\n" DS_CALL_BEGIN "function" DS_SEP
                         "b\n```json\n{}\n```" DS_CALL_END DS_CALLS_END);
  CHECK(m.reasoning == "Need weather.");
  CHECK(m.content.empty());
  check_calls(m, {{"get_weather", R"({"city": "Paris"})"}, {"b", "{}"}});
  ParseOptions open;
  open.starts_in_reasoning = true;
  m = parse_checked(Family::kDeepSeekR1, "Hmm.\n</think>\n\nIt is 4.", open);
  CHECK(m.reasoning == "Hmm.");
  CHECK(m.content == "It is 4.");
  m = parse_checked(Family::kDeepSeekV31, "Sure." DS_CALLS_BEGIN DS_CALL_BEGIN "get_weather" DS_SEP "{\"city\": \"Paris\"}" DS_CALL_END
                                          DS_CALL_BEGIN "b" DS_SEP "{}" DS_CALL_END DS_CALLS_END);
  CHECK(m.content == "Sure.");
  check_calls(m, {{"get_weather", R"({"city": "Paris"})"}, {"b", "{}"}});
  m = parse_checked(Family::kDeepSeekV31, "reasoning here</think>answer", open);
  CHECK(m.reasoning == "reasoning here");
  CHECK(m.content == "answer");
}

TEST_CASE("gpt-oss harmony channels") {
  const Family f = Family::kGptOss;
  auto m = parse_checked(f, "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
                            "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>");
  CHECK(m.reasoning == "Need weather.");
  check_calls(m, {{"get_weather", R"({"city": "Paris"})"}});
  m = parse_checked(f, "<|start|>assistant to=functions.a<|channel|>commentary json<|message|>{\"x\": 1}<|call|>"
                       "<|start|>assistant to=functions.b<|channel|>commentary json<|message|>{}<|call|>");
  check_calls(m, {{"a", R"({"x": 1})"}, {"b", "{}"}});
  m = parse_checked(f, "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>It is 4.");
  CHECK(m.reasoning == "Easy.");
  CHECK(m.content == "It is 4.");
  check_no_markup(m);
}

TEST_CASE("Generic JSON answers and the system prompt") {
  const Family f = Family::kGeneric;
  auto m = parse_checked(f, "{\"tool_calls\": [{\"name\": \"a\", \"arguments\": {\"x\": 1}}, {\"name\": \"b\", \"arguments\": {}}]}");
  check_calls(m, {{"a", R"({"x": 1})"}, {"b", "{}"}});
  m = parse_checked(f, "{\"response\": \"Hello \\\"you\\\" \\u00e9\\ud83d\\ude00\"}");
  CHECK(m.content == "Hello \"you\" é\xF0\x9F\x98\x80");
  m = parse_checked(f, "Just text {not json}");
  CHECK(m.content == "Just text {not json}");
  m = parse_checked(Family::kNone, "<tool_call>{\"name\": \"a\"}</tool_call>");
  CHECK(m.content == "<tool_call>{\"name\": \"a\"}</tool_call>");
  const std::string prompt = generic_tool_system_prompt(R"([{"type": "function", "function": {"name": "get_weather"}}])");
  CHECK(prompt.find("get_weather") != std::string::npos);
  CHECK(prompt.find("\"tool_calls\"") != std::string::npos);
  CHECK(prompt.find("\"response\"") != std::string::npos);
  CHECK(call_triggers(Family::kHermes) == std::vector<std::string>{"<tool_call>"});
  CHECK(call_opener(Family::kHermes) == "<tool_call>\n");
}

TEST_CASE("malformed and cut-off calls stay text") {
  auto m = parse_checked(Family::kHermes, "<tool_call>\nnot json at all\n</tool_call>");
  CHECK(m.calls.empty());
  CHECK(m.content == "<tool_call>\nnot json at all\n</tool_call>");
  m = parse_checked(Family::kHermes, "Hi <tool_call>{\"name\": \"a\", \"arguments\": {\"x\": tru}}</tool_call>");
  CHECK(m.calls.empty());
  CHECK(m.content == "Hi <tool_call>{\"name\": \"a\", \"arguments\": {\"x\": tru}}</tool_call>");
  m = parse_checked(Family::kMistral, "[TOOL_CALLS]bad name!![ARGS]{}");
  CHECK(m.calls.empty());
  CHECK(m.content == "[TOOL_CALLS]bad name!![ARGS]{}");
  m = parse_checked(Family::kFunctionaryV31, "<function=f>{\"a\": 1</function>");
  CHECK(m.calls.empty());
  m = parse_checked(Family::kDeepSeekV31, DS_CALLS_BEGIN DS_CALL_BEGIN "f" DS_SEP "oops");
  CHECK(m.calls.empty());
  // Truncated by max_tokens: the unfinished call is withdrawn and reported.
  StreamParser p(Family::kHermes, {});
  MessageDelta d = p.feed("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par");
  REQUIRE(d.calls.size() == 1);
  CHECK(d.calls[0].name == "get_weather");
  CHECK(d.calls[0].arguments == "{\"city\": \"Par");
  CHECK(d.content.empty());
  p.finish(true);
  CHECK(p.incomplete_call());
  CHECK(p.message().calls.empty());
  StreamParser q(Family::kFunctionaryV31, {});
  q.feed("<|python_tag|>print(1");
  q.finish(true);
  CHECK(q.incomplete_call());
  CHECK(q.message().calls.empty());
}

TEST_CASE("streaming sends the name first, then argument fragments") {
  StreamParser p(Family::kHermes, {});
  std::string text = "Sure<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"bcd\"}}\n</tool_call>";
  std::vector<MessageDelta> ds;
  for (char c : text) ds.push_back(p.feed(std::string(1, c)));
  ds.push_back(p.finish(false));
  std::string content, args;
  int first = -1;
  for (size_t i = 0; i < ds.size(); ++i) {
    content += ds[i].content;
    for (const CallDelta& c : ds[i].calls) {
      if (first < 0) {
        first = static_cast<int>(i);
        CHECK(c.name == "f");
      }
      args += c.arguments;
    }
  }
  CHECK(content == "Sure");
  CHECK(args == "{\"a\": \"bcd\"}");
  // Arguments arrive in more than one piece.
  int pieces = 0;
  for (const MessageDelta& d : ds) pieces += static_cast<int>(d.calls.size());
  CHECK(pieces > 3);
}

TEST_CASE("oracle fixtures rendered by jinja2 (tests/tool_calls_oracle.sh)") {
  const char* dir = std::getenv("QKV_TOOL_CALL_FIXTURES");
  if (!dir || !*dir) {
    MESSAGE("SKIPPED: QKV_TOOL_CALL_FIXTURES is not set (tests/tool_calls_oracle.sh sets it)");
    return;
  }
  DIR* d = opendir(dir);
  REQUIRE_MESSAGE(d != nullptr, dir);
  std::vector<std::string> files;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n.size() > 5 && n.substr(n.size() - 5) == ".json") files.push_back(std::string(dir) + "/" + n);
  }
  closedir(d);
  std::sort(files.begin(), files.end());
  REQUIRE(!files.empty());
  std::map<std::string, int> per_template;
  const std::map<std::string, Family> by_name = {
      {"hermes", Family::kHermes},         {"llama3", Family::kLlama3},       {"mistral", Family::kMistral},
      {"functionary_v3_1", Family::kFunctionaryV31}, {"firefunction_v2", Family::kFirefunctionV2},
      {"command_r_plus", Family::kCommandRPlus},     {"command_r7b", Family::kCommandR7B},
      {"deepseek_r1", Family::kDeepSeekR1}, {"deepseek_v3_1", Family::kDeepSeekV31}, {"gpt_oss", Family::kGptOss},
      {"generic", Family::kGeneric}};
  for (const std::string& path : files) {
    json fx = json::parse(read_file(path));
    CAPTURE(path);
    const std::string tmpl = fx["template"];
    REQUIRE(by_name.count(fx["family"]));
    const Family family = by_name.at(fx["family"]);
    if (fx.contains("template_path") && qkv::test::file_exists(fx["template_path"]))
      CHECK_MESSAGE(detect_family(read_file(fx["template_path"])) == family, tmpl);
    ParseOptions opts;
    opts.starts_in_reasoning = fx.value("starts_in_reasoning", false);
    const std::string text = fx["text"];
    ParsedMessage m = parse_checked(family, text, opts);
    const json& want = fx["expected"];
    CHECK_MESSAGE(m.content == want["content"].get<std::string>(), tmpl << ": " << show(m));
    CHECK_MESSAGE(m.reasoning == want["reasoning"].get<std::string>(), tmpl << ": " << show(m));
    REQUIRE_MESSAGE(m.calls.size() == want["calls"].size(), tmpl << ": " << json(text).dump() << " -> " << show(m));
    for (size_t i = 0; i < m.calls.size(); ++i) {
      CHECK(m.calls[i].name == want["calls"][i]["name"].get<std::string>());
      json args = json::parse(m.calls[i].arguments, nullptr, false);
      CHECK_MESSAGE(args == want["calls"][i]["arguments"], tmpl << ": " << m.calls[i].arguments);
    }
    check_no_markup(m);
    ++per_template[tmpl];
  }
  for (const auto& [t, n] : per_template) MESSAGE(t << ": " << n << " fixtures");
  MESSAGE(files.size() << " fixtures from " << per_template.size() << " templates");
}

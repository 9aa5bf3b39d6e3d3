// Tool calls and reasoning on qkv serve's /v1/chat/completions, driven by the
// official openai client (v4) and checked by an independent JSON Schema
// validator (ajv), for each tool-call family the server parses (one server
// per chat template, all serving the tiny model):
//  - tool_choice "required": finish_reason "tool_calls", each call with an id,
//    type "function", one of the tools' names and arguments that validate
//    against its parameters; content free of call markup; several seeds and
//    temperatures; parallel_tool_calls false: exactly one call;
//  - tool_choice naming a function: one call, to it; "none": no calls; "auto";
//  - the calls sent back with tool results (the template renders them);
//  - streaming: delta.tool_calls assembled by index (and the client's
//    beta.chat.completions.stream helper) equal the non-streamed reply of the
//    same seed at temperature 0; a call's first delta carries id and name;
//  - max_tokens cutting a call: finish_reason "length" and no half call;
//  - (qwen3) reasoning: <think> extracted into reasoning_content, kept inline
//    with reasoning_format "none", chat_template_kwargs changing the prompt;
//  - (hermes) bad tool input: 400 naming the problem, the server still serving.
//
// The model's text is gibberish and it rarely ends on its own, so structure
// comes from the grammars: calls are forced, strings bounded (maxLength) so
// arguments end, and where several calls may follow each other a logit bias
// on the end-of-sequence token ends the reply as soon as the grammar allows.
//
// Usage: node serve_tools.mjs FAMILY=BASE_URL...   (families: see FAMILIES)
// NODE_PATH names the node_modules holding openai, ajv and ajv-formats.
import { createRequire } from "node:module";
import assert from "node:assert/strict";

const require = createRequire(process.env.NODE_PATH + "/");
const OpenAI = require("openai");
const Ajv = require("ajv").default;
const addFormats = require("ajv-formats").default;

const EOS = 2;  // stories260K's </s>
const END_NOW = { [EOS]: 100 };  // ends the reply wherever the grammar lets it end

// Families the server parses; generic: a template without tool support (the
// tools go into the prompt, the reply is one JSON object).
const FAMILIES = ["hermes", "qwen3", "llama3", "mistral", "deepseek_v31", "functionary", "gpt_oss", "generic",
                  "command_r7b", "firefunction", "command_r_plus"];
// Families whose parallel calls sit in one block (a JSON list, or DeepSeek's
// calls_begin ... calls_end): only the model's choice of the block's closer
// ends the calls, which EOS bias cannot hasten, so the tiny model may fill
// max_tokens with calls.
const LIST_FAMILIES = ["generic", "command_r7b", "deepseek_v31", "firefunction", "command_r_plus"];

const TOOLS = [
  { type: "function", function: { name: "get_weather", description: "The weather in a city",
    parameters: { type: "object", properties: {
      city: { type: "string", maxLength: 12 },
      unit: { type: "string", enum: ["c", "f"] },
      days: { type: "integer", minimum: 1, maximum: 7 } },
      required: ["city", "unit"], additionalProperties: false } } },
  // No description: optional in OpenAI's API, though some templates print it.
  { type: "function", function: { name: "add",
    parameters: { type: "object", properties: {
      a: { type: "integer", minimum: -100, maximum: 100 },
      b: { type: "integer", minimum: 0, maximum: 9 } },
      required: ["a", "b"], additionalProperties: false } } },
  { type: "function", function: { name: "set_mode", description: "Switch the lamp",
    parameters: { type: "object", properties: {
      mode: { enum: ["on", "off", "auto"] },
      note: { type: "string", maxLength: 8 } },
      required: ["mode"], additionalProperties: false } } },
];
const NAMES = TOOLS.map(t => t.function.name);
const ajv = new Ajv({ strict: false, allErrors: true });
addFormats(ajv);
const VALIDATE = Object.fromEntries(TOOLS.map(t => [t.function.name, ajv.compile(t.function.parameters)]));
// Call or thinking markup of any family: never in content beside parsed calls.
const MARKUP = /<tool_call>|<\/tool_call>|\[TOOL_CALLS\]|\[ARGS\]|<\||\|>|｜|<function=|<\/?think>|functools\[|"tool_calls"|\{"name"/;

const MESSAGES = [{ role: "user", content: "What is the weather in Paris? Also add 2 and 3." }];
const model = "stories260K.gguf";

let failures = 0, passes = 0;
async function check(name, f) {
  try {
    await f();
    passes++;
    console.log("ok:", name);
  } catch (e) {
    failures++;
    console.log("FAIL:", name, e && e.stack ? e.stack : e);
  }
}

// Asserts one call is well formed and its arguments validate; returns the parsed arguments.
function checkCall(c, names, where) {
  assert.equal(typeof c.id, "string", `${where}: id`);
  assert.ok(c.id.length > 0, `${where}: empty id`);
  assert.equal(c.type, "function", `${where}: type`);
  assert.ok(names.includes(c.function.name), `${where}: name ${c.function.name} not in ${names}`);
  assert.equal(typeof c.function.arguments, "string", `${where}: arguments must be JSON text`);
  let args;
  try {
    args = JSON.parse(c.function.arguments);
  } catch (e) {
    assert.fail(`${where}: arguments are not JSON: ${c.function.arguments}`);
  }
  const v = VALIDATE[c.function.name];
  assert.ok(v(args), `${where}: ${c.function.arguments} fails ${c.function.name}'s parameters: ` +
                     JSON.stringify(v.errors));
  return args;
}

function checkCleanContent(content, where) {
  assert.ok(content === null || content === undefined || typeof content === "string", `${where}: content type`);
  if (content) assert.ok(!MARKUP.test(content), `${where}: markup in content: ${JSON.stringify(content)}`);
}

// A reply that must be calls (finish_reason "tool_calls").
function checkCallReply(r, names, where) {
  const ch = r.choices[0];
  assert.equal(ch.finish_reason, "tool_calls", `${where}: finish_reason (message ${JSON.stringify(ch.message)})`);
  const calls = ch.message.tool_calls;
  assert.ok(Array.isArray(calls) && calls.length >= 1, `${where}: no tool_calls`);
  calls.forEach((c, i) => checkCall(c, names, `${where} call ${i}`));
  assert.equal(new Set(calls.map(c => c.id)).size, calls.length, `${where}: call ids repeat`);
  checkCleanContent(ch.message.content, where);
  return calls;
}

// Streams a request with the client and assembles the message as the SDK's
// docs show: tool_calls accumulated by index.
async function streamed(client, req) {
  const stream = await client.chat.completions.create({ ...req, stream: true });
  let content = "", reasoning = "", finish = null, markup = null;
  const calls = [];
  for await (const chunk of stream) {
    const ch = chunk.choices[0];
    if (!ch) continue;
    if (ch.finish_reason) finish = ch.finish_reason;
    const d = ch.delta || {};
    if (d.content) {
      if (MARKUP.test(d.content) && !markup) markup = d.content;
      content += d.content;
    }
    if (d.reasoning_content) reasoning += d.reasoning_content;
    for (const tc of d.tool_calls || []) {
      if (!calls[tc.index]) {
        // A call's first delta names it.
        assert.ok(tc.id && tc.function && tc.function.name, `first delta of call ${tc.index} lacks id/name: ` +
                                                            JSON.stringify(tc));
        assert.equal(tc.type, "function");
        calls[tc.index] = { id: tc.id, type: "function", function: { name: tc.function.name, arguments: "" } };
      } else {
        assert.ok(!tc.id || tc.id === calls[tc.index].id, "a later delta changes the call's id");
      }
      calls[tc.index].function.arguments += (tc.function && tc.function.arguments) || "";
    }
  }
  // A call cut by max_tokens is not a call: its raw text ends the content.
  if (finish !== "length" && req.reasoning_format !== "none") {
    assert.equal(markup, null, `markup in delta.content: ${markup}`);
  }
  return { content, reasoning, finish, calls };
}

const sameCalls = (a, b) => a.map(c => [c.function.name, c.function.arguments]);

async function familySuite(family, baseURL) {
  const client = new OpenAI({ baseURL, apiKey: "test-key", maxRetries: 0, timeout: 60000 });
  const base = { model, messages: MESSAGES, tools: TOOLS };
  const t = s => `${family}: ${s}`;
  const listed = LIST_FAMILIES.includes(family);
  let oneCall = null, manyCalls = null;

  await check(t("required: calls validate, several seeds and temperatures"), async () => {
    const runs = [
      { seed: 1, temperature: 0, parallel_tool_calls: false },
      { seed: 2, temperature: 0.7, parallel_tool_calls: false },
      { seed: 3, temperature: 1.2, parallel_tool_calls: false },
      { seed: 4, temperature: 0.9, logit_bias: END_NOW },
      { seed: 5, temperature: 1.0, logit_bias: END_NOW },
    ];
    const replies = await Promise.all(runs.map(x =>
      client.chat.completions.create({ ...base, ...x, tool_choice: "required", max_tokens: x.logit_bias ? 700 : 400 })));
    replies.forEach((r, i) => {
      const where = `seed ${runs[i].seed}`;
      if (listed && runs[i].logit_bias && r.choices[0].finish_reason === "length") {
        // The block ran out of room: the calls presented are whole.
        (r.choices[0].message.tool_calls || []).forEach((c, k) => checkCall(c, NAMES, `${where} call ${k}`));
        return;
      }
      const calls = checkCallReply(r, NAMES, where);
      if (runs[i].parallel_tool_calls === false) {
        assert.equal(calls.length, 1, `${where}: parallel_tool_calls false gave ${calls.length} calls`);
        oneCall = oneCall || r.choices[0].message;
      } else {
        manyCalls = manyCalls || r.choices[0].message;
      }
    });
  });

  await check(t("tool_choice naming a function: one call, to it"), async () => {
    for (const [name, seed] of [["set_mode", 11], ["add", 12], ["get_weather", 13]]) {
      const r = await client.chat.completions.create({
        ...base, seed, temperature: 0.8, max_tokens: 400, tool_choice: { type: "function", function: { name } } });
      const calls = checkCallReply(r, [name], `${name}`);
      assert.equal(calls.length, 1, `${name}: ${calls.length} calls`);
    }
  });

  await check(t("tool_choice none: no calls"), async () => {
    const r = await client.chat.completions.create({ ...base, seed: 21, max_tokens: 30, tool_choice: "none" });
    const m = r.choices[0].message;
    assert.ok(!m.tool_calls || m.tool_calls.length === 0, `tool_calls: ${JSON.stringify(m.tool_calls)}`);
    assert.notEqual(r.choices[0].finish_reason, "tool_calls");
  });

  await check(t("tool_choice auto: text or valid calls"), async () => {
    const r = await client.chat.completions.create({ ...base, seed: 22, max_tokens: 80 });
    const ch = r.choices[0];
    assert.ok(["stop", "length", "tool_calls"].includes(ch.finish_reason), ch.finish_reason);
    (ch.message.tool_calls || []).forEach((c, i) => checkCall(c, NAMES, `call ${i}`));
    if (ch.finish_reason === "tool_calls") assert.ok(ch.message.tool_calls.length >= 1);
  });

  await check(t("round trip: calls and their results sent back"), async () => {
    for (const m of [oneCall, manyCalls]) {
      if (!m) continue;
      const messages = [...MESSAGES, { role: "assistant", content: m.content, tool_calls: m.tool_calls }];
      for (const c of m.tool_calls) {
        messages.push({ role: "tool", tool_call_id: c.id, content: JSON.stringify({ ok: true, tool: c.function.name }) });
      }
      const r = await client.chat.completions.create({ ...base, messages, seed: 31, max_tokens: 16 });
      assert.equal(r.choices.length, 1);
      assert.ok(r.usage.prompt_tokens > 0);
    }
    assert.ok(oneCall, "no call to send back");
  });

  await check(t("streamed call equals the non-streamed one (same seed, temperature 0)"), async () => {
    const reqs = [{ ...base, seed: 41, temperature: 0, max_tokens: 400, tool_choice: "required", parallel_tool_calls: false },
                  { ...base, seed: 42, temperature: 0, max_tokens: 700, tool_choice: "required", logit_bias: END_NOW }];
    for (const req of reqs) {
      const whole = await client.chat.completions.create(req);
      const s = await streamed(client, req);
      assert.equal(s.finish, whole.choices[0].finish_reason);
      if (s.finish !== "tool_calls" && listed) continue;  // a block cut by length: see the cut test
      assert.deepEqual(sameCalls(s.calls), sameCalls(whole.choices[0].message.tool_calls));
      s.calls.forEach((c, i) => checkCall(c, NAMES, `streamed call ${i}`));
      assert.equal(s.content.trim(), (whole.choices[0].message.content || "").trim());
      // The client's own stream helper assembles the same message.
      const helper = client.beta.chat.completions.stream(req);
      const final = await helper.finalChatCompletion();
      assert.equal(final.choices[0].finish_reason, "tool_calls");
      assert.deepEqual(sameCalls(final.choices[0].message.tool_calls), sameCalls(whole.choices[0].message.tool_calls));
    }
  });

  await check(t("max_tokens cutting a call: length, no half call"), async () => {
    const req = { ...base, seed: 51, temperature: 0, tool_choice: "required", parallel_tool_calls: false };
    const whole = await client.chat.completions.create({ ...req, max_tokens: 400 });
    checkCallReply(whole, NAMES, "uncut");
    const n = whole.usage.completion_tokens;
    // Early in the call and in its arguments: no call (its raw text is content).
    for (const max_tokens of [3, 12, Math.floor(n / 2)]) {
      const r = await client.chat.completions.create({ ...req, max_tokens });
      const ch = r.choices[0];
      const where = `max_tokens ${max_tokens} of ${n}`;
      assert.equal(ch.finish_reason, "length", `${where}: finish_reason`);
      const calls = ch.message.tool_calls || [];
      assert.equal(calls.length, 0, `${where}: a cut call presented: ${JSON.stringify(calls)}`);
    }
    // In its last tokens (closing markup, the end of its JSON): a call
    // presented is whole, and no piece of markup is left in the content.
    for (const max_tokens of [n - 3, n - 2, n - 1]) {
      const r = await client.chat.completions.create({ ...req, max_tokens });
      const ch = r.choices[0];
      const where = `max_tokens ${max_tokens} of ${n}`;
      assert.equal(ch.finish_reason, "length", `${where}: finish_reason`);
      const calls = ch.message.tool_calls || [];
      calls.forEach((c, i) => checkCall(c, NAMES, `${where} call ${i}`));
      if (calls.length) checkCleanContent(ch.message.content, where);
    }
  });
}

// Reasoning (Qwen3's <think>). The tiny model never writes the tags itself,
// so a GBNF grammar (llama.cpp's `grammar` field) makes it think, then answer.
async function reasoningSuite(baseURL) {
  const client = new OpenAI({ baseURL, apiKey: "test-key", maxRetries: 0, timeout: 60000 });
  const grammar = 'root ::= "<think>" [a-z]{2,6} " " [a-z]{2,6} "</think>" "\\n\\n" [a-z]{2,6} " " [a-z]{2,6}';
  const req = { model, messages: MESSAGES, grammar, seed: 61, temperature: 0.8, max_tokens: 100 };
  const t = s => `qwen3: ${s}`;
  let whole = null;

  await check(t("reasoning_content holds the thinking, content the answer"), async () => {
    whole = await client.chat.completions.create(req);
    const m = whole.choices[0].message;
    assert.equal(whole.choices[0].finish_reason, "stop");
    assert.match(m.reasoning_content || "", /^[a-z]{2,6} [a-z]{2,6}$/, JSON.stringify(m));
    assert.match(m.content, /^[a-z]{2,6} [a-z]{2,6}$/, JSON.stringify(m));
  });

  await check(t("streamed reasoning equals the non-streamed one"), async () => {
    const s = await streamed(client, req);
    assert.equal(s.reasoning, whole.choices[0].message.reasoning_content);
    assert.equal(s.content, whole.choices[0].message.content);
  });

  await check(t("reasoning_format none keeps the thinking inline"), async () => {
    for (const r of [await client.chat.completions.create({ ...req, reasoning_format: "none" }),
                     await streamed(client, { ...req, reasoning_format: "none" })]) {
      const m = r.choices ? r.choices[0].message : { content: r.content, reasoning_content: r.reasoning };
      assert.ok(!m.reasoning_content, JSON.stringify(m));
      assert.match(m.content, /^<think>[a-z]{2,6} [a-z]{2,6}<\/think>\s*[a-z]{2,6} [a-z]{2,6}$/);
    }
  });

  await check(t("chat_template_kwargs enable_thinking false changes the prompt"), async () => {
    const off = await client.chat.completions.create({ ...req, chat_template_kwargs: { enable_thinking: false } });
    assert.notEqual(off.usage.prompt_tokens, whole.usage.prompt_tokens);
    assert.ok(!MARKUP.test(off.choices[0].message.content || ""), JSON.stringify(off.choices[0].message));
  });

  await check(t("json_schema answer after the thinking: content is the JSON"), async () => {
    const schema = { type: "object", properties: { word: { type: "string", maxLength: 8 } }, required: ["word"],
                     additionalProperties: false };
    const r = await client.chat.completions.create({
      model, messages: MESSAGES, seed: 62, max_tokens: 200,
      response_format: { type: "json_schema", json_schema: { name: "w", schema } } });
    const m = r.choices[0].message;
    assert.ok(!MARKUP.test(m.content), JSON.stringify(m));
    assert.ok(ajv.validate(schema, JSON.parse(m.content)), m.content);
  });
}

// Bad tool input: 400 with a message naming the problem; the server serves on.
async function badInputSuite(baseURL) {
  const client = new OpenAI({ baseURL, apiKey: "test-key", maxRetries: 0, timeout: 60000 });
  const tool = (name, parameters = { type: "object", properties: {} }) => ({ type: "function", function: { name, parameters } });
  const cases = [
    ["parameters using not", { tools: [tool("f", { type: "object", properties: { x: { not: { type: "string" } } } })] },
     /\bnot\b/],
    ["tool_choice naming an unknown function",
     { tools: [tool("f")], tool_choice: { type: "function", function: { name: "nope" } } }, /nope/],
    ["tool message answering no call",
     { messages: [...MESSAGES, { role: "tool", tool_call_id: "call_missing", content: "x" }] }, /tool_call_id.*call_missing|call_missing.*tool_call_id/],
    ["tools not a list", { tools: { type: "function", function: { name: "f" } } }, /tools/],
    ["tool name with spaces", { tools: [tool("get the weather")] }, /name/],
    ["tool_choice required without tools", { tool_choice: "required" }, /tool_choice.*tools|tools.*tool_choice/],
    ["duplicate tool names", { tools: [tool("f"), tool("f")] }, /"f"|\bf\b.*twice|two tools/],
  ];
  for (const [name, body, pattern] of cases) {
    await check(`bad input: ${name}`, async () => {
      let err = null;
      try {
        await client.chat.completions.create({ model, messages: MESSAGES, max_tokens: 4, ...body });
      } catch (e) {
        err = e;
      }
      assert.ok(err, "no error");
      assert.equal(err.status, 400, String(err));
      const message = (err.error && err.error.message) || err.message;
      assert.match(message, pattern);
    });
  }
  await check("bad input: the server still serves", async () => {
    const r = await client.chat.completions.create({ model, messages: MESSAGES, max_tokens: 4 });
    assert.equal(r.choices.length, 1);
  });
}

const servers = Object.fromEntries(process.argv.slice(2).map(a => [a.slice(0, a.indexOf("=")), a.slice(a.indexOf("=") + 1)]));
for (const f of Object.keys(servers)) assert.ok(FAMILIES.includes(f), `unknown family ${f}`);
const started = Date.now();
await Promise.all(Object.entries(servers).map(async ([family, url]) => {
  await familySuite(family, url);
  if (family === "qwen3") await reasoningSuite(url);
  if (family === "hermes") await badInputSuite(url);
}));
console.log(`${passes} passed, ${failures} failed in ${((Date.now() - started) / 1000).toFixed(1)} s`);
process.exit(failures ? 1 : 0);

// Anthropic's Messages API on qkv serve, driven by the official
// @anthropic-ai/sdk client: plain messages, tool use forced with tool_choice
// (inputs checked against their input_schema with ajv), a tool_result round
// trip, streaming (the raw event sequence and the SDK's finalMessage), token
// counting, stop sequences, thinking blocks (a thinking template), and the
// 4xx answers in Anthropic's error shape for bad requests, the server
// serving on after each.
//
// The model is tiny and writes gibberish: every structure comes from the
// server (grammar-forced calls, the event framing), which is what is checked.
//
// Usage: node serve_anthropic.mjs HERMES_URL QWEN3_URL QWQ_URL (servers with
//        those chat templates)
// NODE_PATH names the node_modules holding @anthropic-ai/sdk and ajv.
import { createRequire } from "node:module";
import assert from "node:assert/strict";
import { checks } from "./serve_harness.mjs";

const require = createRequire(process.env.NODE_PATH + "/");
const { Anthropic, BadRequestError, NotFoundError, AuthenticationError } = require("@anthropic-ai/sdk");
const Ajv = require("ajv").default;

const [baseURL, thinkingURL, reasoningURL] = process.argv.slice(2);
const client = new Anthropic({ apiKey: "test-key", baseURL, maxRetries: 0, timeout: 60000 });
const thinker = new Anthropic({ apiKey: "test-key", baseURL: thinkingURL, maxRetries: 0, timeout: 60000 });
const reasoner = new Anthropic({ apiKey: "test-key", baseURL: reasoningURL, maxRetries: 0, timeout: 60000 });
const MODEL = "stories260K.gguf";
const ajv = new Ajv({ strict: false });

const { check, failed } = checks();

const WEATHER = {
  name: "get_weather",
  description: "The weather in a city over some days.",
  input_schema: {
    type: "object",
    properties: {
      city: { type: "string", maxLength: 12 },
      days: { type: "integer", minimum: 1, maximum: 7 },
      unit: { type: "string", enum: ["c", "f"] },
    },
    required: ["city", "days"],
  },
};
const validWeather = ajv.compile(WEATHER.input_schema);
const ASK = [{ role: "user", content: "What is the weather in Paris?" }];

function checkUsage(u, maxTokens) {
  assert.ok(Number.isInteger(u.input_tokens) && u.input_tokens > 0, `input_tokens ${u.input_tokens}`);
  assert.ok(Number.isInteger(u.output_tokens) && u.output_tokens > 0, `output_tokens ${u.output_tokens}`);
  assert.ok(u.output_tokens <= maxTokens, `output_tokens ${u.output_tokens} > max_tokens ${maxTokens}`);
}

function checkMessageShape(m) {
  assert.equal(m.type, "message");
  assert.equal(m.role, "assistant");
  assert.match(m.id, /^msg_/);
  assert.equal(m.model, MODEL);
  assert.ok(Array.isArray(m.content));
}

function checkToolUse(block) {
  assert.equal(block.type, "tool_use");
  assert.match(block.id, /^toolu_/);
  assert.equal(block.name, "get_weather");
  assert.equal(typeof block.input, "object");
  assert.ok(validWeather(block.input), `input ${JSON.stringify(block.input)}: ${ajv.errorsText(validWeather.errors)}`);
}

// The raw events of a stream: framing checked (message_start first,
// message_stop last, each block started, deltas of its kind, stopped).
function checkEventSequence(events) {
  assert.equal(events[0].type, "message_start");  // (its content the SDK fills in as the stream goes)
  assert.equal(events.at(-1).type, "message_stop");
  assert.equal(events.at(-2).type, "message_delta");
  const open = new Map();
  let next = 0;
  for (const e of events) {
    if (e.type === "content_block_start") {
      assert.equal(e.index, next++, "block indices count up from 0");
      open.set(e.index, e.content_block.type);
    } else if (e.type === "content_block_delta") {
      const kind = open.get(e.index);
      assert.ok(kind, `a delta of block ${e.index}, which is not open`);
      const expected = { text: "text_delta", tool_use: "input_json_delta", thinking: "thinking_delta" }[kind];
      assert.equal(e.delta.type, expected);
    } else if (e.type === "content_block_stop") {
      assert.ok(open.delete(e.index), `block ${e.index} stopped twice or never started`);
    }
  }
  assert.equal(open.size, 0, "every block is stopped");
  return events.filter(e => e.type === "content_block_delta").map(e => e.delta.type);
}

async function collect(stream) {
  const events = [];
  for await (const e of stream) events.push(e);
  return { events, final: await stream.finalMessage() };
}

async function expectError(cls, status, type, fragment, params, c = client) {
  try {
    await c.messages.create(params);
  } catch (e) {
    assert.ok(e instanceof cls, `expected ${cls.name}, got ${e.constructor.name}: ${e.message}`);
    assert.equal(e.status, status);
    assert.equal(e.error.type, "error");
    assert.equal(e.error.error.type, type);
    assert.ok(e.error.error.message.includes(fragment), `message "${e.error.error.message}" lacks "${fragment}"`);
    return;
  }
  assert.fail(`no error for ${JSON.stringify(params).slice(0, 200)}`);
}

let toolUse = null;  // a call from the tool test, for the round trip

await check("plain text message", async () => {
  const m = await client.messages.create({ model: MODEL, max_tokens: 24, messages: ASK });
  checkMessageShape(m);
  assert.equal(m.content[0].type, "text");
  assert.equal(typeof m.content[0].text, "string");
  assert.ok(["end_turn", "max_tokens"].includes(m.stop_reason), m.stop_reason);
  assert.equal(m.stop_sequence, null);
  checkUsage(m.usage, 24);
  if (m.stop_reason === "max_tokens") assert.equal(m.usage.output_tokens, 24);
  else assert.ok(m.usage.output_tokens < 24);
});

await check("system prompt as blocks, temperature, top_k, metadata", async () => {
  const m = await client.messages.create({
    max_tokens: 8, temperature: 0, top_k: 5, top_p: 0.9, metadata: { user_id: "u1" },
    system: [{ type: "text", text: "You are terse.", cache_control: { type: "ephemeral" } }], messages: ASK,
  });
  checkMessageShape(m);
  const again = await client.messages.create({
    max_tokens: 8, temperature: 0, system: [{ type: "text", text: "You are terse." }], messages: ASK,
  });
  assert.equal(again.content[0].text, m.content[0].text, "temperature 0 repeats itself");
});

await check("tool_choice any: a tool_use valid against input_schema", async () => {
  for (let i = 0; i < 3; i++) {
    const m = await client.messages.create({
      max_tokens: 300, tools: [WEATHER], tool_choice: { type: "any", disable_parallel_tool_use: true },
      messages: ASK,
    });
    checkMessageShape(m);
    const calls = m.content.filter(b => b.type === "tool_use");
    assert.equal(calls.length, 1, JSON.stringify(m.content));
    checkToolUse(calls[0]);
    assert.equal(m.stop_reason, "tool_use");
    checkUsage(m.usage, 300);
    toolUse = calls[0];
  }
});

await check("tool_choice tool by name", async () => {
  const other = { name: "noop", description: "Does nothing.", input_schema: { type: "object", properties: {} } };
  const m = await client.messages.create({
    max_tokens: 300, tools: [other, WEATHER], tool_choice: { type: "tool", name: "get_weather" }, messages: ASK,
  });
  const calls = m.content.filter(b => b.type === "tool_use");
  assert.ok(calls.length >= 1, JSON.stringify(m.content));
  for (const c of calls) checkToolUse(c);
});

await check("tool_result round trip", async () => {
  assert.ok(toolUse, "needs the tool test's call");
  const messages = [
    ...ASK,
    { role: "assistant", content: [{ type: "text", text: "Let me look." }, toolUse] },
    { role: "user", content: [
      { type: "tool_result", tool_use_id: toolUse.id, content: [{ type: "text", text: "Sunny, 21 C" }] },
      { type: "text", text: "And tomorrow?" },
    ] },
  ];
  const m = await client.messages.create({ max_tokens: 16, tools: [WEATHER], messages });
  checkMessageShape(m);
  checkUsage(m.usage, 16);
  // An error result and a thinking block in the history are accepted too.
  const m2 = await client.messages.create({
    max_tokens: 8, tools: [WEATHER],
    messages: [
      ...ASK,
      { role: "assistant", content: [{ type: "thinking", thinking: "I should call it.", signature: "" }, toolUse] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: toolUse.id, content: "timeout", is_error: true }] },
    ],
  });
  checkMessageShape(m2);
});

await check("streaming a tool call: input_json_delta events and finalMessage", async () => {
  const { events, final } = await collect(client.messages.stream({
    max_tokens: 300, tools: [WEATHER], tool_choice: { type: "any", disable_parallel_tool_use: true }, messages: ASK,
  }));
  const deltas = checkEventSequence(events);
  assert.ok(deltas.includes("input_json_delta"), `delta types: ${[...new Set(deltas)]}`);
  checkMessageShape(final);
  const calls = final.content.filter(b => b.type === "tool_use");
  assert.equal(calls.length, 1, JSON.stringify(final.content));
  checkToolUse(calls[0]);
  assert.equal(final.stop_reason, "tool_use");
  checkUsage(final.usage, 300);
  const start = events.find(e => e.type === "content_block_start" && e.content_block.type === "tool_use");
  assert.equal(start.content_block.id, calls[0].id);
});

await check("streaming text: text_delta events", async () => {
  const stream = client.messages.stream({ max_tokens: 20, messages: ASK });
  let text = "";
  stream.on("text", t => { text += t; });
  const { events, final } = await collect(stream);
  const deltas = checkEventSequence(events);
  assert.ok(deltas.every(d => d === "text_delta"));
  assert.equal(final.content[0].type, "text");
  assert.equal(final.content[0].text, text);
  assert.ok(["end_turn", "max_tokens"].includes(final.stop_reason));
  checkUsage(final.usage, 20);
  assert.ok(events[0].message.usage.input_tokens > 0, "message_start tells the prompt's size");
});

await check("raw SSE: event names match the data types", async () => {
  const r = await fetch(`${baseURL}/v1/messages`, {
    method: "POST",
    headers: { "x-api-key": "test-key", "content-type": "application/json", "anthropic-version": "2023-06-01" },
    body: JSON.stringify({ max_tokens: 6, stream: true, messages: ASK }),
  });
  assert.equal(r.status, 200);
  assert.match(r.headers.get("content-type"), /text\/event-stream/);
  const frames = (await r.text()).split("\n\n").filter(Boolean);
  for (const f of frames) {
    const [ev, data] = f.split("\n");
    assert.equal(JSON.parse(data.replace(/^data: /, "")).type, ev.replace(/^event: /, ""));
  }
  assert.ok(frames.some(f => f.startsWith("event: ping")));
  const start = JSON.parse(frames[0].split("\n")[1].replace(/^data: /, ""));
  assert.equal(start.type, "message_start");
  assert.deepEqual(start.message.content, []);
  assert.equal(start.message.stop_reason, null);
});

await check("count_tokens grows with the text and the tools", async () => {
  const count = async (params) => (await client.messages.countTokens({ model: MODEL, ...params })).input_tokens;
  const short = await count({ messages: [{ role: "user", content: "Hi" }] });
  const long = await count({ messages: [{ role: "user", content: "Hi there, tell me a long story about a cat." }] });
  // (Without a system prompt the template writes its own default one.)
  const withSystem = await count({ system: "Be brief. Answer in one short sentence, and never in a list.",
                                   messages: [{ role: "user", content: "Hi" }] });
  const briefSystem = await count({ system: "Be brief.", messages: [{ role: "user", content: "Hi" }] });
  const withTools = await count({ tools: [WEATHER], messages: [{ role: "user", content: "Hi" }] });
  for (const n of [short, long, withSystem, withTools]) assert.ok(Number.isInteger(n) && n > 0, `count ${n}`);
  assert.ok(long > short && withSystem > briefSystem && withTools > short,
            `${short} ${long} ${briefSystem} ${withSystem} ${withTools}`);
  // The count is the prompt a message request reads.
  const m = await client.messages.create({ max_tokens: 1, messages: [{ role: "user", content: "Hi" }] });
  assert.equal(m.usage.input_tokens + (m.usage.cache_read_input_tokens ?? 0), short);
});

await check("stop_sequences: stop_reason stop_sequence", async () => {
  const m = await client.messages.create({ max_tokens: 200, stop_sequences: [" ", "zzzz"], messages: ASK });
  assert.equal(m.stop_reason, "stop_sequence", JSON.stringify(m));
  assert.equal(m.stop_sequence, " ");
  assert.ok(!m.content[0].text.includes(" "));
  const { events, final } = await collect(client.messages.stream({
    max_tokens: 200, stop_sequences: ["e"], messages: ASK,
  }));
  const md = events.find(e => e.type === "message_delta");
  assert.equal(md.delta.stop_reason, "stop_sequence");
  assert.equal(md.delta.stop_sequence, "e");
  assert.equal(final.stop_sequence, "e");
  // A template's own end-of-turn string is not a stop sequence.
  const plain = await client.messages.create({ max_tokens: 200, stop_sequences: ["qqqq"], messages: ASK });
  assert.notEqual(plain.stop_reason, "stop_sequence");
});

function checkThinkingContent(m) {
  checkMessageShape(m);
  for (const b of m.content) {
    assert.ok(["thinking", "text", "tool_use"].includes(b.type), b.type);
    if (b.type === "thinking") {
      assert.equal(typeof b.thinking, "string");
      assert.ok(b.thinking.length > 0);
      assert.equal(typeof b.signature, "string");
    }
  }
  // Thinking comes first.
  const i = m.content.findIndex(b => b.type === "thinking");
  assert.ok(i <= 0, "a thinking block is the first");
}

await check("thinking enabled (Qwen3 template): the model may think", async () => {
  // Qwen3's prompt leaves the <think> to the model, which this one hardly
  // ever writes: a thinking block may or may not come.
  const params = { max_tokens: 1100, thinking: { type: "enabled", budget_tokens: 1024 }, messages: ASK };
  const m = await thinker.messages.create(params);
  checkThinkingContent(m);
  checkUsage(m.usage, 1100);
  const { events, final } = await collect(thinker.messages.stream({ ...params, max_tokens: 1025 }));
  checkEventSequence(events);
  checkThinkingContent(final);
  // Disabled: the template closes an empty thinking block, the reply has none.
  const off = await thinker.messages.create({ max_tokens: 30, thinking: { type: "disabled" }, messages: ASK });
  checkMessageShape(off);
  assert.ok(off.content.every(b => b.type !== "thinking"), JSON.stringify(off.content));
});

await check("thinking (QwQ template, whose prompt opens <think>): thinking blocks", async () => {
  const params = { max_tokens: 1100, thinking: { type: "enabled", budget_tokens: 1024 }, messages: ASK };
  const m = await reasoner.messages.create(params);
  checkThinkingContent(m);
  assert.equal(m.content[0].type, "thinking", JSON.stringify(m.content).slice(0, 300));
  const { events, final } = await collect(reasoner.messages.stream({ ...params, max_tokens: 1025 }));
  const deltas = checkEventSequence(events);
  assert.ok(deltas.includes("thinking_delta"), `delta types: ${[...new Set(deltas)]}`);
  checkThinkingContent(final);
  assert.equal(final.content[0].type, "thinking");
  const streamed = events.filter(e => e.type === "content_block_delta" && e.delta.type === "thinking_delta")
                         .map(e => e.delta.thinking).join("");
  assert.equal(final.content[0].thinking, streamed);
});

await check("bad requests: 4xx in Anthropic's shape, naming the field", async () => {
  const E = "invalid_request_error";
  await expectError(BadRequestError, 400, E, "max_tokens: Field required", { messages: ASK });
  await expectError(BadRequestError, 400, E, "messages", { max_tokens: 5, messages: "hello" });
  await expectError(BadRequestError, 400, E, "messages.2.content.0.tool_use_id", {
    max_tokens: 5, tools: [WEATHER],
    messages: [...ASK, { role: "assistant", content: "No tools needed." },
               { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_nope", content: "x" }] }],
  });
  await expectError(BadRequestError, 400, E, "tool_choice", {
    max_tokens: 5, tools: [WEATHER], tool_choice: { type: "tool", name: "get_time" }, messages: ASK,
  });
  await expectError(BadRequestError, 400, E, "'not'", {
    max_tokens: 5, messages: ASK,
    tools: [{ name: "f", input_schema: { type: "object", properties: { a: { not: { type: "string" } } } } }],
  });
  await expectError(BadRequestError, 400, E, "messages.0.content.1", {
    max_tokens: 5, messages: [{ role: "user", content: [
      { type: "text", text: "What is this?" },
      { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } },
    ] }],
  });
  await expectError(BadRequestError, 400, E, "temperature", { max_tokens: 5, temperature: 1.5, messages: ASK });
  await expectError(BadRequestError, 400, E, "messages.0.role", {
    max_tokens: 5, messages: [{ role: "system", content: "x" }],
  });
  await expectError(BadRequestError, 400, E, "tools.0.input_schema", {
    max_tokens: 5, tools: [{ name: "f" }], messages: ASK,
  });
  await expectError(BadRequestError, 400, E, "thinking.budget_tokens", {
    max_tokens: 100, thinking: { type: "enabled", budget_tokens: 2000 }, messages: ASK,
  });
  await expectError(BadRequestError, 400, E, "prefill", {
    max_tokens: 5, messages: [...ASK, { role: "assistant", content: "The weather is" }],
  });
  await expectError(NotFoundError, 404, "not_found_error", "model", { model: "claude-nope", max_tokens: 5, messages: ASK });
  const stranger = new Anthropic({ apiKey: "wrong", baseURL, maxRetries: 0 });
  await expectError(AuthenticationError, 401, "authentication_error", "API key", { max_tokens: 5, messages: ASK },
                    stranger);
  // A bad streamed request is refused before the stream starts.
  try {
    await collect(client.messages.stream({ max_tokens: 5, messages: [{ role: "user", content: [{ type: "video" }] }] }));
    assert.fail("no error for a streamed bad request");
  } catch (e) {
    assert.ok(e instanceof BadRequestError, `${e.constructor.name}: ${e.message}`);
  }
  // Still serving.
  const m = await client.messages.create({ max_tokens: 4, messages: ASK });
  checkMessageShape(m);
});

if (failed()) {
  console.log(`${failed()} check(s) failed`);
  process.exit(1);
}
console.log("all checks passed");

// qkv serve's Ollama API through the official Ollama JavaScript client:
// the model listing (tags, show, ps, version), /api/chat and /api/generate
// whole and streamed (NDJSON framing checked with plain fetch too), the
// counts and durations of the last object, options, `format` as "json" and as
// a JSON schema (the content validated by ajv, keys in the schema's order),
// tool calls (shape, arguments as objects, streamed whole in one chunk, the
// round trip of calls and tool results), thinking, and the 400/404 error
// objects, with the server still serving after them.
//
// The model is tiny and writes gibberish: every structure checked comes from
// the server (grammars, templates, parsing), and replies are compared with
// themselves across seeds and modes rather than with expected words.
//
// Usage: node serve_ollama.mjs URL_A URL_B URL_C MODEL_PATH GREEDY_RUN_OUTPUT
// (servers as serve_ollama.sh starts them; NODE_PATH names the node_modules
// holding ollama and ajv).
import { createRequire } from "node:module";
import { statSync } from "node:fs";
import assert from "node:assert/strict";

const require = createRequire(process.env.NODE_PATH + "/");
const { Ollama } = require("ollama");
const Ajv = require("ajv").default;

const [urlA, urlB, urlC, modelPath, runOutput] = process.argv.slice(2);
const A = new Ollama({ host: urlA });  // Qwen 2.5 template
const B = new Ollama({ host: urlB });  // no template: generic JSON tool calls
const C = new Ollama({ host: urlC });  // QwQ template: thinking
const model = "stories";
const prompt = "Once upon a time";
const greedy = runOutput.slice(prompt.length);  // qkv run echoes the prompt

let passed = 0, failed = 0;
async function check(name, f) {
  try {
    await f();
    passed++;
    console.log("ok:", name);
  } catch (e) {
    failed++;
    console.log("FAIL:", name, e && e.stack ? e.stack : e);
  }
}

// A promise that must reject with Ollama's error object and this status.
async function rejects(promise, status, pattern) {
  await assert.rejects(promise, e => {
    assert.equal(e.name, "ResponseError", String(e));
    assert.equal(e.status_code, status, e.error);
    if (pattern) assert.match(e.error, pattern);
    return true;
  });
}

function checkStats(r, maxTokens) {
  assert.equal(r.done, true);
  assert.ok(["stop", "length"].includes(r.done_reason), r.done_reason);
  assert.ok(r.prompt_eval_count > 0);
  assert.ok(r.eval_count >= 0 && r.eval_count <= maxTokens, String(r.eval_count));
  for (const k of ["total_duration", "load_duration", "prompt_eval_duration", "eval_duration"]) {
    assert.ok(Number.isInteger(r[k]) && r[k] >= 0, `${k}: ${r[k]}`);
  }
  assert.ok(r.total_duration >= r.eval_duration + r.prompt_eval_duration);
  assert.ok(!Number.isNaN(new Date(r.created_at).getTime()), String(r.created_at));
}

const weatherTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "The weather in a city",
    parameters: {
      type: "object",
      properties: { city: { type: "string", maxLength: 12 }, days: { type: "integer", minimum: 1, maximum: 7 } },
      required: ["city", "days"],
    },
  },
};

// ---- the model endpoints -------------------------------------------------

await check("list: the one model with its file's size and details", async () => {
  const r = await A.list();
  assert.equal(r.models.length, 1);
  const m = r.models[0];
  assert.equal(m.name, model);
  assert.equal(m.model, model);
  assert.equal(m.size, statSync(modelPath).size);
  assert.match(m.digest, /^[0-9a-f]{64}$/);
  assert.equal(m.details.format, "gguf");
  assert.equal(m.details.family, "llama");
  assert.ok(m.details.parameter_size && m.details.quantization_level);
  assert.ok(!Number.isNaN(new Date(m.modified_at).getTime()));
});

await check("show: template, model_info, capabilities; ':latest' names the model too", async () => {
  for (const name of [model, model + ":latest"]) {
    const r = await A.show({ model: name });
    assert.match(r.template, /<tool_call>/);
    assert.deepEqual(r.capabilities, ["completion", "tools"]);
    assert.equal(r.model_info["general.architecture"], "llama");
    assert.ok(r.model_info["general.parameter_count"] > 0);
    assert.equal(r.details.format, "gguf");
  }
  const c = await C.show({ model });
  assert.ok(c.capabilities.includes("thinking"), String(c.capabilities));
  const b = await B.show({ model });
  assert.deepEqual(b.capabilities, ["completion"]);  // no template: tools through the generic format only
});

await check("ps and version", async () => {
  const ps = await A.ps();
  assert.equal(ps.models[0].name, model);
  assert.ok(ps.models[0].size > statSync(modelPath).size / 2);
  assert.ok(new Date(ps.models[0].expires_at).getTime() > Date.now());
  const v = await A.version();
  assert.match(v.version, /^\d+\.\d+\.\d+/);
});

// ---- chat and generate ---------------------------------------------------

await check("chat: a reply with counts and durations", async () => {
  const r = await A.chat({ model, messages: [{ role: "user", content: "Tell me a story" }], stream: false,
                           options: { num_predict: 24, seed: 5 } });
  assert.equal(r.model, model);
  assert.equal(r.message.role, "assistant");
  assert.equal(typeof r.message.content, "string");
  assert.ok(r.message.content.length > 0);
  assert.equal(r.message.tool_calls, undefined);
  checkStats(r, 24);
});

await check("chat streamed: the chunks add up to the same reply (same seed)", async () => {
  const req = { model, messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello" }],
                options: { num_predict: 30, seed: 11, temperature: 0.9, top_k: 20, top_p: 0.9, min_p: 0.01,
                           repeat_penalty: 1.1, repeat_last_n: 32, presence_penalty: 0.5, frequency_penalty: 0.2,
                           num_ctx: 4096, mirostat: 0, typical_p: 1 } };
  const whole = await A.chat({ ...req, stream: false });
  let content = "", chunks = 0, last = null;
  for await (const c of await A.chat({ ...req, stream: true })) {
    if (c.done) {
      last = c;
    } else {
      chunks++;
      assert.equal(c.message.role, "assistant");
      content += c.message.content;
    }
  }
  assert.ok(chunks > 1, String(chunks));
  assert.equal(content.trim(), whole.message.content);
  checkStats(last, 30);
  assert.equal(last.eval_count, whole.eval_count);
  assert.equal(last.prompt_eval_count, whole.prompt_eval_count);
});

await check("generate raw, streamed, greedy: the same text as qkv run", async () => {
  let text = "", last = null;
  for await (const c of await A.generate({ model, prompt, raw: true, stream: true,
                                           options: { temperature: 0, num_predict: 32 } })) {
    if (c.done) last = c; else text += c.response;
  }
  assert.equal(text, greedy);
  assert.equal(last.done_reason, "length");
  assert.equal(last.eval_count, 32);
  assert.equal(last.response, "");
  checkStats(last, 32);
});

await check("generate through the template, whole and streamed", async () => {
  // A system prompt longer than the template's default one.
  const system = "You tell stories about a cat, a dog and a bird. ".repeat(4);
  const req = { model, prompt: "Tell me a story", system, options: { num_predict: 20, seed: 3 } };
  const whole = await A.generate({ ...req, stream: false });
  assert.ok(whole.response.length > 0);
  checkStats(whole, 20);
  let text = "", last = null;
  for await (const c of await A.generate({ ...req, stream: true })) {
    if (c.done) last = c; else text += c.response;
  }
  assert.equal(text.trim(), whole.response);
  assert.equal(last.eval_count, whole.eval_count);
  // The system prompt goes through the template: a longer prompt than without it.
  const bare = await A.generate({ ...req, system: undefined, stream: false });
  assert.ok(whole.prompt_eval_count > bare.prompt_eval_count);
});

await check("stop strings end the reply", async () => {
  const stop = greedy.slice(10, 16);
  const r = await A.generate({ model, prompt, raw: true, stream: false,
                               options: { temperature: 0, num_predict: 32, stop: [stop] } });
  assert.equal(r.response, greedy.slice(0, greedy.indexOf(stop)));
  assert.equal(r.done_reason, "stop");
});

await check("NDJSON framing (plain fetch): one JSON object per line, the last done", async () => {
  for (const [path, body] of [
    ["/api/chat", { model, messages: [{ role: "user", content: "Hi" }], options: { num_predict: 12 } }],
    ["/api/generate", { model, prompt: "Hi", options: { num_predict: 12 } }]]) {
    const res = await fetch(urlA + path, { method: "POST", body: JSON.stringify(body) });  // stream: default true
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("content-type"), "application/x-ndjson");
    const text = await res.text();
    assert.ok(text.endsWith("\n"));
    const lines = text.slice(0, -1).split("\n").map(l => JSON.parse(l));
    assert.ok(lines.length >= 2);
    lines.slice(0, -1).forEach(l => assert.equal(l.done, false));
    assert.equal(lines.at(-1).done, true);
    assert.equal(lines.at(-1).eval_count, 12);
  }
});

await check("no messages or prompt: the load reply", async () => {
  const c = await A.chat({ model, messages: [], stream: false });
  assert.equal(c.done, true);
  assert.equal(c.done_reason, "load");
  const g = await A.generate({ model, prompt: "", stream: false, keep_alive: "5m" });
  assert.equal(g.done_reason, "load");
});

// ---- structured output ---------------------------------------------------

await check("format: a JSON schema; the content validates, keys in the schema's order", async () => {
  const schema = {
    type: "object",
    properties: {
      zeta: { type: "string", maxLength: 10 },
      alpha: { type: "integer", minimum: 0, maximum: 99 },
      mid: { type: "array", items: { enum: ["red", "blue"] }, maxItems: 3 },
      ok: { type: "boolean" },
    },
    required: ["zeta", "alpha", "mid", "ok"],
    additionalProperties: false,
  };
  const validate = new Ajv().compile(schema);
  for (const seed of [1, 2, 3]) {
    const r = await A.chat({ model, messages: [{ role: "user", content: "Describe it in JSON" }], format: schema,
                             stream: false, options: { num_predict: 300, seed } });
    assert.equal(r.done_reason, "stop");
    const value = JSON.parse(r.message.content);
    assert.ok(validate(value), JSON.stringify(validate.errors) + " " + r.message.content);
    assert.deepEqual(Object.keys(value), ["zeta", "alpha", "mid", "ok"]);
  }
  // Streamed generate with the same format.
  let text = "";
  for await (const c of await A.generate({ model, prompt: "JSON please", format: schema, stream: true,
                                           options: { num_predict: 300, seed: 4 } })) {
    if (!c.done) text += c.response;
  }
  assert.ok(validate(JSON.parse(text)), text);
});

await check('format: "json" gives a JSON object', async () => {
  const r = await A.chat({ model, messages: [{ role: "user", content: "JSON" }], format: "json", stream: false,
                           options: { num_predict: 400, seed: 2 } });
  if (r.done_reason === "stop") {
    const v = JSON.parse(r.message.content);
    assert.equal(typeof v, "object");
    assert.ok(v !== null && !Array.isArray(v));
  } else {
    assert.match(r.message.content, /^\{/);  // cut by num_predict, but an object so far
  }
});

// ---- tools ---------------------------------------------------------------

await check("tools (Hermes template, auto): accepted; any calls have Ollama's shape", async () => {
  const r = await A.chat({ model, messages: [{ role: "user", content: "Weather in Paris?" }], tools: [weatherTool],
                           stream: false, options: { num_predict: 40, seed: 7 } });
  checkStats(r, 40);
  for (const call of r.message.tool_calls || []) {
    assert.equal(call.function.name, "get_weather");
    assert.equal(typeof call.function.arguments, "object");
  }
});

// Server B answers with the generic JSON format, constrained from the first
// token: {"tool_calls": [...]} or {"response": "..."}; which one depends on
// the seed, so seeds are tried until calls come (the same ones each run).
// The tiny model rarely closes the list of calls, so the reply usually ends
// by num_predict inside a call: the complete calls before it are the reply's.
const validateArgs = new Ajv().compile(weatherTool.function.parameters);
let callReply = null;
await check("tool calls: arguments are objects that satisfy the tool's schema", async () => {
  const messages = [{ role: "user", content: "What is the weather in Paris?" }];
  for (let seed = 1; seed <= 12 && !callReply; seed++) {
    const r = await B.chat({ model, messages, tools: [weatherTool], stream: false,
                             options: { num_predict: 150, seed, temperature: 1 } });
    if (r.message.tool_calls && r.message.tool_calls.length) callReply = { seed, r };
  }
  assert.ok(callReply, "no seed of 1..12 gave a reply with a complete tool call");
  for (const call of callReply.r.message.tool_calls) {
    assert.equal(call.function.name, "get_weather");
    assert.ok(call.function.arguments && typeof call.function.arguments === "object" &&
              !Array.isArray(call.function.arguments));
    assert.ok(validateArgs(call.function.arguments), JSON.stringify(call.function.arguments));
    assert.deepEqual(Object.keys(call.function.arguments), ["city", "days"]);  // the schema's order
  }
});

await check("tool calls streamed: whole, in one chunk, the same as unstreamed", async () => {
  assert.ok(callReply, "needs the previous check's seed");
  const stream = await B.chat({ model, messages: [{ role: "user", content: "What is the weather in Paris?" }],
                                tools: [weatherTool], stream: true,
                                options: { num_predict: 150, seed: callReply.seed, temperature: 1 } });
  const withCalls = [];
  let last = null;
  for await (const c of stream) {
    if (c.message.tool_calls) withCalls.push(c);
    if (c.done) last = c;
  }
  assert.equal(withCalls.length, 1);
  assert.equal(withCalls[0].done, false);
  const strip = calls => calls.map(c => ({ name: c.function.name, arguments: c.function.arguments }));
  assert.deepEqual(strip(withCalls[0].message.tool_calls), strip(callReply.r.message.tool_calls));
  assert.equal(last.done_reason, callReply.r.done_reason);
  assert.equal(last.eval_count, callReply.r.eval_count);
});

await check("tool round trip: the reply's calls and tool results go back in and are answered", async () => {
  assert.ok(callReply, "needs the calls of an earlier check");
  const calls = callReply.r.message.tool_calls;
  const messages = [{ role: "user", content: "What is the weather in Paris?" }, callReply.r.message,
                    ...calls.map(c => ({ role: "tool", tool_name: c.function.name, content: "Sunny, 22 C" }))];
  for (const client of [A, B]) {
    const r = await client.chat({ model, messages, tools: [weatherTool], stream: false,
                                  options: { num_predict: 8, seed: 1 } });
    checkStats(r, 8);
    // Without the results the prompt is shorter: they reached the template.
    const before = await client.chat({ model, messages: messages.slice(0, 2), tools: [weatherTool], stream: false,
                                       options: { num_predict: 1 } });
    assert.ok(r.prompt_eval_count > before.prompt_eval_count);
  }
  // Calls written by the client (no ids; tool messages answer them by name, in order).
  const r = await A.chat({ model, stream: false, options: { num_predict: 4 }, messages: [
    { role: "user", content: "Two cities?" },
    { role: "assistant", content: "", tool_calls: [
      { function: { name: "get_weather", arguments: { city: "Oslo", days: 1 } } },
      { function: { name: "get_time", arguments: {} } }] },
    { role: "tool", tool_name: "get_time", content: "noon" },
    { role: "tool", content: "rain" }] });
  checkStats(r, 4);
  await rejects(A.chat({ model, stream: false, messages: [
    { role: "assistant", content: "", tool_calls: [{ function: { name: "a", arguments: {} } }] },
    { role: "tool", tool_name: "b", content: "x" }] }), 400, /tool_name/);
});

// ---- thinking ------------------------------------------------------------

await check("think: the thinking comes apart in message.thinking, whole and streamed", async () => {
  const req = { model, messages: [{ role: "user", content: "Think" }], think: true, options: { num_predict: 16, seed: 9 } };
  const whole = await C.chat({ ...req, stream: false });
  assert.ok(whole.message.thinking && whole.message.thinking.length > 0, JSON.stringify(whole.message));
  let thinking = "";
  for await (const c of await C.chat({ ...req, stream: true })) thinking += c.message.thinking || "";
  assert.equal(thinking.trim(), whole.message.thinking);
  const g = await C.generate({ model, prompt: "Think", think: "high", stream: false, options: { num_predict: 8 } });
  assert.ok(g.thinking && g.thinking.length > 0);
  // An assistant turn's thinking is accepted back.
  const r = await C.chat({ model, stream: false, options: { num_predict: 2 }, messages: [
    { role: "user", content: "a" }, { role: "assistant", content: "b", thinking: whole.message.thinking },
    { role: "user", content: "c" }] });
  checkStats(r, 2);
});

// ---- errors --------------------------------------------------------------

await check("errors: Ollama's {error} with 400/404, the server serving after them", async () => {
  const user = [{ role: "user", content: "hi" }];
  await rejects(A.chat({ model: "llama3", messages: user, stream: false }), 404, /model 'llama3' not found/);
  await rejects(A.generate({ model: "llama3", prompt: "x", stream: true }), 404, /not found/);
  await rejects(A.show({ model: "llama3" }), 404, /not found/);
  await rejects(A.chat({ model, messages: user, stream: false, format: { not: { type: "string" } } }), 400, /not/);
  await rejects(A.chat({ model, messages: [{ role: "user", content: "hi", images: ["aGVsbG8="] }], stream: false }),
                400, /images/);
  await rejects(A.generate({ model, prompt: "hi", images: ["aGVsbG8="], stream: false }), 400, /images/);
  await rejects(A.chat({ model, messages: user, stream: false, think: true }), 400, /thinking/);
  await rejects(A.chat({ model, messages: user, stream: false, format: "yaml" }), 400, /format/);
  await rejects(A.chat({ model, messages: user, stream: false, options: { temperature: "hot" } }), 400,
                /options\.temperature/);
  await rejects(A.chat({ model, messages: user, stream: false, options: { num_predict: -5 } }), 400, /num_predict/);
  await rejects(A.chat({ model, messages: [{ role: "wizard", content: "x" }], stream: false }), 400, /role/);
  await rejects(A.chat({ model, messages: [{ role: "assistant", content: "", tool_calls: [
    { function: { name: "f", arguments: "{\"a\": 1}" } }] }], stream: false }), 400, /arguments/);
  await rejects(A.chat({ model, messages: user, stream: false, tools: [{ type: "retrieval" }] }), 400, /tools\[0\]/);
  await rejects(A.generate({ model, prompt: "x", suffix: "y", stream: false }), 400, /suffix/);
  await rejects(A.generate({ model, prompt: "x", template: "{{ .Prompt }}", stream: false }), 400, /template/);
  await rejects(A.generate({ model, prompt: "x", context: [1, 2, 3], stream: false }), 400, /context/);
  await rejects(A.generate({ model, prompt: "x ".repeat(3000), raw: true, stream: false }), 400, /context length/);
  for (const body of ["{", "[1]", JSON.stringify({ messages: user })]) {
    const res = await fetch(urlA + "/api/chat", { method: "POST", body });
    assert.equal(res.status, 400);
    assert.equal(typeof (await res.json()).error, "string");
  }
  const res = await fetch(urlA + "/api/pull", { method: "POST", body: JSON.stringify({ model }) });
  assert.equal(res.status, 404);
  assert.equal(typeof (await res.json()).error, "string");
  const after = await A.chat({ model, messages: user, stream: false, options: { num_predict: 3 } });
  checkStats(after, 3);
});

console.log(`serve ollama: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);

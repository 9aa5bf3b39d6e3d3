// qkv serve through the official OpenAI Node client: completions and chat,
// streaming and not, stop strings, usage, and the client's error classes for
// a bad key, bad JSON, an unknown model and a prompt longer than the context.
import { createRequire } from "node:module";
import assert from "node:assert/strict";

const require = createRequire(process.env.NODE_PATH + "/");
const OpenAI = require("openai");
const [baseURL, runOutput] = process.argv.slice(2);
const prompt = "Once upon a time";
const expected = runOutput.slice(prompt.length);  // qkv run echoes the prompt
const client = new OpenAI({ baseURL, apiKey: "test-key", maxRetries: 0, timeout: 30000 });
const model = "stories260K.gguf";
let failures = 0;
async function check(name, f) {
  try {
    await f();
    console.log("ok:", name);
  } catch (e) {
    failures++;
    console.log("FAIL:", name, e && e.stack ? e.stack : e);
  }
}

await check("models", async () => {
  const list = await client.models.list();
  assert.equal(list.data[0].id, model);
});

await check("completion, greedy equals qkv run, usage", async () => {
  const r = await client.completions.create({ model, prompt, max_tokens: 32, temperature: 0 });
  assert.equal(r.object, "text_completion");
  assert.equal(r.choices[0].text, expected);
  assert.equal(r.choices[0].finish_reason, "length");
  assert.equal(r.usage.completion_tokens, 32);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 32);
});

await check("streamed completion with usage", async () => {
  const stream = await client.completions.create({
    model, prompt, max_tokens: 32, temperature: 0, stream: true, stream_options: { include_usage: true } });
  let text = "", usage = null, finish = null;
  for await (const c of stream) {
    if (c.usage) usage = c.usage;
    if (c.choices.length) {
      text += c.choices[0].text;
      finish = c.choices[0].finish_reason || finish;
    }
  }
  assert.equal(text, expected);
  assert.equal(finish, "length");
  assert.equal(usage.completion_tokens, 32);
});

await check("stop strings, streamed and not", async () => {
  const stop = expected.slice(15, 24);
  const want = expected.slice(0, expected.indexOf(stop));
  const r = await client.completions.create({ model, prompt, max_tokens: 32, temperature: 0, stop: [stop] });
  assert.equal(r.choices[0].text, want);
  assert.equal(r.choices[0].finish_reason, "stop");
  const stream = await client.completions.create({ model, prompt, max_tokens: 32, temperature: 0, stop, stream: true });
  let text = "";
  for await (const c of stream) text += c.choices[0]?.text ?? "";
  assert.equal(text, want);
});

await check("chat, streamed and not", async () => {
  const messages = [{ role: "system", content: "Tell a story." }, { role: "user", content: "A cat." }];
  const r = await client.chat.completions.create({ model, messages, max_tokens: 16, temperature: 0 });
  assert.equal(r.object, "chat.completion");
  assert.equal(r.choices[0].message.role, "assistant");
  assert.ok(r.usage.prompt_tokens > 10);
  const stream = await client.chat.completions.create({
    model, messages, max_tokens: 16, temperature: 0, stream: true, stream_options: { include_usage: true } });
  let text = "", role = null, usage = null;
  for await (const c of stream) {
    if (c.usage) usage = c.usage;
    if (c.choices.length) {
      role = role || c.choices[0].delta.role;
      text += c.choices[0].delta.content ?? "";
    }
  }
  assert.equal(role, "assistant");
  assert.equal(text, r.choices[0].message.content);
  assert.equal(usage.completion_tokens, r.usage.completion_tokens);
  // The second identical request reuses the slot's cached prompt.
  assert.ok(usage.prompt_tokens_details.cached_tokens > 0);
});

await check("bad key is an AuthenticationError", async () => {
  const bad = new OpenAI({ baseURL, apiKey: "wrong", maxRetries: 0 });
  await assert.rejects(bad.completions.create({ model, prompt, max_tokens: 1 }),
    e => e instanceof OpenAI.AuthenticationError && e.status === 401 && e.code === "invalid_api_key");
});

await check("unknown model is a NotFoundError", async () => {
  await assert.rejects(client.completions.create({ model: "gpt-4o", prompt, max_tokens: 1 }),
    e => e instanceof OpenAI.NotFoundError && e.code === "model_not_found");
});

await check("context too long is a BadRequestError", async () => {
  await assert.rejects(client.completions.create({ model, prompt: "Once upon a time ".repeat(300), max_tokens: 1 }),
    e => e instanceof OpenAI.BadRequestError && e.code === "context_length_exceeded");
});

await check("n = 2 is a BadRequestError naming n", async () => {
  await assert.rejects(client.completions.create({ model, prompt, n: 2 }),
    e => e instanceof OpenAI.BadRequestError && e.param === "n");
});

await check("bad JSON is a 400 error object", async () => {
  const res = await fetch(baseURL + "/completions", {
    method: "POST", headers: { Authorization: "Bearer test-key", "Content-Type": "application/json" },
    body: '{"prompt": "x", "max_tokens": }' });
  assert.equal(res.status, 400);
  const body = await res.json();
  assert.equal(body.error.type, "invalid_request_error");
  assert.ok(body.error.message.includes("JSON"));
});

console.log(failures ? `serve openai: ${failures} failed` : "serve openai: ok");
process.exit(failures ? 1 : 0);

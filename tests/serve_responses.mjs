// qkv serve's OpenAI Responses API (POST /v1/responses) through the official
// openai client: a text response with usage, forced function calls whose
// arguments validate against the tool's parameters (ajv), a follow-up turn
// that sends the call and its output back as input items, text.format
// json_schema and json_object, streams of text and of a function call (their
// deltas add up to the final response, sequence numbers count up), the
// client's responses.stream() helper, and the 4xx answers for what a
// stateless function-tools-only server refuses, with the server still serving
// after them. A second server's template opens a thinking block, so its
// replies are reasoning items (whole and streamed as reasoning_text deltas).
//
// The model is tiny and writes gibberish: every structure checked here comes
// from the grammar (tool_choice required, text.format), so schemas bound their
// strings to end in time.
//
// Usage: node serve_responses.mjs BASE_URL THINKING_BASE_URL
//        (NODE_PATH: node_modules with openai, ajv)
import { createRequire } from "node:module";
import assert from "node:assert/strict";

const require = createRequire(process.env.NODE_PATH + "/");
const OpenAI = require("openai");
const Ajv = require("ajv").default;

const [baseURL, thinkingURL] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "test-key", maxRetries: 0, timeout: 30000 });
const thinking = new OpenAI({ baseURL: thinkingURL, apiKey: "test-key", maxRetries: 0, timeout: 30000 });
const model = "stories260K.gguf";
const ajv = new Ajv({ strict: false });
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

const weatherParams = {
  type: "object",
  properties: {
    city: { type: "string", maxLength: 12 },
    unit: { type: "string", enum: ["celsius", "fahrenheit"] },
    days: { type: "integer", minimum: 1, maximum: 7 },
  },
  required: ["city", "unit", "days"],
  additionalProperties: false,
};
const weatherTool = {
  type: "function",
  name: "get_weather",
  description: "The weather forecast for a city",
  parameters: weatherParams,
  strict: true,
};
const timeTool = {
  type: "function",
  name: "get_time",
  description: "The time in a city",
  parameters: { type: "object", properties: { city: { type: "string", maxLength: 8 } }, required: ["city"] },
};
const validWeather = ajv.compile(weatherParams);

function checkUsage(r) {
  assert.ok(r.usage.input_tokens > 0, "input_tokens");
  assert.ok(r.usage.output_tokens > 0, "output_tokens");
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
  assert.equal(typeof r.usage.input_tokens_details.cached_tokens, "number");
  assert.equal(r.usage.output_tokens_details.reasoning_tokens, 0);
}

// The one function_call item of a response, its arguments valid.
function weatherCall(r) {
  const calls = r.output.filter(o => o.type === "function_call");
  assert.equal(calls.length, 1, "one function_call item: " + JSON.stringify(r.output));
  const c = calls[0];
  assert.equal(c.name, "get_weather");
  assert.equal(c.status, "completed");
  assert.match(c.call_id, /^call_/);
  assert.match(c.id, /^fc_/);
  const args = JSON.parse(c.arguments);
  assert.ok(validWeather(args), JSON.stringify(validWeather.errors) + " in " + c.arguments);
  return c;
}

// The client's error for a request the server refuses.
async function refused(status, params, pattern, param) {
  let err;
  try {
    await client.responses.create({ model, max_output_tokens: 8, ...params });
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof OpenAI.APIError, "an APIError, got " + err);
  assert.equal(err.status, status, err.message);
  assert.match(err.error.message, pattern);
  if (param) assert.equal(err.error.param, param);
}

// Every event of a stream, their sequence numbers 0, 1, 2...
async function events(params, c = client) {
  const stream = await c.responses.create({ model, stream: true, ...params });
  const all = [];
  for await (const e of stream) all.push(e);
  all.forEach((e, i) => assert.equal(e.sequence_number, i, "sequence_number of " + e.type));
  assert.equal(all[0].type, "response.created");
  assert.equal(all[1].type, "response.in_progress");
  return all;
}

await check("text: output_text, a message item, usage", async () => {
  const r = await client.responses.create({ model, input: "Tell me a story about a cat.", max_output_tokens: 40 });
  assert.equal(r.object, "response");
  assert.match(r.id, /^resp_/);
  assert.equal(r.model, model);
  assert.ok(r.output_text.length > 0, "output_text is empty");
  const msg = r.output.find(o => o.type === "message");
  assert.equal(msg.role, "assistant");
  assert.equal(msg.content[0].type, "output_text");
  assert.equal(msg.content[0].text, r.output_text);
  checkUsage(r);
  assert.ok(r.usage.output_tokens <= 40);
  if (r.status === "incomplete") assert.equal(r.incomplete_details.reason, "max_output_tokens");
  else assert.equal(r.status, "completed");
  assert.equal(r.error, null);
  assert.equal(r.max_output_tokens, 40);
});

await check("max_output_tokens cuts the response: incomplete", async () => {
  const r = await client.responses.create({ model, input: "Go on and on.", max_output_tokens: 3 });
  assert.equal(r.status, "incomplete");
  assert.deepEqual(r.incomplete_details, { reason: "max_output_tokens" });
  assert.equal(r.usage.output_tokens, 3);
});

await check("instructions and a list of message items, echo fields", async () => {
  const r = await client.responses.create({
    model,
    instructions: "You tell short stories.",
    input: [
      { role: "developer", content: "Be brief." },
      { role: "user", content: [{ type: "input_text", text: "Hello" }] },
      { type: "message", role: "assistant", content: [{ type: "output_text", text: "Hi!" }] },
      { type: "reasoning", id: "rs_1", summary: [], content: [{ type: "reasoning_text", text: "They want more." }] },
      { type: "message", role: "assistant", content: "Shall I go on?" },
      { role: "user", content: "Yes." },
    ],
    temperature: 0.5,
    top_p: 0.9,
    reasoning: { effort: "minimal" },
    metadata: { run: "test" },
    store: false,
    max_output_tokens: 16,
  });
  assert.equal(r.instructions, "You tell short stories.");
  assert.equal(r.temperature, 0.5);
  assert.equal(r.top_p, 0.9);
  assert.deepEqual(r.metadata, { run: "test" });
  assert.equal(r.tool_choice, "auto");
  assert.deepEqual(r.tools, []);
  assert.deepEqual(r.text, { format: { type: "text" } });
  assert.equal(r.reasoning.effort, "minimal");
  checkUsage(r);
});

let firstCall;
await check("tool_choice required: a function_call whose arguments validate", async () => {
  const r = await client.responses.create({
    model,
    input: "What is the weather in Paris?",
    tools: [weatherTool, timeTool],
    tool_choice: { type: "function", name: "get_weather" },
    max_output_tokens: 200,
  });
  assert.equal(r.status, "completed");
  firstCall = weatherCall(r);
  assert.equal(r.tools.length, 2);
  assert.equal(r.tools[0].name, "get_weather");
  assert.deepEqual(r.tool_choice, { type: "function", name: "get_weather" });
  checkUsage(r);
});

await check("the call and its output sent back as input items", async () => {
  assert.ok(firstCall, "needs the call of the previous check");
  const r = await client.responses.create({
    model,
    input: [
      { role: "user", content: "What is the weather in Paris?" },
      firstCall,  // as the previous response returned it
      { type: "function_call_output", call_id: firstCall.call_id, output: JSON.stringify({ sky: "sunny" }) },
    ],
    tools: [weatherTool],
    max_output_tokens: 24,
  });
  assert.ok(["completed", "incomplete"].includes(r.status));
  assert.ok(r.output.length > 0);
  checkUsage(r);
  // A second forced call after the first one's answer.
  const again = await client.responses.create({
    model,
    input: [
      { role: "user", content: "What is the weather in Paris?" },
      { type: "function_call", call_id: "call_a", name: "get_weather", arguments: '{"city":"Paris"}' },
      { type: "function_call", call_id: "call_b", name: "get_time", arguments: '{"city":"Paris"}' },
      { type: "function_call_output", call_id: "call_a", output: "sunny" },
      { type: "function_call_output", call_id: "call_b", output: [{ type: "input_text", text: "noon" }] },
    ],
    tools: [weatherTool, timeTool],
    tool_choice: { type: "function", name: "get_weather" },
    max_output_tokens: 200,
  });
  weatherCall(again);
});

await check("text.format json_schema: output_text validates, keys in declared order", async () => {
  const schema = {
    type: "object",
    properties: {
      zeta: { type: "string", maxLength: 10 },
      alpha: { type: "integer", minimum: 0, maximum: 120 },
      tags: { type: "array", items: { type: "string", maxLength: 5 }, maxItems: 3 },
    },
    required: ["zeta", "alpha", "tags"],
    additionalProperties: false,
  };
  const r = await client.responses.create({
    model,
    input: "Describe a person.",
    text: { format: { type: "json_schema", name: "person", schema, strict: true } },
    max_output_tokens: 300,
  });
  assert.equal(r.status, "completed", r.output_text);
  const value = JSON.parse(r.output_text);
  const valid = ajv.compile(schema);
  assert.ok(valid(value), JSON.stringify(valid.errors) + " in " + r.output_text);
  assert.deepEqual(Object.keys(value), ["zeta", "alpha", "tags"]);
  assert.equal(r.text.format.type, "json_schema");
});

await check("text.format json_object", async () => {
  const r = await client.responses.create({
    model,
    input: "JSON please.",
    text: { format: { type: "json_object" } },
    max_output_tokens: 400,
  });
  if (r.status === "completed") {
    const v = JSON.parse(r.output_text);
    assert.equal(typeof v, "object");
  } else {
    assert.ok(r.output_text.trimStart().startsWith("{"), r.output_text);
  }
});

await check("streamed text: deltas add up to output_text", async () => {
  const all = await events({ input: "Tell me a story.", max_output_tokens: 30 });
  const last = all[all.length - 1];
  assert.ok(["response.completed", "response.incomplete"].includes(last.type), last.type);
  const deltas = all.filter(e => e.type === "response.output_text.delta");
  assert.ok(deltas.length > 1, "several deltas");
  const text = deltas.map(e => e.delta).join("");
  assert.equal(text, last.response.output_text);
  const done = all.find(e => e.type === "response.output_text.done");
  assert.equal(done.text, text);
  const item = all.find(e => e.type === "response.output_item.done").item;
  assert.equal(item.type, "message");
  assert.equal(item.content[0].text, text);
  assert.equal(deltas[0].item_id, item.id);
  const types = all.map(e => e.type);
  for (const t of ["response.output_item.added", "response.content_part.added", "response.content_part.done"]) {
    assert.ok(types.includes(t), t);
  }
  checkUsage(last.response);
  assert.equal(last.response.output[0].id, item.id);
});

await check("streamed function call: argument deltas add up to the call", async () => {
  const all = await events({
    input: "Weather in Oslo?",
    tools: [weatherTool],
    tool_choice: "required",
    parallel_tool_calls: false,
    max_output_tokens: 200,
  });
  const last = all[all.length - 1];
  assert.equal(last.type, "response.completed");
  const added = all.find(e => e.type === "response.output_item.added" && e.item.type === "function_call");
  assert.ok(added, "an added function_call item");
  assert.equal(added.item.arguments, "");
  const deltas = all.filter(e => e.type === "response.function_call_arguments.delta");
  assert.ok(deltas.length > 0);
  for (const d of deltas) assert.equal(d.item_id, added.item.id);
  const args = deltas.map(e => e.delta).join("");
  const done = all.find(e => e.type === "response.function_call_arguments.done");
  assert.equal(done.arguments, args);
  const call = weatherCall(last.response);
  assert.equal(call.arguments, args);
  assert.equal(call.id, added.item.id);
  assert.equal(call.call_id, added.item.call_id);
});

await check("the client's responses.stream() helper", async () => {
  const stream = client.responses.stream({ model, input: "A story, please.", max_output_tokens: 20 });
  let text = "";
  stream.on("response.output_text.delta", e => (text += e.delta));
  const final = await stream.finalResponse();
  assert.ok(text.length > 0);
  // The helper builds the response from the events (this client version
  // keeps its snapshot when the stream ends with response.incomplete).
  const msg = final.output.find(o => o.type === "message");
  assert.equal(msg.content[0].text, text);
  if (final.status === "completed") assert.equal(final.output_text, text);
});

// stories260K never closes the thinking block: the whole reply is reasoning.
await check("reasoning: a reasoning item, sent back as input", async () => {
  const r = await thinking.responses.create({ model, input: "Think about cats.", max_output_tokens: 12 });
  assert.equal(r.status, "incomplete");
  assert.equal(r.output.length, 1, JSON.stringify(r.output));
  const rs = r.output[0];
  assert.equal(rs.type, "reasoning");
  assert.match(rs.id, /^rs_/);
  assert.equal(rs.content[0].type, "reasoning_text");
  assert.ok(rs.content[0].text.length > 0);
  assert.equal(r.output_text, "");
  const next = await thinking.responses.create({
    model,
    input: [{ role: "user", content: "Think about cats." }, rs,
            { role: "assistant", content: "Cats sleep." }, { role: "user", content: "Why?" }],
    max_output_tokens: 4,
  });
  assert.equal(next.output[0].type, "reasoning");
});

await check("streamed reasoning: reasoning_text deltas add up to the item", async () => {
  const all = await events({ input: "Think.", max_output_tokens: 12 }, thinking);
  const last = all[all.length - 1];
  assert.equal(last.type, "response.incomplete");
  const text = all.filter(e => e.type === "response.reasoning_text.delta").map(e => e.delta).join("");
  assert.ok(text.length > 0);
  assert.equal(all.find(e => e.type === "response.reasoning_text.done").text, text);
  assert.equal(last.response.output[0].content[0].text, text);
  assert.equal(last.response.output[0].status, "incomplete");
});

await check("refused: previous_response_id, with the reason", async () => {
  await refused(400, { input: "hi", previous_response_id: "resp_123" },
                new RegExp("this server keeps no state: previous_response_id is not supported; " +
                           "send the whole conversation in input"),
                "previous_response_id");
});

await check("refused: hosted tools, unknown functions, unsupported schemas, bad input", async () => {
  await refused(400, { input: "hi", tools: [{ type: "web_search_preview" }] }, /not supported/, "tools[0].type");
  await refused(400, { input: "hi", tools: [weatherTool], tool_choice: { type: "function", name: "nope" } },
                /nope/, "tool_choice");
  await refused(400, { input: "hi", tool_choice: "required" }, /needs 'tools'/, "tool_choice");
  await refused(400, { input: "hi", tools: [{ type: "function", function: { name: "f" } }] }, /'tools\[0\]\.name'/,
                "tools[0].name");
  await refused(400, {
    input: "hi",
    text: { format: { type: "json_schema", name: "x", schema: { type: "object", not: { required: ["a"] } } } },
  }, /not/, "text.format");
  await refused(400, {
    input: "hi",
    tools: [{ type: "function", name: "f",
              parameters: { type: "object", properties: { a: { not: { type: "string" } } } } }],
    tool_choice: "required",
  }, /not/, "tools");
  await refused(400, { input: [{ type: "computer_call_output", call_id: "x" }] }, /computer_call_output/,
                "input[0].type");
  await refused(400, { input: [{ type: "function_call_output", call_id: "call_x", output: "1" }] },
                /answers no function_call/, "input[0].call_id");
  await refused(400, { input: [{ role: "user", content: [{ type: "input_image", image_url: "x" }] }] }, /input_image/);
  await refused(400, { input: "hi", background: true }, /background/, "background");
  await refused(400, { input: 5 }, /'input'/, "input");
  await refused(400, { input: "hi", temperature: 3 }, /temperature/, "temperature");
  await refused(400, { input: "hi", text: { format: { type: "yaml" } } }, /text\.format\.type/);
  await refused(404, { input: "hi", model: "gpt-4o" }, /gpt-4o/, "model");
  let err;
  try {
    await client.responses.retrieve("resp_123");
  } catch (e) {
    err = e;
  }
  assert.equal(err && err.status, 404);
  assert.match(err.error.message, /keeps no state/);
});

await check("still serving after the refusals", async () => {
  const [a, b] = await Promise.all([
    client.responses.create({ model, input: "One more story.", max_output_tokens: 10 }),
    client.responses.create({ model, input: "And another.", max_output_tokens: 10 }),
  ]);
  assert.ok(a.output_text.length > 0 && b.output_text.length > 0);
});

if (failures) {
  console.log(`FAIL: ${failures} check(s) failed`);
  process.exit(1);
}
console.log("PASS: serve_responses");

// Speculative decoding's counts on the Anthropic Messages API, the OpenAI
// Responses API and the Ollama API of qkv serve, through their official
// clients (@anthropic-ai/sdk, openai, ollama), on two servers of the same
// model: one drafting by prompt lookup, one with a draft model. For each API,
// whole and streamed, a greedy request on a copying prompt:
//   - gives the text of the same request with speculation turned off
//     ("speculative": false; Ollama: inside options), and of the other server;
//   - reports drafted > 0 and accepted <= drafted, in the API's own place
//     (Anthropic: usage, streamed in message_delta's usage and not in
//     message_start's; Responses: the response's usage, streamed in the final
//     response event; Ollama: draft_eval_count / draft_accepted_count in the
//     done: true object, no other chunk);
//   - reports nothing with speculation off.
// A request's "speculative.n_max": 1 drafts one token per verify pass (the
// output then holds at least drafted + accepted tokens, where the server's
// own setting drafts more); "speculative.n_max" out of range is a 400 in each
// API's error shape naming the field. Each server's /metrics
// qkv_draft_tokens_total and qkv_draft_accepted_total equal the sums of the
// counts over every response it gave.
//
// Usage: node serve_speculative_apis.mjs NGRAM_URL DRAFT_URL MODEL_ID
// NODE_PATH names the node_modules holding the three clients.
import { createRequire } from "node:module";
import assert from "node:assert/strict";
import { checks } from "./serve_harness.mjs";

const require = createRequire(process.env.NODE_PATH + "/");
const { Anthropic } = require("@anthropic-ai/sdk");
const OpenAI = require("openai");
const { Ollama } = require("ollama");

const [ngramURL, draftURL, MODEL] = process.argv.slice(2);
const N = 40;  // tokens per reply
// A passage said twice and begun a third time: prompt lookup finds what
// follows, and the model copies it.
const PASSAGE = "Sue had a big cat. The cat was soft and white. Sue liked to play with the cat in the sun. ";
const COPY = PASSAGE + PASSAGE + "Sue had a big cat. The cat was";
const OFF = { speculative: false };

const { check, done } = checks();

// Each API's call, whole or streamed: {text, tokens (output), counts: {drafted, accepted} or null}.
function apis(url) {
  const anthropic = new Anthropic({ apiKey: "unused", baseURL: url, maxRetries: 0, timeout: 60000 });
  const openai = new OpenAI({ apiKey: "unused", baseURL: url + "/v1", maxRetries: 0, timeout: 60000 });
  const ollama = new Ollama({ host: url });
  const pair = (u, drafted, accepted) =>
    drafted in u || accepted in u ? { drafted: u[drafted], accepted: u[accepted] } : null;
  return {
    async anthropic(stream, extra) {
      const body = { model: MODEL, max_tokens: N, temperature: 0, messages: [{ role: "user", content: COPY }], ...extra };
      if (!stream) {
        const m = await anthropic.messages.create(body);
        return { text: m.content.map((b) => b.text ?? "").join(""), tokens: m.usage.output_tokens,
                 counts: pair(m.usage, "draft_tokens", "draft_accepted_tokens") };
      }
      let text = "", usage = null;
      for await (const ev of await anthropic.messages.create({ ...body, stream: true })) {
        if (ev.type === "message_start") {
          assert.equal(pair(ev.message.usage, "draft_tokens", "draft_accepted_tokens"), null, "counts in message_start");
        } else if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") {
          text += ev.delta.text;
        } else if (ev.type === "message_delta") {
          usage = ev.usage;
        }
      }
      assert.ok(usage, "no message_delta event");
      return { text, tokens: usage.output_tokens, counts: pair(usage, "draft_tokens", "draft_accepted_tokens") };
    },
    async responses(stream, extra) {
      const body = { model: MODEL, max_output_tokens: N, temperature: 0, input: COPY, ...extra };
      if (!stream) {
        const r = await openai.responses.create(body);
        return { text: r.output_text, tokens: r.usage.output_tokens,
                 counts: pair(r.usage, "draft_tokens", "draft_accepted_tokens") };
      }
      let text = "", final = null;
      for await (const ev of await openai.responses.create({ ...body, stream: true })) {
        if (ev.type === "response.output_text.delta") text += ev.delta;
        if (ev.type === "response.completed" || ev.type === "response.incomplete") final = ev.response;
        else if (ev.response) assert.equal(ev.response.usage, null, `usage in ${ev.type}`);
      }
      assert.ok(final, "no response.completed / response.incomplete event");
      return { text, tokens: final.usage.output_tokens,
               counts: pair(final.usage, "draft_tokens", "draft_accepted_tokens") };
    },
    // /api/generate raw (the prompt as it is) and /api/chat (through the template).
    async ollama_generate(stream, extra) {
      const req = { model: MODEL, prompt: COPY, raw: true, options: { temperature: 0, num_predict: N, ...extra } };
      return ollamaReply(await ollama.generate({ ...req, stream }), stream, (p) => p.response);
    },
    async ollama_chat(stream, extra) {
      const req = { model: MODEL, messages: [{ role: "user", content: COPY }],
                    options: { temperature: 0, num_predict: N, ...extra } };
      return ollamaReply(await ollama.chat({ ...req, stream }), stream, (p) => p.message.content);
    },
  };
}

async function ollamaReply(reply, stream, textOf) {
  const counts = (o) =>
    "draft_eval_count" in o || "draft_accepted_count" in o
      ? { drafted: o.draft_eval_count, accepted: o.draft_accepted_count } : null;
  if (!stream) return { text: textOf(reply), tokens: reply.eval_count, counts: counts(reply) };
  let text = "", last = null;
  for await (const part of reply) {
    text += textOf(part);
    if (part.done) last = part;
    else assert.equal(counts(part), null, "counts in a done: false chunk");
  }
  assert.ok(last, "no done: true object");
  return { text, tokens: last.eval_count, counts: counts(last) };
}

const servers = { ngram: { url: ngramURL, api: apis(ngramURL), drafted: 0, accepted: 0 },
                  draft: { url: draftURL, api: apis(draftURL), drafted: 0, accepted: 0 } };
const texts = {};  // "api stream" -> the ngram server's text, for the draft server's

for (const [name, s] of Object.entries(servers)) {
  const tally = (r) => {
    if (r.counts) {
      s.drafted += r.counts.drafted;
      s.accepted += r.counts.accepted;
    }
    return r;
  };
  for (const api of ["anthropic", "responses", "ollama_generate", "ollama_chat"]) {
    for (const stream of [false, true]) {
      const what = `${name} ${api}${stream ? " streamed" : ""}`;
      await check(`${what}: the text without speculation; drafted and accepted reported`, async () => {
        const on = tally(await s.api[api](stream, {}));
        const off = tally(await s.api[api](stream, OFF));
        assert.equal(on.tokens, N, `${on.tokens} output tokens`);
        assert.ok(on.text.length > 0, "no text");
        assert.equal(on.text, off.text, "speculation changed the greedy text");
        const key = `${api} ${stream}`;
        if (texts[key] === undefined) texts[key] = on.text;
        else assert.equal(on.text, texts[key], "the two drafters' texts differ");
        assert.ok(on.counts, "no draft counts with speculation on");
        assert.ok(Number.isInteger(on.counts.drafted) && on.counts.drafted > 0, `drafted ${on.counts.drafted}`);
        assert.ok(Number.isInteger(on.counts.accepted) && on.counts.accepted >= 0 &&
                  on.counts.accepted <= on.counts.drafted, `accepted ${on.counts.accepted} of ${on.counts.drafted}`);
        assert.equal(off.counts, null, "draft counts with speculation off");
        console.log(`     ${on.counts.accepted} of ${on.counts.drafted} drafted tokens accepted`);
      });
    }
  }

  // The request's own n_max: one drafted token per verify pass, and a pass
  // yields its accepted drafts and one token of the model's, so the output
  // holds at least drafted + accepted tokens. The server's setting (up to 6
  // per pass, the draft model at p-min 0) drafts more than that.
  if (name === "draft") {
    for (const [api, extra] of [["anthropic", { "speculative.n_max": 1 }],
                                ["responses", { "speculative.n_max": 1 }],
                                ["ollama_chat", { "speculative.n_max": 1, "speculative.n_min": 0 }]]) {
      await check(`draft ${api}: "speculative.n_max": 1 drafts one token per pass`, async () => {
        const own = tally(await s.api[api](false, extra));
        const server = tally(await s.api[api](false, {}));
        assert.equal(own.text, server.text, "the text differs");
        assert.ok(own.counts && own.counts.drafted > 0, `counts ${JSON.stringify(own.counts)}`);
        const { drafted, accepted } = own.counts;
        assert.ok(own.tokens >= drafted + accepted, `${accepted} of ${drafted} accepted for ${own.tokens} tokens`);
        assert.ok(server.tokens < server.counts.drafted + server.counts.accepted,
                  `the server's setting: ${server.counts.accepted} of ${server.counts.drafted} for ${server.tokens} tokens`);
      });
    }
  }

  // Out of range: a 400 in each API's own error shape, naming the field.
  await check(`${name}: speculative.n_max 300 is a 400 in each API's error shape`, async () => {
    const post = async (path, body) => {
      const r = await fetch(s.url + path, { method: "POST", headers: { "content-type": "application/json" },
                                            body: JSON.stringify(body) });
      return { status: r.status, body: await r.json() };
    };
    const bad = { "speculative.n_max": 300 };
    const a = await post("/v1/messages", { model: MODEL, max_tokens: 4, messages: [{ role: "user", content: "Hi" }], ...bad });
    assert.equal(a.status, 400, JSON.stringify(a.body));
    assert.equal(a.body.type, "error", JSON.stringify(a.body));
    assert.equal(a.body.error.type, "invalid_request_error", JSON.stringify(a.body));
    assert.match(a.body.error.message, /^speculative\.n_max: /);
    const r = await post("/v1/responses", { model: MODEL, input: "Hi", ...bad });
    assert.equal(r.status, 400, JSON.stringify(r.body));
    assert.equal(r.body.error.param, "speculative.n_max", JSON.stringify(r.body));
    assert.equal(r.body.error.type, "invalid_request_error", JSON.stringify(r.body));
    for (const path of ["/api/generate", "/api/chat"]) {
      const o = await post(path, { model: MODEL, prompt: "Hi", messages: [{ role: "user", content: "Hi" }],
                                   stream: false, options: bad });
      assert.equal(o.status, 400, JSON.stringify(o.body));
      assert.deepEqual(Object.keys(o.body), ["error"], JSON.stringify(o.body));
      assert.match(o.body.error, /'options\.speculative\.n_max' must be/);
    }
    const p = await post("/v1/messages", { model: MODEL, max_tokens: 4, messages: [{ role: "user", content: "Hi" }],
                                           "speculative.p_min": 1.5 });
    assert.equal(p.status, 400, JSON.stringify(p.body));
    assert.match(p.body.error.message, /^speculative\.p_min: /);
    const b = await post("/v1/responses", { model: MODEL, input: "Hi", speculative: "no" });
    assert.equal(b.status, 400, JSON.stringify(b.body));
    assert.equal(b.body.error.param, "speculative", JSON.stringify(b.body));
  });

  await check(`${name}: /metrics totals equal the responses' sums`, async () => {
    const text = await (await fetch(s.url + "/metrics")).text();
    const value = (metric) => {
      const line = text.split("\n").find((l) => l.startsWith(metric + " "));
      assert.ok(line, `no ${metric} in /metrics`);
      return Number(line.split(" ")[1]);
    };
    assert.equal(value("qkv_draft_tokens_total"), s.drafted, "qkv_draft_tokens_total");
    assert.equal(value("qkv_draft_accepted_total"), s.accepted, "qkv_draft_accepted_total");
    assert.ok(s.accepted > 0, "no drafted token was ever accepted: the run did not see speculation at work");
    console.log(`     ${s.accepted} of ${s.drafted} drafted tokens accepted over the run`);
  });
}

done();

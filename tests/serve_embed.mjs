// qkv serve's embedding and rerank endpoints against llama.cpp b4748's
// numbers (/work/shared/reference/arch-*-a.embed.json, embed-README.md),
// through the official `openai` client (embeddings.create: its default
// base64 path, which it decodes, and "float"), the official `ollama` client
// (embed), and plain HTTP for the raw shapes and the errors.
//
// Tolerances (embed-README.md "What a runtime must know"): llama.cpp's bert
// GELU rounds through an fp16 table, so a runtime moves pooled raw values by
// up to ~1e-3 and L2-normalized ones by up to 2e-4 (llama.cpp disagrees with
// itself by 2.3e-5 raw / 2.5e-6 L2 between batched and single runs, and with
// float64 numpy by 1.2e-4 / 1.2e-5); per-token raw values 2e-3; rank scores
// 1e-3. The qwen2 L2 references use an F32 KV cache; an F16 cache moves L2
// values by up to 8.7e-5 (the README's table), inside 2e-4. The same server
// answering the same tokens packed with other requests differs only by the
// order of float sums: 1e-5.
//
// Usage: node serve_embed.mjs PORT_BERT PORT_RANK PORT_QWEN2 PORT_NOMIC REFERENCE_DIR
// (servers as serve_embed.sh starts them; NODE_PATH holds openai and ollama).
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import assert from "node:assert/strict";
import { request } from "./serve_harness.mjs";

const require = createRequire(process.env.NODE_PATH + "/");
const OpenAI = require("openai").default;
const { Ollama } = require("ollama");

const [bertPort, rankPort, qwenPort, nomicPort, refDir] = process.argv.slice(2);
const ref = name => JSON.parse(readFileSync(`${refDir}/${name}.embed.json`, "utf8"));
const bertRef = ref("arch-bert-a"), rankRef = ref("arch-bert-rank-a"), qwenRef = ref("arch-qwen2-a");
const nomicRef = ref("arch-nomic-bert-a");
const openai = new OpenAI({ baseURL: `http://127.0.0.1:${bertPort}/v1`, apiKey: "none", maxRetries: 0 });
const ollama = new Ollama({ host: `http://127.0.0.1:${bertPort}` });
const texts = bertRef.texts.map(t => t.text);

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

function maxDiff(a, b) {
  assert.equal(a.length, b.length, `lengths ${a.length} and ${b.length}`);
  let m = 0;
  for (let i = 0; i < a.length; i++) {
    assert.ok(Number.isFinite(a[i]), `value ${i} is ${a[i]}`);
    m = Math.max(m, Math.abs(a[i] - b[i]));
  }
  return m;
}
const measured = {};
function near(got, want, tol, label) {
  const d = maxDiff(got, want);
  measured[label] = Math.max(measured[label] || 0, d);
  assert.ok(d <= tol, `${label}: max |difference| ${d} > ${tol}`);
}
const norm = v => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const post = (port, path, body) => request(port, "POST", path, body, { timeoutMs: 60000 });
const json = r => JSON.parse(r.body);

// An OpenAI error object with this status (and the message matching).
function openaiError(r, status, pattern) {
  assert.equal(r.status, status, r.body);
  const e = json(r).error;
  assert.equal(typeof e.message, "string");
  assert.equal(e.type, status >= 500 ? "server_error" : "invalid_request_error");
  if (pattern) assert.match(e.message, pattern);
}

// ---- bert (MEAN) through the openai client ----------------------------------

await check("openai client, default (base64) encoding: the 8 texts equal llama.cpp's MEAN L2 vectors", async () => {
  const r = await openai.embeddings.create({ model: "bert", input: texts });
  assert.equal(r.object, "list");
  assert.equal(r.model, "bert");
  assert.equal(r.data.length, texts.length);
  r.data.forEach((d, i) => {
    assert.equal(d.object, "embedding");
    assert.equal(d.index, i);
    near(d.embedding, bertRef.pooled.mean.l2[i], 2e-4, "bert MEAN L2");
  });
  const tokens = bertRef.texts.reduce((s, t) => s + t.n_tokens, 0);
  assert.deepEqual(r.usage, { prompt_tokens: tokens, total_tokens: tokens });
});

await check("openai client, encoding_format float: the same vectors", async () => {
  const r = await openai.embeddings.create({ model: "bert", input: texts, encoding_format: "float" });
  r.data.forEach((d, i) => near(d.embedding, bertRef.pooled.mean.l2[i], 2e-4, "bert MEAN L2"));
});

await check("base64 is the little-endian float32 bytes of the float answer", async () => {
  const f = json(await post(bertPort, "/v1/embeddings", { input: "Hello world!", encoding_format: "float" }));
  const b = json(await post(bertPort, "/v1/embeddings", { input: "Hello world!", encoding_format: "base64" }));
  const buf = Buffer.from(b.data[0].embedding, "base64");
  assert.equal(buf.length, 128 * 4);
  const decoded = Array.from({ length: 128 }, (_, i) => buf.readFloatLE(4 * i));
  // float -> shortest decimal -> float is exact
  assert.deepEqual(decoded, f.data[0].embedding.map(x => Math.fround(x)));
});

await check("token ids equal the text (one list, and a list of lists)", async () => {
  const byText = await openai.embeddings.create({ model: "bert", input: texts, encoding_format: "float" });
  const byIds = await openai.embeddings.create({ model: "bert", input: bertRef.texts.map(t => t.ids), encoding_format: "float" });
  byIds.data.forEach((d, i) => near(d.embedding, byText.data[i].embedding, 1e-5, "ids vs text"));
  const one = await openai.embeddings.create({ model: "bert", input: bertRef.texts[2].ids, encoding_format: "float" });
  assert.equal(one.data.length, 1);
  near(one.data[0].embedding, bertRef.pooled.mean.l2[2], 2e-4, "bert MEAN L2");
});

await check("dimensions 64: a unit vector equal to the normalized first 64 raw values", async () => {
  const r = await openai.embeddings.create({ model: "bert", input: texts, dimensions: 64 });
  r.data.forEach((d, i) => {
    assert.equal(d.embedding.length, 64);
    assert.ok(Math.abs(norm(d.embedding) - 1) < 1e-5, String(norm(d.embedding)));
    const raw = bertRef.pooled.mean.raw[i].slice(0, 64);
    const n = norm(raw);
    near(d.embedding, raw.map(x => x / n), 2e-4, "bert MEAN dimensions 64");
  });
});

await check("normalize false: the raw MEAN vectors; pooling cls; pooling none per token", async () => {
  const raw = json(await post(bertPort, "/v1/embeddings", { input: texts, normalize: false }));
  raw.data.forEach((d, i) => near(d.embedding, bertRef.pooled.mean.raw[i], 1e-3, "bert MEAN raw"));
  const cls = json(await post(bertPort, "/v1/embeddings", { input: texts, pooling: "cls" }));
  cls.data.forEach((d, i) => near(d.embedding, bertRef.pooled.cls.l2[i], 2e-4, "bert CLS L2"));
  const perTexts = bertRef.per_token.texts.map(name => bertRef.texts.find(t => t.name === name).text);
  const per = json(await post(bertPort, "/v1/embeddings", { input: perTexts, pooling: "none", normalize: false }));
  per.data.forEach((d, k) => {
    const want = bertRef.per_token.embeddings[k];
    assert.equal(d.embedding.length, want.length);
    d.embedding.forEach((v, t) => near(v, want[t], 2e-3, "bert per-token raw"));
  });
});

await check("ollama client embed: the MEAN L2 vectors; legacy /api/embeddings: the raw one", async () => {
  const r = await ollama.embed({ model: "bert", input: texts });
  assert.equal(r.model, "bert");
  assert.equal(r.embeddings.length, texts.length);
  r.embeddings.forEach((e, i) => near(e, bertRef.pooled.mean.l2[i], 2e-4, "bert MEAN L2"));
  assert.equal(r.prompt_eval_count, bertRef.texts.reduce((s, t) => s + t.n_tokens, 0));
  assert.ok(Number.isInteger(r.total_duration) && r.total_duration > 0);
  const one = await ollama.embed({ model: "bert:latest", input: texts[1], truncate: false, keep_alive: "5m", options: { num_ctx: 512 } });
  near(one.embeddings[0], bertRef.pooled.mean.l2[1], 2e-4, "bert MEAN L2");
  const legacy = await ollama.embeddings({ model: "bert", prompt: texts[3] });
  near(legacy.embedding, bertRef.pooled.mean.raw[3], 1e-3, "bert MEAN raw");
  const load = await ollama.embed({ model: "bert", input: "" });
  assert.deepEqual(load.embeddings, []);
  const d = await ollama.embed({ model: "bert", input: texts[0], dimensions: 64 });
  assert.equal(d.embeddings[0].length, 64);
});

await check("16 concurrent requests give the vectors of sequential ones", async () => {
  const bodies = Array.from({ length: 16 }, (_, k) => ({ input: [texts[k % 8], texts[(k + 3) % 8]], encoding_format: "float" }));
  const sequential = [];
  for (const b of bodies) sequential.push(json(await post(bertPort, "/v1/embeddings", b)));
  const calls0 = await metricValue(bertPort, "qkv_embedding_calls_total");
  const requests0 = await metricValue(bertPort, "qkv_embedding_requests_total");
  const together = await Promise.all(bodies.map(b => post(bertPort, "/v1/embeddings", b)));
  together.forEach((r, k) => {
    assert.equal(r.status, 200, r.body);
    json(r).data.forEach((d, i) => near(d.embedding, sequential[k].data[i].embedding, 1e-5, "concurrent vs sequential"));
  });
  const calls = (await metricValue(bertPort, "qkv_embedding_calls_total")) - calls0;
  const requests = (await metricValue(bertPort, "qkv_embedding_requests_total")) - requests0;
  assert.equal(requests, 16);
  assert.ok(calls >= 1 && calls <= 16, String(calls));
  console.log(`  16 concurrent requests ran in ${calls} embedding passes`);
});

async function metricValue(port, name) {
  const r = await request(port, "GET", "/metrics", undefined, { timeoutMs: 10000 });
  const m = r.body.match(new RegExp("^" + name + " ([0-9.e+-]+)$", "m"));
  assert.ok(m, `no ${name} in /metrics`);
  return Number(m[1]);
}

await check("errors: empty input, bad types, ids, dimensions, format, model, over-context", async () => {
  openaiError(await post(bertPort, "/v1/embeddings", { input: "" }), 400, /empty string/);
  openaiError(await post(bertPort, "/v1/embeddings", { input: [] }), 400, /empty list/);
  openaiError(await post(bertPort, "/v1/embeddings", { input: ["a", ""] }), 400, /input\[1\]/);
  openaiError(await post(bertPort, "/v1/embeddings", {}), 400, /'input' is required/);
  openaiError(await post(bertPort, "/v1/embeddings", { input: 7 }), 400, /must be a string/);
  openaiError(await post(bertPort, "/v1/embeddings", { input: { text: "a" } }), 400, /must be a string/);
  openaiError(await post(bertPort, "/v1/embeddings", { input: ["a", 7] }), 400, /input\[1\]/);
  openaiError(await post(bertPort, "/v1/embeddings", { input: [101, 1.5, 102] }), 400, /token id/);
  openaiError(await post(bertPort, "/v1/embeddings", { input: [[101, 30522, 102]] }), 400, /30522/);
  openaiError(await post(bertPort, "/v1/embeddings", { input: [[]] }), 400, /empty list/);
  openaiError(await post(bertPort, "/v1/embeddings", { input: "a", dimensions: 0 }), 400, /between 1 and 128/);
  openaiError(await post(bertPort, "/v1/embeddings", { input: "a", dimensions: 129 }), 400, /between 1 and 128/);
  openaiError(await post(bertPort, "/v1/embeddings", { input: "a", encoding_format: "int8" }), 400, /encoding_format/);
  openaiError(await post(bertPort, "/v1/embeddings", { input: "a", pooling: "max" }), 400, /pooling/);
  openaiError(await post(bertPort, "/v1/embeddings", { input: "a", pooling: "none", encoding_format: "base64" }), 400, /per token/);
  openaiError(await post(bertPort, "/v1/embeddings", { input: Array(2049).fill("a") }), 400, /at most 2048/);
  openaiError(await post(bertPort, "/v1/embeddings", "{not json"), 400);
  const other = await post(bertPort, "/v1/embeddings", { input: "a", model: "text-embedding-3-small" });
  assert.equal(other.status, 404, other.body);
  const long = "word ".repeat(600);
  openaiError(await post(bertPort, "/v1/embeddings", { input: ["a", long] }), 400, /input\[1\].*602 tokens.*512/);
  const cut = json(await post(bertPort, "/v1/embeddings", { input: long, truncate: true }));
  assert.equal(cut.usage.prompt_tokens, 512);
  const ol = await post(bertPort, "/api/embed", { model: "bert", input: long, truncate: false });
  assert.equal(ol.status, 400, ol.body);
  assert.match(json(ol).error, /512/);
  assert.equal((await post(bertPort, "/api/embed", { model: "bert", input: long })).status, 200);
  const nomodel = await post(bertPort, "/api/embed", { input: "a" });
  assert.equal(nomodel.status, 400);
  assert.equal(typeof json(nomodel).error, "string");
});

await check("an encoder refuses generation in each API's shape; rerank on a MEAN model is a 400", async () => {
  openaiError(await post(bertPort, "/v1/chat/completions", { messages: [{ role: "user", content: "hi" }] }), 400,
    /bert is an embedding model: it serves \/v1\/embeddings/);
  openaiError(await post(bertPort, "/v1/completions", { prompt: "hi" }), 400, /embedding model/);
  openaiError(await post(bertPort, "/v1/responses", { input: "hi" }), 400, /embedding model/);
  const a = await post(bertPort, "/v1/messages", { model: "bert", max_tokens: 4, messages: [{ role: "user", content: "hi" }] });
  assert.equal(a.status, 400);
  assert.equal(json(a).type, "error");
  assert.match(json(a).error.message, /embedding model/);
  for (const path of ["/api/chat", "/api/generate"]) {
    const o = await post(bertPort, path, { model: "bert", prompt: "hi", messages: [] });
    assert.equal(o.status, 400, o.body);
    assert.match(json(o).error, /embedding model/);
  }
  openaiError(await post(bertPort, "/v1/rerank", { query: "q", documents: ["d"] }), 400, /not a reranking model/);
});

await check("the listing, health and metrics of an embedding server", async () => {
  const models = await openai.models.list();
  assert.equal(models.data[0].id, "bert");
  const tags = json(await request(bertPort, "GET", "/api/tags"));
  assert.equal(tags.models[0].name, "bert");
  const show = json(await post(bertPort, "/api/show", { model: "bert" }));
  assert.deepEqual(show.capabilities, ["embedding"]);
  assert.equal(json(await request(bertPort, "GET", "/health")).status, "ok");
  assert.ok((await metricValue(bertPort, "qkv_embedding_inputs_total")) > 0);
  assert.ok((await metricValue(bertPort, "qkv_embedding_tokens_total")) > 0);
});

// ---- rerank ------------------------------------------------------------------

await check("rerank: llama.cpp's scores, sorted, top_n, return_documents", async () => {
  const pairs = rankRef.pairs;
  const docs = [pairs[0].document, pairs[1].document];
  assert.equal(pairs[0].query, pairs[1].query);
  const r = json(await post(rankPort, "/v1/rerank", { model: "rank", query: pairs[0].query, documents: docs }));
  assert.equal(r.object, "list");
  assert.equal(r.model, "rank");
  assert.equal(r.results.length, 2);
  const want = [0, 1].map(i => ({ index: i, score: rankRef.rank_scores[i] })).sort((x, y) => y.score - x.score);
  r.results.forEach((x, k) => {
    assert.equal(x.index, want[k].index);
    near([x.relevance_score], [want[k].score], 1e-3, "rank score");
    assert.equal(x.document, undefined);
  });
  assert.equal(r.usage.prompt_tokens, pairs[0].n_tokens + pairs[1].n_tokens);
  const top = json(await post(rankPort, "/rerank", { query: pairs[0].query, documents: docs, top_n: 1, return_documents: true }));
  assert.equal(top.results.length, 1);
  assert.equal(top.results[0].index, want[0].index);
  assert.deepEqual(top.results[0].document, { text: docs[want[0].index] });
  const third = json(await post(rankPort, "/v1/reranking", { query: pairs[2].query, documents: [{ text: pairs[2].document }] }));
  near([third.results[0].relevance_score], [rankRef.rank_scores[2]], 1e-3, "rank score");
  openaiError(await post(rankPort, "/v1/rerank", { query: "q", documents: [] }), 400, /non-empty/);
  openaiError(await post(rankPort, "/v1/rerank", { documents: ["d"] }), 400, /'query' is required/);
  openaiError(await post(rankPort, "/v1/rerank", { query: "q", documents: ["d", 3] }), 400, /documents\[1\]/);
  openaiError(await post(rankPort, "/v1/rerank", { query: "q", documents: ["d"], top_n: 0 }), 400, /top_n/);
});

await check("a rank model's /v1/embeddings gives the score (pooling rank) or CLS vectors", async () => {
  const ids = rankRef.pairs.map(p => p.ids);
  const s = json(await post(rankPort, "/v1/embeddings", { input: ids }));
  s.data.forEach((d, i) => near(d.embedding, [rankRef.rank_scores[i]], 1e-3, "rank score"));
  const cls = json(await post(rankPort, "/v1/embeddings", { input: ids, pooling: "cls" }));
  cls.data.forEach((d, i) => near(d.embedding, rankRef.cls_embedding.l2[i], 2e-4, "rank model CLS L2"));
});

// ---- nomic-bert ---------------------------------------------------------------

await check("nomic-bert: the MEAN L2 vectors", async () => {
  // No GELU table in nomic-bert: llama.cpp agrees with float64 numpy to 5e-7 raw.
  const r = json(await post(nomicPort, "/v1/embeddings", { input: nomicRef.texts.map(t => t.text) }));
  r.data.forEach((d, i) => near(d.embedding, nomicRef.pooled.mean.l2[i], 1e-5, "nomic MEAN L2"));
});

// ---- a decoder: chat and embeddings side by side -----------------------------

await check("qwen2 (a decoder): LAST-pooled /v1/embeddings beside chat", async () => {
  const usable = qwenRef.texts.map((t, i) => ({ ...t, i })).filter(t => t.n_tokens <= 512);  // `long` has 608
  const r = json(await post(qwenPort, "/v1/embeddings", { input: usable.map(t => t.text) }));
  usable.forEach((t, k) => near(r.data[k].embedding, qwenRef.pooled.last.l2[t.i], 2e-4, "qwen2 LAST L2"));
  assert.equal(r.usage.prompt_tokens, usable.reduce((s, t) => s + t.n_tokens, 0));
  const ids = json(await post(qwenPort, "/v1/embeddings", { input: usable.map(t => t.ids) }));
  ids.data.forEach((d, k) => near(d.embedding, r.data[k].embedding, 1e-5, "ids vs text"));
  const mean = json(await post(qwenPort, "/v1/embeddings", { input: usable.map(t => t.text), pooling: "mean", normalize: false }));
  // MEAN raw: an F16 KV cache moves it by up to 5.9e-4 from float64 (README).
  usable.forEach((t, k) => near(mean.data[k].embedding, qwenRef.pooled.mean.raw[t.i], 1e-3, "qwen2 MEAN raw"));
  const chat = await post(qwenPort, "/v1/completions", { prompt: "Once upon a time", max_tokens: 4 });
  assert.equal(chat.status, 200, chat.body);
  assert.equal(json(chat).choices.length, 1);
  openaiError(await post(qwenPort, "/v1/rerank", { query: "q", documents: ["d"] }), 400, /not a reranking model/);
});

await check("qwen2: embeddings of many inputs while a completion runs take turns with it, results unchanged", async () => {
  // 48 inputs of ~20 tokens pass the worker's 512-token budget: several
  // embedding passes, each taking its turn with the decode steps.
  const texts = Array.from({ length: 48 }, (_, i) => `${i}: ${qwenRef.texts[i % qwenRef.texts.length].text}`.slice(0, 120));
  const body = { prompt: "Once upon a time", max_tokens: 24, temperature: 0 };
  const aloneChat = json(await post(qwenPort, "/v1/completions", body));
  const aloneEmbed = json(await post(qwenPort, "/v1/embeddings", { input: texts }));
  const [chat, embed] = await Promise.all([post(qwenPort, "/v1/completions", body),
    post(qwenPort, "/v1/embeddings", { input: texts })]);
  assert.equal(json(chat).choices[0].text, aloneChat.choices[0].text, "the completion beside embeddings");
  assert.equal(json(embed).data.length, texts.length);
  json(embed).data.forEach((d, k) => near(d.embedding, aloneEmbed.data[k].embedding, 1e-6, "embeddings beside a completion"));
  const single = json(await post(qwenPort, "/v1/embeddings", { input: texts[47] }));
  near(aloneEmbed.data[47].embedding, single.data[0].embedding, 1e-5, "the last of many inputs vs alone");
});

console.log("max |difference| per check:", JSON.stringify(measured));
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);

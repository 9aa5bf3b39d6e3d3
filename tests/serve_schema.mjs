// Schema-constrained output of qkv serve, checked by an independent JSON
// Schema validator (ajv) rather than by the server's own grammar code: 300
// generated schemas (objects, nesting, arrays, prefixItems, enum, const,
// anyOf, oneOf, $ref/$defs with recursion, type lists, formats, patterns,
// bounded integers), each sampled with two seeds through chat
// `response_format: json_schema` and through /v1/completions `json_schema`,
// some streamed; then `json_object`, GBNF `grammar`, the 400s for schema
// keywords and grammars the server cannot honour (with the server still
// serving after them), and the official client's `beta.chat.completions.parse`
// with a zod schema.
//
// The model is tiny and its text gibberish, so every structure in the output
// comes from the grammar: an output that fails ajv is a bug in the schema to
// grammar compilation or in constrained sampling. The generated schemas bound
// string lengths, array sizes and depth so random text ends well within
// max_tokens; a "length" finish is counted apart from invalid output so the
// two are told apart.
//
// Usage: node serve_schema.mjs BASE_URL [SCHEMA_INDEX...]  (indices: only
//        those generated schemas, nothing else)
//        node serve_schema.mjs --check-schemas [SCHEMA_INDEX...]  (no server:
//        every generated schema must compile with ajv; prints those listed)
// NODE_PATH names the node_modules holding ajv, ajv-formats, openai and zod.
import { createRequire } from "node:module";
import assert from "node:assert/strict";

import { makeSchema, rng, size } from "./serve_schema_gen.mjs";

const require = createRequire(process.env.NODE_PATH + "/");
// prefixItems and $defs are JSON Schema 2020-12: the 2020 build of Ajv reads
// them (the default draft-07 build would ignore prefixItems under strict:false).
const Ajv2020 = require("ajv/dist/2020").default;
const addFormats = require("ajv-formats").default;

const SCHEMAS = 300;
const SEEDS = 2;
const CONCURRENCY = 4;  // the server's --slots
const MAX_TOKENS = 1500;
const SHOW_FAILURES = Number(process.env.SHOW_FAILURES || 5);  // failures of each kind printed

function newAjv() {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  return ajv;
}

if (process.argv[2] === "--check-schemas") {
  const ajv = newAjv();
  const print = process.argv.slice(3).map(Number);
  const counts = {};
  let failed = 0, biggest = 0;
  for (let i = 0; i < SCHEMAS; i++) {
    const { category, schema } = makeSchema(i);
    counts[category] = (counts[category] || 0) + 1;
    biggest = Math.max(biggest, size(schema, schema.$defs || {}));
    if (print.includes(i)) console.log(`schema ${i} (${category}): ${JSON.stringify(schema)}`);
    try {
      ajv.compile(schema);
    } catch (e) {
      failed++;
      console.log(`schema ${i} (${category}) does not compile: ${e.message}\n${JSON.stringify(schema)}`);
    }
  }
  console.log(`${SCHEMAS} schemas, ${failed} do not compile; by category: ${JSON.stringify(counts)}; ` +
              `largest size bound ${biggest}`);
  process.exit(failed ? 1 : 0);
}

// ---------------------------------------------------------------------------
// Requests.

const OpenAI = require("openai");
const { zodResponseFormat } = require("openai/helpers/zod");
const { z } = require("zod");

const baseURL = process.argv[2];
const only = process.argv.slice(3).map(Number);
const model = "stories260K.gguf";
const messages = [{ role: "user", content: "Tell me about a cat, as JSON." }];
const prompt = "Once upon a time";

// POST to baseURL + path. Streams are read to the end: `text` joins the
// content of every chunk (chat delta.content or completion text).
async function post(path, body) {
  const res = await fetch(baseURL + path, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
    signal: AbortSignal.timeout(120000),
  });
  const out = { status: res.status, text: "", finish: null };
  if (res.status !== 200 || !body.stream) {
    const raw = await res.text();
    try { out.body = JSON.parse(raw); } catch { out.body = raw; }
    const c = out.body?.choices?.[0];
    if (c) {
      out.text = path === "/chat/completions" ? c.message?.content ?? "" : c.text;
      out.finish = c.finish_reason;
    }
    return out;
  }
  const decoder = new TextDecoder();
  let buf = "", done = false;
  const event = data => {
    if (data === "[DONE]") { done = true; return; }
    const j = JSON.parse(data);
    if (j.error) throw new Error("error event in the stream: " + data);
    const c = j.choices?.[0];
    if (!c) return;
    out.text += (path === "/chat/completions" ? c.delta?.content : c.text) ?? "";
    if (c.finish_reason) out.finish = c.finish_reason;
  };
  for await (const chunk of res.body) {
    buf += decoder.decode(chunk, { stream: true }).replace(/\r\n/g, "\n");
    let end;
    while ((end = buf.indexOf("\n\n")) >= 0) {
      for (const line of buf.slice(0, end).split("\n")) if (line.startsWith("data:")) event(line.slice(5).trim());
      buf = buf.slice(end + 2);
    }
  }
  if (!done) throw new Error("the stream ended without [DONE]");
  return out;
}

function chatBody(schema, name, extra) {
  return { model, messages, max_tokens: MAX_TOKENS,
           response_format: { type: "json_schema", json_schema: { name, schema, strict: true } }, ...extra };
}

function completionBody(schema, extra) {
  return { model, prompt, max_tokens: MAX_TOKENS, json_schema: schema, ...extra };
}

// A key seen twice in one object: JSON.parse keeps the last silently, so a
// grammar that lets a key repeat would pass ajv unnoticed.
function duplicateKey(text) {
  let i = 0;
  const ws = () => { while (/\s/.test(text[i])) i++; };
  const str = () => {
    const start = i++;
    while (text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
    i++;
    return JSON.parse(text.slice(start, i));
  };
  const value = () => {
    ws();
    if (text[i] === "{") {
      i++; ws();
      const seen = new Set();
      if (text[i] === "}") { i++; return null; }
      for (;;) {
        ws();
        const k = str();
        if (seen.has(k)) return k;
        seen.add(k);
        ws(); i++;  // ':'
        const d = value();
        if (d !== null) return d;
        ws();
        if (text[i++] === "}") return null;
      }
    }
    if (text[i] === "[") {
      i++; ws();
      if (text[i] === "]") { i++; return null; }
      for (;;) {
        const d = value();
        if (d !== null) return d;
        ws();
        if (text[i++] === "]") return null;
      }
    }
    if (text[i] === '"') { str(); return null; }
    while (i < text.length && !/[\s,\]}]/.test(text[i])) i++;
    return null;
  };
  return value();
}

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

function show(x) {
  return typeof x === "string" ? x : JSON.stringify(x);
}

async function expectServing() {
  const r = await post("/chat/completions", { model, messages, max_tokens: 4 });
  assert.equal(r.status, 200, "a plain request after the error: " + show(r.body));
}

if (!only.length) {
  // Keywords outside what the compiler enforces must be refused, not ignored:
  // an ignored keyword would let invalid output through as "valid".
  const unsupported = [
    [["not"], { type: "object", properties: { a: { not: { type: "string" } } } }],
    [["if", "then"], { type: "object", properties: { a: { type: "integer" } },
                       if: { properties: { a: { const: 1 } } }, then: { required: ["a"] } }],
    [["patternProperties"], { type: "object", patternProperties: { "^x": { type: "integer" } } }],
    [["multipleOf"], { type: "object", properties: { n: { type: "integer", multipleOf: 3 } } }],
    [["uniqueItems"], { type: "array", items: { type: "integer" }, uniqueItems: true }],
    [["pattern"], { type: "object", properties: { s: { type: "string", pattern: "^(a)\\1$" } } }],
  ];
  for (const [names, schema] of unsupported) {
    for (const [path, body] of [["/chat/completions", chatBody(schema, "bad")],
                                ["/completions", completionBody(schema, { stream: names[0] === "not" })]]) {
      await check(`${path} refuses '${names[0]}'`, async () => {
        const r = await post(path, body);
        assert.equal(r.status, 400, show(r.body));
        assert.equal(r.body.error.type, "invalid_request_error");
        const m = r.body.error.message;
        assert.ok(names.some(n => [`'${n}'`, `"${n}"`, `\`${n}\``].some(q => m.includes(q))),
                  `the message names none of ${names}: ${m}`);
        await expectServing();
      });
    }
  }

  // A GBNF syntax error is told by its place in the grammar text.
  const badGrammars = [
    ['root ::= ("a" | "b"', /line 1\b/],
    ["root ::= foo", /line 1\b/],
    ['root ::= [a-', /line 1\b/],
    ['root ::= item\nitem ::= "x"\nother ::= ( "y"', /line 3\b/],
  ];
  for (const [grammar, line] of badGrammars) {
    await check(`bad grammar ${JSON.stringify(grammar)} is a 400 with line and column`, async () => {
      const r = await post("/completions", { model, prompt, max_tokens: 8, grammar });
      assert.equal(r.status, 400, show(r.body));
      const m = r.body.error.message;
      assert.match(m, /line \d+/);
      assert.match(m, /column \d+/);
      assert.match(m, line);
      await expectServing();
    });
  }

  // GBNF grammars, each with a regular expression for the language it
  // generates, tried with a few seeds.
  const grammars = [
    ['root ::= "yes" | "no"', /^(yes|no)$/],
    ["# a name and a number\nroot ::= name \": \" num \"\\n\"\nname ::= [A-Z] [a-z]{0,7}\nnum ::= \"-\"? [1-9] [0-9]{0,3}",
     /^[A-Z][a-z]{0,7}: -?[1-9][0-9]{0,3}\n$/],
    ['root ::= "[" item ("," item){0,5} "]"\nitem ::= [0-9]', /^\[[0-9](,[0-9]){0,5}\]$/],
    // An unbounded repetition ended by a character the model writes often.
    ['root ::= [a-z ]* "."', /^[a-z ]*\.$/],
    ['root ::= "(" root ")" | [a-c]', /^(\(*)[a-c](\)*)$/],
    ['root ::= [^\\n"]{1,10} "."', /^[^\n"]{1,10}\.$/u],
    ["root ::= word (\" \" word){1,3}\nword ::= [a-z]{1,5}", /^[a-z]{1,5}( [a-z]{1,5}){1,3}$/],
  ];
  for (const [grammar, re] of grammars) {
    await check(`grammar ${JSON.stringify(grammar)}`, async () => {
      for (const seed of [1, 2, 3]) {
        const stream = seed === 3;
        const r = await post("/completions", { model, prompt, max_tokens: 200, temperature: 1, seed, grammar, stream });
        assert.equal(r.status, 200, show(r.body));
        assert.equal(r.finish, "stop", `seed ${seed}: finish ${r.finish}, text ${JSON.stringify(r.text)}`);
        assert.match(r.text, re, `seed ${seed}`);
        if (re.source.startsWith("^(\\(*)")) {  // balanced parentheses
          const m = re.exec(r.text);
          assert.equal(m[1].length, m[2].length, r.text);
        }
      }
    });
  }

  await check("json_object gives a JSON object", async () => {
    // Any JSON object has no length bound, and this model, never having seen
    // '}' or ']', would fill max_tokens with members: logit_bias on those
    // tokens (and on '"', which ends keys and strings) lets the text close.
    const bias = {};
    for (const [ch, b] of [["}", 15], ["]", 15], ['"', 5]]) {
      const res = await fetch(baseURL.replace(/\/v1$/, "") + "/tokenize", { method: "POST", body: JSON.stringify({ content: ch }) });
      bias[(await res.json()).tokens.at(-1)] = b;
    }
    for (const seed of [1, 2, 3, 4, 5, 6]) {
      const r = await post("/chat/completions", { model, messages, max_tokens: MAX_TOKENS, seed, temperature: 0.8,
                                                  logit_bias: bias, stream: seed > 4,
                                                  response_format: { type: "json_object" } });
      assert.equal(r.status, 200, show(r.body));
      assert.equal(r.finish, "stop", `seed ${seed}: finish ${r.finish}, content ${r.text.slice(0, 300)}`);
      const v = JSON.parse(r.text);
      assert.ok(v !== null && typeof v === "object" && !Array.isArray(v), r.text);
    }
  });

  await check("openai client: beta.chat.completions.parse with a zod schema", async () => {
    const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, timeout: 60000 });
    const Pet = z.object({
      name: z.string().max(10),
      age: z.number().int().min(0).max(30),
      kind: z.enum(["cat", "dog", "bird"]),
      tags: z.array(z.string().max(6)).max(3),
      owner: z.object({ city: z.string().max(8) }).nullable(),
      weight: z.number(),
    });
    for (const seed of [1, 2]) {
      const r = await client.beta.chat.completions.parse({
        model, messages, max_tokens: MAX_TOKENS, temperature: 0.9, seed, response_format: zodResponseFormat(Pet, "pet") });
      const m = r.choices[0].message;
      assert.equal(r.choices[0].finish_reason, "stop");
      assert.ok(Pet.safeParse(m.parsed).success, m.content);
      assert.deepEqual(m.parsed, JSON.parse(m.content));
    }
  });
}

// The generated schemas: 2 requests each, chat and completions alternating
// by seed, some streamed, temperatures spread over 0.5..1.3.
const ajv = newAjv();
const jobs = [];
for (let i = 0; i < SCHEMAS; i++) {
  if (only.length && !only.includes(i)) continue;
  const { category, schema } = makeSchema(i);
  const validate = ajv.compile(schema);
  for (let k = 0; k < SEEDS; k++) {
    const r = rng((i * SEEDS + k + 1) * 0x85ebca6b);
    const seed = i * SEEDS + k + 1;
    const extra = { seed, temperature: Math.round((0.5 + 0.8 * r.next()) * 100) / 100, stream: r.chance(0.3) };
    const chat = k % 2 === 0;
    jobs.push({ i, category, schema, validate, path: chat ? "/chat/completions" : "/completions",
                body: chat ? chatBody(schema, `schema_${i}`, extra) : completionBody(schema, extra) });
  }
}

const results = { valid: 0, invalid: [], truncated: [], failed: [] };
const started = Date.now();
let next = 0;
async function worker() {
  while (next < jobs.length) {
    const job = jobs[next++];
    let r;
    try {
      r = await post(job.path, job.body);
    } catch (e) {
      results.failed.push({ job, why: String(e && e.stack ? e.stack : e) });
      continue;
    }
    if (r.status !== 200) {
      results.failed.push({ job, why: `HTTP ${r.status}: ${show(r.body)}` });
    } else if (r.finish === "length") {
      results.truncated.push({ job, output: r.text });
    } else if (r.finish !== "stop") {
      results.failed.push({ job, why: `finish_reason ${r.finish}`, output: r.text });
    } else {
      let why = null;
      try {
        const v = JSON.parse(r.text);
        const dup = duplicateKey(r.text);
        if (dup !== null) why = `key ${JSON.stringify(dup)} appears twice`;
        else if (!job.validate(v)) why = "ajv: " + JSON.stringify(job.validate.errors);
      } catch (e) {
        why = "not JSON: " + e.message;
      }
      if (why) results.invalid.push({ job, why, output: r.text });
      else results.valid++;
    }
  }
}
await Promise.all(Array.from({ length: CONCURRENCY }, worker));
const seconds = (Date.now() - started) / 1000;

function report(title, list, limit, outputChars) {
  for (const f of list.slice(0, limit)) {
    console.log(`${title}: schema ${f.job.i} (${f.job.category}) POST ${f.job.path} seed ${f.job.body.seed} ` +
                `temperature ${f.job.body.temperature}${f.job.body.stream ? " streamed" : ""}`);
    console.log("  schema:", JSON.stringify(f.job.schema));
    if (f.why) console.log("  why:", f.why);
    if (f.output !== undefined) {
      if (f.output.length <= outputChars) {
        console.log("  output:", JSON.stringify(f.output));
      } else {  // where it went astray and where it was cut
        console.log(`  output (${f.output.length} chars): ${JSON.stringify(f.output.slice(0, outputChars / 2))} ... ` +
                    JSON.stringify(f.output.slice(-outputChars / 2)));
      }
    }
  }
}
report("INVALID", results.invalid, SHOW_FAILURES, 20000);
report("TRUNCATED", results.truncated, process.env.SHOW_FAILURES ? SHOW_FAILURES : 3, 600);
report("FAILED", results.failed, SHOW_FAILURES, 2000);
const byCategory = {};
for (const f of [...results.invalid, ...results.truncated, ...results.failed]) {
  byCategory[f.job.category] = (byCategory[f.job.category] || 0) + 1;
}
console.log(`schemas: ${jobs.length} requests, ${results.valid} valid, ${results.invalid.length} invalid, ` +
            `${results.truncated.length} truncated`);
if (results.failed.length) console.log(`schemas: ${results.failed.length} requests failed (HTTP status, stream or connection)`);
if (Object.keys(byCategory).length) console.log("schemas: problems by category", JSON.stringify(byCategory));
console.log(`schemas: ${seconds.toFixed(1)} s at ${CONCURRENCY} requests at a time`);
if (results.invalid.length || results.truncated.length || results.failed.length) failures++;
console.log(failures ? `serve schema: ${failures} failed` : "serve schema: ok");
process.exit(failures ? 1 : 0);

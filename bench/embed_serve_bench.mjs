// Embedding serving benchmark: rounds of C concurrent clients, each sending
// --requests POST /v1/embeddings requests one after another (--texts texts of
// about --words words each), against `qkv serve` on MODEL and, with
// --llama-server BIN, against llama.cpp's llama-server started with
// --embeddings on the same file, in the same run (one server at a time, so
// neither shares the cores). Reports embedded texts/s, tokens/s (from each
// response's usage) and the request latency p50/p99, and the ratio.
//   node bench/embed_serve_bench.mjs QKV MODEL [--clients 1,16] [--requests 8] [--texts 1] [--words 48]
//                                    [-t 2] [--pooling mean] [--llama-server BIN] [--json]
// Texts differ across clients, requests and rounds. The script starts a
// llama-server binary it is given; it never builds one.
import { startServer, request } from "../tests/serve_harness.mjs";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { loadavg } from "node:os";
import http from "node:http";
import net from "node:net";

const argv = process.argv.slice(2);
const valued = new Set(["--clients", "--requests", "--texts", "--words", "-t", "--pooling", "--llama-server"]);
const opt = (name, def) => { const i = argv.indexOf(name); return i >= 0 ? argv[i + 1] : def; };
const positional = argv.filter((a, i) => !a.startsWith("-") && !valued.has(argv[i - 1]));
const unknown = argv.filter((a, i) => a.startsWith("-") && !valued.has(a) && a !== "--json" && !valued.has(argv[i - 1]));
const usage = "usage: node bench/embed_serve_bench.mjs QKV MODEL [--clients 1,16] [--requests 8] [--texts 1] " +
  "[--words 48] [-t 2] [--pooling mean] [--llama-server BIN] [--json]";
const fail = msg => { console.error(`embed_serve_bench: ${msg}\n${usage}`); process.exit(2); };
if (unknown.length) fail(`unknown option ${unknown[0]}`);
for (const f of valued) if (argv.includes(f) && argv.indexOf(f) === argv.length - 1) fail(`${f} needs a value`);
const [qkv, model] = positional;
if (!qkv || !model || positional.length > 2) fail("QKV and MODEL are required, and nothing else is positional");
for (const f of [qkv, model]) if (!existsSync(f)) fail(`no such file: ${f}`);
const posInt = (name, def) => {
  const v = Number(opt(name, def));
  if (!Number.isInteger(v) || v < 1) fail(`${name} must be a positive integer, not '${opt(name, def)}'`);
  return v;
};
const clients = opt("--clients", "1,16").split(",").map(Number);
if (clients.some(c => !Number.isInteger(c) || c < 1 || c > 256)) fail("--clients takes integers 1..256, comma-separated");
const requests = posInt("--requests", "8"), texts = posInt("--texts", "1"), words = posInt("--words", "48");
const threads = String(posInt("-t", "2"));
const pooling = opt("--pooling", "mean");
const llamaServer = opt("--llama-server", "");
if (llamaServer && !existsSync(llamaServer)) fail(`no such file: ${llamaServer}`);
const asJson = argv.includes("--json");

// Common English words: WordPiece splits them the same way in both servers
// (the model's own vocabulary), so both embed the same token sequences.
const vocab = ("the of and to in is was for on that with as by at from it an be this which or are have one " +
  "had not but what all were when we there can more if no out so said time up some them into could then " +
  "other about these her would make like him has two see way could people my than first water been call who " +
  "oil its now find long down day did get come made may part over new sound take only little work know place " +
  "year live me back give most very after thing our just name good sentence man think say great where help").split(" ");
function text(round, client, req, t) {
  let s = `${round}.${client}.${req}.${t}`;
  let x = (round * 7919 + client * 104729 + req * 1299709 + t * 15485863) >>> 0;
  for (let w = 0; w < words; ++w) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    s += " " + vocab[x % vocab.length];
  }
  return s;
}

function post(port, body) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, method: "POST", path: "/v1/embeddings", agent: false,
      headers: { "Content-Type": "application/json" } }, res => {
      let out = "";
      res.setEncoding("utf8");
      res.on("data", d => { out += d; });
      res.on("end", () => {
        if (res.statusCode !== 200) return reject(new Error(`HTTP ${res.statusCode}: ${out.slice(0, 300)}`));
        const j = JSON.parse(out);
        if (!Array.isArray(j.data) || j.data.length !== body.input.length) {
          return reject(new Error(`expected ${body.input.length} vectors, got: ${out.slice(0, 300)}`));
        }
        resolve(j.usage?.prompt_tokens ?? NaN);
      });
    });
    req.setTimeout(600000, () => req.destroy(new Error("timeout")));
    req.on("error", reject);
    req.end(JSON.stringify(body));
  });
}

const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))] : NaN; };

async function round(port, c, k) {
  const latencies = [];
  let tokens = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: c }, async (_, i) => {
    for (let r = 0; r < requests; ++r) {
      const input = Array.from({ length: texts }, (_, t) => text(k, i, r, t));
      const s = performance.now();
      const used = await post(port, { input, encoding_format: "float" });  // awaited before the sum reads `tokens`
      tokens += used;
      latencies.push((performance.now() - s) / 1000);
    }
  }));
  const wall = (performance.now() - t0) / 1000;
  const n = c * requests * texts;
  return { clients: c, texts: n, tokens, wall_s: wall, texts_per_s: n / wall, tokens_per_s: tokens / wall,
    latency_p50_s: pct(latencies, 0.5), latency_p99_s: pct(latencies, 0.99) };
}

async function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => { const p = s.address().port; s.close(() => resolve(p)); });
    s.on("error", reject);
  });
}

// llama-server b4748 with --embeddings: one slot per client; each slot's
// context holds the longest text. Its non-causal encoder needs every token
// of a batch in one micro-batch (it asserts n_ubatch >= n_tokens, and its
// slots pack into one batch), so -ub equals -b equals the whole context.
async function startLlamaServer(maxClients) {
  const port = await freePort();
  const perSlot = 512;
  const args = ["-m", model, "--embeddings", "--pooling", pooling, "-t", threads, "-np", String(maxClients),
    "-c", String(perSlot * maxClients), "-b", String(perSlot * maxClients), "-ub", String(perSlot * maxClients),
    "--host", "127.0.0.1", "--port", String(port)];
  const proc = spawn(llamaServer, args, { stdio: ["ignore", "ignore", "pipe"] });
  if (process.env.EMBED_BENCH_DEBUG) proc.stderr.pipe(process.stderr);
  let err = "";
  proc.stderr.on("data", d => { err = (err + d).slice(-4000); });
  const exited = new Promise(resolve => proc.on("exit", code => resolve(code)));
  process.on("exit", () => proc.kill("SIGKILL"));
  const deadline = Date.now() + 120000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`llama-server exited with ${proc.exitCode}: ${err}`);
    try {
      const r = await request(port, "GET", "/health", undefined, { timeoutMs: 2000 });
      if (r.status === 200) break;
    } catch { /* not listening yet */ }
    if (Date.now() > deadline) { proc.kill("SIGKILL"); throw new Error(`llama-server did not start in 120 s: ${err}`); }
    await new Promise(r => setTimeout(r, 250));
  }
  return { port, async stop() { proc.kill("SIGTERM"); const t = setTimeout(() => proc.kill("SIGKILL"), 20000); await exited; clearTimeout(t); } };
}

async function measure(server) {
  try {
    await post(server.port, { input: [text(99, 0, 0, 0)] });  // warm-up
    const rows = [];
    for (const [k, c] of clients.entries()) rows.push(await round(server.port, c, k));
    return rows;
  } finally {
    await server.stop();
  }
}

const load = { start: loadavg()[0] };
const maxClients = Math.max(...clients);
const qkvRows = await measure(await startServer(qkv, ["-m", model, "-t", threads, "--pooling", pooling,
  "--max-queue", String(Math.max(64, 2 * maxClients))], { passive: false }));
const llamaRows = llamaServer ? await measure(await startLlamaServer(maxClients)) : null;
load.end = loadavg()[0];

if (asJson) {
  console.log(JSON.stringify({ model, requests, texts, words, threads: Number(threads), pooling, load_average: load,
    qkv: qkvRows, llama_server: llamaRows }, null, 1));
} else {
  console.log(`model ${model}; ${requests} requests per client of ${texts} text(s) of ${words} words; ${threads} threads; ` +
    `pooling ${pooling}; load average (1 min) ${load.start.toFixed(2)} before, ${load.end.toFixed(2)} after`);
  console.log("server        clients  texts  tokens/text   texts/s  tokens/s  latency p50  latency p99" +
    (llamaRows ? "  qkv/llama-server" : ""));
  const line = (name, r, ratio) => console.log(`${name.padEnd(13)} ${String(r.clients).padStart(7)} ${String(r.texts).padStart(6)}` +
    ` ${(r.tokens / r.texts).toFixed(1).padStart(12)} ${r.texts_per_s.toFixed(1).padStart(9)} ${r.tokens_per_s.toFixed(0).padStart(9)}` +
    ` ${(r.latency_p50_s * 1000).toFixed(1).padStart(10)}ms ${(r.latency_p99_s * 1000).toFixed(1).padStart(10)}ms` +
    (ratio ? ` ${ratio.padStart(17)}` : ""));
  for (const [i, r] of qkvRows.entries()) {
    const l = llamaRows?.[i];
    line("qkv serve", r, l ? `${(r.texts_per_s / l.texts_per_s).toFixed(2)}x` : "");
    if (l) line("llama-server", l, "");
  }
}

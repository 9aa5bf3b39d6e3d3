// Serving benchmark of qkv serve: rounds of C concurrent streaming clients
// (each --tokens new tokens at temperature 0, EOS banned so every client gets
// all of them) report aggregate tokens/s, time to first token and inter-token
// latency (p50/p99); `qkv bench`'s single-sequence and 16-sequence decode on
// the same file in the same run give the ratios. Without MODEL it writes the
// synthetic 143M F16 model (`qkv make-model 143M --type f16`) to a temporary
// directory. The floors are those of docs/benchmarks.md ("Serving").
//   node bench/serve_bench.mjs QKV [MODEL] [--clients 1,4,16] [--tokens 64] [--slots N] [-t 2]
//                              [--prefill-chunk N] [--url http://HOST:PORT] [--json-schema FILE] [--json]
// --url measures a running OpenAI-compatible server instead (no qkv bench rows).
// --json-schema FILE: every request's output is constrained by the schema
// (llama.cpp's json_schema field, which llama-server takes too); give a
// schema no output finishes within --tokens (an array with a large minItems).
import { startServer, request } from "../tests/serve_harness.mjs";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import http from "node:http";

const argv = process.argv.slice(2);
const opt = (name, def) => { const i = argv.indexOf(name); return i >= 0 ? argv[i + 1] : def; };
const valued = new Set(["--clients", "--tokens", "--slots", "-t", "--prefill-chunk", "--prefill-batch", "--url",
  "--json-schema"]);
const positional = argv.filter((a, i) => !a.startsWith("-") && !valued.has(argv[i - 1]));
const [qkv, modelArg] = positional;
const url = opt("--url", "");
if (!qkv && !url) {
  console.error("usage: node bench/serve_bench.mjs QKV [MODEL] [--clients 1,4,16] [--tokens 64] [--slots N] [-t 2] " +
    "[--prefill-chunk N] [--prefill-batch N] [--url http://HOST:PORT] [--json]");
  process.exit(2);
}
const clients = opt("--clients", "1,4,16").split(",").map(Number);
const tokens = Number(opt("--tokens", "64"));
const slots = opt("--slots", String(Math.max(...clients)));
const threads = opt("-t", "2");
const asJson = argv.includes("--json");
const schemaFile = opt("--json-schema", "");
const schema = schemaFile ? JSON.parse(readFileSync(schemaFile, "utf8")) : null;
const extra = ["--prefill-chunk", "--prefill-batch"].flatMap(f => argv.includes(f) ? [f, opt(f, "")] : []);
// llama-server (llama.cpp b4748, -np 16 -t 2) on the 143M F16 file on the 2-core Xeon, from issue 24.
const llamaServer = { 1: [40, 51], 4: [124, 124], 16: [134, 148] };

// One streaming client: the arrival time of every chunk with text, and the usage's token count.
// Prompts differ from their first characters on, across clients and rounds
// (round k of the run), so no slot's cached tokens from an earlier request
// shorten a prefill.
function stream(host, port, k, i) {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ prompt: `${k}.${i}: Once upon a time, in a land`, max_tokens: tokens, temperature: 0,
      stream: true, stream_options: { include_usage: true }, logit_bias: { "1": -100, "2": -100 },
      ...(schema ? { json_schema: schema } : {}) });
    const t0 = performance.now();
    const times = [];
    let usage = null;
    const req = http.request({ host, port, method: "POST", path: "/v1/completions", agent: false,
      headers: { "Content-Type": "application/json" } }, res => {
      if (res.statusCode !== 200) return reject(new Error(`client ${i}: HTTP ${res.statusCode}`));
      let buf = "";
      res.setEncoding("utf8");
      res.on("data", d => {
        buf += d;
        let k;
        while ((k = buf.indexOf("\n\n")) >= 0) {
          const ev = buf.slice(0, k);
          buf = buf.slice(k + 2);
          if (!ev.startsWith("data: {")) continue;
          const j = JSON.parse(ev.slice(6));
          if (j.error) return reject(new Error(j.error.message));
          if (j.usage) usage = j.usage;
          if (j.choices?.[0]?.text) times.push(performance.now());
        }
      });
      res.on("end", () => resolve({ t0, times, completion: usage ? usage.completion_tokens : times.length,
        prompt: usage ? usage.prompt_tokens : NaN, cached: usage?.prompt_tokens_details?.cached_tokens ?? 0 }));
    });
    req.setTimeout(600000, () => req.destroy(new Error("timeout")));
    req.on("error", reject);
    req.end(body);
  });
}

const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))] : NaN; };

async function round(host, port, c, k) {
  const t0 = performance.now();
  const rs = await Promise.all(Array.from({ length: c }, (_, i) => stream(host, port, k, i)));
  const wall = (performance.now() - t0) / 1000;
  for (const r of rs) {
    if (r.completion !== tokens) throw new Error(`a client got ${r.completion} tokens, not ${tokens}`);
  }
  const ttft = rs.map(r => (r.times[0] - r.t0) / 1000);
  const itl = rs.flatMap(r => r.times.slice(1).map((t, k) => (t - r.times[k]) / 1000));
  const n = rs.reduce((a, r) => a + r.completion, 0);
  // A client's tokens after its first over the time they took: the decode rate
  // it sees, without the prompt's prefill (what qkv bench's decode rows time).
  const streamRates = rs.map(r => (r.times.length - 1) / ((r.times[r.times.length - 1] - r.times[0]) / 1000));
  return { clients: c, tokens: n, prompt_tokens: pct(rs.map(r => r.prompt), 0.5),
    cached_tokens: rs.reduce((a, r) => a + r.cached, 0), wall_s: wall, tokens_per_s: n / wall,
    stream_tokens_per_s_p50: pct(streamRates, 0.5), ttft_p50_s: pct(ttft, 0.5),
    ttft_p99_s: pct(ttft, 0.99), itl_p50_s: pct(itl, 0.5), itl_p99_s: pct(itl, 0.99) };
}

// qkv bench's decode rows on the same file: batch 1 at depth 0 (one sequence) and batch 16.
function qkvBench(model) {
  const out = execFileSync(qkv, ["bench", "-m", model, "--prompt-lengths", "none", "--depths", "0",
    "--batches", "16", "--batch-depth", "32", "--steps", String(tokens), "--reps", "3", "-t", threads,
    "--no-probe", "--json", "-q"], { encoding: "utf8", maxBuffer: 1 << 24 });
  const rows = JSON.parse(out).rows;
  const get = kind => rows.find(r => r.kind === kind)?.tokens_per_s.median ?? NaN;
  return { decode_tokens_per_s: get("decode"), batch16_tokens_per_s: get("batch") };
}

const load = { start: loadavg()[0] };
let tmp = null, model = modelArg, server = null, host = "127.0.0.1", port = 0;
const rows = [];
let bench = null;
try {
  if (url) {
    const u = new URL(url);
    host = u.hostname;
    port = Number(u.port);
  } else {
    if (!model) {
      tmp = mkdtempSync(join(tmpdir(), "qkv-serve-bench-"));
      model = join(tmp, "143M-f16.gguf");
      execFileSync(qkv, ["make-model", "143M", "--type", "f16", "-o", model, "-q"]);
    }
    bench = qkvBench(model);
    server = await startServer(qkv, ["-m", model, "--slots", slots, "-c", String(64 + 2 * tokens), "-t", threads,
      "--max-queue", "256", ...extra], { passive: false });
    port = server.port;
  }
  await request(port, "POST", "/v1/completions", { prompt: "warm up", max_tokens: 8 }, { timeoutMs: 120000 });
  for (const [k, c] of clients.entries()) rows.push(await round(host, port, c, k));
} finally {
  if (server) await server.stop();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
}
load.end = loadavg()[0];

const by = c => rows.find(r => r.clients === c);
const checks = [];
if (by(1) && by(16)) checks.push([`16 clients >= 5x one client`, by(16).tokens_per_s / by(1).tokens_per_s, 5]);
if (by(16)) {
  checks.push([`16 clients >= 4x llama-server (${llamaServer[16][1]} tok/s)`, by(16).tokens_per_s / llamaServer[16][1], 4]);
  checks.push([`TTFT median at 16 clients <= 0.5 s`, by(16).ttft_p50_s, 0.5, "max"]);
}
// qkv bench's decode rows time the steps after a prompt, so the client's
// comparable figure is its stream after the first token; the wall figure
// (with the request and the prefill) is reported beside it.
if (by(1) && bench) {
  checks.push([`one client's stream within 10% of qkv bench decode`, by(1).stream_tokens_per_s_p50 / bench.decode_tokens_per_s, 0.9]);
  checks.push([`(one client's wall tokens/s, prompt included, against qkv bench decode)`, by(1).tokens_per_s / bench.decode_tokens_per_s, 0, "info"]);
}
const verdicts = checks.map(([name, value, bound, kind]) => ({ name, value, bound, kind,
  pass: kind === "max" ? value <= bound : value >= bound }));

if (asJson) {
  console.log(JSON.stringify({ model: url || model, tokens, threads: Number(threads), load_average: load, qkv_bench: bench,
    rounds: rows, floors: verdicts }, null, 1));
} else {
  console.log(`model ${url || (modelArg ?? "synthetic 143M F16")}; ${tokens} new tokens per client at temperature 0; ` +
    `${threads} threads; load average (1 min) ${load.start.toFixed(2)} before, ${load.end.toFixed(2)} after`);
  if (bench) {
    console.log(`qkv bench: decode ${bench.decode_tokens_per_s.toFixed(1)} tok/s (one sequence), ` +
      `batch 16 ${bench.batch16_tokens_per_s.toFixed(1)} tok/s`);
  }
  if (rows.length) console.log(`prompts: ${rows[0].prompt_tokens} tokens (median), cached tokens per round: ${rows.map(r => r.cached_tokens).join(", ")}`);
  console.log("clients  tokens  tokens/s  stream/client  TTFT p50  TTFT p99  ITL p50  ITL p99  llama-server");
  for (const r of rows) {
    const ls = llamaServer[r.clients];
    console.log(`${String(r.clients).padStart(7)} ${String(r.tokens).padStart(7)} ${r.tokens_per_s.toFixed(1).padStart(9)}` +
      ` ${r.stream_tokens_per_s_p50.toFixed(1).padStart(14)}` +
      ` ${(r.ttft_p50_s * 1000).toFixed(0).padStart(7)}ms ${(r.ttft_p99_s * 1000).toFixed(0).padStart(7)}ms` +
      ` ${(r.itl_p50_s * 1000).toFixed(1).padStart(6)}ms ${(r.itl_p99_s * 1000).toFixed(1).padStart(6)}ms` +
      `  ${ls ? (ls[0] === ls[1] ? `${ls[0]}` : `${ls[0]}-${ls[1]}`) : "-"}`);
  }
  for (const v of verdicts) {
    const verdict = v.kind === "info" ? "info" : v.pass ? "meets" : "MISSES";
    console.log(`${verdict}: ${v.name}: ${v.value.toFixed(2)}${v.name.startsWith("TTFT") ? " s" : "x"}`);
  }
}

// Load generator for qkv serve: starts a server on a model, runs rounds of
// C concurrent streaming clients (each max_tokens new tokens at temperature 0,
// EOS banned so every client gets all of them), and reports per round the
// aggregate tokens/s, time to first token and inter-token latency (p50/p99).
//   node bench/serve_bench.mjs QKV MODEL [--clients 1,4,16] [--tokens 64] [--slots 16] [-t 2]
//                              [--prefill-chunk N] [--json]
import { startServer, request } from "../tests/serve_harness.mjs";
import http from "node:http";

const argv = process.argv.slice(2);
const [qkv, model] = argv;
const opt = (name, def) => { const i = argv.indexOf(name); return i >= 0 ? argv[i + 1] : def; };
const clients = opt("--clients", "1,4,16").split(",").map(Number);
const tokens = Number(opt("--tokens", "64"));
const slots = opt("--slots", String(Math.max(...clients)));
const threads = opt("-t", "2");
const asJson = argv.includes("--json");
const extra = argv.includes("--prefill-chunk") ? ["--prefill-chunk", opt("--prefill-chunk", "256")] : [];

function stream(port, i) {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ prompt: `Once upon a time, in a land ${i}`, max_tokens: tokens, temperature: 0,
      stream: true, logit_bias: { "1": -100, "2": -100 } });
    const t0 = performance.now();
    const times = [];
    const req = http.request({ host: "127.0.0.1", port, method: "POST", path: "/v1/completions", agent: false,
      headers: { "Content-Type": "application/json" } }, res => {
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
          if (j.choices[0]?.text) times.push(performance.now());
        }
      });
      res.on("end", () => resolve({ t0, times }));
    });
    req.setTimeout(600000, () => req.destroy(new Error("timeout")));
    req.on("error", reject);
    req.end(body);
  });
}

const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))] : NaN; };

const s = await startServer(qkv, ["-m", model, "--slots", slots, "-c", "512", "-t", threads, "--max-queue", "256", ...extra]);
const rows = [];
try {
  await request(s.port, "POST", "/v1/completions", { prompt: "warm up", max_tokens: 8 });
  for (const c of clients) {
    const t0 = performance.now();
    const rs = await Promise.all(Array.from({ length: c }, (_, i) => stream(s.port, i)));
    const wall = (performance.now() - t0) / 1000;
    const ttft = rs.map(r => (r.times[0] - r.t0) / 1000);
    const itl = rs.flatMap(r => r.times.slice(1).map((t, k) => (t - r.times[k]) / 1000));
    const n = rs.reduce((a, r) => a + r.times.length, 0);
    rows.push({ clients: c, tokens: n, wall_s: wall, tokens_per_s: n / wall,
      ttft_p50_s: pct(ttft, 0.5), ttft_p99_s: pct(ttft, 0.99), itl_p50_s: pct(itl, 0.5), itl_p99_s: pct(itl, 0.99) });
  }
} finally {
  await s.stop();
}
if (asJson) {
  console.log(JSON.stringify(rows, null, 1));
} else {
  console.log("clients  tokens  tokens/s  TTFT p50  TTFT p99  ITL p50  ITL p99");
  for (const r of rows) {
    console.log(`${String(r.clients).padStart(7)} ${String(r.tokens).padStart(7)} ${r.tokens_per_s.toFixed(1).padStart(9)}` +
      ` ${(r.ttft_p50_s * 1000).toFixed(0).padStart(7)}ms ${(r.ttft_p99_s * 1000).toFixed(0).padStart(7)}ms` +
      ` ${(r.itl_p50_s * 1000).toFixed(1).padStart(6)}ms ${(r.itl_p99_s * 1000).toFixed(1).padStart(6)}ms`);
  }
}

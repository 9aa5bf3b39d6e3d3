// Faults against qkv serve: 200 malformed or oversized requests mixed with
// good ones (each bad one a 4xx with an error object, each good one served),
// raw sockets that send half a request or vanish mid-stream, a client that
// stops reading for a while; the server keeps serving and frees every slot.
import assert from "node:assert/strict";
import net from "node:net";
import { spawnSync } from "node:child_process";
import { startServer, request, sseChunks, metric, sleep } from "./serve_harness.mjs";

const [qkv, model] = process.argv.slice(2);
let failed = 0;
const fail = (...m) => { failed++; console.log("FAIL:", ...m); };

const s = await startServer(qkv, ["-m", model, "--slots", "4", "--max-queue", "64", "-c", "256", "-t", "2",
  "--max-body", "65536"]);
const good = { prompt: "Once upon a time", max_tokens: 8, temperature: 0 };
const bad = [
  '{"prompt": ',                                   // truncated JSON
  '{"prompt": "x", "max_tokens": -1}',
  '{"prompt": "x", "temperature": 9}',
  '{"prompt": 5}',
  '{"prompt": [1, 2, 99999999]}',
  '{"prompt": []}',
  '{"prompt": "x", "stop": [1]}',
  '{"prompt": "x", "stop": ["a","b","c","d","e"]}',
  '{"prompt": "x", "logit_bias": {"abc": 1}}',
  '{"prompt": "x", "logit_bias": {"5": 1000}}',
  '{"prompt": "x", "n": 3}',
  '{"prompt": "x", "logprobs": 50}',
  '{"prompt": "x", "stream_options": {"include_usage": true}}',
  '{"prompt": "x", "seed": "s"}',
  '{"prompt": "x", "max_tokens": 1e400}',
  '[1, 2, 3]',
  '"just a string"',
  "\u0000\u0001\u0002",
  "[".repeat(5000),
  '{"prompt": "' + "a".repeat(70000) + '"}',        // over --max-body
];
try {
  const jobs = [];
  for (let i = 0; i < 200; i++) {
    const b = bad[i % bad.length];
    const path = i % 3 === 0 ? "/v1/chat/completions" : "/v1/completions";
    const chatBody = i % 3 === 0 && b.startsWith('{"prompt"') ? b.replace('"prompt"', '"messages"') : b;
    // The bound is a liveness check; under AddressSanitizer 220 requests at once take tens of seconds.
    jobs.push(request(s.port, "POST", path, chatBody, { timeoutMs: 90000 }).then(r => {
      if (r.status < 400 || r.status >= 500) return fail(`bad request ${i} (${chatBody.slice(0, 60)}): status ${r.status}`);
      const e = JSON.parse(r.body).error;
      if (typeof e.message !== "string" || !("param" in e) || !("code" in e) || !("type" in e)) fail("error object", r.body);
    }, e => {
      // An oversized body may be cut off by the server's 413 while it is still being sent.
      if (!(b.length > 65536 && /ECONNRESET|EPIPE/.test(e.message))) fail(`bad request ${i}:`, e.message);
    }));
    if (i % 10 === 0) {
      jobs.push(request(s.port, "POST", "/v1/completions", good, { timeoutMs: 60000 }).then(r => {
        if (r.status !== 200 || JSON.parse(r.body).usage.completion_tokens !== 8) fail("good request:", r.status, r.body);
      }, e => fail("good request:", e.message)));
    }
  }
  await Promise.all(jobs);
  console.log("200 malformed requests among 20 good ones: done");

  // Raw sockets: half a request then close; a stream dropped after its first bytes.
  const raw = (text, readBytes) => new Promise(resolve => {
    const c = net.connect(s.port, "127.0.0.1", () => c.write(text));
    let got = 0;
    c.on("data", d => { got += d.length; if (readBytes && got >= readBytes) c.destroy(); });
    c.on("error", () => resolve());
    c.on("close", () => resolve());
    setTimeout(() => { c.destroy(); resolve(); }, readBytes ? 10000 : 300);
  });
  await Promise.all(Array.from({ length: 10 }, () => raw("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{\"pro")));
  const streamBody = JSON.stringify({ prompt: "Once upon a time", max_tokens: 200, temperature: 1, stream: true });
  await Promise.all(Array.from({ length: 8 }, () => raw(
    `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(streamBody)}\r\n\r\n${streamBody}`, 400)));
  let busy = NaN;
  for (let i = 0; i < 100; i++) {
    busy = await metric(s.port, "qkv_slots_busy");
    if (busy === 0) break;
    await sleep(50);
  }
  if (busy !== 0) fail("dropped streams still hold", busy, "slots");
  else console.log("half requests and dropped streams: every slot free");

  // A slow client: stops reading its stream until another request has been
  // served in full (so that one cannot have waited behind it), then reads on.
  let resumeSlow;
  const resumed = new Promise(r => { resumeSlow = r; });
  const slow = new Promise((resolve, reject) => {
    const c = net.connect(s.port, "127.0.0.1", () => {
      const b = JSON.stringify({ prompt: "Once upon a time", max_tokens: 64, temperature: 0, stream: true, logit_bias: { "1": -100, "2": -100 } });
      c.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: ${Buffer.byteLength(b)}\r\n\r\n${b}`);
      c.pause();
      resumed.then(() => c.resume());
    });
    let out = "";
    c.setEncoding("utf8");
    c.on("data", d => { out += d; });
    c.on("end", () => resolve(out));
    c.on("error", reject);
    setTimeout(() => { c.destroy(); reject(new Error("the slow client never finished")); }, 60000);
  });
  await sleep(200);
  const r = await request(s.port, "POST", "/v1/completions", good, { timeoutMs: 30000 });
  assert.equal(r.status, 200);
  resumeSlow();
  const slowText = await slow;
  assert.ok(slowText.includes("data: [DONE]"), "the slow client's stream completed");
  console.log("slow client: another request was served while it did not read; then it completed");

  const after = await request(s.port, "POST", "/v1/completions", good);
  assert.equal(after.status, 200);
  const h = await request(s.port, "GET", "/health");
  assert.equal(h.status, 200);
} catch (e) {
  fail(e.message);
} finally {
  const r = await s.stop();
  if (r.code !== 0) fail("exit", r);
}

// --io-timeout: a connection that stops halfway through its request gets its
// 400 (or is closed) once it has stalled that long (the default 30 s would
// outlast the test).
for (const v of ["0", "-1", "abc", ""]) {
  const r = spawnSync(qkv, ["serve", "-m", model, "--port", "0", "--io-timeout", v], { encoding: "utf8", timeout: 20000 });
  if (r.status === 0 || !/--io-timeout wants a number/.test(r.stderr)) fail(`--io-timeout '${v}': status ${r.status}, ${r.stderr}`);
}
for (const v of ["0", "70000", "x", ""]) {
  const r = spawnSync(qkv, ["serve", "-m", model, "--port", "0", "--prefill-batch", v], { encoding: "utf8", timeout: 20000 });
  if (r.status === 0 || !/--prefill-batch wants a whole number from 1 to 65536/.test(r.stderr)) {
    fail(`--prefill-batch '${v}': status ${r.status}, ${r.stderr}`);
  }
}
const t = await startServer(qkv, ["-m", model, "--slots", "1", "-c", "64", "-t", "1", "--io-timeout", "0.5"]);
try {
  const started = Date.now();
  const answeredAfter = await new Promise(resolve => {
    const c = net.connect(t.port, "127.0.0.1", () => c.write("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{\"pr"));
    c.on("data", () => { resolve(Date.now() - started); c.destroy(); });
    c.on("close", () => resolve(Date.now() - started));
    c.on("error", () => {});
    setTimeout(() => { c.destroy(); resolve(Infinity); }, 10000);
  });
  if (!(answeredAfter >= 400 && answeredAfter < 5000)) fail(`a stalled request with --io-timeout 0.5 answered after ${answeredAfter} ms`);
  else console.log(`--io-timeout 0.5: a stalled request answered after ${answeredAfter} ms`);
  const h = await request(t.port, "GET", "/health");
  if (h.status !== 200) fail("health after an io timeout:", h.status);
} catch (e) {
  fail(e.message);
} finally {
  const r = await t.stop();
  if (r.code !== 0) fail("exit", r);
}
console.log(failed ? `serve faults: ${failed} failed` : "serve faults: ok");
process.exit(failed ? 1 : 0);

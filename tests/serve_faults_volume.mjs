// Volume faults against qkv serve: 1000 requests, 16 at a time, of which 200
// are bad (malformed, truncated, over --max-body, 10000 levels deep); each bad
// one a 4xx with an OpenAI error object, each good one (greedy) the same text
// and token counts as its prompt asked alone. Then a stream whose client
// stops reading outlives --timeout: its slot is freed while the client still
// holds the connection. Then SIGTERM with 16 streams in flight: exit 0
// within --grace, every client a complete reply or a closed stream.
import net from "node:net";
import { startServer, request, sseChunks, metric, sleep } from "./serve_harness.mjs";

const [qkv, model] = process.argv.slice(2);
let failed = 0;
const fail = (...m) => { failed++; console.log("FAIL:", ...m); };
const MAX_BODY = 65536;
const GRACE_S = 3;

const prompts = ["Once upon a time", "The little dog", "Lily wanted to", "One day, a bird", "Tom and his mom",
  "The sun was", "A big red ball", "She was happy because"];
const goodBody = (i) => {
  const chat = i % 2 === 1;
  const p = prompts[i % prompts.length];
  const stream = i % 3 === 0;
  const b = chat ? { messages: [{ role: "user", content: p }] } : { prompt: p };
  return { chat, key: `${chat}|${p}`, stream,
    body: { ...b, max_tokens: 8, temperature: 0, stream, ...(stream ? { stream_options: { include_usage: true } } : {}) } };
};
// A reply's text and usage, streaming or not.
const answer = (chat, stream, r) => {
  if (!stream) {
    const j = JSON.parse(r.body);
    return { text: chat ? j.choices[0].message.content : j.choices[0].text, usage: j.usage };
  }
  const chunks = sseChunks(r.body);
  const usage = chunks.pop().usage;
  const text = chunks.map(c => (chat ? c.choices[0].delta.content : c.choices[0].text) ?? "").join("");
  return { text, usage };
};
const nested = "[".repeat(10000);
const badBody = (i) => {
  const g = JSON.stringify(goodBody(i).body);
  switch (i % 5) {
    case 0: return { kind: "malformed", body: g.replace(/"max_tokens":8/, '"max_tokens":"eight"').replace(/:/, "=") };
    case 1: return { kind: "truncated", body: g.slice(0, 1 + (i * 7) % (g.length - 2)) };
    case 2: return { kind: "oversized", body: '{"prompt": "' + "a".repeat(MAX_BODY + 100) + '"}' };
    case 3: return { kind: "nested", body: nested };
    default: return { kind: "nested", body: '{"prompt": ' + "[".repeat(10000) + "1" + "]".repeat(10000) + "}" };
  }
};
// Runs thunks with at most `width` in flight.
async function pool(thunks, width) {
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < thunks.length) await thunks[next++]();
  }));
}

// A raw streaming request; ended resolves "complete" ([DONE] seen), "error
// event" (the stream carried an error object), "503", "closed unanswered"
// (no byte: the connection was never read before the server stopped) or
// "cut mid-stream" (bytes but no [DONE]).
function openStream(port, body) {
  const b = JSON.stringify(body);
  const c = { bytes: 0, closed: false, text: "" };
  c.ended = new Promise(resolve => {
    const sock = net.connect(port, "127.0.0.1", () => sock.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\n` +
      `Content-Type: application/json\r\nConnection: close\r\nContent-Length: ${Buffer.byteLength(b)}\r\n\r\n${b}`));
    sock.setEncoding("utf8");
    sock.on("data", d => { c.bytes += d.length; c.text += d; });
    const end = () => {
      if (c.closed) return;
      c.closed = true;
      const done = c.text.includes("data: [DONE]");
      resolve(done && c.text.includes('"error"') ? "error event" : done ? "complete" :
        c.text.startsWith("HTTP/1.1 503") ? "503" : c.bytes ? "cut mid-stream" : "closed unanswered");
    };
    sock.on("end", end);
    sock.on("close", end);
    sock.on("error", end);
  });
  return c;
}

// SIGTERM with 16 streams open (4 generating, 12 queued): the server exits 0
// within the grace period (plus a margin); no client hangs, and every
// stream that started ends with [DONE] (after its text or an error event).
async function sigtermWithStreams(srv, grace, maxTokens) {
  const streams = Array.from({ length: 16 }, (_, i) => openStream(srv.port, { prompt: prompts[i % prompts.length],
    max_tokens: maxTokens, temperature: 0, stream: true, logit_bias: { "1": -100, "2": -100 } }));
  for (let i = 0; i < 400 && streams.filter(c => c.bytes > 0).length < 4; i++) await sleep(10);
  const inFlight = streams.filter(c => !c.closed).length;
  const tSig = Date.now();
  const r = await srv.stop();
  const exitMs = Date.now() - tSig;
  const ends = await Promise.all(streams.map(c => Promise.race([c.ended, sleep(5000).then(() => "hang")])));
  const tally = {};
  for (const e of ends) tally[e] = (tally[e] ?? 0) + 1;
  console.log(`SIGTERM with ${inFlight} streams open: exit ${r.code} after ${exitMs} ms (grace ${grace} s); ` +
    `clients: ${Object.entries(tally).map(([k, n]) => `${k} ${n}`).join(", ")}`);
  if (r.code !== 0) fail("exit after SIGTERM", r);
  if (exitMs > (grace + 5) * 1000) fail("exit took", exitMs, "ms");
  if (tally.hang) fail(tally.hang, "clients hang after the server exited");
  if (tally["cut mid-stream"]) fail(tally["cut mid-stream"], "streams cut without an end event");
  return tally;
}

// An F32 KV cache: batched steps then give the logits of single steps within
// 4.8e-6 (README, qkv serve), so greedy text cannot flip on a near tie.
const s = await startServer(qkv, ["-m", model, "--slots", "4", "--max-queue", "64", "-c", "256", "-t", "2",
  "--kv-type", "f32", "--max-body", String(MAX_BODY), "--grace", String(GRACE_S)]);
let exited = false;
try {
  // Every prompt asked alone: the reference answers.
  const alone = new Map();
  for (let i = 0; i < 2 * prompts.length; i++) {
    const g = goodBody(i);
    const r = await request(s.port, "POST", g.chat ? "/v1/chat/completions" : "/v1/completions", { ...g.body, stream: false,
      stream_options: undefined }, { timeoutMs: 30000 });
    if (r.status !== 200) throw new Error(`reference ${g.key}: ${r.status} ${r.body}`);
    alone.set(g.key, answer(g.chat, false, r));
  }

  const counts = { goodOk: 0, badRejected: 0, badReset: 0, wrong: 0, crashed: 0 };
  const kinds = {};
  const t0 = Date.now();
  const thunks = Array.from({ length: 1000 }, (_, i) => async () => {
    if (i % 5 === 4) {  // 200 bad ones
      const b = badBody(Math.floor(i / 5));
      const path = i % 2 ? "/v1/chat/completions" : "/v1/completions";
      kinds[b.kind] = (kinds[b.kind] ?? 0) + 1;
      try {
        const r = await request(s.port, "POST", path, b.body, { timeoutMs: 60000 });
        const e = r.status >= 400 && r.status < 500 ? JSON.parse(r.body).error : null;
        if (e && typeof e.message === "string" && typeof e.type === "string" && "param" in e && "code" in e) {
          counts.badRejected++;
        } else {
          counts.wrong++;
          fail(`bad ${b.kind} request ${i}: ${r.status} ${r.body.slice(0, 200)}`);
        }
      } catch (e) {
        // The server's 413 may close the connection while the body is still being sent.
        if (b.kind === "oversized" && /ECONNRESET|EPIPE/.test(e.message)) counts.badReset++;
        else { counts.crashed++; fail(`bad ${b.kind} request ${i}:`, e.message); }
      }
      return;
    }
    const g = goodBody(i);
    try {
      const r = await request(s.port, "POST", g.chat ? "/v1/chat/completions" : "/v1/completions", g.body,
        { timeoutMs: 60000 });
      if (r.status !== 200) throw new Error(`status ${r.status} ${r.body.slice(0, 200)}`);
      const got = answer(g.chat, g.stream, r);
      const want = alone.get(g.key);
      if (got.text === want.text && got.usage.prompt_tokens === want.usage.prompt_tokens &&
          got.usage.completion_tokens === want.usage.completion_tokens) {
        counts.goodOk++;
      } else {
        counts.wrong++;
        fail(`good request ${i} (${g.key}, stream ${g.stream}): ${JSON.stringify(got)} != alone ${JSON.stringify(want)}`);
      }
    } catch (e) {
      counts.crashed++;
      fail(`good request ${i}:`, e.message);
    }
  });
  await pool(thunks, 16);
  console.log(`1000 requests, 16 at a time, in ${Date.now() - t0} ms: good ok ${counts.goodOk}/800, ` +
    `bad rejected ${counts.badRejected} + reset while sending ${counts.badReset}/200 ` +
    `(${Object.entries(kinds).map(([k, n]) => `${k} ${n}`).join(", ")}), wrong ${counts.wrong}, crashed ${counts.crashed}`);
  if (counts.goodOk !== 800 || counts.badRejected + counts.badReset !== 200) fail("counts", JSON.stringify(counts));
  if (await metric(s.port, "qkv_slots_busy") !== 0) fail("slots busy after the volume run");

  exited = true;
  await sigtermWithStreams(s, GRACE_S, 240);
} catch (e) {
  fail(e.message);
} finally {
  if (!exited) {
    const r = await s.stop();
    if (r.code !== 0) fail("exit", r);
  }
}
// --timeout with a client that stops reading: the slot is freed while the
// client still holds its connection; read on, the stream ends with the
// timeout error.
{
  const t = await startServer(qkv, ["-m", model, "--slots", "1", "--max-queue", "16", "-c", "512", "-t", "2",
    "--timeout", "0.05"]);
  try {
    const b = JSON.stringify({ prompt: "Once upon a time", max_tokens: 500, temperature: 1, stream: true,
      logit_bias: { "1": -100, "2": -100 } });
    const sock = net.connect(t.port, "127.0.0.1", () => sock.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\n` +
      `Content-Type: application/json\r\nConnection: close\r\nContent-Length: ${Buffer.byteLength(b)}\r\n\r\n${b}`));
    sock.pause();
    let text = "";
    sock.setEncoding("utf8");
    sock.on("data", d => { text += d; });
    const ended = new Promise(resolve => { sock.on("end", resolve); sock.on("close", resolve); sock.on("error", resolve); });
    let busy = NaN, sawBusy = false;
    for (let i = 0; i < 200; i++) {
      busy = await metric(t.port, "qkv_slots_busy");
      if (busy > 0) sawBusy = true;
      if (busy === 0 && (sawBusy || i > 20)) break;
      await sleep(10);
    }
    if (busy !== 0) fail("a stalled client past --timeout still holds", busy, "slots");
    sock.resume();
    await Promise.race([ended, sleep(10000)]);
    if (!text.includes('"code":"timeout"') || !text.includes("data: [DONE]")) fail("stalled stream:", text.slice(-300));
    else console.log("stalled client past --timeout: slot freed while it did not read; its stream ends with the timeout error");
  } catch (e) {
    fail(e.message);
  } finally {
    const r = await t.stop();
    if (r.code !== 0) fail("exit", r);
  }
}
// SIGTERM with a grace too short for the streams: they end cut, not hung.
{
  const g = await startServer(qkv, ["-m", model, "--slots", "1", "--max-queue", "16", "-c", "512", "-t", "2",
    "--grace", "0.2"]);
  try {
    const tally = await sigtermWithStreams(g, 0.2, 500);
    if (tally.complete === 16) fail("a 0.2 s grace let 16 x 500-token streams on one slot finish");
  } catch (e) {
    fail(e.message);
  }
}
console.log(failed ? `serve faults volume: ${failed} failed` : "serve faults volume: ok");
process.exit(failed ? 1 : 0);

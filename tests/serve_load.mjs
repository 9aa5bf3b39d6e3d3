// Load on qkv serve: 32 concurrent streaming clients against 8 slots all
// complete with exactly max_tokens tokens each (EOS banned through
// logit_bias); then an oversubscribed server (2 slots, queue of 2) answers
// the overflow with 503 + Retry-After while the admitted requests complete,
// and /metrics shows the queue.
import assert from "node:assert/strict";
import { startServer, request, sseChunks, metric, sleep } from "./serve_harness.mjs";

const [qkv, model] = process.argv.slice(2);
const body = (i, n) => ({ prompt: `Once upon a time ${i}`, max_tokens: n, temperature: 0.8, seed: i, stream: true,
  logprobs: 0, logit_bias: { "1": -100, "2": -100 }, stream_options: { include_usage: true } });
let failed = 0;

// Runs fn against a server started with args; a failure is counted, not thrown,
// and the server must exit 0.
async function withServer(args, fn) {
  const s = await startServer(qkv, args);
  try {
    await fn(s);
  } catch (e) {
    failed++;
    console.log("FAIL:", e.message);
  } finally {
    const r = await s.stop();
    if (r.code !== 0) { failed++; console.log("FAIL: exit", r); }
  }
}

await withServer(["-m", model, "--slots", "8", "--max-queue", "32", "-c", "256", "-t", "2"], async s => {
  const t0 = Date.now();
  const results = await Promise.all(Array.from({ length: 32 }, (_, i) =>
    request(s.port, "POST", "/v1/completions", body(i, 24), { timeoutMs: 120000 })));
  let ok = 0;
  for (const [i, r] of results.entries()) {
    try {
      assert.equal(r.status, 200, r.body);
      const chunks = sseChunks(r.body);
      const usage = chunks.pop().usage;
      const tokens = chunks.reduce((n, c) => n + (c.choices[0].logprobs ? c.choices[0].logprobs.tokens.length : 0), 0);
      assert.equal(usage.completion_tokens, 24);
      assert.equal(tokens, 24, "streamed tokens");
      assert.equal(chunks[chunks.length - 1].choices[0].finish_reason, "length");
      ok++;
    } catch (e) {
      failed++;
      console.log(`FAIL: client ${i}:`, e.message);
    }
  }
  console.log(`32 clients on 8 slots: ${ok} complete in ${Date.now() - t0} ms`);
  assert.equal(await metric(s.port, "qkv_slots_busy"), 0);
  assert.equal(await metric(s.port, "qkv_generated_tokens_total"), 32 * 24);
});

await withServer(["-m", model, "--slots", "2", "--max-queue", "2", "-c", "256", "-t", "2"], async s => {
  let maxQueue = 0;
  let polling = true;
  const poller = (async () => {
    for (let i = 0; i < 400 && polling; i++) {
      maxQueue = Math.max(maxQueue, await metric(s.port, "qkv_queue_depth"));
      await sleep(10);
    }
  })();
  const results = await Promise.all(Array.from({ length: 12 }, (_, i) =>
    request(s.port, "POST", "/v1/completions", body(i, 64), { timeoutMs: 120000 })));
  polling = false;
  await poller;
  const done = results.filter(r => r.status === 200);
  const busy = results.filter(r => r.status === 503);
  console.log(`12 clients on 2 slots + queue 2: ${done.length} served, ${busy.length} answered 503, queue peak ${maxQueue}`);
  assert.equal(done.length + busy.length, 12);
  assert.ok(done.length >= 4, "every slot and queue place served");
  assert.ok(maxQueue <= 2, "the queue stays within --max-queue");
  assert.ok(busy.length >= 1, "some 503");
  for (const r of busy) {
    assert.equal(r.headers["retry-after"], "1");
    assert.equal(JSON.parse(r.body).error.code, "queue_full");
  }
  for (const r of done) assert.equal(sseChunks(r.body).pop().usage.completion_tokens, 64);
  assert.ok(maxQueue >= 1, "the queue shows in /metrics");
});

// Prompt passes of both sizes: a burst of 6 prompts (more waiting than
// generating: passes of up to --prefill-batch tokens), then 2 arriving while
// 4 stream (passes of --prefill-chunk tokens between decode steps). Every
// greedy text equals the same request's text alone.
const greedy = (i, stream) => ({ prompt: `Once upon a time ${"there was a little dog. ".repeat(1 + i % 3)}${i}`,
  max_tokens: 16, temperature: 0, stream, logit_bias: { "1": -100, "2": -100 } });
const text = r => {
  assert.equal(r.status, 200, r.body);
  return r.body.startsWith("data: ") ? sseChunks(r.body).map(c => c.choices[0].text).join("")
    : JSON.parse(r.body).choices[0].text;
};
await withServer(["-m", model, "--slots", "6", "-c", "256", "-t", "2", "--prefill-chunk", "8", "--prefill-batch", "48"],
  async s => {
    const alone = [];
    for (let i = 0; i < 6; i++) alone.push(text(await request(s.port, "POST", "/v1/completions", greedy(i, false))));
    const burst = await Promise.all(alone.map((_, i) => request(s.port, "POST", "/v1/completions", greedy(i, true),
      { timeoutMs: 120000 })));
    burst.forEach((r, i) => assert.equal(text(r), alone[i], `burst request ${i}`));
    const before = await metric(s.port, "qkv_generated_tokens_total");
    const first = [0, 1, 2, 3].map(i => request(s.port, "POST", "/v1/completions", { ...greedy(i, true), max_tokens: 200 },
      { timeoutMs: 120000 }));
    while (await metric(s.port, "qkv_generated_tokens_total") === before) await sleep(1);
    const later = await Promise.all([4, 5].map(i => request(s.port, "POST", "/v1/completions", greedy(i, true),
      { timeoutMs: 120000 })));
    later.forEach((r, k) => assert.equal(text(r), alone[k + 4], `request ${k + 4} arriving while others stream`));
    for (const r of await Promise.all(first)) assert.equal(sseChunks(r.body).pop().choices[0].finish_reason, "length");
    console.log("prompt passes of --prefill-batch and --prefill-chunk tokens: 8 greedy texts equal to each alone");
  });
console.log(failed ? `serve load: ${failed} failed` : "serve load: ok");
process.exit(failed ? 1 : 0);

// The mixed load of scripts/soak_serve.sh: WIDTH clients in a loop against
// qkv serve on PORT until SIGTERM, then prints the outcome counts as one line
// of JSON. Each client draws a request: completion or chat, streaming or not,
// a bad body (1 in 10: malformed, truncated, nested, over --max-body) or a
// stream dropped after its first bytes (1 in 10).
//   node scripts/soak_serve_load.mjs PORT [WIDTH]
import net from "node:net";
import { request } from "../tests/serve_harness.mjs";

const port = Number(process.argv[2]);
const width = Number(process.argv[3] ?? 8);
const counts = { ok: 0, rejected: 0, dropped: 0, busy: 0, unexpected: 0 };
let running = true;
process.removeAllListeners("SIGTERM");
process.on("SIGTERM", () => { running = false; });

const prompts = ["Once upon a time", "The little dog", "Lily wanted to", "One day, a bird", "Tom and his mom"];
const bad = ['{"prompt": ', '{"prompt": "x", "max_tokens": -1}', "[".repeat(5000),
  '{"prompt": "' + "a".repeat(70000) + '"}', '{"messages": [{"role": "nobody"}]}'];
let seq = 0;

// A streaming request on a raw socket, closed after its first bytes.
const dropStream = (body) => new Promise(resolve => {
  const b = JSON.stringify(body);
  const c = net.connect(port, "127.0.0.1", () => c.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(b)}\r\n\r\n${b}`));
  c.on("data", () => c.destroy());
  c.on("close", resolve);
  c.on("error", resolve);
  setTimeout(() => { c.destroy(); resolve(); }, 30000);
});

async function client() {
  while (running) {
    const i = seq++;
    const p = prompts[i % prompts.length];
    const chat = i % 2 === 1;
    const path = chat ? "/v1/chat/completions" : "/v1/completions";
    const max_tokens = 8 + (i * 37) % 120;
    const base = { ...(chat ? { messages: [{ role: "user", content: p }] } : { prompt: p }), max_tokens,
      temperature: i % 3 ? 0.8 : 0, seed: i, stream: i % 4 < 2 };
    try {
      if (i % 10 === 3) {
        const r = await request(port, "POST", path, bad[i % bad.length], { timeoutMs: 60000 });
        counts[r.status >= 400 && r.status < 500 ? "rejected" : "unexpected"]++;
      } else if (i % 10 === 7) {
        await dropStream({ prompt: p, max_tokens: 200, stream: true });
        counts.dropped++;
      } else {
        const r = await request(port, "POST", path, base, { timeoutMs: 120000 });
        counts[r.status === 200 ? "ok" : r.status === 503 ? "busy" : "unexpected"]++;
      }
    } catch (e) {
      // An over-limit body may be cut off by the server's 413 while it is sent.
      if (i % 10 === 3 && /ECONNRESET|EPIPE/.test(e.message)) counts.rejected++;
      else counts.unexpected++;
    }
  }
}

await Promise.all(Array.from({ length: width }, client));
console.log(JSON.stringify(counts));

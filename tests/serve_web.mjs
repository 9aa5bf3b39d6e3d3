// The chat page at / in headless Chromium: settings typed into the page reach
// the request, the reply streams in (the page shows partial text before the
// end) and equals the server's own non-streamed answer to the same request.
// Usage: node serve_web.mjs BASE_URL CHROMIUM SCREENSHOT.png
import { createRequire } from "node:module";
import assert from "node:assert/strict";

const require = createRequire(process.env.NODE_PATH + "/");
const { chromium } = require("playwright-core");
const [base, executablePath, screenshot] = process.argv.slice(2);
const system = "You tell short stories about a cat named Tom.";

const browser = await chromium.launch({ executablePath, headless: true, args: ["--no-sandbox"] });
let failed = false;
try {
  const page = await browser.newPage({ viewport: { width: 1000, height: 800 } });
  // A reply can be generated faster than the page reads it, and one read of
  // many events renders once. Throttled to 16 KB/s, the stream arrives in many
  // reads whatever the machine's speed, so partial replies must show.
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("Network.enable");
  await cdp.send("Network.emulateNetworkConditions",
                 { offline: false, latency: 0, downloadThroughput: 16384, uploadThroughput: -1 });
  page.setDefaultTimeout(30000);
  page.on("pageerror", e => { failed = true; console.log("FAIL: page error:", e.message); });
  let sent = null;
  page.on("request", r => { if (r.url().endsWith("/v1/chat/completions")) sent = r.postDataJSON(); });
  await page.goto(base + "/");
  assert.equal(await page.title(), "qkv chat");

  await page.click("summary");
  await page.fill("#system", system);
  await page.fill("#temperature", "0");
  await page.fill("#top_k", "7");
  await page.fill("#max_tokens", "200");
  // Every state of the reply's text as the page shows it.
  await page.evaluate(() => {
    window.replyStates = [];
    new MutationObserver(() => {
      const t = document.querySelector(".msg.assistant .text");
      if (t && t.textContent && t.textContent !== window.replyStates.at(-1)) window.replyStates.push(t.textContent);
    }).observe(document.getElementById("log"), { subtree: true, childList: true, characterData: true });
  });
  await page.fill("#input", "Once upon a time");
  await page.click("#send");
  await page.waitForSelector(".msg.assistant[data-done='1']");
  const reply = await page.textContent(".msg.assistant .text");
  const states = await page.evaluate(() => window.replyStates);
  const status = await page.textContent("#status");
  await page.screenshot({ path: screenshot, fullPage: true });
  console.log("screenshot:", screenshot);

  assert.ok(sent, "the page sent no request to /v1/chat/completions");
  assert.equal(sent.stream, true);
  assert.deepEqual(sent.messages, [{ role: "system", content: system }, { role: "user", content: "Once upon a time" }]);
  assert.equal(sent.temperature, 0);
  assert.equal(sent.top_k, 7);
  assert.equal(sent.max_tokens, 200);
  assert.match(status, /^\d+ prompt \+ \d+ new tokens$/, `status line: ${status}`);

  // The same request, not streamed: greedy, so the same text.
  const solo = await fetch(base + "/v1/chat/completions", { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ ...sent, stream: false, stream_options: undefined }) }).then(r => r.json());
  assert.ok(solo.choices, `the non-streamed request failed: ${JSON.stringify(solo)}`);
  const want = solo.choices[0].message.content;
  assert.ok(want.length > 20, `the reply is too short to show streaming: ${JSON.stringify(want)}`);
  assert.equal(reply, want);
  assert.equal(states.at(-1), want);
  const partial = states.filter(s => s.length < want.length);
  assert.ok(partial.length >= 2, `the page showed ${partial.length} partial states before the full reply`);
  for (const s of partial) assert.ok(want.startsWith(s), `a partial state is not a prefix of the reply: ${s}`);
  console.log(`ok: ${reply.length} characters in ${states.length} states; request carried the system prompt and sampler`);
} catch (e) {
  failed = true;
  console.log("FAIL:", e && e.stack ? e.stack : e);
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);

// The chat page at GET /: plain HTML and JavaScript, no build step. It streams
// replies from /v1/chat/completions and keeps the conversation in the page.
#include "tools/serve/server.h"

namespace qkv::serve {

const char* web_page() {
  return R"HTML(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>qkv chat</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font-family:system-ui,sans-serif;max-width:52rem;margin:0 auto;padding:1rem;background:#fafafa}
#log{border:1px solid #ccc;background:#fff;min-height:18rem;padding:.5rem;overflow-y:auto;max-height:60vh}
.msg{white-space:pre-wrap;margin:.4rem 0}.user{color:#124}.assistant{color:#231}
.role{font-weight:bold;margin-right:.4rem}
fieldset{margin:.5rem 0}label{margin-right:.8rem}input[type=number]{width:5rem}
textarea{width:100%;box-sizing:border-box}#status{color:#666;font-size:.9em}
</style></head><body>
<h1>qkv chat</h1>
<details><summary>Settings</summary>
<fieldset><legend>System prompt</legend><textarea id="system" rows="2">You are a helpful assistant.</textarea></fieldset>
<fieldset><legend>Sampler</legend>
<label>temperature <input id="temperature" type="number" step="0.05" min="0" max="2" value="0.8"></label>
<label>top_p <input id="top_p" type="number" step="0.05" min="0.01" max="1" value="0.95"></label>
<label>top_k <input id="top_k" type="number" min="0" value="40"></label>
<label>min_p <input id="min_p" type="number" step="0.01" min="0" max="0.99" value="0.05"></label>
<label>max_tokens <input id="max_tokens" type="number" min="1" value="256"></label>
<label>repeat_penalty <input id="repeat_penalty" type="number" step="0.05" min="0" value="1"></label>
<label>API key <input id="key" type="password" size="12"></label>
</fieldset></details>
<div id="log"></div>
<form id="form"><textarea id="input" rows="3" placeholder="Type a message; Enter sends, Shift+Enter is a new line"></textarea>
<button id="send" type="submit">Send</button> <button id="stop" type="button" disabled>Stop</button>
<button id="clear" type="button">Clear</button> <span id="status"></span></form>
<script>
"use strict";
const $ = id => document.getElementById(id);
let history = [], controller = null;
function add(role, text) {
  const d = document.createElement("div"); d.className = "msg " + role;
  const r = document.createElement("span"); r.className = "role"; r.textContent = role + ":";
  const t = document.createElement("span"); t.className = "text"; t.textContent = text;
  d.append(r, t); $("log").append(d); $("log").scrollTop = $("log").scrollHeight; return t;
}
function num(id) { return Number($(id).value); }
async function send(text) {
  history.push({role: "user", content: text}); add("user", text);
  const out = add("assistant", ""); let reply = "";
  const messages = [];
  if ($("system").value.trim()) messages.push({role: "system", content: $("system").value});
  const body = {messages: messages.concat(history), stream: true, stream_options: {include_usage: true},
    temperature: num("temperature"), top_p: num("top_p"), top_k: num("top_k"), min_p: num("min_p"),
    max_tokens: num("max_tokens"), repeat_penalty: num("repeat_penalty")};
  const headers = {"Content-Type": "application/json"};
  if ($("key").value) headers.Authorization = "Bearer " + $("key").value;
  controller = new AbortController(); $("send").disabled = true; $("stop").disabled = false;
  $("status").textContent = "generating...";
  try {
    const res = await fetch("/v1/chat/completions", {method: "POST", headers, body: JSON.stringify(body), signal: controller.signal});
    if (!res.ok) { const e = await res.json().catch(() => ({})); throw new Error((e.error && e.error.message) || res.statusText); }
    const reader = res.body.getReader(), dec = new TextDecoder(); let buf = "";
    for (;;) {
      const {value, done} = await reader.read(); if (done) break;
      buf += dec.decode(value, {stream: true}); let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const ev = buf.slice(0, i); buf = buf.slice(i + 2);
        if (!ev.startsWith("data: ")) continue;
        const data = ev.slice(6); if (data === "[DONE]") continue;
        const j = JSON.parse(data);
        if (j.error) throw new Error(j.error.message);
        if (j.usage) $("status").textContent = j.usage.prompt_tokens + " prompt + " + j.usage.completion_tokens + " new tokens";
        if (j.choices && j.choices[0] && j.choices[0].delta && j.choices[0].delta.content) {
          reply += j.choices[0].delta.content; out.textContent = reply; $("log").scrollTop = $("log").scrollHeight;
        }
      }
    }
  } catch (e) { if (e.name !== "AbortError") $("status").textContent = "error: " + e.message; }
  history.push({role: "assistant", content: reply});
  out.parentElement.dataset.done = "1";
  controller = null; $("send").disabled = false; $("stop").disabled = true;
}
$("form").onsubmit = e => { e.preventDefault(); const t = $("input").value.trim(); if (t && !controller) { $("input").value = ""; send(t); } };
$("input").onkeydown = e => { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("form").requestSubmit(); } };
$("stop").onclick = () => controller && controller.abort();
$("clear").onclick = () => { history = []; $("log").textContent = ""; $("status").textContent = ""; };
</script></body></html>
)HTML";
}

}  // namespace qkv::serve

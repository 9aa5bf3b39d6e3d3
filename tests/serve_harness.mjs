// Test harness for qkv serve from Node (no packages): start a server on
// 127.0.0.1 and a free port, always kill it at exit; small HTTP helpers with
// timeouts on everything.
import { spawn } from "node:child_process";
import http from "node:http";

const servers = new Set();
process.on("exit", () => { for (const s of servers) s.kill("SIGKILL"); });
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => process.exit(1));

// The test servers' OpenMP threads sleep when idle (OMP_WAIT_POLICY=passive):
// CTest runs suites side by side, and spinning threads on oversubscribed cores
// slowed a request past a minute (docs/benchmarks.md, Serving). Benchmarks
// pass { passive: false } to run the server as a user does (OpenMP's default).
export async function startServer(qkv, args, { passive = true } = {}) {
  const env = passive ? { OMP_WAIT_POLICY: "passive", ...process.env } : { ...process.env };
  const proc = spawn(qkv, ["serve", "--host", "127.0.0.1", "--port", "0", ...args], { stdio: ["ignore", "ignore", "pipe"], env });
  servers.add(proc);
  let err = "";
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("the server did not start in 20 s: " + err)), 20000);
    proc.stderr.on("data", d => {
      err += d;
      const m = err.match(/listening on http:\/\/[^:]+:(\d+)/);
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
    });
    proc.on("exit", code => { clearTimeout(timer); reject(new Error("the server exited with " + code + ": " + err)); });
  });
  const exited = new Promise(resolve => proc.on("exit", (code, signal) => { servers.delete(proc); resolve({ code, signal }); }));
  return {
    port, proc,
    async stop() { proc.kill("SIGTERM"); const t = setTimeout(() => proc.kill("SIGKILL"), 20000); const r = await exited; clearTimeout(t); return r; },
  };
}

// A request; resolves {status, headers, body} (body a string). Never hangs past timeoutMs.
export function request(port, method, path, body, { timeoutMs = 60000, headers = {} } = {}) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : (typeof body === "string" ? body : JSON.stringify(body));
    const req = http.request({ host: "127.0.0.1", port, method, path, agent: false,
      headers: { "Content-Type": "application/json", ...headers } }, res => {
      let out = "";
      res.setEncoding("utf8");
      res.on("data", d => { out += d; });
      res.on("end", () => resolve({ status: res.statusCode, headers: res.headers, body: out }));
      res.on("error", reject);
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`${method} ${path} timed out`)));
    req.on("error", reject);
    if (data !== undefined) req.write(data);
    req.end();
  });
}

// The JSON chunks of an SSE body (without [DONE]); throws on bad framing.
export function sseChunks(body) {
  const events = body.split("\n\n");
  if (events.pop() !== "") throw new Error("the stream does not end with a blank line");
  if (events[events.length - 1] !== "data: [DONE]") throw new Error("no [DONE]: " + body.slice(-200));
  return events.slice(0, -1).map(e => {
    if (!e.startsWith("data: ")) throw new Error("bad event " + e);
    return JSON.parse(e.slice(6));
  });
}

export async function metric(port, name) {
  const r = await request(port, "GET", "/metrics", undefined, { timeoutMs: 10000 });
  const m = r.body.match(new RegExp("^" + name + " ([0-9.e+-]+)$", "m"));
  return m ? Number(m[1]) : NaN;
}

export const sleep = ms => new Promise(r => setTimeout(r, ms));

// Named checks: check(name, f) runs f and prints "ok" or "FAIL" with its time;
// failed() counts the failures; done() prints the tally and exits 1 if any failed.
export function checks() {
  let failures = 0;
  return {
    async check(name, f) {
      const t0 = Date.now();
      try {
        await f();
        console.log(`ok   ${name} (${Date.now() - t0} ms)`);
      } catch (e) {
        failures++;
        console.log(`FAIL ${name}: ${e.stack || e}`);
      }
    },
    failed: () => failures,
    done() {
      console.log(failures ? `${failures} failure(s)` : "all passed");
      process.exit(failures ? 1 : 0);
    },
  };
}

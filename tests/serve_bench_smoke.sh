#!/usr/bin/env bash
# bench/serve_bench.mjs on stories260K.gguf, rounds of 1, 3 and 3 clients of 8
# tokens: every client of every round gets all its tokens (the script fails
# otherwise), the JSON report has every round and qkv bench's decode row, and
# the second 3-client round's prompts are new ones (the prompt cache may keep
# a token or two of each, not a whole prompt). Figures unchecked.
set -u
QKV="$1" MODEL="$2/models/stories260K.gguf" BENCH="$3"
[ -f "$MODEL" ] || { echo "SKIPPED: $MODEL is absent"; exit 77; }
command -v node >/dev/null || { echo "SKIPPED: node is not installed"; exit 77; }
out=$(timeout 200 node "$BENCH" "$QKV" "$MODEL" --clients 1,3,3 --tokens 8 --slots 3 -t 1 --json) ||
  { echo "FAIL: serve_bench.mjs failed"; exit 1; }
echo "$out"
echo "$out" | node -e '
let s = "";
process.stdin.on("data", d => { s += d; }).on("end", () => {
  const r = JSON.parse(s);
  const fresh = r.rounds.length === 3 && r.rounds[2].cached_tokens < r.rounds[2].prompt_tokens;
  if (!fresh) console.log("FAIL: the repeated round reused its prompts (cached tokens " + r.rounds[2]?.cached_tokens + ")");
  const ok = fresh && r.rounds[0].tokens === 8 && r.rounds[1].tokens === 24 && r.rounds[2].tokens === 24 &&
    r.rounds.every(x => x.tokens_per_s > 0 && x.stream_tokens_per_s_p50 > 0 && x.ttft_p50_s > 0 && x.itl_p99_s > 0) && r.qkv_bench.decode_tokens_per_s > 0;
  console.log(ok ? "ok: every round and the qkv bench row" : "FAIL: the report is incomplete");
  process.exit(ok ? 0 : 1);
});'

#!/usr/bin/env bash
# A fresh process reports its load to first token: qkv run on stderr (load
# time plus the prompt's pass), qkv bench in its header and its JSON
# (cold_start: load, first token, the model file's read time for scale) for a
# model file, and no cold start for a synthetic model, which is made, not loaded.
set -u
QKV="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
model=$dir/tiny.gguf
"$QKV" make-model tiny -q -o "$model" || { echo "FAIL: make-model"; exit 1; }
err=$("$QKV" run -m "$model" -p "Once upon a time" -n 4 --temp 0 2>&1 >/dev/null) || { echo "FAIL: run: $err"; exit 1; }
load=$(printf '%s\n' "$err" | sed -n 's/^qkv: load time *= *\([0-9.]*\) ms$/\1/p')
prompt=$(printf '%s\n' "$err" | sed -n 's/^qkv: prompt eval time = *\([0-9.]*\) ms.*/\1/p')
first=$(printf '%s\n' "$err" | sed -n 's/^qkv: load to first token = *\([0-9.]*\) ms$/\1/p')
if [ -z "$load" ] || [ -z "$prompt" ] || [ -z "$first" ]; then
  echo "FAIL: run's timings lack load, prompt or load to first token: $err"; fail=1
else
  # The sum of the two lines above it, each rounded to 0.01 ms.
  awk -v l="$load" -v p="$prompt" -v f="$first" 'BEGIN {d = l + p - f; exit !(d < 0.02 && d > -0.02)}' ||
    { echo "FAIL: load to first token $first is not load $load + prompt $prompt"; fail=1; }
fi

json=$("$QKV" bench -m "$model" --prompt-lengths none --depths none --batches none --no-probe --json 2>/dev/null) ||
  { echo "FAIL: bench --json"; exit 1; }
printf '%s' "$json" | python3 -c '
import json, sys
c = json.load(sys.stdin)["cold_start"]
assert c is not None, "no cold_start for a model file"
assert c["load_ms"] >= 0 and c["first_token_ms"] > 0 and c["warm_first_token_ms"] > 0, c
assert abs(c["load_to_first_token_ms"] - c["load_ms"] - c["first_token_ms"]) < 1e-6, c
assert c["prompt_tokens"] == 32 and c["context"] > 0 and c["file_read_ms"] > 0, c
' || { echo "FAIL: bench's cold_start: $json"; fail=1; }
"$QKV" bench -m "$model" --prompt-lengths none --depths none --batches none --no-probe 2>/dev/null |
  grep -q "cold start: load .* ms, then the first token of a 32-token prompt (context [0-9]*) .* ms (.* ms warm)" || { echo "FAIL: bench's header has no cold start"; fail=1; }
synthetic=$("$QKV" bench --synthetic tiny --prompt-lengths none --depths none --batches none --no-probe --json 2>/dev/null)
printf '%s' "$synthetic" | python3 -c 'import json, sys; assert json.load(sys.stdin)["cold_start"] is None' ||
  { echo "FAIL: a synthetic model reported a cold start"; fail=1; }
[ $fail -eq 0 ] && echo "cli_cold_start: all checks passed"
exit $fail

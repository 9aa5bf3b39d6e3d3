#!/usr/bin/env bash
# --memory-limit on qkv run, chat, serve and bench: a limit below the context's bytes
# fails before allocating, naming the weights, the KV cache and the
# activations; a generous one changes nothing; a malformed one is a usage error.
set -u
QKV="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
model=$dir/tiny.gguf
"$QKV" make-model tiny -q -o "$model" || { echo "FAIL: make-model"; exit 1; }
fail=0
parts() {  # $1: command, $2: its stderr
  for part in "weights " "KV cache " "activations " "over the memory limit of 1024 bytes"; do
    printf '%s' "$2" | grep -q -- "$part" || { echo "FAIL: $1 error lacks '$part': '$2'"; fail=1; }
  done
}
run() { "$QKV" run -m "$model" -p "Once upon a time" -n 8 --temp 0 -q -t 1 "$@"; }
err=$(run --memory-limit 1K 2>&1 >/dev/null); rc=$?
[ $rc -ne 0 ] || { echo "FAIL: run --memory-limit 1K exits 0"; fail=1; }
parts run "$err"
base=$(run) || { echo "FAIL: plain run"; exit 1; }
for limit in 8G 64M 1073741824; do
  out=$(run --memory-limit "$limit") || { echo "FAIL: run --memory-limit $limit exits non-zero"; fail=1; continue; }
  [ "$out" == "$base" ] || { echo "FAIL: --memory-limit $limit changed the output"; fail=1; }
done
for bad in 0 -5 12X 1.5G 20000000000G ""; do
  err=$(run --memory-limit "$bad" 2>&1 >/dev/null); rc=$?
  [ $rc -ne 0 ] && printf '%s' "$err" | grep -q -- "--memory-limit wants a byte count" ||
    { echo "FAIL: --memory-limit '$bad': rc $rc '$err'"; fail=1; }
done
err=$(echo hi | "$QKV" chat -m "$model" -n 2 -t 1 --memory-limit 1024 2>&1 >/dev/null); rc=$?
[ $rc -ne 0 ] || { echo "FAIL: chat --memory-limit 1024 exits 0"; fail=1; }
parts chat "$err"
out=$(echo hi | "$QKV" chat -m "$model" -n 2 -t 1 --temp 0 --memory-limit 1G 2>/dev/null) ||
  { echo "FAIL: chat --memory-limit 1G exits non-zero"; fail=1; }
err=$(timeout 20 "$QKV" serve -m "$model" --port 0 -t 1 --memory-limit 1K 2>&1 >/dev/null); rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || { echo "FAIL: serve --memory-limit 1K: rc $rc"; fail=1; }
parts serve "$err"
printf '%s' "$err" | grep -q "4 sequences" || { echo "FAIL: serve error lacks the slot count: '$err'"; fail=1; }
bench() { "$QKV" bench -m "$model" -t 1 --no-probe --reps 1 --warmup 0 --steps 2 -q --prompt-lengths 8 --depths 0 "$@"; }
err=$(bench --batches none --memory-limit 1K 2>&1 >/dev/null); rc=$?
[ $rc -ne 0 ] || { echo "FAIL: bench --memory-limit 1K exits 0"; fail=1; }
parts bench "$err"
err=$(bench --memory-limit 12X 2>&1 >/dev/null); rc=$?
[ $rc -ne 0 ] && printf '%s' "$err" | grep -q -- "--memory-limit wants a byte count" ||
  { echo "FAIL: bench --memory-limit 12X: rc $rc '$err'"; fail=1; }
bench --batches 16 --memory-limit 1G >/dev/null 2>&1 || { echo "FAIL: bench --memory-limit 1G exits non-zero"; fail=1; }
# The batched rows' decoder (16 sequences) is larger than the prefill one's:
# a limit between the two fails at the batched rows, naming them.
err=$(bench --prompt-lengths none --depths none --batches 16 --batch-depth 1000 --memory-limit 1M 2>&1 >/dev/null); rc=$?
[ $rc -ne 0 ] && printf '%s' "$err" | grep -q "16 sequences" ||
  { echo "FAIL: bench batches 16 over 1M: rc $rc '$err'"; fail=1; }
[ $fail -eq 0 ] && echo "cli memory limit: ok"
exit $fail

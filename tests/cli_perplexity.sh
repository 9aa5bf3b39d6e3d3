#!/usr/bin/env bash
# qkv perplexity: llama-perplexity's output lines and llama.cpp's F32 figures, the
# KL-divergence report against llama.cpp's base file, --json, and bad usage.
# Usage: cli_perplexity.sh QKV SHARED_DIR. Skips (exit 0, with a message) without the shared data.
set -u
qkv=$1
shared=$2
model=$shared/models/tinystories-3M-F32.gguf
text=$shared/reference/ppl-text.txt
base=$shared/reference/tinystories-3M-F32.kld
if [[ ! -f $model || ! -f $text || ! -f $base ]]; then
  echo "SKIPPED: shared tinystories-3M data absent under $shared"
  exit 0
fi
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

out=$("$qkv" perplexity -m "$model" -f "$text" -c 128 --kv-type f32 -t 2 2>/dev/null) || fail "perplexity exited $?"
[[ $out == "[1]"*",[168]"* ]] || fail "running estimate [1]..[168] missing: ${out:0:80}"
grep -qx "Final estimate: PPL = 4.0096 +/- 0.06085" <<<"$out" || fail "final estimate differs from llama.cpp's: $(tail -1 <<<"$out")"

out=$("$qkv" perplexity -m "$model" --kl-divergence "$base" --kv-type f32 -t 2 2>/dev/null) || fail "--kl-divergence exited $?"
for line in "====== Perplexity statistics ======" "Mean PPL(Q)                   :" "Mean PPL(base)                :" \
            "====== KL divergence statistics ======" "Mean    KLD:" "Maximum KLD:" "99.9%   KLD:" "Median  KLD:" \
            "Minimum KLD:" "====== Token probability statistics ======" "Mean    Δp:" "RMS Δp    :" "Same top p: 100.000"; do
  grep -qF -- "$line" <<<"$out" || fail "KL-divergence report lacks '$line'"
done
[[ $(grep -c "^  20 " <<<"$out") == 1 ]] || fail "no row for chunk 20"

json=$("$qkv" perplexity -m "$model" -f "$text" -c 128 --chunks 3 --kv-type f32 --json 2>/dev/null)
[[ $json == "{"*'"chunks": 3'*'"ppl": '*"}" ]] || fail "--json: $json"

err=$("$qkv" perplexity -m "$model" -f "$shared/reference/stories260K-greedy.txt" -c 100000 2>&1 >/dev/null)
[[ $? -ne 0 ]] || fail "an oversized context should fail"
echo "Once upon a time." >"${TMPDIR:-/tmp}/qkv_ppl_short.$$"
err=$("$qkv" perplexity -m "$model" -f "${TMPDIR:-/tmp}/qkv_ppl_short.$$" -c 128 2>&1 >/dev/null)
rc=$?
rm -f "${TMPDIR:-/tmp}/qkv_ppl_short.$$"
[[ $rc == 1 && $err == *"needs at least 2 * n_ctx = 256 tokens"* ]] || fail "short text: rc $rc, $err"
err=$("$qkv" perplexity -m "$model" 2>&1 >/dev/null)
[[ $? == 2 && $err == *"-f TEXT"* ]] || fail "missing -f: $err"
err=$("$qkv" perplexity -m "$model" --kl-divergence "$text" 2>&1 >/dev/null)
[[ $? == 1 && $err == *"_logits_"* ]] || fail "a text as a base file: $err"

if [[ $failures -gt 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "cli_perplexity: all checks passed"

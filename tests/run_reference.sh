#!/usr/bin/env bash
# Greedy generation must match llama2.c's output byte for byte: for every prompt
# in the shared reference file, `qkv run --temp 0 --steps 256` on stories260K
# (.bin with tok512.bin, and the .gguf with its own vocabulary) prints exactly
# the text between "=== prompt: P" and "=== end". The reference file puts one
# newline of its own between llama2.c's output (which ends in "\n") and the
# "=== end" line (see its last prompt, cut off mid-sentence at 256 steps), so
# the output plus one "\n" must equal the block.
set -euo pipefail
qkv=$1
shared=$2
ref=$shared/reference/stories260K-greedy.txt
if [ ! -f "$ref" ] || [ ! -f "$shared/models/stories260K.bin" ]; then
  echo "SKIPPED: $shared is absent (the shared models live beside the project root)"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Split the reference into one expected-output file per prompt.
awk -v dir="$tmp" '
  /^=== prompt: / { n++; p = substr($0, 13); printf "%s", p > (dir "/prompt" n); close(dir "/prompt" n); out = dir "/expected" n; printf "" > out; next }
  /^=== end$/ { close(out); out = ""; next }
  out != "" { print >> out }
' "$ref"

fail=0
count=0
for pf in "$tmp"/prompt*; do
  i=${pf##*/prompt}
  prompt=$(cat "$pf")
  for model in bin gguf; do
    if [ $model = bin ]; then
      args=(-m "$shared/models/stories260K.bin" -z "$shared/models/tok512.bin")
    else
      args=(-m "$shared/models/stories260K.gguf")
    fi
    "$qkv" run "${args[@]}" --temp 0 --steps 256 -p "$prompt" >"$tmp/got$i.$model" 2>"$tmp/err$i.$model" || {
      echo "FAIL: qkv run exited non-zero for prompt '$prompt' ($model)"; cat "$tmp/err$i.$model"; fail=$((fail + 1)); continue; }
    count=$((count + 1))
    printf '\n' >>"$tmp/got$i.$model"
    if cmp -s "$tmp/got$i.$model" "$tmp/expected$i"; then
      echo "ok: prompt '$prompt' ($model)"
    else
      echo "FAIL: prompt '$prompt' ($model) differs from llama2.c:"
      diff "$tmp/expected$i" "$tmp/got$i.$model" | head -20
      fail=$((fail + 1))
    fi
  done
done
[ $count -gt 0 ] || { echo "FAIL: no prompt found in $ref"; exit 1; }
echo "$((count - 0)) compared, $fail failed"
[ $fail -eq 0 ]

#!/usr/bin/env bash
# qkv run's speculative decoding flags (llama.cpp's spellings): greedy output
# with a draft model (-md, --model-draft) and with prompt lookup (--spec-type
# ngram) identical to plain decoding's on the trained pair stories260K ->
# tinystories-3M, the drafted/accepted line in the timings, and clear errors
# (exit 1 or 2 with a message) for bad flags and a missing draft file.
# Usage: cli_speculative.sh QKV SHARED_DIR. Skips (exit 0, with a message) without the shared data.
set -u
qkv=$1
shared=$2
target=$shared/models/tinystories-3M-F32.gguf
draft=$shared/models/stories260K.gguf
for f in "$target" "$draft"; do
  if [[ ! -f $f ]]; then
    echo "SKIPPED: $f is absent"
    exit 0
  fi
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

prompt="Lily and Ben found a little red box in the garden. Lily and Ben"
run=("$qkv" run -m "$target" -p "$prompt" --temp 0 -n 80 --seed 1)
"${run[@]}" >"$tmp/plain.txt" 2>"$tmp/plain.err" || fail "plain run (exit $?): $(cat "$tmp/plain.err")"
for variant in "-md $draft" "--model-draft $draft --draft-max 4 --draft-p-min 0" "--spec-type ngram" \
               "--spec-type ngram --spec-ngram-size 1 --draft 8 --draft-min 2" "-md $draft --draft-n 2"; do
  # shellcheck disable=SC2086
  if ! "${run[@]}" $variant >"$tmp/spec.txt" 2>"$tmp/spec.err"; then
    fail "$variant (exit $?): $(cat "$tmp/spec.err")"
    continue
  fi
  if ! cmp -s "$tmp/plain.txt" "$tmp/spec.txt"; then
    fail "$variant: the output differs from plain decoding's"
    diff "$tmp/plain.txt" "$tmp/spec.txt" | head -5
  elif ! grep -Eq "qkv: speculative .* [0-9]+ drafted, [0-9]+ accepted \([0-9.]+%\)" "$tmp/spec.err"; then
    fail "$variant: no drafted/accepted line in the timings"
  else
    echo "ok: $variant: $(grep 'qkv: speculative' "$tmp/spec.err")"
  fi
done

expect_error() {  # expect_error DESCRIPTION CODE NEEDLE ARGS...: exit CODE and NEEDLE on stderr
  local what=$1 code=$2 needle=$3
  shift 3
  "$qkv" run -m "$target" -p "x" --temp 0 -n 4 "$@" >/dev/null 2>"$tmp/err"
  local rc=$?
  if [[ $rc -ne $code ]] || ! grep -qF -- "$needle" "$tmp/err"; then
    fail "$what: exit $rc (want $code), stderr: $(head -c 300 "$tmp/err")"
  else
    echo "ok: $what"
  fi
}
expect_error "missing draft file" 1 "loading the draft model" -md /nonexistent/draft.gguf
expect_error "--draft-max 0" 1 "--draft-max" -md "$draft" --draft-max 0
expect_error "--draft-max 257" 1 "--draft-max" --spec-type ngram --draft-max 257
expect_error "--draft-p-min 2" 1 "--draft-p-min" -md "$draft" --draft-p-min 2
expect_error "--draft-min above --draft-max" 2 "exceeds --draft-max" --spec-type ngram --draft-max 4 --draft-min 5
expect_error "unknown --spec-type" 2 "--spec-type 'lookahead' is not known" --spec-type lookahead
expect_error "--spec-ngram-size 0" 1 "--spec-ngram-size" --spec-type ngram --spec-ngram-size 0
expect_error "two drafters" 2 "exclude each other" -md "$draft" --spec-type ngram
expect_error "with a grammar" 1 "does not combine with a grammar" --spec-type ngram --grammar 'root ::= "a"'
# A draft of another vocabulary: a synthetic model written with a byte-level one.
if "$qkv" make-model tiny --type f32 -o "$tmp/other.gguf" -q >/dev/null 2>"$tmp/mk.err"; then
  expect_error "draft of another vocabulary" 1 "must share the target's vocabulary" -md "$tmp/other.gguf"
else
  fail "qkv make-model: $(cat "$tmp/mk.err")"
fi

if [[ $failures -ne 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all passed"

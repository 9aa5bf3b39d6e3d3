#!/usr/bin/env bash
# A value-taking flag followed by another flag is an error naming the flag
# that lacks its value (not a swallowed flag and a confusing "unknown flag"
# about the real value), in every command; negative numbers and "-" (standard
# input) still pass as values.
set -u
QKV="$1"
SHARED="${2:-}"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
model=$dir/tiny.gguf
"$QKV" make-model tiny -q -o "$model" || { echo "FAIL: make-model"; exit 1; }
printf 'Once upon a time there was a cat.\n' > "$dir/text.txt"
expect_missing() {  # flag, then the command line
  local flag=$1; shift
  local err rc
  err=$("$@" 2>&1 >/dev/null); rc=$?
  [ $rc -ne 0 ] && printf '%s' "$err" | grep -q -- "flag $flag needs a value, but the next word is the flag" ||
    { echo "FAIL: '$*': rc $rc '$err'"; fail=1; }
}
expect_missing -f "$QKV" perplexity -m "$model" -f --kv-type f32
expect_missing -n "$QKV" run -m "$model" -n -p hi
expect_missing -m "$QKV" bench -m --no-probe
expect_missing --slots "$QKV" serve -m "$model" --slots --port 0
expect_missing -o "$QKV" plot in.json -o --title x
expect_missing -t "$QKV" chat -m "$model" -t -n 4
# Values that start with a dash but are no flag.
"$QKV" run -m "$model" -p "Once upon a time" -n -1 --steps 12 --temp 0 -q >/dev/null ||
  { echo "FAIL: -n -1 is refused"; fail=1; }
printf 'Once upon a time' | "$QKV" tokenize -m "$model" -f - >/dev/null || { echo "FAIL: -f - is refused"; fail=1; }
# llama.cpp's flags qkv has no use for are accepted and ignored with a note;
# renamed ones mean qkv's flag (tools/llama_flags.cc).
run() { "$QKV" run -m "$model" -p "Once upon a time" -n 8 --temp 0 -q -t 1 "$@"; }
base=$(run 2>/dev/null) || { echo "FAIL: plain run"; exit 1; }
out=$(run -ngl 99 -fa --mlock --no-mmap --jinja -cb 2>"$dir/err") || { echo "FAIL: ignored flags refused: $(cat "$dir/err")"; fail=1; }
[ "$out" == "$base" ] || { echo "FAIL: ignored flags changed the output"; fail=1; }
grep -q -- "-ngl 99 ignored: qkv runs on the CPU" "$dir/err" && grep -q -- "-fa ignored" "$dir/err" ||
  { echo "FAIL: no note for the ignored flags: $(cat "$dir/err")"; fail=1; }
[ "$(run -ctk f32 -ctv f32 2>/dev/null)" == "$(run --kv-type f32 2>/dev/null)" ] || { echo "FAIL: -ctk/-ctv are not --kv-type"; fail=1; }
err=$(run -ctk nonsense 2>&1 >/dev/null); rc=$?
[ $rc -ne 0 ] && printf '%s' "$err" | grep -q "nonsense" || { echo "FAIL: -ctk nonsense: rc $rc '$err'"; fail=1; }
expect_missing --kv-type "$QKV" run -m "$model" -ctk -p hi
# qkv serve takes --chat-template-file itself (llama-server's spelling): a
# missing file is named.
err=$("$QKV" serve -m "$model" --chat-template-file "$dir/none.jinja" 2>&1 >/dev/null); rc=$?
[ $rc -ne 0 ] && printf '%s' "$err" | grep -q -- "cannot open '$dir/none.jinja'" ||
  { echo "FAIL: serve --chat-template-file: rc $rc '$err'"; fail=1; }

# llama-perplexity's spelling of a KL-divergence run: --kl-divergence-base
# names the base file and --kl-divergence is a switch; the same figures as
# qkv's --kl-divergence FILE.
for i in $(seq 40); do printf 'Once upon a time there was a little cat who liked the sun. '; done > "$dir/long.txt"
"$QKV" perplexity -m "$model" -f "$dir/long.txt" -c 32 --kl-divergence-base "$dir/base.kld" >/dev/null 2>&1 ||
  { echo "FAIL: writing a KL-divergence base"; fail=1; }
# The figures without the run's own time.
kld() { "$QKV" perplexity -m "$model" "$@" --json 2>/dev/null | sed 's/"seconds": [0-9.]*, //'; }
ours=$(kld --kl-divergence "$dir/base.kld")
theirs=$(kld --kl-divergence-base "$dir/base.kld" --kl-divergence)
[ -n "$ours" ] && [[ "$ours" == *'"kld": '* ]] && [ "$ours" == "$theirs" ] || { echo "FAIL: llama-perplexity's spelling: '$theirs' vs '$ours'"; fail=1; }
theirs=$(kld --kl-divergence --kl-divergence-base "$dir/base.kld")
[ "$ours" == "$theirs" ] || { echo "FAIL: the switch before the base: '$theirs'"; fail=1; }
err=$("$QKV" perplexity -m "$model" -f "$dir/long.txt" --kl-divergence 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ] && printf '%s' "$err" | grep -q -- "--kl-divergence without a file" ||
  { echo "FAIL: a lone --kl-divergence switch: rc $rc '$err'"; fail=1; }
# -f FILE: the prompt from a file, one trailing newline dropped (llama.cpp's -f).
printf 'Once upon a time\n' > "$dir/prompt.txt"
[ "$(run -f "$dir/prompt.txt" 2>/dev/null)" == "$base" ] || { echo "FAIL: -f FILE is not -p with its text"; fail=1; }
err=$("$QKV" run -m "$model" -f "$dir/none.txt" -n 4 2>&1 >/dev/null); rc=$?
[ $rc -ne 0 ] && printf '%s' "$err" | grep -q "cannot open '$dir/none.txt'" ||
  { echo "FAIL: -f of a missing file: rc $rc '$err'"; fail=1; }
# --ignore-eos: a trained model's story that ends (at BOS, this model's end of
# a story) goes on past it with the same text first.
trained=$SHARED/models/tinystories-3M-F32.gguf
if [ -f "$trained" ]; then
  story="Once upon a time there was a dog. The dog was happy. The end"
  ended=$("$QKV" run -m "$trained" -p "$story" --temp 0 -t 1 2>"$dir/err")
  grep -q "stopped by bos" "$dir/err" || { echo "FAIL: the story did not end at BOS: $(tail -1 "$dir/err")"; fail=1; }
  longer=$("$QKV" run -m "$trained" -p "$story" --temp 0 -t 1 --ignore-eos -n 300 2>"$dir/err")
  grep -q "stopped by n_predict after" "$dir/err" ||
    { echo "FAIL: --ignore-eos stopped early: $(tail -1 "$dir/err")"; fail=1; }
  [ -n "$ended" ] && [ ${#longer} -gt $(( ${#ended} + 20 )) ] && [ "${longer:0:${#ended}}" == "$ended" ] ||
    { echo "FAIL: --ignore-eos: ${#ended} then ${#longer} bytes"; fail=1; }
else
  echo "SKIP: --ignore-eos check: no tinystories-3M-F32.gguf under the shared dir '$SHARED'"
fi
[ $fail -eq 0 ] && echo "cli_flags: all checks passed"
exit $fail

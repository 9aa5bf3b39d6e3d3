#!/usr/bin/env bash
# qkv run's penalty and logit-bias flags: each changes greedy output on stories260K when set
# hard, is a no-op at its neutral value, and a bad value is a clear usage error.
set -u
QKV="$1"
MODEL="$2/models/stories260K.gguf"
if [ ! -f "$MODEL" ]; then echo "SKIPPED: $MODEL is absent"; exit 0; fi
run() { "$QKV" run -m "$MODEL" -p "Once upon a time" -n 48 --temp 0 -q -t 1 "$@"; }
fail=0
base=$(run) || { echo "FAIL: plain run"; exit 1; }
for flags in "--repeat-penalty 1.8" "--presence-penalty 3" "--frequency-penalty 2"; do
  # shellcheck disable=SC2086
  out=$(run $flags) || { echo "FAIL: $flags exits non-zero"; fail=1; continue; }
  [ "$out" != "$base" ] || { echo "FAIL: $flags did not change the output"; fail=1; }
  # shellcheck disable=SC2086
  same=$(run $flags --repeat-last-n 0)
  [ "$same" == "$base" ] || { echo "FAIL: $flags --repeat-last-n 0 changed the output"; fail=1; }
done
neutral=$(run --repeat-penalty 1 --presence-penalty 0 --frequency-penalty 0)
[ "$neutral" == "$base" ] || { echo "FAIL: neutral penalties changed the output"; fail=1; }
# Stop string: the output ends before it.
stop=$(printf '%s' "$base" | cut -c 30-35)
cut=$(run -r "$stop")
[ "$cut" == "${base%%"$stop"*}" ] || { echo "FAIL: -r '$stop' gave '$cut'"; fail=1; }
err=$("$QKV" run -m "$MODEL" --repeat-last-n -5 2>&1 >/dev/null); rc=$?
[ $rc -ne 0 ] && printf '%s' "$err" | grep -q -- "--repeat-last-n" || { echo "FAIL: bad --repeat-last-n: rc $rc '$err'"; fail=1; }
# Logit bias: banning the first generated token (the 5th of the echoed text)
# changes the output; bad values
# and tokens outside the vocabulary are clear errors.
first=$("$QKV" tokenize -m "$MODEL" --no-bos -- "$base" | cut -d' ' -f5)
banned=$(run -l "$first-inf")
[ "$banned" != "$base" ] || { echo "FAIL: -l $first-inf did not change the output"; fail=1; }
for bad in "2x" "+5" "99999+1"; do
  err=$("$QKV" run -m "$MODEL" -p "x" -n 1 -l "$bad" 2>&1 >/dev/null); rc=$?
  [ $rc -ne 0 ] && printf '%s' "$err" | grep -q -E -- "-l|logit bias" || { echo "FAIL: -l '$bad': rc $rc '$err'"; fail=1; }
done
[ $fail -eq 0 ] && echo "cli penalties: ok"
exit $fail

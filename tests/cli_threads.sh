#!/usr/bin/env bash
# qkv's -tb/--threads-batch, -C/--cpu-mask, -Cr/--cpu-range, --cpu-strict and
# --numa (tools/thread_flags.h): bad values exit 2 with a message naming the
# problem for each command that takes them; the threads of a running qkv
# (every task's Cpus_allowed_list in /proc, sampled while it decodes) are the
# CPUs asked for; greedy output is the same with and without the flags.
# Usage: cli_threads.sh QKV SHARED_DIR. Skips (exit 0, with a message) without the shared model.
set -u
qkv=$1
model=$2/models/tinystories-3M-Q8_0.gguf
if [[ ! -f $model ]]; then
  echo "SKIPPED: $model is absent"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# expect_error CODE TEXT ARGS...: qkv ARGS exits CODE and its stderr contains TEXT.
expect_error() {
  local code=$1 text=$2
  shift 2
  "$qkv" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [[ $rc != "$code" ]]; then
    fail "qkv $* exited $rc, expected $code; stderr: $(cat "$tmp/err")"
  elif ! grep -qF -- "$text" "$tmp/err"; then
    fail "qkv $*: stderr lacks '$text': $(cat "$tmp/err")"
  fi
}

allowed=$(grep Cpus_allowed_list /proc/self/status | cut -f2)
for cmd in run chat serve bench embed perplexity; do
  expect_error 2 "CPU mask '0xzz' is not hexadecimal ('z')" $cmd -m "$model" --cpu-mask 0xzz
  expect_error 2 "CPU range '5-2' ends before it starts" $cmd -m "$model" --cpu-range 5-2
  expect_error 2 "--numa takes distribute, isolate or numactl, not 'everywhere'" $cmd -m "$model" --numa everywhere
  expect_error 2 "flag -tb wants a whole number from 1 to 1024, not '0'" $cmd -m "$model" -tb 0
done
expect_error 2 "--numa mirror (a copy of the weights per node) is not implemented" run -m "$model" --numa mirror
expect_error 2 "CPU 1000 is not one this process may run on (allowed: " run -m "$model" -Cr 1000
expect_error 2 "flag --cpu-mask needs a value" run -m "$model" --cpu-mask
expect_error 2 "flag --cpu-strict wants a whole number from 0 to 1, not 'yes'" run -m "$model" --cpu-strict yes
# Commands that run no model do not take them.
expect_error 2 "unexpected argument '--numa'" quantize --numa distribute

# The same greedy text with each flag (a 1-node machine, or any: placement moves no result).
"$qkv" run -m "$model" -p "Once upon a time" -n 24 --temp 0 -q >"$tmp/plain" 2>"$tmp/err" || fail "plain run: $(cat "$tmp/err")"
[[ -s $tmp/plain ]] || fail "the plain run printed nothing"
for flags in "-tb 1" "-t 2 -tb 2" "--numa distribute" "--numa isolate" "--numa numactl" "--cpu-range 0-0" \
             "-C 1 --cpu-strict 1" "-t 2 --cpu-strict 1"; do
  # shellcheck disable=SC2086
  "$qkv" run -m "$model" -p "Once upon a time" -n 24 --temp 0 -q $flags >"$tmp/flagged" 2>"$tmp/err" ||
    fail "run with $flags: $(cat "$tmp/err")"
  cmp -s "$tmp/plain" "$tmp/flagged" || fail "run with $flags printed other text: $(cat "$tmp/flagged")"
done

# cpu_samples MIN_TASKS ARGS...: runs qkv bench ARGS in the background and
# prints the Cpus_allowed_list values of its threads, sampled every 50 ms
# (one line per thread per sample) from the time it has MIN_TASKS threads to
# its end. Before main() sets the placement (the shell's fork, the loader) its
# one thread still has the shell's CPUs.
cpu_samples() {
  local min_tasks=$1
  shift
  "$qkv" bench --synthetic 143M --prompt-lengths none --depths 0 --batches none --steps 16 --reps 2 --warmup 1 \
    --no-probe -q "$@" >/dev/null 2>"$tmp/bench_err" &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    tasks=(/proc/"$pid"/task/*)
    [[ ${#tasks[@]} -ge $min_tasks ]] && cat /proc/"$pid"/task/*/status 2>/dev/null | grep Cpus_allowed_list | cut -f2
    sleep 0.05
  done
  wait "$pid" || fail "qkv bench $*: $(cat "$tmp/bench_err")"
}
# cpu_lists ARGS...: the distinct values of cpu_samples from the time qkv has a
# second thread.
cpu_lists() { cpu_samples 2 "$@" | sort -u; }

first=$(echo "$allowed" | cut -d, -f1 | cut -d- -f1)
# One CPU: -t 2 runs one thread (threads beyond the usable CPUs are capped,
# with a note), and that thread runs on the CPU from the time it is placed on.
samples=$(cpu_samples 1 -t 2 --cpu-range "$first-$first")
placed=$(sed -n "/^$first\$/,\$p" <<<"$samples" | sort -u)
[[ $placed == "$first" ]] || fail "--cpu-range $first-$first: the thread ran on '$(echo $samples | tr ' ' '\n' | sort -u | tr '\n' ' ')', not only CPU $first"
grep -q "2 threads asked for, 1 CPU usable: running 1" "$tmp/bench_err" ||
  fail "-t 2 on one CPU gave no note of the cap: $(cat "$tmp/bench_err")"
if [[ $allowed == 0-1 || $allowed == 0-[1-9]* ]]; then
  lists=$(cpu_lists -t 2 --cpu-range 0-1 --cpu-strict 1)
  # Member 0 on CPU 0, member 1 on CPU 1; threads of no team (if any) keep 0-1.
  grep -qx 0 <<<"$lists" || fail "--cpu-strict 1: no thread ran on CPU 0 alone (saw '$(echo $lists)')"
  grep -qx 1 <<<"$lists" || fail "--cpu-strict 1: no thread ran on CPU 1 alone (saw '$(echo $lists)')"
  lists=$(cpu_lists -t 2 --cpu-mask 0x3)
  [[ $lists == 0-1 ]] || fail "--cpu-mask 0x3: the threads ran on '$(echo $lists)', not 0-1"
else
  echo "CPUs 0 and 1 are not both allowed ($allowed): the two-CPU pinning checks are skipped"
fi

if [[ $failures -gt 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "cli_threads: all checks passed"

#!/usr/bin/env bash
# --poll N (0..100 microseconds a waiting thread spins before it blocks):
# libgomp reads the spin count libqkv_openmp_wait.so sets from it (so the
# library's initializer ran before libgomp's), a user's own OpenMP settings are
# kept, qkv info --cpu reports the level, any level leaves greedy output as it
# is, and a bad level is a usage error naming the flag.
set -u
QKV="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
# The spin count libgomp itself read (OMP_DISPLAY_ENV prints its settings at load).
gomp_spin() { OMP_DISPLAY_ENV=verbose "$@" 2>&1 >/dev/null | sed -n "s/^ *GOMP_SPINCOUNT = '\([0-9]*\)'.*/\1/p"; }
default=$(gomp_spin "$QKV" version)
if [ -z "$default" ]; then
  echo "SKIPPED (OpenMP part): the OpenMP runtime is not libgomp (no GOMP_SPINCOUNT in OMP_DISPLAY_ENV)"
else
  # libgomp's own default is 300000 pauses; qkv's is 50 us of them (a pause
  # takes from about 1 to 150 ns across x86 cores: 50 to 50000 of them).
  { [ "$default" -gt 0 ] && [ "$default" -lt 300000 ]; } ||
    { echo "FAIL: libgomp read GOMP_SPINCOUNT=$default, not qkv's 50 us"; fail=1; }
  zero=$(gomp_spin "$QKV" version --poll 0)
  [ "$zero" = "0" ] || { echo "FAIL: --poll 0 gave libgomp GOMP_SPINCOUNT=$zero"; fail=1; }
  hundred=$(gomp_spin "$QKV" version --poll 100)
  { [ -n "$hundred" ] && [ "$hundred" -gt "$default" ]; } ||
    { echo "FAIL: --poll 100 gave GOMP_SPINCOUNT=$hundred, not more than the default's $default"; fail=1; }
  mine=$(GOMP_SPINCOUNT=12345 gomp_spin "$QKV" version)
  [ "$mine" = "12345" ] || { echo "FAIL: a user's GOMP_SPINCOUNT=12345 became $mine"; fail=1; }
  info=$(OMP_WAIT_POLICY=active "$QKV" info --cpu)
  printf '%s' "$info" | grep -q "OMP_WAIT_POLICY=active GOMP_SPINCOUNT=(unset)" ||
    { echo "FAIL: with OMP_WAIT_POLICY=active qkv still set a spin count: $info"; fail=1; }
fi
"$QKV" info --cpu --poll 7 | grep -q "waits spin 7 us, then block" || { echo "FAIL: info --cpu does not report --poll 7"; fail=1; }
"$QKV" info --cpu | grep -q "waits spin 50 us, then block" || { echo "FAIL: info --cpu does not report the default 50"; fail=1; }

model=$dir/tiny.gguf
"$QKV" make-model tiny -q -o "$model" || { echo "FAIL: make-model"; exit 1; }
run() { "$QKV" run -m "$model" -p "Once upon a time" -n 24 --temp 0 -q -t 2 "$@"; }
base=$(run) || { echo "FAIL: plain run"; exit 1; }
for level in 0 1 100; do
  out=$(run --poll "$level") || { echo "FAIL: run --poll $level exits non-zero"; fail=1; continue; }
  [ "$out" == "$base" ] || { echo "FAIL: --poll $level changed the greedy output"; fail=1; }
done
for bad in 101 -1 x 5us ""; do
  err=$("$QKV" run -m "$model" -p hi -n 1 --poll "$bad" 2>&1 >/dev/null); rc=$?
  [ $rc -eq 2 ] && printf '%s' "$err" | grep -q -- "--poll takes a level from 0 to 100" ||
    { echo "FAIL: --poll '$bad': rc $rc '$err'"; fail=1; }
done
err=$("$QKV" bench --poll 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ] && printf '%s' "$err" | grep -q -- "--poll takes a level" || { echo "FAIL: a bare --poll: rc $rc '$err'"; fail=1; }
[ $fail -eq 0 ] && echo "cli_poll: all checks passed"
exit $fail

#!/bin/bash
# scripts/speed_table.sh refuses bad arguments with exit status 2 and a message
# naming the problem, before it writes or runs anything; --help exits 0.
# usage: speed_table_args.sh QKV
set -u
qkv=$1
script="$(dirname "$0")/../scripts/speed_table.sh"
fail=0
expect() {  # expect STATUS MESSAGE_PART ARGS...
  local want=$1 part=$2
  shift 2
  local err rc
  err=$(QKV_BIN="$qkv" bash "$script" "$@" 2>&1 >/dev/null)
  rc=$?
  if [ "$rc" != "$want" ] || ! grep -qF -- "$part" <<<"$err"; then
    echo "FAIL: speed_table.sh $* gave status $rc (want $want) and: $err"
    fail=1
  else
    echo "ok: speed_table.sh $* -> $want ($part)"
  fi
}
expect 2 "unknown option '--bogus'" --bogus
expect 2 "--threads needs a value" --threads
expect 2 "--threads takes a positive integer, not 'x'" --threads x
expect 2 "--reps takes a positive integer, not '0'" --reps 0
expect 2 "unexpected argument 'somewhere'" somewhere
expect 2 "--embed-batch takes a positive integer, not '0'" --embed --embed-batch 0
expect 2 "--embed-lengths takes lengths such as 16,64, not '16,'" --embed --embed-lengths 16,
expect 2 "--isa needs a value" --isa
expect 2 "--cases takes a bash regular expression, not '('" --cases '(' --out /nonexistent/speed
expect 2 "--cases '^7B' matches none of the table's cases" --cases '^7B' --out /nonexistent/speed
expect 0 "" --help
out=$(QKV_BIN=/nonexistent/qkv bash "$script" --quick 2>&1)
rc=$?
if [ "$rc" != 1 ] || ! grep -qF "no qkv binary at /nonexistent/qkv" <<<"$out"; then
  echo "FAIL: a missing qkv binary gave status $rc and: $out"; fail=1
fi
# A level qkv does not know is refused with qkv's own list of levels.
err=$(QKV_BIN="$qkv" bash "$script" --isa avx9 --out /nonexistent/speed 2>&1 >/dev/null)
rc=$?
if [ "$rc" != 2 ] || ! grep -qF "unknown ISA level 'avx9'" <<<"$err"; then
  echo "FAIL: --isa avx9 gave status $rc and: $err"; fail=1
fi
exit $fail

#!/usr/bin/env bash
# QKV_ISA and --isa from the command line: the cap shows in qkv info --cpu and
# moves the dispatch; bad levels, ARM levels on x86, levels the CPU lacks and
# conflicting caps are refused with exit code 2 (1 for qkv bench's flag
# errors) and a message naming the valid levels or what the CPU has.
# usage: isa_caps_cli.sh QKV
set -uo pipefail
qkv=$1
unset QKV_ISA
fails=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# expect CODE PATTERN CMD...: CMD exits with CODE and its output matches PATTERN.
expect() {
  local code=$1 pattern=$2
  shift 2
  "$@" >"$out" 2>&1
  local rc=$?
  if [[ $rc -ne $code ]] || ! grep -qE -- "$pattern" "$out"; then
    echo "FAIL: $* (exit $rc, want $code; want output matching '$pattern'):"
    sed 's/^/  | /' "$out"
    fails=$((fails + 1))
  fi
}

valid='valid levels: scalar, sse4, avx2, avx2-vnni, avx512, avx512-vnni, amx, neon, sve, sve2'
expect 2 "^qkv: QKV_ISA=avx3: unknown ISA level 'avx3' \\($valid\\)" env QKV_ISA=avx3 "$qkv" info --cpu
expect 2 "unknown ISA level 'foo' \\($valid\\)" "$qkv" info --cpu --isa foo
expect 1 "unknown ISA level 'foo'" "$qkv" bench --isa foo --synthetic tiny
expect 0 '^isa cap: none; levels this CPU and build can run: ' "$qkv" info --cpu

levels=$("$qkv" info --cpu | sed -n 's/^isa cap: none; levels this CPU and build can run: //p')
case $(uname -m) in
  x86_64)
    expect 2 'cannot cap at neon: an ARM level on an x86-64 CPU \(levels this CPU and build can run: ' \
      env QKV_ISA=neon "$qkv" version
    expect 2 'cannot cap at sve2: an ARM level' "$qkv" info --cpu --isa sve2
    ;;
esac
for level in $levels; do
  expect 0 "^isa cap: $level \\(QKV_ISA\\)" env QKV_ISA="$level" "$qkv" info --cpu
  expect 0 "^isa cap: $level \\(--isa\\)" "$qkv" info --cpu --isa "$level"
done
if [[ " $levels " == *" avx2 "* ]]; then
  expect 0 '^simd target: AVX2$' "$qkv" info --cpu --isa avx2
  expect 0 '^oneDNN ISA: avx2$' "$qkv" info --cpu --isa avx2
  expect 0 '^cpu: .*AVX-512 no, VNNI no, BF16 no; AMX-BF16 no, AMX-INT8 no \(under the cap\)' "$qkv" info --cpu --isa avx2
  expect 2 'conflicts with QKV_ISA=avx2' env QKV_ISA=avx2 "$qkv" info --cpu --isa sse4
  expect 1 'conflicts with QKV_ISA=avx2' env QKV_ISA=avx2 "$qkv" bench --isa sse4 --synthetic tiny
  expect 0 '^qkv bench .* threads, AVX2$' "$qkv" bench --isa avx2 --synthetic tiny --type q4_0 --prompt-lengths 32 \
    --depths none --batches none --reps 1 --warmup 0 --no-probe -q
fi
if [[ " $levels " == *" avx512 "* ]]; then
  expect 0 '^simd target: AVX3$' "$qkv" info --cpu --isa avx512
fi
for level in avx2-vnni avx512 avx512-vnni amx; do
  if [[ " $levels " != *" $level "* ]]; then
    expect 2 "cannot cap at $level: this CPU (has no|cannot run)" "$qkv" info --cpu --isa "$level"
  fi
done

if [[ $fails -ne 0 ]]; then
  echo "$fails check(s) failed"
  exit 1
fi
echo "isa caps from the command line: all checks passed (levels here: $levels)"

#!/bin/bash
# qkv quantize on the command line: a preset of the shared tinystories-3M-F32
# equals llama.cpp's file byte for byte; a quantized input is re-quantized with
# a warning; an unknown preset lists the known ones; a file that is not GGUF,
# a missing input, an unwritable output and a full disk (a file-size limit)
# fail with a message and leave no output; make-model and bench --synthetic
# take presets.
# usage: cli_quantize.sh QKV SHARED_DIR
set -u
qkv=$1 shared=$2
dir=$(mktemp -d /tmp/cli_quantize.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail=0
check() {  # check DESCRIPTION COMMAND...: the command must succeed
  local what=$1; shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fail=1; fi
}
# expect_error DESCRIPTION CODE NEEDLE ARGS...: qkv ARGS exits with CODE and says NEEDLE on stderr.
expect_error() {
  local what=$1 code=$2 needle=$3; shift 3
  "$qkv" "$@" >/dev/null 2>"$dir/err"
  local rc=$?
  if [ $rc -eq "$code" ] && grep -qF -- "$needle" "$dir/err"; then
    echo "ok: $what"
  else
    echo "FAIL: $what (exit $rc, stderr: $(head -c 400 "$dir/err"))"; fail=1
  fi
}
no_output() {  # nothing named OUT or OUT.tmp.* exists
  ! ls "$1" "$1".tmp.* >/dev/null 2>&1
}

"$qkv" make-model tiny --type f32 -q -o "$dir/tiny-f32.gguf" || { echo "FAIL: make-model tiny"; exit 1; }
expect_error "unknown preset lists the valid ones" 2 "Q4_K_M, Q5_K_S" quantize "$dir/tiny-f32.gguf" "$dir/o.gguf" Q4_K_X
check "no output after an unknown preset" no_output "$dir/o.gguf"
echo "not a model" >"$dir/text.gguf"
expect_error "a file that is not GGUF" 1 "is not a GGUF file" quantize "$dir/text.gguf" "$dir/o.gguf" q8_0
expect_error "a missing input" 1 "$dir/missing.gguf" quantize "$dir/missing.gguf" "$dir/o.gguf" q8_0
expect_error "an output in a missing directory" 1 "$dir/no/such/o.gguf" quantize "$dir/tiny-f32.gguf" "$dir/no/such/o.gguf" f16
expect_error "Q8_0 on rows of 172 (no fallback, as llama-quantize)" 1 "'blk.0.ffn_down.weight' has rows of 172 values" \
  quantize "$dir/tiny-f32.gguf" "$dir/o.gguf" q8_0
expect_error "missing arguments" 2 "PRESET are required" quantize "$dir/tiny-f32.gguf" q8_0
check "no output after the errors" no_output "$dir/o.gguf"
# A full disk: writes past 20 KiB fail (EFBIG; SIGXFSZ ignored, as ENOSPC would be).
(trap '' XFSZ; ulimit -f 20; exec "$qkv" quantize "$dir/tiny-f32.gguf" "$dir/o.gguf" f16 -q) 2>"$dir/err"
rc=$?
if [ $rc -eq 1 ] && grep -qF "o.gguf" "$dir/err" && no_output "$dir/o.gguf"; then
  echo "ok: a full disk is an error naming the file, and no output is left"
else
  echo "FAIL: full disk (exit $rc, stderr: $(head -c 400 "$dir/err"))"; fail=1
fi

check "tiny Q4_K_M quantizes (rows of 64 and 172 fall back)" "$qkv" quantize "$dir/tiny-f32.gguf" "$dir/tiny-q4km.gguf" q4_k_m -t 2 -q
run_quiet() { "$qkv" run "$@" >/dev/null; }
check "the quantized tiny model runs" run_quiet -m "$dir/tiny-q4km.gguf" -p "a" -n 4 --temp 0 -q
check "make-model takes a preset" "$qkv" make-model tiny --type Q4_K_M -q -o "$dir/made.gguf"
check "make-model takes a K type" "$qkv" make-model tiny --type q6_k -q -o "$dir/made6.gguf"
# make-model's preset model equals quantizing its F32 twin (same random values, same plan).
"$qkv" make-model tiny --type f32 --untied -q -o "$dir/untied-f32.gguf" &&
  "$qkv" make-model tiny --type q3_k_m --untied -q -o "$dir/untied-q3km.gguf" &&
  "$qkv" quantize "$dir/untied-f32.gguf" "$dir/untied-f32-q3km.gguf" q3_k_m -q &&
  "$qkv" info "$dir/untied-q3km.gguf" | grep "tensor types" >"$dir/a" &&
  "$qkv" info "$dir/untied-f32-q3km.gguf" | grep "tensor types" >"$dir/b"
check "make-model Q3_K_M has the tensor types qkv quantize gives its F32 twin" cmp -s "$dir/a" "$dir/b"
"$qkv" bench --synthetic tiny --type q4_k_m --json -q -t 2 --reps 1 --steps 2 --prompt-lengths 8 --depths 0 \
  --batches none --no-probe >"$dir/bench.json" 2>"$dir/err"
check "bench --synthetic takes a preset" grep -q '"Q4_K_M"' "$dir/bench.json"

if [ -f "$shared/models/tinystories-3M-F32.gguf" ]; then
  for p in Q4_K_M iq4_xs; do
    P=${p^^}
    "$qkv" quantize "$shared/models/tinystories-3M-F32.gguf" "$dir/ts-$P.gguf" "$p" -t 2 2>"$dir/log"
    check "qkv quantize $p equals llama.cpp's tinystories-3M-$P.gguf" cmp "$dir/ts-$P.gguf" "$shared/models/tinystories-3M-$P.gguf"
    check "progress on stderr for $p" grep -q "blk.3.ffn_up.weight" "$dir/log"
  done
  # An F16 (BF16) input under its own preset: every tensor copied, the file unchanged.
  for P in F16 BF16; do
    "$qkv" quantize "$shared/models/tinystories-3M-$P.gguf" "$dir/ts-$P-again.gguf" "$P" -q
    check "$P input to $P reproduces the file" cmp "$dir/ts-$P-again.gguf" "$shared/models/tinystories-3M-$P.gguf"
  done
  "$qkv" quantize "$shared/models/tinystories-3M-F16.gguf" "$dir/ts-f16-q4_0.gguf" q4_0 -q 2>"$dir/err"
  check "an F16 input quantizes without a warning" test ! -s "$dir/err"
  "$qkv" quantize "$shared/models/tinystories-3M-Q8_0.gguf" "$dir/ts-re.gguf" q4_k_m -q 2>"$dir/err"
  check "a quantized input is re-quantized with a warning" grep -q "warning: .*quantized tensors" "$dir/err"
else
  echo "SKIPPED: $shared/models/tinystories-3M-F32.gguf is absent (the shared models live beside the project root)"
fi
exit $fail

#!/usr/bin/env bash
# qkv tokenize / detokenize / info (and info --cpu) against known ids and values.
# Usage: cli_tokenize.sh QKV SHARED_DIR. Skips (exit 0, with a message) without the shared models.
set -u
qkv=$1
models=$2/models
if [[ ! -f $models/llama-spm-vocab.gguf || ! -f $models/stories260K.bin ]]; then
  echo "SKIPPED: shared models absent under $2"
  exit 0
fi
failures=0
expect() {  # expect DESCRIPTION EXPECTED COMMAND...
  local what=$1 want=$2
  shift 2
  local got
  got=$("$@" 2>&1)
  if [[ "$got" != "$want" ]]; then
    echo "FAIL: $what"
    echo "  command: $*"
    echo "  want: $want"
    echo "  got:  $got"
    failures=$((failures + 1))
  fi
}
expect_error() {  # expect_error DESCRIPTION NEEDLE COMMAND...: exit code 1 or 2 and NEEDLE on stderr
  local what=$1 needle=$2
  shift 2
  local err rc
  err=$("$@" 2>&1 >/dev/null)
  rc=$?
  if [[ $rc -eq 0 || "$err" != *"$needle"* ]]; then
    echo "FAIL: $what (exit $rc): $err"
    failures=$((failures + 1))
  fi
}

vocab=$models/llama-spm-vocab.gguf
expect "GGUF vocabulary, BOS" "1 15043 3186" "$qkv" tokenize -m "$vocab" "Hello world"
expect "words are joined by spaces" "1 15043 3186" "$qkv" tokenize -m "$vocab" Hello world
expect "--no-bos" "15043 29892 3186 29991" "$qkv" tokenize -m "$vocab" --no-bos "Hello, world!"
expect "--eos" "1 29871 29896 29906 29941 29946 2" "$qkv" tokenize -m "$vocab" --eos 1234
expect "-- before text with a dash" "1 448 29916" "$qkv" tokenize -m "$vocab" -- "-x"
expect "llama2.c tokenizer.bin" "259 1023 8162" "$qkv" tokenize -z "$models/llama2-tokenizer.bin" --no-bos "  two spaces"
expect "llama2.c model with -z" "$("$qkv" tokenize -z "$models/tok512.bin" "Once upon a time")" \
  "$qkv" tokenize -m "$models/stories260K.bin" -z "$models/tok512.bin" "Once upon a time"
expect "detokenize" "Hello, world!" "$qkv" detokenize -m "$vocab" 1 15043 29892 3186 29991 2
expect "detokenize from stdin" "café" bash -c "echo '274 28059' | '$qkv' detokenize -m '$vocab'"
ids=$("$qkv" tokenize -m "$models/stories260K.gguf" "Lily and Ben went to the park.")
expect "round trip through the stories260K GGUF" "Lily and Ben went to the park." "$qkv" detokenize -m "$models/stories260K.gguf" $ids

info=$("$qkv" info "$models/stories260K.gguf")
for line in "dim:             64" "layers:          5" "heads:           8 query, 4 key/value (group 2)" \
            "head dim:        8" "vocabulary:      512" "parameters:      260032" "f16   640 bytes"; do
  if [[ "$info" != *"$line"* ]]; then
    echo "FAIL: qkv info lacks '$line'"
    failures=$((failures + 1))
  fi
done

# info --cpu: the SIMD target and the batched-decode GEMM kernel it selects.
cpu=$("$qkv" info --cpu)
if [[ "$cpu" != *"simd target: "* ||
      ! "$cpu" =~ "F16/BF16 weights: "("AMX bf16 tiles"|"AVX512_BF16 dot products"|"f32 FMA")"; F32 weights: f32 FMA; K-quants" ]]; then
  echo "FAIL: qkv info --cpu: $cpu"
  failures=$((failures + 1))
fi

expect_error "llama2.c model without -z" "name its tokenizer.bin with -z" "$qkv" tokenize -m "$models/stories260K.bin" hi
expect_error "id out of range" "31999" "$qkv" detokenize -m "$vocab" 32000
expect_error "negative id" "-5" "$qkv" detokenize -m "$vocab" -5
expect_error "missing model" "cannot open" "$qkv" info /nonexistent/model.gguf
expect_error "no text" "TEXT is required" "$qkv" tokenize -m "$vocab"

if [[ $failures -ne 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all cli_tokenize checks passed"

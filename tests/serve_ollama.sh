#!/usr/bin/env bash
# The Ollama API of qkv serve through the official Ollama JavaScript client
# (the `ollama` npm package; ajv checks schema-constrained output). Installs
# them into a cache under the build tree (skips when npm or the registry is
# unavailable), starts three servers on the small model and runs
# serve_ollama.mjs:
#   A  the Qwen 2.5 template (Hermes tool calls, no thinking): the endpoints,
#      streaming, formats, options and the 400/404s;
#   B  no template (the generic JSON tool-call format, constrained from the
#      first token): replies with tool calls, whole and streamed;
#   C  the QwQ template (its prompt opens a thinking block): thinking.
set -u
QKV="$1"
SHARED="$2"
MODEL="$SHARED/models/stories260K.gguf"
TEMPLATES="$SHARED/templates"
CACHE="$(mkdir -p "$3" && cd "$3" && pwd)"
if [ ! -f "$MODEL" ]; then echo "SKIPPED: $MODEL is absent"; exit 0; fi
command -v node >/dev/null && command -v npm >/dev/null || { echo "SKIPPED: node/npm are not installed"; exit 0; }
PACKAGES="ollama@0.6 ajv@8"
missing=0
for p in ollama ajv; do [ -f "$CACHE/node_modules/$p/package.json" ] || missing=1; done
if [ $missing == 1 ]; then
  (cd "$CACHE" && timeout 180 npm install --no-audit --no-fund --silent $PACKAGES >/dev/null 2>&1) ||
    { echo "SKIPPED: npm could not install $PACKAGES"; exit 0; }
fi
source "$(dirname "$0")/serve_lib.sh"
start_server A "$QKV" -m "$MODEL" --chat-template-file "$TEMPLATES/Qwen-Qwen2.5-7B-Instruct.jinja" --slots 2 -c 2048 \
  --alias stories --kv-type f32 -t 2 || exit 1
start_server B "$QKV" -m "$MODEL" --slots 2 -c 2048 --alias stories --kv-type f32 -t 2 || exit 1
start_server C "$QKV" -m "$MODEL" --chat-template-file "$TEMPLATES/Qwen-QwQ-32B.jinja" --slots 2 -c 1024 \
  --alias stories --kv-type f32 -t 2 || exit 1
NODE_PATH="$CACHE/node_modules" timeout 120 node "$(dirname "$0")/serve_ollama.mjs" "http://127.0.0.1:$A_PORT" \
  "http://127.0.0.1:$B_PORT" "http://127.0.0.1:$C_PORT" "$MODEL" \
  "$("$QKV" run -m "$MODEL" -p "Once upon a time" -n 32 --temp 0 -q -t 1 --kv-type f32)"
rc=$?
[ $rc == 124 ] && echo "FAIL: serve_ollama.mjs did not finish in 120 s"
for pid in "$A_PID" "$B_PID" "$C_PID"; do
  stop_server "$pid"
  [ "$STOP_RC" == 0 ] || { echo "FAIL: a server exited with $STOP_RC"; rc=1; }
done
exit $rc

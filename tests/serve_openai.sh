#!/usr/bin/env bash
# The official OpenAI Node client against qkv serve. Installs the `openai`
# npm package into a cache under the build tree (skips when npm or the
# registry is unavailable), starts a server, runs serve_openai.mjs.
set -u
QKV="$1"
MODEL="$2/models/stories260K.gguf"
CACHE="$(mkdir -p "$3" && cd "$3" && pwd)"
if [ ! -f "$MODEL" ]; then echo "SKIPPED: $MODEL is absent"; exit 0; fi
command -v node >/dev/null && command -v npm >/dev/null || { echo "SKIPPED: node/npm are not installed"; exit 0; }
mkdir -p "$CACHE"
if [ ! -f "$CACHE/node_modules/openai/package.json" ]; then
  (cd "$CACHE" && timeout 180 npm install --no-audit --no-fund --silent openai@4 >/dev/null 2>&1) ||
    { echo "SKIPPED: npm could not install the openai package"; exit 0; }
fi
source "$(dirname "$0")/serve_lib.sh"
start_server A "$QKV" -m "$MODEL" --slots 2 -c 256 --kv-type f32 -t 2 --api-key test-key || exit 1
NODE_PATH="$CACHE/node_modules" timeout 120 node "$(dirname "$0")/serve_openai.mjs" "http://127.0.0.1:$A_PORT/v1" \
  "$("$QKV" run -m "$MODEL" -p "Once upon a time" -n 32 --temp 0 -q -t 1 --kv-type f32)"
rc=$?
stop_server "$A_PID"
[ "$STOP_RC" == 0 ] || { echo "FAIL: the server exited with $STOP_RC"; rc=1; }
exit $rc

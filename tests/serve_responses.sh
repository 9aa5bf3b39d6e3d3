#!/usr/bin/env bash
# The Responses API of qkv serve through the official openai client
# (serve_responses.mjs). Installs openai and ajv into a cache under the build
# tree (skips when npm or the registry is unavailable), starts two servers on
# the tiny stories260K model, one with a Hermes tool-call template (Qwen
# 2.5's), one with a template whose prompt opens a thinking block (QwQ's: the
# reply is reasoning), and runs the script against them.
set -u
QKV="$1"
MODEL="$2/models/stories260K.gguf"
TEMPLATE="$2/templates/Qwen-Qwen2.5-7B-Instruct.jinja"
THINKING_TEMPLATE="$2/templates/Qwen-QwQ-32B.jinja"
CACHE="$(mkdir -p "$3" && cd "$3" && pwd)"
for f in "$MODEL" "$TEMPLATE" "$THINKING_TEMPLATE"; do [ -f "$f" ] || { echo "SKIPPED: $f is absent"; exit 0; }; done
command -v node >/dev/null && command -v npm >/dev/null || { echo "SKIPPED: node/npm are not installed"; exit 0; }
PACKAGES="ajv@8 openai@4"
missing=0
for p in ajv openai; do [ -f "$CACHE/node_modules/$p/package.json" ] || missing=1; done
if [ $missing == 1 ]; then
  (cd "$CACHE" && timeout 180 npm install --no-audit --no-fund --silent $PACKAGES >/dev/null 2>&1) ||
    { echo "SKIPPED: npm could not install $PACKAGES"; exit 0; }
fi
source "$(dirname "$0")/serve_lib.sh"
start_server A "$QKV" -m "$MODEL" --chat-template-file "$TEMPLATE" --slots 2 -c 2048 -t 2 || exit 1
start_server B "$QKV" -m "$MODEL" --chat-template-file "$THINKING_TEMPLATE" --slots 1 -c 1024 -t 1 || exit 1
NODE_PATH="$CACHE/node_modules" timeout 120 node "$(dirname "$0")/serve_responses.mjs" "http://127.0.0.1:$A_PORT/v1" \
  "http://127.0.0.1:$B_PORT/v1"
rc=$?
[ $rc == 124 ] && echo "FAIL: serve_responses.mjs did not finish in 120 s"
for pid in "$A_PID" "$B_PID"; do
  stop_server "$pid"
  [ "$STOP_RC" == 0 ] || { echo "FAIL: a server exited with $STOP_RC"; rc=1; }
done
exit $rc

#!/usr/bin/env bash
# Anthropic's Messages API on qkv serve, driven by the official
# @anthropic-ai/sdk Node client (serve_anthropic.mjs). Installs the SDK and
# ajv into a cache under the build tree (skips when npm or the registry is
# unavailable), starts a server with a Hermes tool-call template (Qwen2.5)
# and two with thinking templates (Qwen3, whose prompt leaves the <think> to
# the model; QwQ, whose prompt opens it), runs the script.
set -u
QKV="$1"
SHARED="$2"
MODEL="$SHARED/models/stories260K.gguf"
HERMES="$SHARED/templates/Qwen-Qwen2.5-7B-Instruct.jinja"
THINKING="$SHARED/templates/Qwen-Qwen3-0.6B.jinja"
OPENS_THINKING="$SHARED/templates/Qwen-QwQ-32B.jinja"
CACHE="$(mkdir -p "$3" && cd "$3" && pwd)"
for f in "$MODEL" "$HERMES" "$THINKING" "$OPENS_THINKING"; do
  if [ ! -f "$f" ]; then echo "SKIPPED: $f is absent"; exit 0; fi
done
command -v node >/dev/null && command -v npm >/dev/null || { echo "SKIPPED: node/npm are not installed"; exit 0; }
PACKAGES="@anthropic-ai/sdk@0 ajv@8"
missing=0
for p in @anthropic-ai/sdk ajv; do [ -f "$CACHE/node_modules/$p/package.json" ] || missing=1; done
if [ $missing == 1 ]; then
  (cd "$CACHE" && timeout 180 npm install --no-audit --no-fund --silent $PACKAGES >/dev/null 2>&1) ||
    { echo "SKIPPED: npm could not install $PACKAGES"; exit 0; }
fi
source "$(dirname "$0")/serve_lib.sh"
start_server A "$QKV" -m "$MODEL" --chat-template-file "$HERMES" --slots 2 -c 2048 --api-key test-key -t 2 || exit 1
start_server T "$QKV" -m "$MODEL" --chat-template-file "$THINKING" --slots 2 -c 2048 --api-key test-key -t 2 || exit 1
start_server R "$QKV" -m "$MODEL" --chat-template-file "$OPENS_THINKING" --slots 1 -c 2048 --api-key test-key -t 1 ||
  exit 1
NODE_PATH="$CACHE/node_modules" timeout 110 node "$(dirname "$0")/serve_anthropic.mjs" \
  "http://127.0.0.1:$A_PORT" "http://127.0.0.1:$T_PORT" "http://127.0.0.1:$R_PORT"
rc=$?
[ $rc == 124 ] && echo "FAIL: serve_anthropic.mjs did not finish in 110 s"
for pid in "$A_PID" "$T_PID" "$R_PID"; do
  stop_server "$pid"
  [ "$STOP_RC" == 0 ] || { echo "FAIL: a server exited with $STOP_RC"; rc=1; }
done
exit $rc

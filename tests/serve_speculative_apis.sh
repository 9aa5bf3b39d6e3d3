#!/usr/bin/env bash
# Speculative decoding's counts and per-request settings on qkv serve's
# Anthropic, Responses and Ollama APIs (serve_speculative_apis.mjs, through
# the official @anthropic-ai/sdk, openai and ollama Node clients):
# tinystories-3M F32 as the model, one server drafting by prompt lookup
# (--spec-type ngram) and one with stories260K as the draft model. Installs
# the clients into a cache under the build tree (skips when npm or the
# registry is unavailable).
# Usage: serve_speculative_apis.sh QKV SHARED_DIR NPM_CACHE_DIR
set -u
QKV="$1"
TARGET="$2/models/tinystories-3M-F32.gguf"
DRAFT="$2/models/stories260K.gguf"
CACHE="$(mkdir -p "$3" && cd "$3" && pwd)"
for f in "$TARGET" "$DRAFT"; do
  if [ ! -f "$f" ]; then echo "SKIPPED: $f is absent"; exit 0; fi
done
command -v node >/dev/null && command -v npm >/dev/null || { echo "SKIPPED: node/npm are not installed"; exit 0; }
PACKAGES="@anthropic-ai/sdk@0 openai@4 ollama@0.6"
missing=0
for p in @anthropic-ai/sdk openai ollama; do [ -f "$CACHE/node_modules/$p/package.json" ] || missing=1; done
if [ $missing == 1 ]; then
  (cd "$CACHE" && timeout 180 npm install --no-audit --no-fund --silent $PACKAGES >/dev/null 2>&1) ||
    { echo "SKIPPED: npm could not install $PACKAGES"; exit 0; }
fi
source "$(dirname "$0")/serve_lib.sh"
FLAGS=(-m "$TARGET" --slots 2 -c 512 --kv-type f32 -t 2)
start_server ngram "$QKV" "${FLAGS[@]}" --spec-type ngram --draft-max 8 || exit 1
# --draft-p-min 0: the draft model drafts the whole --draft-max every pass.
start_server draft "$QKV" "${FLAGS[@]}" -md "$DRAFT" --draft-max 6 --draft-p-min 0 || exit 1
NODE_PATH="$CACHE/node_modules" timeout 200 node "$(dirname "$0")/serve_speculative_apis.mjs" \
  "http://127.0.0.1:$ngram_PORT" "http://127.0.0.1:$draft_PORT" "$(basename "$TARGET")"
rc=$?
[ $rc == 124 ] && echo "FAIL: serve_speculative_apis.mjs did not finish in 200 s"
for pid in "$ngram_PID" "$draft_PID"; do
  stop_server "$pid"
  [ "$STOP_RC" == 0 ] || { echo "FAIL: a server exited with $STOP_RC"; rc=1; }
done
exit $rc

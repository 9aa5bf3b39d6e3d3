#!/usr/bin/env bash
# Tool calls and reasoning on /v1/chat/completions through the official
# openai client (serve_tools.mjs), for every tool-call family the server
# parses: one server per chat template (the tiny model, served with that
# template), all started side by side. Installs openai and ajv into a cache
# under the build tree (skips when npm or the registry is unavailable).
# Usage: serve_tools.sh QKV SHARED_DIR CACHE_DIR
set -u
QKV="$1"
SHARED="$2"
MODEL="$SHARED/models/stories260K.gguf"
TEMPLATES="$SHARED/templates"
CACHE="$(mkdir -p "$3" && cd "$3" && pwd)"
if [ ! -f "$MODEL" ]; then echo "SKIPPED: $MODEL is absent"; exit 0; fi
command -v node >/dev/null && command -v npm >/dev/null || { echo "SKIPPED: node/npm are not installed"; exit 0; }
PACKAGES="ajv@8 ajv-formats@3 openai@4"
missing=0
for p in ajv ajv-formats openai; do [ -f "$CACHE/node_modules/$p/package.json" ] || missing=1; done
if [ $missing == 1 ]; then
  (cd "$CACHE" && timeout 180 npm install --no-audit --no-fund --silent $PACKAGES >/dev/null 2>&1) ||
    { echo "SKIPPED: npm could not install $PACKAGES"; exit 0; }
fi
source "$(dirname "$0")/serve_lib.sh"

# family=template; the family names are the ones serve_tools.mjs knows.
FAMILIES="hermes=Qwen-Qwen2.5-7B-Instruct qwen3=Qwen-Qwen3-0.6B llama3=meta-llama-Llama-3.1-8B-Instruct
mistral=unsloth-mistral-Devstral-Small-2507 deepseek_v31=deepseek-ai-DeepSeek-V3.1
functionary=meetkai-functionary-medium-v3.1 gpt_oss=openai-gpt-oss-120b generic=google-gemma-2-2b-it
command_r7b=CohereForAI-c4ai-command-r7b-12-2024-tool_use firefunction=fireworks-ai-llama-3-firefunction-v2
command_r_plus=CohereForAI-c4ai-command-r-plus-tool_use"
ARGS=()
for f in $FAMILIES; do
  name="${f%%=*}"
  template="$TEMPLATES/${f#*=}.jinja"
  [ -f "$template" ] || { echo "FAIL: $template is absent"; exit 1; }
  # The prompts are long in the tiny vocabulary (Devstral's and Command R7B's
  # system prompts alone are over 4000 tokens).
  start_server "S_$name" "$QKV" -m "$MODEL" --chat-template-file "$template" --slots 2 -c 8192 -t 1 || exit 1
  ARGS+=("$name=http://127.0.0.1:$PORT/v1")
done
NODE_PATH="$CACHE/node_modules" timeout 170 node "$(dirname "$0")/serve_tools.mjs" "${ARGS[@]}"
rc=$?
[ $rc == 124 ] && echo "FAIL: serve_tools.mjs did not finish in 170 s"
for p in "${SERVE_PIDS[@]}"; do
  stop_server "$p"
  [ "$STOP_RC" == 0 ] || { echo "FAIL: a server exited with $STOP_RC"; rc=1; }
done
exit $rc

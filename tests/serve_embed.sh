#!/usr/bin/env bash
# qkv serve's embedding and rerank endpoints (OpenAI /v1/embeddings, Ollama
# /api/embed, /v1/rerank) through the official `openai` and `ollama` npm
# clients, against llama.cpp's reference vectors. Installs the clients into a
# cache under the build tree (skips when npm or the registry is unavailable),
# starts four servers and runs serve_embed.mjs:
#   BERT   arch-bert-a (an encoder, MEAN): embedding mode, no generation;
#   RANK   arch-bert-rank-a (the classifier head, RANK): reranking;
#   QWEN   arch-qwen2-a (a decoder): chat, and LAST-pooled embeddings beside it;
#   NOMIC  arch-nomic-bert-a (MEAN).
set -u
QKV="$1"
SHARED="$2"
CACHE="$(mkdir -p "$3" && cd "$3" && pwd)"
MODELS="$SHARED/models"
for f in "$MODELS/arch-bert-a.gguf" "$MODELS/arch-bert-rank-a.gguf" "$MODELS/arch-qwen2-a.gguf" \
         "$MODELS/arch-nomic-bert-a.gguf" "$SHARED/reference/arch-bert-a.embed.json"; do
  [ -f "$f" ] || { echo "SKIPPED: $f is absent"; exit 0; }
done
command -v node >/dev/null && command -v npm >/dev/null || { echo "SKIPPED: node/npm are not installed"; exit 0; }
PACKAGES="openai@4 ollama@0.6"
missing=0
for p in openai ollama; do [ -f "$CACHE/node_modules/$p/package.json" ] || missing=1; done
if [ $missing == 1 ]; then
  (cd "$CACHE" && timeout 180 npm install --no-audit --no-fund --silent $PACKAGES >/dev/null 2>&1) ||
    { echo "SKIPPED: npm could not install $PACKAGES"; exit 0; }
fi
source "$(dirname "$0")/serve_lib.sh"
start_server BERT "$QKV" -m "$MODELS/arch-bert-a.gguf" --alias bert -t 2 || exit 1
start_server RANK "$QKV" -m "$MODELS/arch-bert-rank-a.gguf" --alias rank -t 1 || exit 1
start_server QWEN "$QKV" -m "$MODELS/arch-qwen2-a.gguf" --alias qwen2 --slots 1 -t 1 || exit 1
start_server NOMIC "$QKV" -m "$MODELS/arch-nomic-bert-a.gguf" --alias nomic -t 1 || exit 1
NODE_PATH="$CACHE/node_modules" timeout 240 node "$(dirname "$0")/serve_embed.mjs" "$BERT_PORT" "$RANK_PORT" \
  "$QWEN_PORT" "$NOMIC_PORT" "$SHARED/reference"
rc=$?
[ $rc == 124 ] && echo "FAIL: serve_embed.mjs did not finish in 240 s"
for pid in "$BERT_PID" "$RANK_PID" "$QWEN_PID" "$NOMIC_PID"; do
  stop_server "$pid"
  [ "$STOP_RC" == 0 ] || { echo "FAIL: a server exited with $STOP_RC"; rc=1; }
done
exit $rc

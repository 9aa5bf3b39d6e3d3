#!/usr/bin/env bash
# qkv serve with and without speculative decoding: rounds of C concurrent
# greedy clients on copying prompts (a passage of the text twice, then its
# first words: the model continues copying), each asking for -n tokens;
# aggregate tokens/s (the clients' completion tokens over the round's wall
# time, the best of --rounds) for the plain server, prompt lookup (--spec-type
# ngram) and, with --draft FILE, a draft model. Every mode's texts must equal
# the plain server's. The passages start at evenly spaced words of the text
# (no choosing).
#
# usage: bench/serve_spec_bench.sh QKV MODEL [--text FILE] [--clients N] [-n N] [-t N]
#          [--words N] [--rounds N] [--draft-max N] [--draft FILE]
set -euo pipefail

usage() { sed -n '/^# usage:/,/^set /p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2; }
[[ $# -ge 2 ]] || usage
QKV=$1 MODEL=$2
shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
TEXT=$here/../shared/reference/ppl-text.txt CLIENTS=4 N=96 THREADS=2 WORDS=50 ROUNDS=2 DRAFT_MAX=8 DRAFT=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --text) TEXT=$2; shift 2 ;;
    --clients) CLIENTS=$2; shift 2 ;;
    -n) N=$2; shift 2 ;;
    -t) THREADS=$2; shift 2 ;;
    --words) WORDS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --draft-max) DRAFT_MAX=$2; shift 2 ;;
    --draft) DRAFT=$2; shift 2 ;;
    *) echo "serve_spec_bench: unknown argument '$1'" >&2; usage ;;
  esac
done
[[ -x $QKV ]] || { echo "serve_spec_bench: '$QKV' is not an executable" >&2; exit 2; }
[[ -f $MODEL ]] || { echo "serve_spec_bench: no model file '$MODEL'" >&2; exit 2; }
[[ -f $TEXT ]] || { echo "serve_spec_bench: no text file '$TEXT' (--text FILE)" >&2; exit 2; }
[[ -z $DRAFT || -f $DRAFT ]] || { echo "serve_spec_bench: no draft model '$DRAFT'" >&2; exit 2; }

work=$(mktemp -d)
pid=""
cleanup() {
  [[ -n $pid ]] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
python3 "$(dirname "$0")/copy_prompts.py" "$TEXT" "$CLIENTS" "$WORDS" "$work" "$N" || exit 2

modes=(plain ngram)
[[ -n $DRAFT ]] && modes+=(draft)
printf '%-6s %8s %10s %10s %9s\n' mode tokens/s drafted accepted "vs plain"
plain_rate=""
for mode in "${modes[@]}"; do
  flags=(--slots "$CLIENTS" -t "$THREADS" --kv-type f32 -c 1024)
  [[ $mode == ngram ]] && flags+=(--spec-type ngram --draft-max "$DRAFT_MAX")
  [[ $mode == draft ]] && flags+=(-md "$DRAFT" --draft-max "$DRAFT_MAX")
  "$QKV" serve -m "$MODEL" --host 127.0.0.1 --port 0 "${flags[@]}" 2>"$work/$mode.err" &
  pid=$!
  port=""
  for _ in $(seq 1 300); do
    port=$(grep -o 'listening on http://[^ ]*' "$work/$mode.err" 2>/dev/null | sed 's/.*://') || true
    [[ -n $port ]] && break
    kill -0 "$pid" 2>/dev/null || { cat "$work/$mode.err" >&2; exit 1; }
    sleep 0.1
  done
  [[ -n $port ]] || { echo "serve_spec_bench: the $mode server did not start" >&2; exit 1; }
  best=0
  for r in $(seq 1 "$ROUNDS"); do
    start=$(date +%s.%N)
    for ((i = 0; i < CLIENTS; i++)); do
      curl -s -m 600 -H 'Content-Type: application/json' --data-binary "@$work/body$i.json" \
        "http://127.0.0.1:$port/v1/completions" >"$work/$mode$i.json" &
    done
    wait $(jobs -p | grep -v "^$pid\$") 2>/dev/null || true
    end=$(date +%s.%N)
    rate=$(python3 - "$work" "$mode" "$CLIENTS" "$start" "$end" <<'EOF'
import json, sys
work, mode, clients, start, end = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
tokens = 0
for i in range(clients):
    d = json.load(open(f"{work}/{mode}{i}.json"))
    tokens += d["usage"]["completion_tokens"]
print(f"{tokens / (end - start):.1f}")
EOF
)
    best=$(python3 -c "print(max($best, $rate))")
  done
  counts=$(python3 - "$work" "$mode" "$CLIENTS" <<'EOF'
import json, sys
work, mode, clients = sys.argv[1], sys.argv[2], int(sys.argv[3])
drafted = accepted = 0
for i in range(clients):
    d = json.load(open(f"{work}/{mode}{i}.json"))
    if mode != "plain":
        plain = json.load(open(f"{work}/plain{i}.json"))
        if d["choices"][0]["text"] != plain["choices"][0]["text"]:
            sys.exit(f"serve_spec_bench: {mode} client {i}'s text differs from the plain server's")
    drafted += d["usage"].get("draft_tokens", 0)
    accepted += d["usage"].get("draft_accepted_tokens", 0)
print(drafted, accepted)
EOF
)
  read -r drafted accepted <<<"$counts"
  [[ $mode == plain ]] && plain_rate=$best
  printf '%-6s %8s %10s %10s %8.2fx\n' "$mode" "$best" "$drafted" "$accepted" "$(python3 -c "print($best / $plain_rate)")"
  kill -TERM "$pid"
  wait "$pid" 2>/dev/null || true
  pid=""
done
echo "($CLIENTS concurrent clients x $N tokens, $THREADS threads, best of $ROUNDS rounds; host load $(cut -d' ' -f1-3 /proc/loadavg))"

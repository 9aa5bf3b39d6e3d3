#!/usr/bin/env bash
# qkv serve with speculative decoding (tinystories-3M F32 as the model;
# stories260K as the draft model, and prompt lookup with --spec-type ngram):
# four concurrent greedy clients each get the text of the server without
# speculation and of `qkv run` greedy, token for token; usage carries
# draft_tokens <= its completion's share and draft_accepted_tokens <=
# draft_tokens (timings.draft_n and draft_n_accepted the same), and the
# /metrics totals qkv_draft_tokens_total and qkv_draft_accepted_total equal the
# sum over the responses; "speculative": false and a grammar give no draft
# counts; max_tokens is honoured exactly; a stream's usage chunk carries the
# counts; seeded sampling repeats itself; bad flags are refused with a message.
# Usage: serve_speculative.sh QKV SHARED_DIR. Skips (exit 0, with a message) without the shared data.
set -u
QKV="$1"
TARGET="$2/models/tinystories-3M-F32.gguf"
DRAFT="$2/models/stories260K.gguf"
for f in "$TARGET" "$DRAFT"; do
  if [ ! -f "$f" ]; then echo "SKIPPED: $f is absent"; exit 0; fi
done
command -v curl >/dev/null || { echo "SKIPPED: curl is not installed"; exit 0; }
command -v python3 >/dev/null || { echo "SKIPPED: python3 is not installed"; exit 0; }
source "$(dirname "$0")/serve_lib.sh"
failures=0
bad() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }
T=$SERVE_TMP
FLAGS=(--slots 4 -c 512 --kv-type f32 -t 2)
N=48
prompts=(
  "Lily and Ben found a little red box in the garden. Lily and Ben"
  "Once upon a time, there was a little dog named Max. Max liked to run. Once upon a time, there was a little dog"
  "The sun was hot and the sky was blue. Tom went to the park with his mom."
  "Sue had a big cat. The cat was soft and white. Sue had a big cat. The cat was"
)
# JSON bodies through python, so that the prompts need no escaping here.
body() {  # body PROMPT MAX_TOKENS [EXTRA_JSON]
  python3 -c 'import json,sys; d={"prompt": sys.argv[1], "max_tokens": int(sys.argv[2]), "temperature": 0}; d.update(json.loads(sys.argv[3])); print(json.dumps(d))' \
    "$1" "$2" "${3:-{\}}"
}
post() {  # post PORT BODY_FILE OUT_FILE
  curl -s -m 120 -H 'Content-Type: application/json' --data-binary "@$2" "http://127.0.0.1:$1/v1/completions" >"$3"
}
field() {  # field FILE PYTHON_EXPR_OF_d
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1" 2>/dev/null
}

# The references: qkv run's greedy continuation of each prompt.
for i in "${!prompts[@]}"; do
  out=$("$QKV" run -m "$TARGET" -p "${prompts[$i]}" -n $N --temp 0 -q -t 1 --kv-type f32) || { bad "qkv run"; exit 1; }
  printf '%s' "${out#"${prompts[$i]}"}" >"$T/ref$i.txt"
  body "${prompts[$i]}" $N >"$T/body$i.json"
done

start_server plain "$QKV" -m "$TARGET" "${FLAGS[@]}" || exit 1
start_server ngram "$QKV" -m "$TARGET" "${FLAGS[@]}" --spec-type ngram --draft-max 8 || exit 1
start_server draft "$QKV" -m "$TARGET" "${FLAGS[@]}" -md "$DRAFT" --draft-max 6 --draft-p-min 0.5 || exit 1

# Four concurrent greedy clients on each server.
for name in plain ngram draft; do
  port_var="${name}_PORT"
  clients=()
  for i in "${!prompts[@]}"; do
    post "${!port_var}" "$T/body$i.json" "$T/$name$i.json" &
    clients+=($!)
  done
  wait "${clients[@]}"
done

metric() {  # metric PORT NAME: the sample's value
  curl -s -m 10 "http://127.0.0.1:$1/metrics" | awk -v n="$2" '$1 == n {print $2}'
}
for name in plain ngram draft; do
  port_var="${name}_PORT"
  sum_drafted=0
  sum_accepted=0
  for i in "${!prompts[@]}"; do
    f="$T/$name$i.json"
    text=$(field "$f" 'd["choices"][0]["text"]')
    if [ "$text" != "$(cat "$T/ref$i.txt")" ]; then
      bad "$name client $i: the text differs from qkv run's greedy text: '$text' vs '$(cat "$T/ref$i.txt")'"
      continue
    fi
    [ "$(field "$f" 'd["usage"]["completion_tokens"]')" == "$N" ] || bad "$name client $i: completion_tokens is not $N"
    has=$(field "$f" '"draft_tokens" in d["usage"]')
    if [ "$name" == plain ]; then
      [ "$has" == False ] || bad "plain client $i: usage has draft counts without speculation"
      [ "$(field "$f" '"timings" in d')" == False ] || bad "plain client $i: timings without speculation"
      continue
    fi
    drafted=$(field "$f" 'd["usage"]["draft_tokens"]')
    accepted=$(field "$f" 'd["usage"]["draft_accepted_tokens"]')
    if [ "$has" != True ] || [ -z "$drafted" ] || [ -z "$accepted" ]; then
      bad "$name client $i: no draft_tokens / draft_accepted_tokens in usage: $(cat "$f")"
      continue
    fi
    [ "$accepted" -le "$drafted" ] || bad "$name client $i: $accepted accepted of $drafted drafted"
    [ "$(field "$f" 'd["timings"]["draft_n"]')" == "$drafted" ] || bad "$name client $i: timings.draft_n is not usage.draft_tokens"
    [ "$(field "$f" 'd["timings"]["draft_n_accepted"]')" == "$accepted" ] || bad "$name client $i: timings.draft_n_accepted is not usage.draft_accepted_tokens"
    sum_drafted=$((sum_drafted + drafted))
    sum_accepted=$((sum_accepted + accepted))
    ok "$name client $i: qkv run's text; $accepted of $drafted drafts accepted"
  done
  [ "$name" == plain ] && { [ "$(metric "${!port_var}" qkv_draft_tokens_total)" == 0 ] || bad "plain: drafted tokens in /metrics"; continue; }
  [ "$sum_accepted" -gt 0 ] || bad "$name: no draft was ever accepted (the test would not see speculation at work)"
  m_drafted=$(metric "${!port_var}" qkv_draft_tokens_total)
  m_accepted=$(metric "${!port_var}" qkv_draft_accepted_total)
  m_passes=$(metric "${!port_var}" qkv_verify_passes_total)
  if [ "$m_drafted" == "$sum_drafted" ] && [ "$m_accepted" == "$sum_accepted" ] && [ "${m_passes:-0}" -gt 0 ]; then
    ok "$name: /metrics totals $m_drafted drafted, $m_accepted accepted = the responses' sums; $m_passes verify passes"
  else
    bad "$name: /metrics has $m_drafted drafted, $m_accepted accepted, ${m_passes:-none} passes; the responses sum to $sum_drafted, $sum_accepted"
  fi
done

# "speculative": false and a grammar decode token by token: no draft counts,
# the same text, and /metrics unchanged.
before=$(metric "$ngram_PORT" qkv_draft_tokens_total)
body "${prompts[3]}" $N '{"speculative": false}' >"$T/off.json"
post "$ngram_PORT" "$T/off.json" "$T/off.out"
[ "$(field "$T/off.out" 'd["choices"][0]["text"]')" == "$(cat "$T/ref3.txt")" ] || bad "speculative:false: the text differs"
[ "$(field "$T/off.out" '"draft_tokens" in d["usage"] or "timings" in d')" == False ] || bad "speculative:false: draft counts in the response"
body "${prompts[3]}" $N '{"speculative.n_max": 0}' >"$T/nmax0.json"
post "$ngram_PORT" "$T/nmax0.json" "$T/nmax0.out"
[ "$(field "$T/nmax0.out" '"draft_tokens" in d["usage"]')" == False ] || bad "speculative.n_max 0: draft counts in the response"
body "${prompts[3]}" 8 '{"grammar": "root ::= [a-z ]+"}' >"$T/gram.json"
post "$ngram_PORT" "$T/gram.json" "$T/gram.out"
[ "$(field "$T/gram.out" '"draft_tokens" in d["usage"] or "timings" in d')" == False ] || bad "grammar: draft counts in the response: $(cat "$T/gram.out")"
[ "$(metric "$ngram_PORT" qkv_draft_tokens_total)" == "$before" ] || bad "speculative:false / grammar: /metrics drafted tokens changed"
ok "speculative:false, speculative.n_max 0 and a grammar: no draft counts, /metrics unchanged"

# A request's own draft settings; bad ones are 400s naming the field.
body "${prompts[1]}" $N '{"speculative.n_max": 2, "speculative.n_min": 1}' >"$T/own.json"
post "$draft_PORT" "$T/own.json" "$T/own.out"
[ "$(field "$T/own.out" 'd["choices"][0]["text"]')" == "$(cat "$T/ref1.txt")" ] || bad "speculative.n_max 2: the text differs"
body "${prompts[1]}" 4 '{"speculative.n_max": 300}' >"$T/big.json"
code=$(curl -s -m 30 -o "$T/big.out" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "@$T/big.json" "http://127.0.0.1:$draft_PORT/v1/completions")
[ "$code" == 400 ] && grep -q 'speculative.n_max' "$T/big.out" || bad "speculative.n_max 300: $code $(cat "$T/big.out")"

# max_tokens exactly, on the prompt whose drafts the draft model gets accepted
# most (whole rounds of up to 6 tokens, so the limit falls among them).
for m in 1 2 5 13; do
  body "${prompts[0]}" $m >"$T/max$m.json"
  post "$draft_PORT" "$T/max$m.json" "$T/max$m.out"
  got=$(field "$T/max$m.out" 'd["usage"]["completion_tokens"]')
  want=$("$QKV" run -m "$TARGET" -p "${prompts[0]}" -n $m --temp 0 -q -t 1 --kv-type f32)
  if [ "$got" != "$m" ] || [ "$(field "$T/max$m.out" 'd["choices"][0]["finish_reason"]')" != length ] ||
     [ "$(field "$T/max$m.out" 'd["choices"][0]["text"]')" != "${want#"${prompts[0]}"}" ]; then
    bad "max_tokens $m: $(cat "$T/max$m.out")"
  fi
done
ok "max_tokens 1, 2, 5, 13: exactly that many tokens, qkv run's text"

# A stream: the same text, the counts in the usage chunk and timings in the last chunk.
body "${prompts[1]}" $N '{"stream": true, "stream_options": {"include_usage": true}}' >"$T/stream.json"
post "$ngram_PORT" "$T/stream.json" "$T/stream.out"
python3 - "$T/stream.out" "$T/ref1.txt" <<'EOF' || bad "stream: see above"
import json, sys
text, usage, timings = "", None, None
for line in open(sys.argv[1]):
    if not line.startswith("data: ") or line.strip() == "data: [DONE]":
        continue
    d = json.loads(line[6:])
    for c in d.get("choices", []):
        text += c.get("text") or ""
    usage = d.get("usage") or usage
    timings = d.get("timings") or timings
ref = open(sys.argv[2]).read()
assert text == ref, f"stream text {text!r} != {ref!r}"
assert usage and "draft_tokens" in usage and usage["draft_accepted_tokens"] <= usage["draft_tokens"], usage
assert timings and timings["draft_n"] == usage["draft_tokens"], timings
print(f"ok: stream: qkv run's text; usage {usage['draft_accepted_tokens']} of {usage['draft_tokens']} drafts accepted")
EOF

# Seeded sampling through the verify path: valid, and the same seed the same text.
for k in 1 2; do
  body "${prompts[0]}" 32 '{"temperature": 0.8, "seed": 7}' >"$T/seed.json"
  post "$draft_PORT" "$T/seed.json" "$T/seed$k.out"
done
s1=$(field "$T/seed1.out" 'd["choices"][0]["text"]')
[ -n "$s1" ] && [ "$s1" == "$(field "$T/seed2.out" 'd["choices"][0]["text"]')" ] &&
  [ "$(field "$T/seed1.out" '"draft_tokens" in d["usage"]')" == True ] || bad "seeded sampling: $(cat "$T/seed1.out") vs $(cat "$T/seed2.out")"
ok "seeded sampling with a draft model: the same text twice"

# Bad flags: refused before listening, with a message.
expect_refusal() {  # expect_refusal DESCRIPTION NEEDLE FLAGS...
  local what=$1 needle=$2
  shift 2
  timeout 60 "$QKV" serve -m "$TARGET" --port 0 -c 64 "$@" >/dev/null 2>"$T/refused.err"
  local rc=$?
  if [ $rc -ge 1 ] && [ $rc -le 2 ] && grep -qF -- "$needle" "$T/refused.err"; then
    ok "refused: $what"
  else
    bad "$what: exit $rc, stderr: $(head -c 300 "$T/refused.err")"
  fi
}
expect_refusal "--draft-max 0" "--draft-max" --spec-type ngram --draft-max 0
expect_refusal "--draft-min above --draft-max" "exceeds --draft-max" --spec-type ngram --draft-max 4 --draft-min 5
expect_refusal "--spec-type lookahead" "--spec-type 'lookahead' is not known" --spec-type lookahead
expect_refusal "two drafters" "exclude each other" -md "$DRAFT" --spec-type ngram
expect_refusal "a missing draft file" "loading the draft model" -md /nonexistent/draft.gguf
if "$QKV" make-model tiny --type f32 -o "$T/other.gguf" -q >/dev/null 2>"$T/mk.err"; then
  expect_refusal "a draft model of another vocabulary" "must share the target's vocabulary" -md "$T/other.gguf"
else
  bad "qkv make-model: $(cat "$T/mk.err")"
fi

for name in plain ngram draft; do
  pid_var="${name}_PID"
  stop_server "${!pid_var}"
  [ "$STOP_RC" == 0 ] || bad "$name server: exit $STOP_RC on SIGTERM"
done
if [ $failures -ne 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all passed"

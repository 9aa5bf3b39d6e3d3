#!/usr/bin/env bash
# qkv serve through curl: raw SSE framing, greedy output equal to `qkv run`
# (alone, and four different prompts at once with --slots 4), stop strings
# (never streamed), the prompt cache, usage, logprobs, error objects (bad JSON,
# n != 1, unknown model, context too long, 401 without the key, 413, 404), a
# client that disconnects mid-stream, /metrics, /tokenize, and SIGTERM -> exit 0.
set -u
QKV="$1"
MODEL="$2/models/stories260K.gguf"
if [ ! -f "$MODEL" ]; then echo "SKIPPED: $MODEL is absent"; exit 0; fi
command -v curl >/dev/null || { echo "SKIPPED: curl is not installed"; exit 0; }
command -v python3 >/dev/null || { echo "SKIPPED: python3 is not installed"; exit 0; }
source "$(dirname "$0")/serve_lib.sh"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

start_server A "$QKV" -m "$MODEL" --slots 4 -c 256 --kv-type f32 -t 2 --grace 60 || exit 1
U="http://127.0.0.1:$A_PORT"
post() { curl -s -m 30 "$U$1" -H 'Content-Type: application/json' -d "$2"; }

# --- greedy == qkv run, alone and four at once -------------------------------------
prompts=("Once upon a time" "Lily and Tom went to the park" "The cat sat" "One day, a big dog")
declare -A solo
for p in "${prompts[@]}"; do
  run=$("$QKV" run -m "$MODEL" -p "$p" -n 40 --temp 0 -q -t 1 --kv-type f32)
  solo[$p]="${run#"$p"}"
  got=$(post /v1/completions "{\"prompt\":\"$p\",\"max_tokens\":40,\"temperature\":0}" | json 'd["choices"][0]["text"]')
  [ "$got" == "${solo[$p]}" ] || bad "alone: '$p' gave '$got', qkv run '${solo[$p]}'"
done
# Different slots' caches must not help: use a fresh server so nothing is cached.
start_server B "$QKV" -m "$MODEL" --slots 4 -c 256 --kv-type f32 -t 2 || exit 1
for i in 0 1 2 3; do
  p="${prompts[$i]}"
  curl -s -m 60 "http://127.0.0.1:$B_PORT/v1/completions" \
    -d "{\"prompt\":\"$p\",\"max_tokens\":40,\"temperature\":0}" >"$SERVE_TMP/c$i.json" &
done
wait_jobs() { for j in $(jobs -p); do case " ${SERVE_PIDS[*]} " in *" $j "*) ;; *) wait "$j";; esac; done; }
wait_jobs
for i in 0 1 2 3; do
  p="${prompts[$i]}"
  got=$(json 'd["choices"][0]["text"]' <"$SERVE_TMP/c$i.json")
  [ "$got" == "${solo[$p]}" ] || bad "four at once: '$p' gave '$got', qkv run '${solo[$p]}'"
done
stop_server "$B_PID"; [ "$STOP_RC" == 0 ] || bad "server B did not exit 0 on SIGTERM"

# --- SSE framing -----------------------------------------------------------------
curl -s -N -m 30 "$U/v1/completions" -d '{"prompt":"Once upon a time","max_tokens":24,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}' >"$SERVE_TMP/sse.txt"
python3 - "$SERVE_TMP/sse.txt" "${solo[Once upon a time]}" <<'PY' || fail=1
import json, sys
raw = open(sys.argv[1], encoding="utf-8").read()
events = raw.split("\n\n")
assert events[-1] == "", "the stream must end with a blank line"
events = events[:-1]
for e in events:
    assert e.startswith("data: ") and "\n" not in e, "bad event framing: %r" % e
assert events[-1] == "data: [DONE]", "the last event must be [DONE]"
chunks = [json.loads(e[6:]) for e in events[:-1]]
usage = chunks[-1]
assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 24, usage
text = "".join(c["choices"][0]["text"] for c in chunks[:-1])
assert all(c["object"] == "text_completion" and c["id"] == chunks[0]["id"] for c in chunks)
assert chunks[-2]["choices"][0]["finish_reason"] == "length"
want = sys.argv[2]
assert want.startswith(text) and len(text) > 20, (text, want)
print("sse framing: ok, %d events" % len(events))
PY

# --- stop strings split across tokens, streamed and not ---------------------------
full="${solo[Once upon a time]}"
stop="${full:12:9}"  # a string that starts inside one token and ends in another
got=$(post /v1/completions "{\"prompt\":\"Once upon a time\",\"max_tokens\":40,\"temperature\":0,\"stop\":[\"zzz\",\"$stop\"]}")
[ "$(echo "$got" | json 'd["choices"][0]["text"]')" == "${full%%"$stop"*}" ] || bad "stop '$stop': $got"
[ "$(echo "$got" | json 'd["choices"][0]["finish_reason"]')" == "stop" ] || bad "stop: finish_reason in $got"
streamed=$(curl -s -N -m 30 "$U/v1/completions" -d "{\"prompt\":\"Once upon a time\",\"max_tokens\":40,\"temperature\":0,\"stream\":true,\"stop\":\"$stop\"}" |
  python3 -c 'import json,sys
t=""
for l in sys.stdin:
  l=l.strip()
  if l.startswith("data: {"): t+=json.loads(l[6:])["choices"][0]["text"]
print(t)')
[ "$streamed" == "${full%%"$stop"*}" ] || bad "streamed stop '$stop' gave '$streamed'"

# --- prompt cache, usage, logprobs --------------------------------------------------
r=$(post /v1/completions '{"prompt":"Once upon a time, there was a little girl named Lily","max_tokens":4,"temperature":0,"logprobs":3}')
cached=$(echo "$r" | json 'd["usage"]["prompt_tokens_details"]["cached_tokens"]')
[ "$cached" -ge 4 ] 2>/dev/null || bad "prompt cache: cached_tokens $cached in $r"
echo "$r" | json 'len(d["choices"][0]["logprobs"]["tokens"])==4 and all(len(t)==3 for t in d["choices"][0]["logprobs"]["top_logprobs"]) and all(x<=0 for x in d["choices"][0]["logprobs"]["token_logprobs"])' | grep -q True || bad "logprobs: $r"
echo "$r" | json 'd["usage"]["total_tokens"]==d["usage"]["prompt_tokens"]+4' | grep -q True || bad "usage: $r"
c=$(post /v1/chat/completions '{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],"max_tokens":8,"temperature":0,"logprobs":true,"top_logprobs":2}')
echo "$c" | json 'd["object"]=="chat.completion" and d["choices"][0]["message"]["role"]=="assistant" and len(d["choices"][0]["logprobs"]["content"])>=1' | grep -q True || bad "chat: $c"

# --- errors ---------------------------------------------------------------------------
check_error() {  # check_error STATUS CODE_OR_EMPTY PATH BODY
  local out status
  out=$(curl -s -m 10 -w '\n%{http_code}' "$U$3" -d "$4")
  status=$(echo "$out" | tail -1)
  body=$(echo "$out" | sed '$d')
  [ "$status" == "$1" ] || { bad "$3 $4: status $status, want $1 ($body)"; return; }
  echo "$body" | json '"message" in d["error"] and "type" in d["error"] and "param" in d["error"] and "code" in d["error"]' | grep -q True || bad "error object for $4: $body"
  [ -z "$2" ] || [ "$(echo "$body" | json 'd["error"]["code"]')" == "$2" ] || bad "code for $4: $body"
}
check_error 400 "" /v1/completions '{"prompt": "x",'
check_error 400 unsupported_value /v1/completions '{"prompt":"x","n":2}'
check_error 404 model_not_found /v1/completions '{"prompt":"x","model":"gpt-4"}'
check_error 400 invalid_type /v1/completions '{"prompt":"x","max_tokens":"many"}'
check_error 400 "" /v1/chat/completions '{"messages":[]}'
check_error 400 "" /v1/completions "$(python3 -c 'print("["*100 + "]"*100)')"
long=$(python3 -c 'print("Once upon a time " * 200)')
check_error 400 context_length_exceeded /v1/completions "{\"prompt\":\"$long\"}"
check_error 404 not_found /v2/nothing '{}'
big=$(head -c 1100000 /dev/zero | tr '\0' a)
status=$(printf '{"prompt":"%s"}' "$big" | curl -s -m 10 -o /dev/null -w '%{http_code}' "$U/v1/completions" --data-binary @-)
[ "$status" == 413 ] || bad "oversized body: status $status"

# --- disconnect mid-stream frees the slot ---------------------------------------------
curl -s -N -m 0.5 "$U/v1/completions" -d '{"prompt":"Once upon a time","max_tokens":200,"temperature":1,"stream":true}' >/dev/null 2>&1
freed=0
for _ in $(seq 1 50); do
  curl -s -m 5 "$U/metrics" | grep -q '^qkv_slots_busy 0' && { freed=1; break; }
  sleep 0.1
done
[ $freed == 1 ] || bad "a disconnected stream kept its slot"

# --- tokenize / detokenize / models / metrics -----------------------------------------
ids=$(post /tokenize '{"content":"Hello world"}' | json 'd["tokens"]')
text=$(post /detokenize "{\"tokens\":$ids}" | json 'd["content"]')
[ "$text" == "Hello world" ] || bad "detokenize(tokenize) gave '$text'"
curl -s "$U/v1/models" | json 'd["data"][0]["id"]' | grep -qx stories260K.gguf || bad "/v1/models"
m=$(curl -s "$U/metrics")
for name in qkv_requests_total qkv_prompt_tokens_total qkv_generated_tokens_total qkv_tokens_per_second \
  qkv_queue_depth qkv_slots_busy qkv_time_to_first_token_seconds_bucket qkv_inter_token_latency_seconds_count; do
  echo "$m" | grep -q "^$name" || bad "/metrics lacks $name"
done
echo "$m" | grep -q 'qkv_requests_total{endpoint="/v1/completions",status="400"}' || bad "/metrics: 400s not counted"

# --- API key ------------------------------------------------------------------------------
start_server K "$QKV" -m "$MODEL" --slots 1 -c 128 --api-key s3cret -t 1 || exit 1
K="http://127.0.0.1:$K_PORT"
s1=$(curl -s -o /dev/null -w '%{http_code}' "$K/v1/models")
s2=$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer wrong' "$K/v1/models")
s3=$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer s3cret' "$K/v1/models")
s4=$(curl -s -o /dev/null -w '%{http_code}' "$K/health")
[ "$s1 $s2 $s3 $s4" == "401 401 200 200" ] || bad "api key: no key $s1, wrong $s2, right $s3, health $s4"
stop_server "$K_PID"; [ "$STOP_RC" == 0 ] || bad "server K did not exit 0"

# --- per-request timeout: 504 with an error object, streamed as an error event ---------------
start_server T "$QKV" -m "$MODEL" --slots 1 -c 512 -t 1 --timeout 0.05 || exit 1
long_req='{"prompt":"Once upon a time","max_tokens":500,"temperature":1,"logit_bias":{"1":-100,"2":-100}'
s=$(curl -s -m 30 -o "$SERVE_TMP/t.json" -w '%{http_code}' "http://127.0.0.1:$T_PORT/v1/completions" -d "$long_req}")
[ "$s" == 504 ] && grep -q '"code":"timeout"' "$SERVE_TMP/t.json" || bad "timeout: status $s $(cat "$SERVE_TMP/t.json")"
curl -s -N -m 30 "http://127.0.0.1:$T_PORT/v1/completions" -d "$long_req,\"stream\":true}" | tail -n 4 | grep -q '"code":"timeout"' ||
  bad "a timed-out stream does not end with an error event"
stop_server "$T_PID"

# --- SIGTERM while a request runs: it finishes, the server exits 0 --------------------------
curl -s -m 30 "$U/v1/completions" -m 90 -d '{"prompt":"Once upon a time","max_tokens":100,"temperature":0}' >"$SERVE_TMP/last.json" &
cpid=$!
for _ in $(seq 1 100); do  # until the request holds a slot
  curl -s -m 5 "$U/metrics" | grep -q '^qkv_slots_busy [1-9]' && break
  sleep 0.05
done
stop_server "$A_PID"
wait $cpid
[ "$STOP_RC" == 0 ] || bad "SIGTERM: exit status $STOP_RC"
grep -q '"finish_reason"' "$SERVE_TMP/last.json" || bad "the request running at SIGTERM did not finish: $(cat "$SERVE_TMP/last.json")"

[ $fail == 0 ] && echo "serve curl: ok"
exit $fail

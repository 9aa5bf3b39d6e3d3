#!/usr/bin/env bash
# qkv serve with several models (two -m flags, --models-dir): each answers a
# greedy completion exactly as `qkv run` on its file does, alternately and
# concurrently; GET /v1/models lists every model with its state, context and
# architecture (and Ollama's /api/tags and /api/ps; /api/tags of unloaded
# models with the parameter size, quantization and family of their GGUF
# headers, checked against tests/serve_models_gguf.py's reading); an unknown
# model is a 404 in each API's shape; POST /models/load and /models/unload;
# least recently used unload under a --memory-limit that holds one model (the
# unloaded one reloads on its next request and answers the same); a truncated
# GGUF answers its requests with a 500 naming the problem while the others
# keep serving; --models-max 1 and --idle-unload 1; /api/show loads a model;
# /models/unload of a model streaming to a client is a 409, and succeeds once
# the stream ends; --memory-limit counts an embedding worker's buffers (the
# worker refused with the numbers, or a least recently used model unloaded
# for it) and refuses a model over it with the numbers.
# Usage: serve_models.sh QKV SHARED_DIR [quick]
# quick (the AddressSanitizer run): one prompt of fewer tokens, one round,
# none of the servers after the --models-dir one.
set -u
QKV="$1"
QUICK="${3:-}"
A_FILE="$2/models/stories260K.gguf"
B_FILE="$2/models/tinystories-3M-Q4_0.gguf"
for f in "$A_FILE" "$B_FILE"; do
  if [ ! -f "$f" ]; then echo "SKIPPED: $f is absent"; exit 0; fi
done
command -v curl >/dev/null || { echo "SKIPPED: curl is not installed"; exit 0; }
command -v python3 >/dev/null || { echo "SKIPPED: python3 is not installed"; exit 0; }
source "$(dirname "$0")/serve_lib.sh"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
A=stories260K
B=tinystories-3M-Q4_0
FLAGS=(--slots 2 -c 256 --kv-type f32 -t 2)
N=24
# The reference: qkv run's greedy continuation of each prompt on each file.
prompts=("Once upon a time" "The cat sat")
rounds="1 2"
if [ "$QUICK" == quick ]; then
  N=12
  prompts=("The cat sat")  # the two models part within its first tokens
  rounds=1
fi

declare -A ref
for p in "${prompts[@]}"; do
  for m in A B; do
    file_var="${m}_FILE"
    out=$("$QKV" run -m "${!file_var}" -p "$p" -n $N --temp 0 -q -t 1 --kv-type f32) || { echo "FAIL: qkv run"; exit 1; }
    ref[$m:$p]="${out#"$p"}"
  done
done
[ "${ref[A:${prompts[0]}]}" != "${ref[B:${prompts[0]}]}" ] || bad "the two models give the same text: the test cannot tell them apart"

# Flags refused before listening: exit 2 (usage) or 1, with the reason named.
refused() {  # refused WANT_TEXT ARGS...
  local want="$1"; shift
  local err rc
  err=$(timeout 20 "$QKV" serve --port 0 "$@" 2>&1 >/dev/null); rc=$?
  { [ $rc == 1 ] || [ $rc == 2 ]; } && printf '%s' "$err" | grep -qF -- "$want" ||
    bad "serve $* : rc $rc, wanted '$want' in '$err'"
}
empty_dir="$(mktemp -d)"
refused "holds no .gguf file" --models-dir "$empty_dir"
refused "cannot read" --models-dir "$empty_dir/absent"
refused "--models-max" -m "$A_FILE" -m "$B_FILE" --models-max 0
refused "--idle-unload" -m "$A_FILE" -m "$B_FILE" --idle-unload -1
refused "--alias names the model of a single -m" -m "$A_FILE" -m "$B_FILE" --alias x
refused "two models are named 'stories260K'" -m "$A_FILE" -m "$A_FILE"
rmdir "$empty_dir"

# complete URL MODEL PROMPT (MODEL "": no model field) -> the completion's JSON
complete() {
  local field=""
  [ -n "$2" ] && field="\"model\":\"$2\","
  curl -s -m 60 "$1/v1/completions" -d "{$field\"prompt\":\"$3\",\"max_tokens\":$N,\"temperature\":0}"
}
# check_text URL MODEL_NAME REF_KEY_MODEL PROMPT WHAT
check_text() {
  local body got
  body=$(complete "$1" "$2" "$4")
  got=$(json 'd["choices"][0]["text"]' <<<"$body" 2>/dev/null)
  [ "$got" == "${ref[$3:$4]}" ] || bad "$5: model '$2', '$4' gave '$got' ($body), qkv run '${ref[$3:$4]}'"
}
# status URL NAME -> the model's status in /v1/models
status() { curl -s -m 10 "$1/v1/models" | json "[m['status'] for m in d['data'] if m['id'] == '$2'][0]" 2>/dev/null; }
post() { curl -s -m 60 -o "$SERVE_TMP/body" -w '%{http_code}' "$1$2" -d "$3"; }

# --- two -m flags ------------------------------------------------------------------
start_server S "$QKV" -m "$A_FILE" -m "$B_FILE" "${FLAGS[@]}" --grace 30 || exit 1
U="http://127.0.0.1:$S_PORT"
curl -s "$U/v1/models" >"$SERVE_TMP/models.json"
python3 - "$SERVE_TMP/models.json" "$A" "$B" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
assert d["object"] == "list", d
ids = [m["id"] for m in d["data"]]
assert ids == sys.argv[2:4], ids
for m in d["data"]:
    assert m["object"] == "model" and m["owned_by"] == "qkv", m
    assert m["status"] == "unloaded", m  # loaded on first use
    assert m["architecture"] == "llama" and m["context"] == 512, m  # from the GGUF header
    assert m["memory_bytes"] > 0, m
PY
# Ollama's /api/tags of the models not yet loaded: size, format, family,
# parameter_size and quantization_level from the file and its GGUF header,
# checked against this script's own reading of the header (tests/serve_models_gguf.py:
# every tensor's elements, general.file_type or the matrices' type) and stat.
curl -s "$U/api/tags" >"$SERVE_TMP/tags.json"
python3 - "$SERVE_TMP/tags.json" "$(dirname "$0")" "$A" "$A_FILE" "$B" "$B_FILE" <<'PY' || bad "/api/tags of unloaded models"
import json, os, sys
sys.path.insert(0, sys.argv[2])
import serve_models_gguf as gguf_header
tags = {m["name"]: m for m in json.load(open(sys.argv[1]))["models"]}
for name, path in ((sys.argv[3], sys.argv[4]), (sys.argv[5], sys.argv[6])):
    h = gguf_header.read(path)
    d = tags[name]["details"]
    want = {"format": "gguf", "family": h.metadata["general.architecture"],
            "parameter_size": gguf_header.ollama_parameter_size(h.parameters),
            "quantization_level": gguf_header.quantization(h)}
    got = {k: d[k] for k in want}
    assert got == want, (name, got, want)
    assert d["families"] == [want["family"]], d
    assert tags[name]["size"] == os.stat(path).st_size, (tags[name]["size"], os.stat(path).st_size)
    print("  /api/tags %s: %s, %d parameters" % (name, got, h.parameters))
# The file name says the quantization too.
assert tags[sys.argv[5]]["details"]["quantization_level"] == sys.argv[5].rsplit("-", 1)[1], tags[sys.argv[5]]
PY
[ "$(status "$U" "$A")" == unloaded ] || bad "/api/tags loaded $A"
# Concurrently, on the first use: both models load while their requests wait, then answer.
i=0
for p in "${prompts[@]}"; do
  for m in A B; do
    name_var="$m"
    complete "$U" "${!name_var}" "$p" >"$SERVE_TMP/c$i.json" &
    i=$((i + 1))
  done
done
wait_jobs() { for j in $(jobs -p); do case " ${SERVE_PIDS[*]} " in *" $j "*) ;; *) wait "$j";; esac; done; }
wait_jobs
i=0
for p in "${prompts[@]}"; do
  for m in A B; do
    got=$(json 'd["choices"][0]["text"]' <"$SERVE_TMP/c$i.json" 2>/dev/null)
    [ "$got" == "${ref[$m:$p]}" ] || bad "concurrently: model $m, '$p' gave '$got', qkv run '${ref[$m:$p]}'"
    i=$((i + 1))
  done
done
for name in "$A" "$B"; do
  loads=$(grep -c "model $name loaded" "$SERVE_TMP/S.err")
  [ "$loads" == 1 ] || bad "$name was loaded $loads times for its concurrent requests, not once"
done
for round in $rounds; do
  for p in "${prompts[@]}"; do
    check_text "$U" "$A" A "$p" "alternately (round $round)"
    check_text "$U" "$B" B "$p" "alternately (round $round)"
  done
done
[ "$(status "$U" "$A")" == loaded ] && [ "$(status "$U" "$B")" == loaded ] || bad "both models should be loaded"
curl -s "$U/v1/models" >"$SERVE_TMP/models_loaded.json"  # measured bytes, for the embedding-buffer limits below
# No model named: the first listed.
check_text "$U" "" A "${prompts[0]}" "no model named"
# Ollama's tag on the name.
got=$(curl -s -m 60 "$U/api/generate" -d "{\"model\":\"$B:latest\",\"prompt\":\"${prompts[0]}\",\"raw\":true,\"stream\":false,\"options\":{\"temperature\":0,\"num_predict\":$N}}" | json 'd["response"]')
[ "$got" == "${ref[B:${prompts[0]}]}" ] || bad "/api/generate on $B:latest gave '$got', qkv run '${ref[B:${prompts[0]}]}'"

# An unknown model: 404 in each API's shape.
code=$(post "$U" /v1/completions '{"model":"nope","prompt":"x","max_tokens":2}')
[ "$code" == 404 ] && [ "$(json 'd["error"]["code"]' <"$SERVE_TMP/body")" == model_not_found ] ||
  bad "unknown model (OpenAI): $code $(cat "$SERVE_TMP/body")"
code=$(post "$U" /v1/chat/completions '{"model":"nope","messages":[{"role":"user","content":"x"}]}')
[ "$code" == 404 ] || bad "unknown model (chat): $code"
code=$(post "$U" /v1/messages '{"model":"nope","max_tokens":4,"messages":[{"role":"user","content":"x"}]}')
[ "$code" == 404 ] && [ "$(json 'd["type"] + " " + d["error"]["type"]' <"$SERVE_TMP/body")" == "error not_found_error" ] ||
  bad "unknown model (Anthropic): $code $(cat "$SERVE_TMP/body")"
code=$(post "$U" /api/chat '{"model":"nope","messages":[{"role":"user","content":"x"}]}')
[ "$code" == 404 ] && json 'd["error"]' <"$SERVE_TMP/body" | grep -q nope || bad "unknown model (Ollama): $code $(cat "$SERVE_TMP/body")"
code=$(post "$U" /v1/embeddings '{"model":"nope","input":"x"}')
[ "$code" == 404 ] || bad "unknown model (embeddings): $code"

# Ollama's listings: every model in /api/tags, the loaded ones in /api/ps.
names=$(curl -s "$U/api/tags" | json '" ".join(m["name"] for m in d["models"])')
[ "$names" == "$A $B" ] || bad "/api/tags lists '$names'"
names=$(curl -s "$U/api/ps" | json '" ".join(m["name"] for m in d["models"])')
[ "$names" == "$A $B" ] || bad "/api/ps lists '$names'"

# /models/unload and /models/load.
code=$(post "$U" /models/unload "{\"model\":\"$A\"}")
[ "$code" == 200 ] && [ "$(json 'd["success"]' <"$SERVE_TMP/body")" == True ] || bad "/models/unload: $code $(cat "$SERVE_TMP/body")"
[ "$(status "$U" "$A")" == unloaded ] || bad "$A should be unloaded after /models/unload"
names=$(curl -s "$U/api/ps" | json '" ".join(m["name"] for m in d["models"])')
[ "$names" == "$B" ] || bad "/api/ps lists '$names' after the unload"
check_text "$U" "$A" A "${prompts[-1]}" "reloaded after /models/unload"
[ "$(status "$U" "$A")" == loaded ] || bad "$A should be loaded again"
post "$U" /models/unload "{\"model\":\"$B\"}" >/dev/null
code=$(post "$U" /models/load "{\"model\":\"$B\"}")
[ "$code" == 200 ] && [ "$(status "$U" "$B")" == loaded ] || bad "/models/load: $code $(cat "$SERVE_TMP/body")"
code=$(post "$U" /models/unload '{"model":"nope"}')
[ "$code" == 404 ] || bad "/models/unload of an unknown model: $code"
code=$(post "$U" /models/load '{}')
[ "$code" == 400 ] || bad "/models/load without a model: $code"
# Each model's metrics carry its name.
m=$(curl -s "$U/metrics")
for name in "$A" "$B"; do
  echo "$m" | grep -q "^qkv_requests_total{model=\"$name\",endpoint=\"/v1/completions\",status=\"200\"}" ||
    bad "/metrics has no requests of $name"
  echo "$m" | grep -q "^qkv_slots_total{model=\"$name\"} 2" || bad "/metrics has no slots of $name"
done
stop_server "$S_PID"; [ "$STOP_RC" == 0 ] || bad "the server did not exit 0 on SIGTERM ($STOP_RC)"

# --- --models-dir under a memory limit that holds one model -----------------------------
D="$SERVE_TMP/models"
mkdir -p "$D"
ln -s "$(realpath "$A_FILE")" "$D/$A.gguf"
ln -s "$(realpath "$B_FILE")" "$D/$B.gguf"
head -c 200000 "$B_FILE" >"$D/broken.gguf"                       # a truncated GGUF
head -c 100000 "$B_FILE" >"$D/parts-00001-of-00002.gguf"          # a split model is listed once
head -c 100000 "$B_FILE" >"$D/parts-00002-of-00002.gguf"
echo "not a model" >"$D/notes.txt"
mem_a=$(python3 -c "import json; print([m['memory_bytes'] for m in json.load(open('$SERVE_TMP/models.json'))['data'] if m['id'] == '$A'][0])")
mem_b=$(python3 -c "import json; print([m['memory_bytes'] for m in json.load(open('$SERVE_TMP/models.json'))['data'] if m['id'] == '$B'][0])")
limit=$(( (mem_a > mem_b ? mem_a : mem_b) + (mem_a < mem_b ? mem_a : mem_b) / 2 ))
start_server M "$QKV" --models-dir "$D" "${FLAGS[@]}" --memory-limit "$limit" || exit 1
U="http://127.0.0.1:$M_PORT"
ids=$(curl -s "$U/v1/models" | json '" ".join(m["id"] for m in d["data"])')
[ "$ids" == "broken parts $A $B" ] || bad "--models-dir lists '$ids'"
check_text "$U" "$A" A "${prompts[0]}" "--models-dir"
check_text "$U" "$B" B "${prompts[0]}" "--models-dir, after $A"
[ "$(status "$U" "$A")" == unloaded ] || bad "loading $B under --memory-limit $limit should unload $A (least recently used)"
[ "$(status "$U" "$B")" == loaded ] || bad "$B should be loaded"
check_text "$U" "$A" A "${prompts[-1]}" "reloaded after the LRU unload"
[ "$(status "$U" "$B")" == unloaded ] && [ "$(status "$U" "$A")" == loaded ] || bad "loading $A again should unload $B"
# The truncated file: its requests fail with the reason, while the others serve.
complete "$U" "$A" "${prompts[0]}" >"$SERVE_TMP/beside.json" &
code=$(post "$U" /v1/completions '{"model":"broken","prompt":"x","max_tokens":2}')
wait_jobs
[ "$code" == 500 ] && json 'd["error"]["message"]' <"$SERVE_TMP/body" | grep -q "broken' could not be loaded: loading the model" ||
  bad "a truncated GGUF: $code $(cat "$SERVE_TMP/body")"
got=$(json 'd["choices"][0]["text"]' <"$SERVE_TMP/beside.json" 2>/dev/null)
[ "$got" == "${ref[A:${prompts[0]}]}" ] || bad "beside the broken model, $A gave '$got'"
code=$(post "$U" /api/generate '{"model":"broken","prompt":"x"}')
[ "$code" == 500 ] && json 'd["error"]' <"$SERVE_TMP/body" | grep -q "could not be loaded" ||
  bad "a truncated GGUF (Ollama, a second try): $code $(cat "$SERVE_TMP/body")"
st=$(curl -s "$U/v1/models" | json "[m['status'] + ' ' + str('error' in m) for m in d['data'] if m['id'] == 'broken'][0]")
[ "$st" == "unloaded True" ] || bad "/v1/models should show broken unloaded with its error, not '$st'"
check_text "$U" "$B" B "${prompts[-1]}" "after the broken model's failures"
stop_server "$M_PID"; [ "$STOP_RC" == 0 ] || bad "the --models-dir server did not exit 0 ($STOP_RC)"

# --- --models-max 1 and --idle-unload 1 ---------------------------------------------
if [ "$QUICK" == quick ]; then
  [ $fail == 0 ] && echo "serve_models (quick): all checks passed"
  exit $fail
fi
start_server I "$QKV" -m "$A_FILE" -m "$B_FILE" "${FLAGS[@]}" --models-max 1 --idle-unload 1 || exit 1
U="http://127.0.0.1:$I_PORT"
check_text "$U" "$A" A "${prompts[0]}" "--models-max 1"
check_text "$U" "$B" B "${prompts[0]}" "--models-max 1"
[ "$(status "$U" "$A")" == unloaded ] || bad "--models-max 1 should have unloaded $A for $B"
unloaded=0
for _ in $(seq 1 50); do  # up to 5 s for the 1 s idle limit
  [ "$(status "$U" "$B")" == unloaded ] && { unloaded=1; break; }
  sleep 0.1
done
[ $unloaded == 1 ] || bad "--idle-unload 1 did not unload $B"
check_text "$U" "$B" B "${prompts[-1]}" "after the idle unload"
stop_server "$I_PID"; [ "$STOP_RC" == 0 ] || bad "the --idle-unload server did not exit 0 ($STOP_RC)"

# --- /api/show loads, /models/unload of a model with a stream in flight ----------------
start_server F "$QKV" -m "$A_FILE" -m "$B_FILE" --slots 1 -c 2048 --kv-type f32 -t 2 || exit 1
U="http://127.0.0.1:$F_PORT"
code=$(post "$U" /api/show "{\"model\":\"$B\"}")
[ "$code" == 200 ] && [ "$(json 'd["details"]["family"] + " " + d["details"]["quantization_level"]' <"$SERVE_TMP/body")" == "llama Q4_0" ] ||
  bad "/api/show of the unloaded $B: $code $(cat "$SERVE_TMP/body")"
[ "$(status "$U" "$B")" == loaded ] || bad "/api/show should have loaded $B"
code=$(post "$U" /api/show '{"model":"nope"}')
[ "$code" == 404 ] || bad "/api/show of an unknown model: $code"
# A streamed completion of many tokens (EOS banned, each event with logprobs)
# to a client that stops reading after the first event: the stream stays open,
# and so the model is in flight.
eos=$(python3 -c "import sys; sys.path.insert(0, '$(dirname "$0")'); import serve_models_gguf as g; print(g.read('$A_FILE').metadata['tokenizer.ggml.eos_token_id'])")
python3 - "$F_PORT" "$A" "$eos" >"$SERVE_TMP/inflight.txt" 2>&1 <<'PY' || bad "unload in flight: $(cat "$SERVE_TMP/inflight.txt")"
import json, socket, sys, time, urllib.error, urllib.request
port, model, eos = int(sys.argv[1]), sys.argv[2], sys.argv[3]

def post(path, obj):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), json.dumps(obj).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)

body = json.dumps({"model": model, "prompt": "Once upon a time", "max_tokens": 1900, "temperature": 0,
                   "stream": True, "logprobs": 5, "logit_bias": {eos: -100}}).encode()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a small window: the server's writes block
s.connect(("127.0.0.1", port))
s.settimeout(60)
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
          b"Content-Length: %d\r\n\r\n" % len(body) + body)
got = b""
while b"data: " not in got:
    got += s.recv(1024)
code, reply = post("/models/unload", {"model": model})
msg = reply.get("error", {}).get("message", "")
print("during the stream:", code, msg)
assert code == 409 and "has requests in flight" in msg and model in msg, (code, reply)
while b"data: [DONE]" not in got[-64:]:
    chunk = s.recv(65536)
    assert chunk, "the stream closed before [DONE]"
    got += chunk
events = got.count(b"data: {")
s.close()
for _ in range(100):  # the stream's end is recorded right after its last write
    code, reply = post("/models/unload", {"model": model})
    if code != 409:
        break
    time.sleep(0.05)
print("after %d events:" % events, code, reply)
assert code == 200 and reply == {"success": True}, (code, reply)
assert events > 100, events  # (chunk headers may split a few "data: {")
PY
[ "$(status "$U" "$A")" == unloaded ] || bad "$A should be unloaded after its stream ended"
stop_server "$F_PID"; [ "$STOP_RC" == 0 ] || bad "the in-flight server did not exit 0 ($STOP_RC)"

# --- --memory-limit counts an embedding worker's buffers ------------------------------
# The bytes /v1/models gave for the loaded models (same flags as these servers).
read -r mem_a emb_a mem_b <<<"$(python3 -c "
import json
d = {m['id']: m for m in json.load(open('$SERVE_TMP/models_loaded.json'))['data']}
print(d['$A']['memory_bytes'], d['$A']['embedding_buffer_bytes'], d['$B']['memory_bytes'])")"
embed() { post "$1" /v1/embeddings "{\"model\":\"$2\",\"input\":\"a cat\"}"; }
# A limit that holds A but not A and its buffers, nor B: the embedding request
# and B's load are refused with the numbers, and A keeps serving.
gap=$(( emb_a < mem_b - mem_a ? emb_a : mem_b - mem_a ))
[ $gap -gt 1 ] || bad "the test's models: $B ($mem_b bytes) should be larger than $A ($mem_a)"
limit=$((mem_a + gap / 2))
start_server E "$QKV" -m "$A_FILE" -m "$B_FILE" "${FLAGS[@]}" --memory-limit "$limit" || exit 1
U="http://127.0.0.1:$E_PORT"
check_text "$U" "$A" A "${prompts[0]}" "under a limit below its embedding buffers"
code=$(embed "$U" "$A")
want="model '$A' cannot start its embedding worker: it needs $((mem_a + emb_a)) bytes (weights and KV cache $mem_a, embedding worker buffers $emb_a), over --memory-limit $limit"
[ "$code" == 500 ] && [ "$(json 'd["error"]["message"]' <"$SERVE_TMP/body")" == "$want" ] ||
  bad "embedding over the limit: $code $(cat "$SERVE_TMP/body"), wanted '$want'"
code=$(post "$U" /v1/completions "{\"model\":\"$B\",\"prompt\":\"x\",\"max_tokens\":2}")
# (B never loaded here: its bytes are the estimate from its file and header.)
[ "$code" == 500 ] && python3 - "$SERVE_TMP/body" "$B" "$limit" <<'PY' || bad "a model over the limit: $code $(cat "$SERVE_TMP/body")"
import json, re, sys
msg = json.load(open(sys.argv[1]))["error"]["message"]
m = re.fullmatch(r"model '(.*)' could not be loaded: it needs (\d+) bytes \(weights and KV cache (\d+)\), "
                 r"over --memory-limit (\d+)", msg)
assert m and m[1] == sys.argv[2] and m[2] == m[3] and int(m[4]) == int(sys.argv[3]) < int(m[2]), msg
PY
check_text "$U" "$A" A "${prompts[-1]}" "after its embedding worker and $B were refused"
stop_server "$E_PID"; [ "$STOP_RC" == 0 ] || bad "the embedding-limit server did not exit 0 ($STOP_RC)"
# A limit that holds A and B, and A with its buffers, but not all three: the
# embedding request unloads B (least recently used) and is answered.
limit=$((mem_a + mem_b + emb_a / 2))
[ $((mem_a + emb_a)) -le $limit ] || bad "the test's models: A's buffers ($emb_a) are over twice B ($mem_b)"
start_server L "$QKV" -m "$A_FILE" -m "$B_FILE" "${FLAGS[@]}" --memory-limit "$limit" || exit 1
U="http://127.0.0.1:$L_PORT"
check_text "$U" "$B" B "${prompts[0]}" "under a limit of two models"
check_text "$U" "$A" A "${prompts[0]}" "under a limit of two models"
[ "$(status "$U" "$B")" == loaded ] || bad "$A and $B fit --memory-limit $limit together"
code=$(embed "$U" "$A")
[ "$code" == 200 ] && [ "$(json 'len(d["data"][0]["embedding"])' <"$SERVE_TMP/body")" -gt 0 ] ||
  bad "embedding after making room: $code $(cat "$SERVE_TMP/body")"
[ "$(status "$U" "$B")" == unloaded ] || bad "$A's embedding buffers should have unloaded $B under --memory-limit $limit"
grep -q "model $B unloaded (to fit --memory-limit)" "$SERVE_TMP/L.err" || bad "no unload of $B logged: $(cat "$SERVE_TMP/L.err")"
got=$(curl -s "$U/v1/models" | json "[m['memory_bytes'] for m in d['data'] if m['id'] == '$A'][0]")
[ "$got" == $((mem_a + emb_a)) ] || bad "$A counts $got bytes with its embedding worker, not $((mem_a + emb_a))"
# B loads again only by unloading A (with its buffers), which no request holds.
check_text "$U" "$B" B "${prompts[-1]}" "reloaded beside an embedding worker"
[ "$(status "$U" "$A")" == unloaded ] || bad "reloading $B should unload $A and its embedding worker"
stop_server "$L_PID"; [ "$STOP_RC" == 0 ] || bad "the embedding-LRU server did not exit 0 ($STOP_RC)"

[ $fail == 0 ] && echo "serve_models: all checks passed"
exit $fail

#!/usr/bin/env bash
# qkv pull, -hf, ollama:, list and rm against tests/hub_server.py (a local
# stand-in for the Hugging Face hub on 127.0.0.1, plain HTTP and HTTPS with a
# self-signed certificate) and a fake Ollama store, both built here from
# models qkv make-model writes. The cache layout is checked against
# huggingface_hub's documented one (https://huggingface.co/docs/hub/local-cache:
# blobs/<sha256>, snapshots/<rev>/FILE -> ../../blobs/<sha256>, refs/main),
# since huggingface_hub itself cannot be installed here.
# A full disk is checked before the download (a small tmpfs) and during it
# (ENOSPC on a tmpfs filled while the hub holds the file's second half, when a
# private mount namespace is allowed; EFBIG past `ulimit -f`, always): the
# partial file stays and the next pull resumes it. qkv serve names an
# ollama: model NAME:TAG.
# Usage: cli_pull.sh QKV. Never contacts a real hub.
set -u
qkv=$1
here=$(cd "$(dirname "$0")" && pwd)
command -v python3 >/dev/null || { echo "SKIPPED: python3 is not installed"; exit 0; }
command -v openssl >/dev/null || { echo "SKIPPED: openssl is not installed"; exit 0; }
tmp=$(mktemp -d)
servers=()
cleanup() {
  for pid in "${servers[@]}"; do kill "$pid" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
failures=0
pass() { echo "ok: $1"; }
fail_test() {
  echo "FAIL: $1"
  failures=$((failures + 1))
}
# expect_error DESCRIPTION NEEDLE COMMAND...: exit code 1 or 2 and NEEDLE on stderr.
expect_error() {
  local what=$1 needle=$2
  shift 2
  local rc
  "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [[ $rc -ge 1 && $rc -le 2 ]] && grep -qF -- "$needle" "$tmp/err"; then
    pass "$what"
  else
    fail_test "$what (exit $rc, stderr: $(cat "$tmp/err"))"
  fi
}
# start_server NAME ARGS...: starts hub_server.py, sets $port; its log is $tmp/NAME.log.
start_server() {
  local name=$1
  shift
  : >"$tmp/$name.log"
  python3 "$here/hub_server.py" --root "$tmp/hub" --log "$tmp/$name.log" "$@" >"$tmp/$name.port" 2>"$tmp/$name.err" &
  servers+=($!)
  for _ in $(seq 100); do
    [[ -s $tmp/$name.port ]] && break
    sleep 0.05
  done
  port=$(head -1 "$tmp/$name.port")
  [[ -n $port ]] || { echo "FAIL: hub_server.py did not start: $(cat "$tmp/$name.err")"; exit 1; }
}

# The hub's content: a repository with two quants, a split model, a gated one.
repo=$tmp/hub/acme/tiny-GGUF
mkdir -p "$repo" "$tmp/hub/acme/split-GGUF" "$tmp/hub/acme/gated-GGUF"
"$qkv" make-model tiny --type q8_0 -o "$repo/tiny-Q8_0.gguf" -q || exit 1
"$qkv" make-model tiny --type q4_0 -o "$repo/tiny-Q4_0.gguf" -q || exit 1
echo "# tiny" >"$repo/README.md"
head -c 100000 "$repo/tiny-Q8_0.gguf" >"$tmp/hub/acme/split-GGUF/tiny-Q8_0-00001-of-00002.gguf"
tail -c +100001 "$repo/tiny-Q8_0.gguf" >"$tmp/hub/acme/split-GGUF/tiny-Q8_0-00002-of-00002.gguf"
cp "$repo/tiny-Q8_0.gguf" "$tmp/hub/acme/gated-GGUF/gated-Q8_0.gguf"
q8_sha=$(sha256sum "$repo/tiny-Q8_0.gguf" | cut -d' ' -f1)

start_server plain
plain_port=$port
export HF_HOME=$tmp/hf HF_ENDPOINT=http://127.0.0.1:$port
unset HF_HUB_CACHE HF_TOKEN HF_TOKEN_PATH HF_HUB_OFFLINE CURL_CA_BUNDLE SSL_CERT_FILE REQUESTS_CA_BUNDLE
export NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost  # a proxy of the CI host must not see loopback
cache=$HF_HOME/hub/models--acme--tiny-GGUF
rev=$(python3 -c 'import hashlib; print(hashlib.sha1(b"acme/tiny-GGUF").hexdigest())')

# Pull by quant tag (case-insensitive): the path printed is the snapshot link.
q8=$("$qkv" pull acme/tiny-GGUF:q8_0 2>"$tmp/err")
if [[ $q8 == "$cache/snapshots/$rev/tiny-Q8_0.gguf" ]] && cmp -s "$q8" "$repo/tiny-Q8_0.gguf"; then
  pass "pull by quant tag"
else
  fail_test "pull by quant tag: '$q8' $(cat "$tmp/err")"
fi
# The layout huggingface_hub documents.
if python3 - "$cache" "$rev" "$q8_sha" <<'EOF'; then
import os, sys
cache, rev, sha = sys.argv[1:]
link = os.path.join(cache, "snapshots", rev, "tiny-Q8_0.gguf")
assert os.path.islink(link), "not a link: " + link
assert os.readlink(link) == "../../blobs/" + sha, "link target " + os.readlink(link)
assert os.path.isfile(os.path.join(cache, "blobs", sha))
with open(os.path.join(cache, "refs", "main")) as f:
    assert f.read() == rev, "refs/main"
assert not [b for b in os.listdir(os.path.join(cache, "blobs")) if b.endswith(".incomplete")]
EOF
  pass "cache layout (relative link to blobs/<sha256>, refs/main, no .incomplete left)"
else
  fail_test "cache layout"
fi

# A second pull prints the path and downloads nothing.
before=$(stat -c %Y.%i "$cache/blobs/$q8_sha")
: >"$tmp/plain.log"
again=$("$qkv" pull acme/tiny-GGUF:Q8_0 2>"$tmp/err")
if [[ $again == "$q8" && $(stat -c %Y.%i "$cache/blobs/$q8_sha") == "$before" ]] && ! grep -q '"/blobs/' "$tmp/plain.log" &&
   ! grep -q pulling "$tmp/err"; then
  pass "second pull is a no-op"
else
  fail_test "second pull: '$again' $(cat "$tmp/err") $(cat "$tmp/plain.log")"
fi

# Pull by file name; the split model comes whole.
q4=$("$qkv" pull acme/tiny-GGUF/tiny-Q4_0.gguf 2>"$tmp/err")
if cmp -s "$q4" "$repo/tiny-Q4_0.gguf"; then pass "pull by file name"; else fail_test "pull by file name: $(cat "$tmp/err")"; fi
mapfile -t parts < <("$qkv" pull acme/split-GGUF:Q8_0 2>"$tmp/err")
if [[ ${#parts[@]} == 2 ]] && cat "${parts[0]}" "${parts[1]}" | cmp -s - "$repo/tiny-Q8_0.gguf"; then
  pass "split model: both parts"
else
  fail_test "split model: ${parts[*]} $(cat "$tmp/err")"
fi

expect_error "a split model is pulled, and loading it says how to join it" "llama-gguf-split --merge" "$qkv" run -hf acme/split-GGUF:Q8_0 -p hi

# Tags that match nothing list what there is; 404s name what is missing.
expect_error "no default quant: available listed" "available: Q4_0 (tiny-Q4_0.gguf), Q8_0 (tiny-Q8_0.gguf)" "$qkv" pull acme/tiny-GGUF
expect_error "unknown quant" "has no GGUF file tagged Q6_K" "$qkv" pull acme/tiny-GGUF:Q6_K
expect_error "repository 404" "repository acme/missing-GGUF: HTTP 404" "$qkv" pull acme/missing-GGUF
expect_error "file not in the repository" "has no file nope.gguf" "$qkv" pull acme/tiny-GGUF/nope.gguf
expect_error "bad reference" "not OWNER/REPO" "$qkv" pull just-a-name
expect_error "path escape refused" "'..' part" "$qkv" pull acme/tiny-GGUF/../x.gguf

# The pulled file runs, and -hf runs the same model.
"$qkv" run -m "$q8" -n 4 -p hi --temp 0 >"$tmp/by_path" 2>"$tmp/err" || fail_test "run -m pulled file: $(cat "$tmp/err")"
if "$qkv" run -hf acme/tiny-GGUF:Q8_0 -n 4 -p hi --temp 0 >"$tmp/by_hf" 2>"$tmp/err" && [[ -s $tmp/by_path ]] &&
   cmp -s "$tmp/by_path" "$tmp/by_hf"; then
  pass "run -hf OWNER/REPO:Q8_0 matches run -m PATH"
else
  fail_test "run -hf: $(cat "$tmp/err")"
fi
if "$qkv" run -hf acme/tiny-GGUF -hff tiny-Q8_0.gguf -n 4 -p hi --temp 0 >"$tmp/by_hff" 2>"$tmp/err" &&
   cmp -s "$tmp/by_path" "$tmp/by_hff"; then
  pass "run -hf REPO -hff FILE"
else
  fail_test "run -hff: $(cat "$tmp/err")"
fi
expect_error "-hff without -hf" "give both" "$qkv" run -hff tiny-Q8_0.gguf -p hi
expect_error "-m and -hf" "not both" "$qkv" run -m "$q8" -hf acme/tiny-GGUF:Q8_0 -p hi

# A dropped connection keeps the partial file; the next pull resumes with Range.
start_server drop --drop-once
export HF_HOME=$tmp/hf-drop HF_ENDPOINT=http://127.0.0.1:$port
partial=$HF_HOME/hub/models--acme--tiny-GGUF/blobs/$q8_sha.incomplete
expect_error "dropped connection: message says resume" "run the same command again to resume" "$qkv" pull acme/tiny-GGUF:Q8_0
have=$(stat -c %s "$partial" 2>/dev/null || echo 0)
full=$(stat -c %s "$repo/tiny-Q8_0.gguf")
if [[ $have -gt 0 && $have -lt $full ]]; then pass "partial kept ($have of $full bytes)"; else fail_test "partial file: $have bytes"; fi
out=$("$qkv" pull acme/tiny-GGUF:Q8_0 2>"$tmp/err")
if cmp -s "$out" "$repo/tiny-Q8_0.gguf" && grep -q "\"range\": \"bytes=$have-\"" "$tmp/drop.log" && [[ ! -e $partial ]]; then
  pass "resume sends Range: bytes=$have- and completes"
else
  fail_test "resume: $(cat "$tmp/err") $(grep blobs "$tmp/drop.log")"
fi

# A wrong sha256 is rejected and the bad bytes are deleted.
start_server corrupt --corrupt
export HF_HOME=$tmp/hf-corrupt HF_ENDPOINT=http://127.0.0.1:$port
expect_error "wrong sha256 rejected" "were deleted" "$qkv" pull acme/tiny-GGUF:Q8_0
if [[ -z $(ls -A "$HF_HOME/hub/models--acme--tiny-GGUF/blobs") && ! -e $HF_HOME/hub/models--acme--tiny-GGUF/snapshots ]]; then
  pass "nothing of the corrupt file stays"
else
  fail_test "corrupt file left: $(find "$HF_HOME")"
fi

# 401 without a token, success with HF_TOKEN (sent as a bearer token).
start_server gated --token s3cret
export HF_HOME=$tmp/hf-gated HF_ENDPOINT=http://127.0.0.1:$port
expect_error "401 names HF_TOKEN" "set HF_TOKEN" "$qkv" pull acme/gated-GGUF:Q8_0
expect_error "wrong token" "HTTP 401 (the token in HF_TOKEN" env HF_TOKEN=wrong "$qkv" pull acme/gated-GGUF:Q8_0
mkdir -p "$tmp/hf-login"
printf 's3cret\n' >"$tmp/hf-login/token"  # as 'huggingface-cli login' leaves it
if out=$(HF_HOME=$tmp/hf-login "$qkv" pull acme/gated-GGUF:Q8_0 2>"$tmp/err") && cmp -s "$out" "$repo/tiny-Q8_0.gguf"; then
  pass "gated repository with the token file \$HF_HOME/token"
else
  fail_test "token file: $(cat "$tmp/err")"
fi
if out=$(HF_TOKEN=s3cret "$qkv" pull acme/gated-GGUF:Q8_0 2>"$tmp/err") && cmp -s "$out" "$repo/tiny-Q8_0.gguf"; then
  pass "gated repository with HF_TOKEN"
else
  fail_test "HF_TOKEN: $(cat "$tmp/err")"
fi

# HTTPS with a self-signed certificate, trusted through CURL_CA_BUNDLE.
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
  -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>/dev/null || { fail_test "openssl req"; }
start_server tls --cert "$tmp/cert.pem" --key "$tmp/key.pem"
export HF_HOME=$tmp/hf-tls HF_ENDPOINT=https://127.0.0.1:$port
expect_error "untrusted certificate refused" "cannot reach" "$qkv" pull acme/tiny-GGUF:Q8_0
if out=$(CURL_CA_BUNDLE=$tmp/cert.pem "$qkv" pull acme/tiny-GGUF:Q8_0 2>"$tmp/err") && cmp -s "$out" "$repo/tiny-Q8_0.gguf"; then
  pass "HTTPS with CURL_CA_BUNDLE"
else
  fail_test "HTTPS: $(cat "$tmp/err")"
fi

# Offline: the cache answers, and what is absent is named.
export HF_HOME=$tmp/hf HF_ENDPOINT=http://127.0.0.1:9 HF_HUB_OFFLINE=1
if out=$("$qkv" pull acme/tiny-GGUF:Q8_0 2>"$tmp/err") && [[ $out == "$q8" ]] &&
   "$qkv" run -hf acme/tiny-GGUF:Q8_0 -n 4 -p hi --temp 0 >"$tmp/offline" 2>>"$tmp/err" && cmp -s "$tmp/by_path" "$tmp/offline"; then
  pass "HF_HUB_OFFLINE=1 pull and run -hf from the cache"
else
  fail_test "offline: $(cat "$tmp/err")"
fi
expect_error "offline, absent model" "HF_HUB_OFFLINE is set" "$qkv" pull acme/other-GGUF:Q8_0
unset HF_HUB_OFFLINE
expect_error "hub unreachable, not cached" "cannot reach http://127.0.0.1:9" "$qkv" pull acme/other-GGUF:Q8_0

# A full disk (a 64 KiB tmpfs in a private mount namespace) is named before any byte is written.
if unshare -rm true 2>/dev/null || unshare -m true 2>/dev/null; then
  runner="unshare -rm"
  unshare -rm true 2>/dev/null || runner="unshare -m"
  mkdir -p "$tmp/full"
  $runner bash -c 'mount -t tmpfs -o size=64k tmpfs "$1" || exit 99; HF_HOME=$1 HF_ENDPOINT=$2 "$3" pull acme/tiny-GGUF:Q8_0' \
    _ "$tmp/full" "http://127.0.0.1:$plain_port" "$qkv" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [[ $rc == 99 ]]; then
    echo "skipped: full disk (cannot mount a tmpfs)"
  elif [[ $rc == 1 ]] && grep -q "not enough disk space for tiny-Q8_0.gguf" "$tmp/err"; then
    pass "full disk named"
  else
    fail_test "full disk: exit $rc $(cat "$tmp/err")"
  fi
else
  echo "skipped: full disk (no private mount namespace)"
fi

# The disk fills mid-download (a 1 MiB tmpfs in a private mount namespace, filled
# while the hub holds the second half of the file): ENOSPC is named, the partial
# .incomplete file stays, and once there is room the next pull resumes from it.
start_server hold --hold-until "$tmp/release"
hold_port=$port
cat >"$tmp/enospc.sh" <<'SCRIPT'
# In the namespace: $1 mount point, $2 hub URL, $3 qkv, $4 release file, $5 partial's name, $6 the hub's file.
mount -t tmpfs -o size=1m tmpfs "$1" || exit 99
partial="$1/hub/models--acme--tiny-GGUF/blobs/$5"
HF_HOME=$1 HF_ENDPOINT=$2 "$3" pull acme/tiny-GGUF:Q8_0 >"$1.out" 2>"$1.err" &
pull=$!
for _ in $(seq 200); do  # up to 20 s for the first half to reach the file
  [[ $(stat -c %s "$partial" 2>/dev/null || echo 0) -gt 0 ]] && break
  sleep 0.1
done
dd if=/dev/zero of="$1/filler" bs=4096 2>/dev/null  # until ENOSPC
touch "$4"
wait $pull
echo "rc=$?" >"$1.rc"
stat -c %s "$partial" >"$1.kept" 2>/dev/null
rm -f "$1/filler"
HF_HOME=$1 HF_ENDPOINT=$2 "$3" pull acme/tiny-GGUF:Q8_0 >"$1.out2" 2>"$1.err2" || exit 3
cmp -s "$(cat "$1.out2")" "$6" || exit 4
[[ ! -e $partial ]] || exit 5
SCRIPT
mkdir -p "$tmp/fills"
runner=""
unshare -rm true 2>/dev/null && runner="unshare -rm"
[[ -z $runner ]] && unshare -m true 2>/dev/null && runner="unshare -m"
if [[ -z $runner ]]; then
  echo "skipped: disk full mid-download (no private mount namespace)"
else
  $runner bash "$tmp/enospc.sh" "$tmp/fills" "http://127.0.0.1:$hold_port" "$qkv" "$tmp/release" "$q8_sha.incomplete" \
    "$repo/tiny-Q8_0.gguf" >"$tmp/fills.log" 2>&1
  rc=$?
  full=$(stat -c %s "$repo/tiny-Q8_0.gguf")
  kept=$(cat "$tmp/fills.kept" 2>/dev/null || echo 0)
  if [[ $rc == 99 ]]; then
    echo "skipped: disk full mid-download (cannot mount a tmpfs: $(cat "$tmp/fills.log"))"
  elif [[ $rc == 0 && $(cat "$tmp/fills.rc") == rc=1 ]] && grep -q "the disk is full while writing .*\.incomplete" "$tmp/fills.err" &&
       grep -q "free some space and run the command again to resume" "$tmp/fills.err" && [[ $kept -gt 0 && $kept -lt $full ]] &&
       grep -q "\"range\": \"bytes=$kept-\"" "$tmp/hold.log"; then
    pass "disk full mid-download (ENOSPC on a tmpfs): named, $kept of $full bytes kept, resumed with Range: bytes=$kept-"
  else
    fail_test "disk full mid-download: exit $rc $(cat "$tmp/fills.rc" "$tmp/fills.err" "$tmp/fills.err2" "$tmp/fills.log" 2>&1) kept $kept"
  fi
fi

# The same failure through the file size limit, which needs no mount: past
# `ulimit -f` a write fails with EFBIG (SIGXFSZ ignored), handled as ENOSPC is.
export HF_HOME=$tmp/hf-fsize HF_ENDPOINT=http://127.0.0.1:$plain_port
partial=$HF_HOME/hub/models--acme--tiny-GGUF/blobs/$q8_sha.incomplete
: >"$tmp/plain.log"
(ulimit -f 64 && exec "$qkv" pull acme/tiny-GGUF:Q8_0) >"$tmp/out" 2>"$tmp/err"
rc=$?
kept=$(stat -c %s "$partial" 2>/dev/null || echo 0)
if [[ $rc == 1 ]] && grep -q "the file size limit (ulimit -f) was reached while writing" "$tmp/err" && [[ $kept == 65536 ]]; then
  pass "file size limit mid-download (EFBIG): named, the 65536 bytes within the limit kept"
else
  fail_test "file size limit: exit $rc, $kept bytes kept, $(cat "$tmp/err")"
fi
if out=$("$qkv" pull acme/tiny-GGUF:Q8_0 2>"$tmp/err") && cmp -s "$out" "$repo/tiny-Q8_0.gguf" &&
   grep -q '"range": "bytes=65536-"' "$tmp/plain.log" && [[ ! -e $partial ]]; then
  pass "resumed after the file size limit with Range: bytes=65536-"
else
  fail_test "resume after EFBIG: $(cat "$tmp/err") $(grep blobs "$tmp/plain.log")"
fi

# A fake Ollama store: the model, template and params layers of a manifest.
export OLLAMA_MODELS=$tmp/ollama
mkdir -p "$OLLAMA_MODELS/blobs" "$OLLAMA_MODELS/manifests/registry.ollama.ai/library/tiny" \
  "$OLLAMA_MODELS/manifests/registry.ollama.ai/someone/tiny"
cp "$repo/tiny-Q8_0.gguf" "$OLLAMA_MODELS/blobs/sha256-$q8_sha"
printf '{"temperature":0.9,"seed":7,"stop":["<|im_end|>"]}' >"$tmp/params"
printf '{{ .Prompt }}' >"$tmp/template"
params_sha=$(sha256sum "$tmp/params" | cut -d' ' -f1)
template_sha=$(sha256sum "$tmp/template" | cut -d' ' -f1)
cp "$tmp/params" "$OLLAMA_MODELS/blobs/sha256-$params_sha"
cp "$tmp/template" "$OLLAMA_MODELS/blobs/sha256-$template_sha"
cat >"$OLLAMA_MODELS/manifests/registry.ollama.ai/library/tiny/latest" <<EOF
{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json",
 "config":{"mediaType":"application/vnd.docker.container.image.v1+json","digest":"sha256:$params_sha","size":10},
 "layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:$q8_sha","size":$full},
           {"mediaType":"application/vnd.ollama.image.template","digest":"sha256:$template_sha","size":14},
           {"mediaType":"application/vnd.ollama.image.params","digest":"sha256:$params_sha","size":50}]}
EOF
sed 's/"size":'"$full"'/"size":1/' "$OLLAMA_MODELS/manifests/registry.ollama.ai/library/tiny/latest" \
  >"$OLLAMA_MODELS/manifests/registry.ollama.ai/someone/tiny/short"
"$qkv" run -m "$q8" -n 8 -p hi --temp 0.9 --seed 7 >"$tmp/sampled" 2>"$tmp/err"
"$qkv" run -m "$q8" -n 8 -p hi --temp 0.9 --seed 8 >"$tmp/sampled8" 2>>"$tmp/err"
if "$qkv" run -m ollama:tiny -n 8 -p hi >"$tmp/ollama_out" 2>"$tmp/err" && cmp -s "$tmp/sampled" "$tmp/ollama_out" &&
   ! cmp -s "$tmp/sampled" "$tmp/sampled8" && grep -q "not applied: stop" "$tmp/err"; then
  pass "run -m ollama:tiny with the params layer's temperature and seed"
else
  fail_test "ollama run: $(cat "$tmp/err")"
fi
if "$qkv" run -m ollama://tiny:latest -n 8 -p hi --seed 8 >"$tmp/ollama_out8" 2>"$tmp/err" && cmp -s "$tmp/sampled8" "$tmp/ollama_out8"; then
  pass "ollama://NAME:TAG, the user's flag over the params layer's"
else
  fail_test "ollama override: $(cat "$tmp/err")"
fi
expect_error "ollama: absent tag" "Ollama has no model tiny:7b" "$qkv" run -m ollama:tiny:7b -p hi
expect_error "ollama: blob shorter than its manifest says" "not the 1 its manifest says" "$qkv" run -m ollama:someone/tiny:short -p hi
expect_error "ollama: bad name" "not an Ollama model name" "$qkv" run -m ollama:../x -p hi

# qkv serve names an Ollama model as Ollama does (NAME:TAG, NAME matching
# NAME:latest), not by its blob's sha256 file name; beside a file path, which
# goes by its file name.
if command -v curl >/dev/null; then
  "$qkv" serve --port 0 -m ollama:tiny -m "$q8" --slots 1 -c 64 -t 1 2>"$tmp/serve.err" &
  serve_pid=$!
  servers+=($serve_pid)
  serve_port=""
  for _ in $(seq 200); do
    serve_port=$(grep -o 'listening on http://[^ ]*' "$tmp/serve.err" | sed 's/.*://')
    [[ -n $serve_port ]] && break
    kill -0 $serve_pid 2>/dev/null || break
    sleep 0.1
  done
  su="http://127.0.0.1:$serve_port"
  ids=$(curl -s -m 10 "$su/v1/models" | python3 -c 'import json,sys; print(" ".join(m["id"] for m in json.load(sys.stdin)["data"]))')
  tags=$(curl -s -m 10 "$su/api/tags" | python3 -c 'import json,sys; print(" ".join(m["name"] for m in json.load(sys.stdin)["models"]))')
  if [[ $ids == "tiny:latest tiny-Q8_0" && $tags == "tiny:latest tiny-Q8_0" ]]; then
    pass "serve -m ollama:tiny lists it as tiny:latest (/v1/models, /api/tags)"
  else
    fail_test "serve ollama: names '$ids' / '$tags' $(cat "$tmp/serve.err")"
  fi
  "$qkv" run -m "$q8" -n 6 -p hi --temp 0 -q -t 1 >"$tmp/ref_text" 2>/dev/null
  ref_text=$(cat "$tmp/ref_text")
  ref_text=${ref_text#hi}
  # An Ollama client names it NAME (/api/generate); an OpenAI client the id /v1/models lists.
  got=$(curl -s -m 60 "$su/api/generate" -d '{"model":"tiny","prompt":"hi","raw":true,"stream":false,"options":{"temperature":0,"num_predict":6}}' |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["response"], end="")' 2>&1)
  got_openai=$(curl -s -m 60 "$su/v1/completions" -d '{"model":"tiny:latest","prompt":"hi","max_tokens":6,"temperature":0}' |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["text"], end="")' 2>&1)
  got_short=$(curl -s -m 60 "$su/v1/chat/completions" -d '{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":2}' |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["model"], end="")' 2>&1)
  if [[ -n $ref_text && $got == "$ref_text" && $got_openai == "$ref_text" && $got_short == "tiny:latest" ]]; then
    pass "serve: 'tiny' (/api/generate, /v1/chat/completions) and 'tiny:latest' (/v1/completions) answer as qkv run on the blob"
  else
    fail_test "serve: tiny gave '$got', tiny:latest '$got_openai', qkv run '$ref_text', chat with 'tiny': '$got_short'"
  fi
  code=$(curl -s -m 10 -o "$tmp/body" -w '%{http_code}' "$su/api/show" -d '{"model":"tiny"}')
  if [[ $code == 200 ]] && grep -q '"family":"llama"' "$tmp/body"; then pass "serve: /api/show of tiny"; else fail_test "/api/show tiny: $code $(cat "$tmp/body")"; fi
  code=$(curl -s -m 10 -o /dev/null -w '%{http_code}' "$su/v1/completions" -d "{\"model\":\"sha256-$q8_sha\",\"prompt\":\"hi\",\"max_tokens\":1}")
  [[ $code == 404 ]] && pass "serve: the blob's file name is not a model name" || fail_test "the blob name answered $code"
  kill -TERM $serve_pid
  wait $serve_pid 2>/dev/null
else
  echo "skipped: serve -m ollama: (curl is not installed)"
fi

# list shows both stores with quant and architecture; rm removes from the HF cache only.
export HF_HOME=$tmp/hf
"$qkv" list >"$tmp/list" 2>"$tmp/err"
if grep -Eq '^hf:acme/tiny-GGUF/tiny-Q8_0.gguf +0.2 MiB +Q8_0 +llama' "$tmp/list" &&
   grep -Eq '^hf:acme/tiny-GGUF/tiny-Q4_0.gguf .* Q4_0 +llama' "$tmp/list" &&
   grep -Eq '^ollama:tiny:latest .* Q8_0 +llama' "$tmp/list" && grep -q 'ollama:someone/tiny:short .*unusable' "$tmp/list"; then
  pass "list"
else
  fail_test "list: $(cat "$tmp/list" "$tmp/err")"
fi
q4_sha=$(sha256sum "$repo/tiny-Q4_0.gguf" | cut -d' ' -f1)
if "$qkv" rm acme/tiny-GGUF:q4_0 >"$tmp/out" 2>"$tmp/err" && [[ ! -e $cache/blobs/$q4_sha && ! -L $cache/snapshots/$rev/tiny-Q4_0.gguf ]] &&
   [[ -f $cache/blobs/$q8_sha && -L $cache/snapshots/$rev/tiny-Q8_0.gguf ]]; then
  pass "rm OWNER/REPO:QUANT removes its link and blob only"
else
  fail_test "rm: $(cat "$tmp/out" "$tmp/err")"
fi
expect_error "rm ollama: refused" "ollama rm" "$qkv" rm ollama:tiny
[[ -f $OLLAMA_MODELS/blobs/sha256-$q8_sha ]] || fail_test "the Ollama store was touched"
if "$qkv" rm hf:acme/tiny-GGUF/tiny-Q8_0.gguf >"$tmp/out" 2>"$tmp/err" && [[ -z $(ls -A "$cache/blobs") && -z $(ls -A "$cache/snapshots") ]]; then
  pass "rm hf:OWNER/REPO/FILE as list names it; the emptied revision folder goes too"
else
  fail_test "rm by list name: $(cat "$tmp/out" "$tmp/err"; find "$cache")"
fi
if "$qkv" rm acme/tiny-GGUF >/dev/null 2>"$tmp/err" && [[ ! -e $cache ]]; then pass "rm OWNER/REPO"; else fail_test "rm repo: $(cat "$tmp/err")"; fi
expect_error "rm of an absent repository" "is not in the Hugging Face cache" "$qkv" rm acme/tiny-GGUF

if [[ $failures -gt 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all passed"

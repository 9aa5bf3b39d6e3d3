#!/usr/bin/env bash
# Writes the libFuzzer seed corpora into DIR/<harness>/ (default build-fuzz/seeds):
# small files made by qkv's own writers (qkv make-model, the KL-divergence
# base writer of qkv perplexity), the chat templates of ../shared/templates,
# request bodies and texts. Nothing here is committed; scripts/fuzz.sh calls it.
#   QKV_BIN   the qkv binary (default build/tools/qkv, the Release build's)
#   QKV_SHARED the shared data (default ../shared)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build-fuzz/seeds}
qkv=${QKV_BIN:-build/tools/qkv}
shared=${QKV_SHARED:-../shared}
[ -x "$qkv" ] || { echo "fuzz_seeds: no qkv binary at $qkv (build the Release target qkv or set QKV_BIN)" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out"/{gguf,llama2c,kld_file,tokenizer,chat_template,serve_request,quantize,grammar,tool_calls}

# GGUF: tiny synthetic models of several families and weight types, and their
# first 4 KiB (header, metadata and tensor table without the data).
for spec in "llama f16" "qwen2 q8_0" "gemma2 bf16" "phi3 q8_0"; do
  set -- $spec
  "$qkv" make-model tiny --arch "$1" --type "$2" -q -o "$out/gguf/tiny-$1-$2.gguf"
  head -c 4096 "$out/gguf/tiny-$1-$2.gguf" > "$out/gguf/head-$1-$2.gguf"
done

# Quantizer inputs: byte 0 picks the preset (tests/fuzz/quantize.cc), then a
# GGUF of a few KB (small, so that mutations run fast: a tiny model's 500 KB
# ran 19 executions/s): one layer of a family whose tensors have rows of 256
# values (every block size) and of 96 (the fallback types), in F32, F16, BF16.
python3 - "$out/quantize" <<'PY'
import random, struct, sys
d = sys.argv[1]
def s(x):
    b = x.encode()
    return struct.pack("<Q", len(b)) + b
def kv_str(k, v): return s(k) + struct.pack("<I", 8) + s(v)
def kv_u32(k, v): return s(k) + struct.pack("<II", 4, v)
rng = random.Random(7)
for arch, ggml_type, tname, sel in (("llama", 0, "f32", 0), ("qwen2", 1, "f16", 13), ("gemma2", 30, "bf16", 16),
                                   ("llama", 0, "f32", 11), ("phi3", 1, "f16", 5)):
    tensors = [("token_embd.weight", (256, 4)), ("blk.0.attn_norm.weight", (256,)),
               ("blk.0.attn_q.weight", (256, 2)), ("blk.0.attn_k.weight", (256, 1)),
               ("blk.0.attn_v.weight", (256, 1)), ("blk.0.attn_output.weight", (256, 2)),
               ("blk.0.ffn_up.weight", (256, 2)), ("blk.0.ffn_down.weight", (96, 2)),
               ("output.weight", (256, 4))]
    meta = [kv_str("general.architecture", arch), kv_u32(arch + ".block_count", 1),
            kv_u32(arch + ".attention.head_count", 2), kv_u32(arch + ".attention.head_count_kv", 1)]
    infos, blobs, off = b"", b"", 0
    for name, shape in tensors:
        n = 1
        for x in shape: n *= x
        t = 0 if len(shape) == 1 else ggml_type  # norms stay F32
        vals = [rng.uniform(-1, 1) for _ in range(n)]
        if t == 0: data = struct.pack("<%df" % n, *vals)
        elif t == 1: data = struct.pack("<%de" % n, *vals)
        else: data = b"".join(struct.pack("<f", v)[2:] for v in vals)  # bf16: the high halves
        infos += s(name) + struct.pack("<I", len(shape)) + b"".join(struct.pack("<Q", x) for x in shape)
        infos += struct.pack("<IQ", t, off)
        pad = (-len(data)) % 32
        blobs += data + b"\0" * pad
        off += len(data) + pad
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta)) + b"".join(meta) + infos
    head += b"\0" * ((-len(head)) % 32)
    with open(f"{d}/{arch}-{tname}-sel{sel}", "wb") as f:
        f.write(bytes([sel]) + head + blobs)
PY

# llama2.c: a checkpoint of dim 8, hidden 16, 1 layer, 2 heads, vocab 16, seq_len 4
# (header then the f32 arrays), and a tokenizer.bin of 16 tokens.
python3 - "$out/llama2c" <<'PY'
import struct, sys, random
d = sys.argv[1]
dim, hid, L, nh, nkv, V, seq = 8, 16, 1, 2, 2, 16, 4
hs = dim // nh; kv = nkv * hs
n = V*dim + L*dim + 2*L*dim*dim + 2*L*kv*dim + L*dim + 3*L*hid*dim + dim + seq*hs
rnd = random.Random(1)
with open(f"{d}/tiny.bin", "wb") as f:
    f.write(struct.pack("<7i", dim, hid, L, nh, nkv, V, seq))
    f.write(struct.pack(f"<{n}f", *[rnd.uniform(-1, 1) for _ in range(n)]))
with open(f"{d}/tiny-untied.bin", "wb") as f:
    f.write(struct.pack("<7i", dim, hid, L, nh, nkv, -V, seq))
    f.write(struct.pack(f"<{n + V*dim}f", *[rnd.uniform(-1, 1) for _ in range(n + V*dim)]))
toks = [b"<unk>", b"<s>", b"</s>", b"<0x0A>", b" ", b"a", b"b", b"ab", b" the", b"\xe2\x96\x81", b"Once",
        b" upon", b" time", b"\xc3\xa9", b"zz", b"."]
with open(f"{d}/tokenizer.bin", "wb") as f:
    f.write(struct.pack("<i", max(len(t) for t in toks)))
    for i, t in enumerate(toks):
        f.write(struct.pack("<fi", -float(i), len(t)) + t)
PY

# KL-divergence base files of the tiny model: 1 and 2 chunks of 8 tokens.
text=$(mktemp)
trap 'rm -f "$text"' EXIT
printf 'Once upon a time there was a tiny model that read its own files again and again.\n' > "$text"
for chunks in 1 2; do
  "$qkv" perplexity -m "$out/gguf/tiny-llama-f16.gguf" -f "$text" -c 8 --chunks "$chunks" \
    --kl-divergence-base "$out/kld_file/tiny-$chunks.kld" > /dev/null 2>&1
done

# Tokenizer texts: byte 0 picks the vocabulary and flags (tests/fuzz/tokenizer.cc).
i=0
for t in 'Hello, world!' ' leading spaces and  doubles' $'tabs\tand\nnewlines' 'naïve café 日本語 🦙' \
         '<s>special</s><|endoftext|><|im_start|>' $'\xff\xfe invalid \xc3 utf-8 \xed\xa0\x80' '1234567890 3.14'; do
  for sel in 0 1 2 3 4 112; do
    printf "\\x$(printf %02x "$sel")%s" "$t" > "$out/tokenizer/text-$i-$sel"
  done
  i=$((i + 1))
done

# Chat templates (rendered with the harness's default conversation) and one
# with a conversation after a NUL byte.
for f in "$shared"/templates/*.jinja; do
  [ -f "$f" ] && cp "$f" "$out/chat_template/"
done
{ printf '{%% for m in messages %%}<|{{ m.role }}|>{{ m.content | trim }}{%% endfor %%}'
  printf '\0'
  printf '[{"role": "user", "content": " hi "}, {"role": "assistant", "content": "yes"}]'; } \
  > "$out/chat_template/with-conversation"

# Request bodies of both endpoints.
r=$out/serve_request
echo '{"prompt": "Once upon a time", "max_tokens": 16, "temperature": 0.7, "stop": ["\n"]}' > "$r/completion"
echo '{"prompt": [1, 2, 3], "logprobs": 2, "echo": true, "logit_bias": {"5": -100}}' > "$r/completion-ids"
echo '{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
 "stream": true, "stream_options": {"include_usage": true}, "seed": 7, "top_p": 0.9, "top_k": 40}' > "$r/chat"
echo '{"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}]}], "max_completion_tokens": 4,
 "logprobs": true, "top_logprobs": 3, "frequency_penalty": 0.5, "presence_penalty": 0.1}' > "$r/chat-parts"
echo '{"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema",
 "json_schema": {"name": "t", "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}}}' > "$r/chat-schema"
echo '{"prompt": "x", "grammar": "root ::= [a-z]+"}' > "$r/completion-grammar"

# Grammars (tests/fuzz/grammar.cc): byte 0 even for GBNF, odd for a JSON Schema.
g=$out/grammar
printf '\0root ::= "{" ws (pair ("," ws pair)*)? "}"\npair ::= [a-z]+ ":" ws [0-9]{1,3}\nws ::= [ \\t]*\n' > "$g/gbnf-object"
printf '\0root ::= ("a" | [^b-z\\x00] .)* ("x"{2,4})? # comment\n' > "$g/gbnf-classes"
printf '\1{"type": "object", "properties": {"s": {"type": "string", "pattern": "^[a-c]{2}-\\\\d+$"},
 "n": {"type": "integer", "minimum": -12, "maximum": 340}, "e": {"enum": ["x", 1, null]},
 "l": {"type": "array", "items": {"$ref": "#/$defs/t"}, "minItems": 1, "maxItems": 3}},
 "required": ["s"], "$defs": {"t": {"anyOf": [{"type": "boolean"}, {"type": "string", "format": "date"}]}}}' > "$g/schema"
# Model outputs (tests/fuzz/tool_calls.cc): byte 0 picks the family (the
# order of toolcall::Family), then the text.
python3 - "$out/tool_calls" <<'PY'
import sys
d = sys.argv[1]
call = '{"name": "get_weather", "arguments": {"city": "Paris", "n": [1, 2.5e3, null, true]}}'
outputs = [
    (0, '{"tool_calls": [' + call + ']}'), (0, '{"response": "hi \\u00e9"}'),
    (1, '<think>\nhm</think>\n\nSure.<tool_call>\n' + call + '\n</tool_call>\n<tool_call>\n' + call + '\n</tool_call>'),
    (2, '{"name": "f", "parameters": {"a": 1}}; {"name": "g", "parameters": {}}'),
    (2, '<|python_tag|>brave_search.call(query="x")'),
    (3, '[TOOL_CALLS]get_weather[ARGS]{"city": "P"}[TOOL_CALLS]f[ARGS]{}'),
    (3, '[TOOL_CALLS][' + call + ']'),
    (4, 'ok <function=f>{"a": 1}</function><function=g>{}</function>'),
    (5, ' functools[' + call + ']'),
    (6, 'Action: ```json\n[{"tool_name": "f", "parameters": {}}]\n```'),
    (7, '<|START_THINKING|>plan<|END_THINKING|><|START_ACTION|>[{"tool_call_id": "0", "tool_name": "f", "parameters": {}}]<|END_ACTION|>'),
    (8, '<think>x</think>ok<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{"a": 1}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>'),
    (9, 'a</think>b<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{"a": 1}<｜tool▁call▁end｜><｜tool▁calls▁end｜>'),
    (10, '<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{"a": 1}'),
    (10, '<|channel|>final<|message|>Hello'),
]
for i, (family, text) in enumerate(outputs):
    with open(f"{d}/out-{i}", "wb") as f:
        f.write(bytes([family]) + text.encode())
PY
echo "fuzz_seeds: $(find "$out" -type f | wc -l) seeds in $out"

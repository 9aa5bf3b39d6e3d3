#!/bin/bash
# qkv on llama.cpp's quantized tinystories-3M files against llama.cpp itself:
#  * for every preset, the mean KL divergence of qkv's logits from llama.cpp's
#    same-preset base file (qkv perplexity --kl-divergence, first chunk of 128
#    tokens) is at most 10% of the preset's own divergence from the F32 base
#    (measured here the same way), at most 3e-5 for F16/BF16/Q8_0 (on CPUs
#    without AVX-512 VNNI Q8_0's prefill runs through a dequantized bf16 GEMM
#    instead of int8 dots: 1e-4 there). The 32-value block types' weights are
#    laid out in row groups where the CPU has AVX-512 VNNI
#    (kernels/quant/row_groups.h). The Q4_0 and Q4_1 bases come from a
#    llama.cpp build without its AMX int8 kernels (../shared/README.md):
#    2.0e-5 and 3.0e-5 there, against their own 3.3e-3 and 1.9e-3 from F32;
#  * greedy text (200 tokens, F32 KV cache) equals llama.cpp's for all six
#    prompts with F32 and F16 weights (up to where qkv stops at BOS); for the
#    other presets the number of matching prompts is printed.
# usage: cli_quant_llama.sh QKV SHARED_DIR
set -u
qkv=$1 shared=$2
if [ ! -f "$shared/reference/tinystories-3M-Q8_0.kld" ]; then
  echo "SKIPPED: $shared/reference/tinystories-3M-*.kld are absent (the shared models live beside the project root)"
  exit 0
fi
fail=0
# 1 where the CPU has AVX-512 VNNI (the int8 block GEMMs of prefill).
vnni=$(grep -qw avx512_vnni /proc/cpuinfo 2>/dev/null && echo 1 || echo 0)
kld() {  # kld MODEL_PRESET BASE_PRESET
  "$qkv" perplexity -m "$shared/models/tinystories-3M-$1.gguf" --kl-divergence "$shared/reference/tinystories-3M-$2.kld" \
    --kv-type f32 -t 2 --chunks 1 --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["kld"])'
}
presets="F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K IQ4_NL IQ4_XS"
for p in $presets; do
  same=$(kld $p $p) || { echo "FAIL: perplexity on $p"; fail=1; continue; }
  own=$(kld $p F32) || { echo "FAIL: perplexity on $p against F32"; fail=1; continue; }
  verdict=$(python3 -c "
same, own, p = $same, $own, '$p'
floor = 3e-5 if p in ('F16', 'BF16') or (p == 'Q8_0' and $vnni) else 1e-4 if p == 'Q8_0' else 0.10 * own
print(('ok' if same <= floor else 'FAIL') + f' {p}: KLD vs llama.cpp {same:.3g}, own KLD vs F32 {own:.3g}, floor {floor:.3g}')")
  echo "$verdict"
  case $verdict in FAIL*) fail=1 ;; esac
done
python3 - "$qkv" "$shared" <<'PY' || fail=1
import re, subprocess, sys
qkv, shared = sys.argv[1], sys.argv[2]
bad = False
for p in ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L",
          "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K", "IQ4_NL", "IQ4_XS"]:
    ref = re.findall(r"=== prompt: (.*?)\n(.*?)\n=== end", open(f"{shared}/reference/tinystories-3M-greedy-{p}.txt").read(), re.S)
    ok = 0
    for prompt, text in ref:
        out = subprocess.run([qkv, "run", "-m", f"{shared}/models/tinystories-3M-{p}.gguf", "-p", prompt, "-n", "200",
                              "--temp", "0", "--kv-type", "f32", "-t", "1"], capture_output=True, text=True).stdout.rstrip("\n")
        text = text.rstrip("\n")
        n = min(len(out), len(text))
        ok += n > len(prompt) + 20 and out[:n] == text[:n]
    print(f"greedy {p}: {ok}/{len(ref)} prompts match llama.cpp")
    if p in ("F32", "F16") and ok != len(ref):
        print(f"FAIL: {p} must match all prompts"); bad = True
sys.exit(1 if bad else 0)
PY
exit $fail

#!/usr/bin/env python3
"""Copying prompts for the speculative-decoding benchmarks: COUNT passages of
WORDS words at evenly spaced offsets of TEXT (none chosen by hand), each
written twice and followed by its first 3 words, as an editing or extraction
request holds the text it asks back.

usage: copy_prompts.py TEXT COUNT WORDS OUTDIR [MAX_TOKENS]
Writes OUTDIR/prompt{i}.txt; with MAX_TOKENS also OUTDIR/body{i}.json, a
greedy /v1/completions request of that many tokens."""
import json
import sys

if len(sys.argv) not in (5, 6):
    sys.exit(__doc__.split("\n\n")[1])
text, count, words, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
w = open(text, encoding="utf-8").read().split()
if len(w) < words + count:
    sys.exit(f"copy_prompts: {text} has {len(w)} words, too few for {count} passages of {words}")
step = (len(w) - words) // count
for i in range(count):
    p = " ".join(w[i * step:i * step + words])
    prompt = p + "\n" + p + "\n" + " ".join(w[i * step:i * step + 3])
    open(f"{out}/prompt{i}.txt", "w", encoding="utf-8").write(prompt)
    if len(sys.argv) == 6:
        body = {"prompt": prompt, "max_tokens": int(sys.argv[5]), "temperature": 0}
        json.dump(body, open(f"{out}/body{i}.json", "w"))

#!/usr/bin/env python3
"""qkv chat through a pipe: three turns, /clear, a turn, then a full context.

Each greedy reply must equal `qkv run` on the same rendered prompt (the
conversation rendered by `qkv template`), and each turn's prefill must cover
only the tokens the KV cache lacks: the rendered prompt's tokens (from
`qkv tokenize`) after their longest common prefix with the previous turn's
prompt and reply.

usage: chat_pipe.py QKV SHARED_DIR
"""
import json
import os
import re
import subprocess
import sys
import tempfile

qkv, shared = sys.argv[1], sys.argv[2]
here = os.path.dirname(os.path.abspath(__file__))
model = os.path.join(shared, "models", "tinystories-3M-F16.gguf")
template = os.path.join(here, "turns.jinja")
if not os.path.isfile(model):
    print(f"SKIPPED: {model} is absent")
    sys.exit(0)

SYSTEM = "You tell short stories."
USERS = ["Tell me a story about a cat.", "What did the dog do?", "And then what happened?"]
N = "24"
COMMON = ["--temp", "0", "-n", N, "-c", "512", "-t", "2"]
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def run(args, stdin=None):
    p = subprocess.run([qkv] + args, input=stdin, capture_output=True, timeout=120)
    if p.returncode != 0:
        sys.exit(f"FAIL: qkv {' '.join(args)} exited {p.returncode}: {p.stderr.decode(errors='replace')}")
    return p.stdout.decode(), p.stderr.decode()


def tokens(text):
    with tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False) as f:
        f.write(text.encode())
    try:
        out, _ = run(["tokenize", "-m", model, "--special", "-f", f.name])
    finally:
        os.unlink(f.name)
    return [int(t) for t in out.split()]


def run_reply(prompt):
    # qkv run prints the reply and a newline.
    out, _ = run(["run", "-m", model, "--special", "--no-display-prompt", "-q", "-p", prompt] + COMMON)
    return out[:-1]


def common_prefix(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


TURN = re.compile(r"turn (\d+): prompt (\d+) tokens, (\d+) reused from the cache, prefilled (\d+) tokens.*"
                  r"stopped by (\w+); cache (\d+) of (\d+) positions")

def conversation(template, rewinds):
    """The scripted conversation under a template; rewinds: its render of a
    reply differs from the reply's tokens (the cache must be rewound)."""
    name = os.path.basename(template)

    def render(turns):
        msgs = [{"role": "system", "content": SYSTEM}]
        msgs += [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(turns)]
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as f:
            json.dump(msgs, f, ensure_ascii=False)
        try:
            out, _ = run(["template", "-m", model, "--template", template, "--messages", f.name])
        finally:
            os.unlink(f.name)
        return out

    # The expected conversation, from qkv template + qkv tokenize + qkv run.
    turns, texts, replies = [], [], []
    for u in USERS:
        turns.append(u)
        texts.append(render(turns))
        replies.append(run_reply(texts[-1]))
        turns.append(replies[-1])

    script = "\n".join(USERS + ["/clear", USERS[0]]) + "\n"
    out, err = run(["chat", "-m", model, "--chat-template", template, "--system", SYSTEM, "--verbose"] + COMMON,
                   stdin=script.encode())
    expected = "".join(r + "\n" for r in replies + [replies[0]])
    check(out == expected, f"{name}: the replies equal qkv run's on the rendered prompts, and /clear starts over")
    if out != expected:
        print("got:\n" + out + "\nexpected:\n" + expected)
    stats = [tuple(int(x) if x.isdigit() else x for x in m.groups()) for m in TURN.finditer(err)]
    check(len(stats) == 4, f"{name}: four turns timed on stderr ({len(stats)})")
    check("conversation cleared" in err, f"{name}: /clear is acknowledged")
    if len(stats) != 4:
        return
    for k, (turn, prompt, reused, prefilled, reason, cache, ctx) in enumerate(stats[:3]):
        want = tokens(texts[k])
        check(prompt == len(want), f"{name}: turn {turn}: the prompt is the rendered conversation's {len(want)} tokens")
        if k == 0:
            check(reused == 0 and prefilled == prompt, f"{name}: turn 1 prefills its whole prompt")
            continue
        held = tokens(texts[k - 1] + replies[k - 1])  # the previous prompt and the reply as generated
        check(stats[k - 1][5] == len(held), f"{name}: after turn {k} the cache holds its prompt and reply ({len(held)})")
        new = len(want) - common_prefix(held, want)
        check(prefilled == new and reused + prefilled == prompt,
              f"{name}: turn {turn} prefills only the {new} tokens after the cached prefix "
              f"(got {prefilled}, {reused} reused)")
        if rewinds:
            check(reused < len(held), f"{name}: turn {turn} rewinds the cache to {reused} of {len(held)} positions")
        else:
            check(new < len(want) - len(tokens(texts[k - 1])), f"{name}: turn {turn}'s new tokens exclude turn {k}'s")
    turn, prompt, reused, prefilled = stats[3][:4]
    check(turn == 1 and reused == 0 and prefilled == len(tokens(texts[0])),
          f"{name}: after /clear the prompt is prefilled anew")


conversation(template, rewinds=False)

# qkv run --chat: one user turn through the same template, only the reply printed.
reply, _ = run(["run", "-m", model, "--chat", "--chat-template", template, "--system", SYSTEM, "-q", "-p", USERS[0]]
               + COMMON)
alone = run_reply(run(["template", "-m", model, "--template", template, "--messages", "/dev/stdin"],
                      stdin=json.dumps([{"role": "system", "content": SYSTEM},
                                        {"role": "user", "content": USERS[0]}]).encode())[0])
check(reply == alone + "\n", "qkv run --chat gives the reply of the rendered single turn")
_, err = run(["run", "-m", model, "--chat", "-q", "-n", "4", "-p", "hi"])
check("using ChatML" in err, "qkv run --chat without a template: ChatML with a warning")
conversation(os.path.join(here, "turns_trim.jinja"), rewinds=True)

# A full context: the reply stops with a message, the next turn does not fit,
# /clear makes room again; the program ends normally.
small = ["chat", "-m", model, "--chat-template", template, "--temp", "0", "-c", "48", "--verbose"]
out, err = run(small, stdin=(USERS[0] + "\n" + USERS[1] + "\n/clear\n" + USERS[1] + "\n").encode())
check(err.count("the context is full (48 positions): the reply stops here; /clear starts over") == 2,
      "a reply that fills the context stops with a message suggesting /clear")
check(re.search(r"the context is full: the conversation needs \d+ tokens and the context holds 48 positions; "
                r"/clear starts over", err) is not None, "a turn that does not fit is refused with a message")
check(len(TURN.findall(err)) == 2, "the refused turn runs nothing; the turn after /clear runs")

# An end-of-generation token ends the reply (the EOS id from the vocabulary,
# pushed up by a logit bias): the turn stops there, and the next turn runs.
eos = int(run(["tokenize", "-m", model, "--special", "--no-bos", "--", "</s>"])[0].split()[-1])
out, err = run(["chat", "-m", model, "--chat-template", template, "--temp", "0", "-n", "20", "--verbose",
                "-l", f"{eos}+100"], stdin=(USERS[0] + "\n" + USERS[1] + "\n").encode())
stops = [m[4] for m in TURN.findall(err)]
check(stops == ["eos", "eos"] and out == "\n\n",
      f"a reply ends at the end-of-generation token (stopped by {stops}, replies {out!r})")

# Bad input is a clear error.
p = subprocess.run([qkv, "chat", "-m", model, "--chat-template", "/nonexistent.jinja"], input=b"hi\n",
                   capture_output=True, timeout=60)
check(p.returncode == 1 and b"/nonexistent.jinja" in p.stderr, "a missing template file is an error naming it")
p = subprocess.run([qkv, "chat", "-m", model, "-n", "8", "--verbose"], input=b"hi\n/exit\nnot read\n",
                   capture_output=True, timeout=60)
check(p.returncode == 0 and b"using ChatML" in p.stderr and len(TURN.findall(p.stderr.decode())) == 1,
      "without a template: ChatML with a warning; /exit ends the input")

sys.exit(1 if failures else 0)

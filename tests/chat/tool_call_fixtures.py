#!/usr/bin/python3
# Tool-call fixtures from real chat templates: for each template that renders
# tool calls, Python's jinja2 (set up as Hugging Face's apply_chat_template, see
# template_oracle.py) renders an assistant turn with one call, with two calls,
# with content before a call, and with reasoning where the template shows it.
# The assistant's part of the rendering (the conversation with the message
# minus the conversation before it with the generation prompt, end-of-turn
# markers stripped) is what the model would have generated; each fixture holds
# it and the message it must parse back into.
# usage: tool_call_fixtures.py OUT_DIR TEMPLATE...
import json, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from template_oracle import hf_env  # noqa: E402

# The family each shared template is expected to be (the C++ side detects it
# from the source; this list is the independent answer).
FAMILIES = {
    "CohereForAI-c4ai-command-r-plus-tool_use.jinja": "command_r_plus",
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja": "command_r7b",
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja": "hermes",
    "Qwen-QwQ-32B.jinja": "hermes",
    "Qwen-Qwen2.5-7B-Instruct.jinja": "hermes",
    "Qwen-Qwen3-0.6B.jinja": "hermes",
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja": "deepseek_r1",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": "deepseek_r1",
    "deepseek-ai-DeepSeek-V3.1.jinja": "deepseek_v3_1",
    "fireworks-ai-llama-3-firefunction-v2.jinja": "firefunction_v2",
    "llama-cpp-deepseek-r1.jinja": "deepseek_r1",
    "meetkai-functionary-medium-v3.1.jinja": "functionary_v3_1",
    "meta-llama-Llama-3.1-8B-Instruct.jinja": "llama3",
    "meta-llama-Llama-3.2-3B-Instruct.jinja": "llama3",
    "meta-llama-Llama-3.3-70B-Instruct.jinja": "llama3",
    "openai-gpt-oss-120b.jinja": "gpt_oss",
    "unsloth-mistral-Devstral-Small-2507.jinja": "mistral",
}

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Get the weather in a city",
                                      "parameters": {"type": "object", "properties": {
                                          "city": {"type": "string", "description": "City name"},
                                          "unit": {"type": "string", "description": "celsius or fahrenheit"}},
                                          "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time", "description": "Get the time in a time zone",
                                      "parameters": {"type": "object", "properties": {
                                          "timezone": {"type": "string", "description": "IANA name"}},
                                          "required": ["timezone"]}}},
]
CALL_WEATHER = ("get_weather", {"city": "Zürich", "unit": "celsius"})
CALL_TIME = ("get_time", {"timezone": "Europe/Paris"})
CONTENT = "Let me check that for you."
REASONING = "The user wants the weather, so I call get_weather."

VARIANTS = {
    "one_call": dict(calls=[CALL_WEATHER]),
    "two_calls": dict(calls=[CALL_WEATHER, CALL_TIME]),
    "content_and_call": dict(calls=[CALL_WEATHER], content=CONTENT),
    "reasoning_and_call": dict(calls=[CALL_WEATHER], reasoning=REASONING),
}

END_OF_TURN = ["<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>", "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<\uff5cend\u2581of\u2581sentence\uff5c>",
               "<|END_OF_TURN_TOKEN|>", "<end_of_turn>", "</s>", "<|return|>"]
THINK_OPENERS = ["<think>", "<|START_THINKING|>"]


def assistant_message(variant, args_as_string, content_none):
    calls = [{"id": f"call{i}abcd", "type": "function",
              "function": {"name": n, "arguments": json.dumps(a, ensure_ascii=False) if args_as_string else a}}
             for i, (n, a) in enumerate(variant["calls"])]
    msg = {"role": "assistant", "tool_calls": calls}
    content = variant.get("content")
    msg["content"] = content if content else (None if content_none else "")
    if variant.get("reasoning"):
        # Templates read it under different names.
        msg["reasoning_content"] = msg["thinking"] = msg["tool_plan"] = variant["reasoning"]
    return msg


def render(env, source, messages, gen):
    # Firefunction v2 reads the tools as `functions` (JSON text) and a `datetime`.
    return env.from_string(source).render(messages=messages, tools=TOOLS, add_generation_prompt=gen,
                                          bos_token="<s>", eos_token="</s>",
                                          functions=json.dumps([t["function"] for t in TOOLS], indent=2),
                                          datetime="2025-01-01")


def fixture_env():
    """HF's environment, except that tojson also takes a generator (as
    `map(...)` gives), which llama.cpp's own deepseek-r1 template relies on."""
    env = hf_env()
    hf_tojson = env.filters["tojson"]
    env.filters["tojson"] = lambda x, **kw: hf_tojson(list(x) if hasattr(x, "__next__") else x, **kw)
    return env


def assistant_part(full, before, before_gen):
    """The text the model generates: the rendering with the message minus the
    one before it (which may also end with markup rendered after every turn,
    as Command R+'s closing system note), minus the generation prompt. When the
    generation prompt is not a prefix of the turn (it adds a <think> the
    rendered turn lacks), the common part is taken back to a marker or line end."""
    gen = before_gen[len(before):] if before_gen.startswith(before) else ""
    # Where the turn goes in: a marker or line end after which the rest of the
    # earlier rendering is the end of this one; the turn should start with the
    # generation prompt, which settles ties (a turn and the closing note that
    # begin with the same marker).
    splits = [i for i in range(len(os.path.commonprefix([full, before])), -1, -1)
              if full.endswith(before[i:]) and (i == len(before) or (i > 0 and full[i - 1] in ">\n"))]
    if not splits:
        return None, False
    i = next((i for i in splits if gen and full[i:].startswith(gen)), splits[0])
    rest = full[i:len(full) - (len(before) - i)]
    n = 0
    while n < min(len(rest), len(gen)) and rest[n] == gen[n]:
        n += 1
    whole_prompt = n == len(gen)
    if not whole_prompt:
        while n > 0 and rest[n - 1] not in ">\n":
            n -= 1
    text = rest[n:]
    # Some templates end every rendering with the same markup, such as the
    # assistant header (Command R7B, Firefunction): the common tail of the
    # renderings with and without the message, from a marker on, is not the model's.
    common = 0
    while common < min(len(full), len(before)) and full[-1 - common] == before[-1 - common]:
        common += 1
    tail = full[len(full) - common:] if common else ""
    tail = tail[tail.find("<"):] if "<" in tail else ""
    if tail and text.endswith(tail):
        text = text[: -len(tail)]
    changed = True
    while changed:
        changed = False
        stripped = text.rstrip()
        for m in END_OF_TURN:
            if stripped.endswith(m):
                text, changed = stripped[: -len(m)], True
    opens = whole_prompt and any(gen.rstrip().endswith(t) for t in THINK_OPENERS)
    return text, opens


def main():
    out_dir, paths = sys.argv[1], sys.argv[2:]
    os.makedirs(out_dir, exist_ok=True)
    env = fixture_env()
    history = [{"role": "system", "content": "You are a helpful assistant."},
               {"role": "user", "content": "What is the weather in Zürich?"}]
    total = 0
    for path in paths:
        name = os.path.basename(path)
        family = FAMILIES.get(name)
        source = open(path, encoding="utf-8").read()
        if family is None or "tool" not in source:
            print(f"skip {name}: no tool calls in this template")
            continue
        made = []
        for vname, variant in VARIANTS.items():
            chosen = None
            # Templates differ in what they accept: arguments as object or JSON
            # text, content as "" or None, a system message or not.
            for args_as_string in (False, True):
                for content_none in (False, True):
                    for hist in (history, history[1:]):
                        msg = assistant_message(variant, args_as_string, content_none)
                        try:
                            full = render(env, source, hist + [msg], False)
                            before = render(env, source, hist, False)
                            before_gen = render(env, source, hist, True)
                        except Exception:
                            continue
                        text, opens = assistant_part(full, before, before_gen)
                        if text is None:
                            continue
                        # Every call must be in the text with its arguments as JSON.
                        if not all(n in text and (v in text or json.dumps(v, ensure_ascii=False)[1:-1] in text)
                                   for n, a in variant["calls"] for v in a.values()):
                            continue
                        chosen = (text, opens)
                        break
                    if chosen:
                        break
                if chosen:
                    break
            if not chosen:
                print(f"  {name} [{vname}]: the template does not render it")
                continue
            text, opens = chosen
            content = variant.get("content", "")
            reasoning = variant.get("reasoning", "")
            expected = {"content": content if content and content in text else "",
                        "reasoning": reasoning if reasoning and reasoning in text else "",
                        "calls": [{"name": n, "arguments": a} for n, a in variant["calls"]]}
            if family == "gpt_oss" and expected["content"]:
                # gpt-oss shows a tool-call turn's content as its analysis (reasoning) message.
                expected["reasoning"], expected["content"] = expected["content"], ""
            if vname == "reasoning_and_call" and not expected["reasoning"]:
                print(f"  {name} [{vname}]: the template does not render reasoning")
                continue
            fx = {"template": name, "template_path": os.path.abspath(path), "family": family, "variant": vname,
                  "starts_in_reasoning": opens, "text": text, "expected": expected}
            out = os.path.join(out_dir, f"{name[:-6]}.{vname}.json")
            with open(out, "w", encoding="utf-8") as f:
                json.dump(fx, f, ensure_ascii=False, indent=1)
            made.append(vname)
        total += len(made)
        print(f"{name}: {len(made)} fixtures ({', '.join(made)})")
    print(f"{total} fixtures in {out_dir}")
    return 0 if total else 1


if __name__ == "__main__":
    sys.exit(main())

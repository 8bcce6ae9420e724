#!/usr/bin/env python3
"""Makes outputs.json: tool calls as each model family writes them.

Run from this directory with Python 3 and Jinja2 3.1, with ../../../shared
holding the real chat templates:

    python3 generate.py

A model is trained on its own template's rendering of assistant messages,
so the template's render of an assistant turn with tool calls is exactly
the text the model writes when it calls them. For each family's real
template this renders a conversation up to the user's turn (with the
generation prompt) and again with the assistant's turn, and keeps what the
assistant's turn added, without its end-of-turn marker, with the calls and
content it was rendered from. Jinja2 is set up as transformers'
apply_chat_template sets it up.
"""

import json
import os

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

TEMPLATES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "templates")

FAMILIES = [
    ("hermes", "Qwen-Qwen2.5-7B-Instruct.jinja", ["<|im_end|>"]),
    ("hermes", "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", ["<|im_end|>"]),
    ("llama3", "meta-llama-Llama-3.1-8B-Instruct.jinja", ["<|eot_id|>", "<|eom_id|>"]),
    ("llama3", "meta-llama-Llama-3.2-3B-Instruct.jinja", ["<|eot_id|>", "<|eom_id|>"]),
    ("mistral", "mistralai-Mistral-Nemo-Instruct-2407.jinja", ["</s>"]),
]

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
                    "required": ["city"]}}},
    {"type": "function", "function": {"name": "search", "description": "Search the web",
     "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["query"]}}},
]

# (content, calls): the assistant turns rendered, each call a name and its
# arguments; single-call families get only the one-call cases.
TURNS = [
    (None, [("get_weather", {"city": "Paris", "unit": "celsius"})]),
    ("", [("search", {"query": "café \"crème\" near Zürich\nopen now", "limit": 3})]),
    (None, [("get_weather", {"city": "Oslo"}), ("get_weather", {"city": "Lima", "unit": "fahrenheit"})]),
    ("Let me look that up.", [("search", {"query": "tallest building", "limit": 1})]),
]


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda f: "15 Jan 2026"
    return env


def main():
    env = make_env()
    out = []
    for family, name, ends in FAMILIES:
        with open(os.path.join(TEMPLATES, name)) as f:
            tpl = env.from_string(f.read())
        for k, (content, calls) in enumerate(TURNS):
            user = [{"role": "user", "content": "Help me, please."}]
            tool_calls = [{"id": "abcDEF%03d" % i, "type": "function", "function": {"name": n, "arguments": a}}
                          for i, (n, a) in enumerate(calls)]
            assistant = {"role": "assistant", "content": content, "tool_calls": tool_calls}
            # A tool result after the calls, as a real conversation has,
            # so that the assistant's turn is rendered in the middle.
            results = [{"role": "tool", "tool_call_id": c["id"], "content": "ok"} for c in tool_calls]
            args = dict(tools=TOOLS, bos_token="<s>", eos_token="</s>")
            try:
                prefix = tpl.render(messages=user, add_generation_prompt=True, **args)
                full = tpl.render(messages=user + [assistant] + results, add_generation_prompt=False, **args)
            except jinja2.exceptions.TemplateError as e:
                print("%s case %d: %s" % (name, k, e))
                continue
            assert full.startswith(prefix), name
            turn = full[len(prefix):]
            cut = min((turn.find(e) for e in ends if e in turn), default=-1)
            assert cut >= 0, (name, turn)
            # Some templates leave the content of a turn with calls out.
            said = content if content and content in turn[:cut] else ""
            out.append({"family": family, "template": name, "output": turn[:cut],
                        "content": said, "calls": [{"name": n, "arguments": a} for n, a in calls]})
    with open("outputs.json", "w") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()

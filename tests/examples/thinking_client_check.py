"""A thinking model through ember-server and the official openai Python client: reasoning
apart from the answer as `reasoning_content` (whole and streamed, the convention of DeepSeek,
vLLM and llama-server), reasoning_budget (an extension, sent in extra_body), thinking turned off
with chat_template_kwargs.enable_thinking, and POST /apply-template.

    thinking_client_check.py BASE_URL r1|qwen3

r1: the server runs a Qwen3-shaped file with --chat-template deepseek_r1.jinja, whose generation
prompt opens <think>: the model reasons first. qwen3: the file's own (Qwen3's) template.
"""
import json
import sys
import urllib.request

import openai

base, mode = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=120)
model = client.models.list().data[0].id
failures = []


def expect(condition, what):
    print(("ok:   " if condition else "FAIL: ") + what, flush=True)
    if not condition:
        failures.append(what)


def post(path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


messages = [{"role": "system", "content": "You are a game NPC."}, {"role": "user", "content": "What is behind the door?"}]
# The file's random weights repeat the last token forever: the prompt's "\n" (byte token 13 of
# the synthetic vocabulary; each stream drops the whitespace it starts with), then the forced
# </think> (511, the last token). Banning both makes the random model write visible text; the
# forced marker is not sampled, so the ban does not stop it.
extra = {"reasoning_budget": 16, "ignore_eos": True, "logit_bias": {"13": -100, "511": -100}}

if mode == "r1":
    whole = client.chat.completions.create(model=model, messages=messages, max_tokens=40, temperature=0, extra_body=extra)
    msg = whole.choices[0].message
    reasoning = getattr(msg, "reasoning_content", None) or (msg.model_extra or {}).get("reasoning_content")
    used = whole.usage.completion_tokens_details.reasoning_tokens
    print(f"reasoning_tokens={used} reasoning={reasoning!r}\ncontent={msg.content!r}")
    expect(bool(reasoning), "message.reasoning_content is there")
    expect(0 < used <= 16, f"at most 16 reasoning tokens ({used})")
    expect(bool(msg.content) and "</think>" not in msg.content, "the answer follows, without the marker")
    expect(whole.usage.completion_tokens == 40, "40 tokens in all")

    reasoning_parts, content_parts = [], []
    stream = client.chat.completions.create(model=model, messages=messages, max_tokens=40, temperature=0, stream=True,
                                            extra_body=extra)
    for chunk in stream:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        r = getattr(delta, "reasoning_content", None) or (delta.model_extra or {}).get("reasoning_content")
        if r:
            reasoning_parts.append(r)
            print(f"  reasoning_content delta: {r!r}")
        if delta.content:
            content_parts.append(delta.content)
            print(f"  content delta:           {delta.content!r}")
    expect(len(reasoning_parts) > 1, f"reasoning streamed in {len(reasoning_parts)} deltas")
    expect("".join(reasoning_parts).rstrip() == reasoning, "streamed reasoning == whole reasoning")
    expect("".join(content_parts) == msg.content, "streamed content == whole content")

    none = client.chat.completions.create(model=model, messages=messages, max_tokens=8, temperature=0,
                                          extra_body={"reasoning_budget": 0, "ignore_eos": True})
    n = none.choices[0].message
    expect(not ((n.model_extra or {}).get("reasoning_content")), "reasoning_budget 0: no reasoning_content")
    expect(none.usage.completion_tokens_details.reasoning_tokens == 0, "reasoning_budget 0: 0 reasoning tokens")
else:
    off = client.chat.completions.create(model=model, messages=messages, max_tokens=8, temperature=0,
                                         extra_body={"chat_template_kwargs": {"enable_thinking": False}, "ignore_eos": True})
    expect(not ((off.choices[0].message.model_extra or {}).get("reasoning_content")), "enable_thinking false: no reasoning")
    on = client.chat.completions.create(model=model, messages=messages, max_tokens=8, temperature=0, extra_body={"ignore_eos": True})
    expect(off.usage.prompt_tokens > on.usage.prompt_tokens, "enable_thinking false adds the template's empty block to the prompt")
    rendered = post("/apply-template", {"messages": messages, "chat_template_kwargs": {"enable_thinking": False}})["prompt"]
    print(f"/apply-template: {rendered!r}")
    expect(rendered.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n"), "/apply-template renders Qwen3's no-thinking prompt")
    tools = [{"type": "function", "function": {"name": "open_door", "parameters": {"type": "object", "properties": {}}}}]
    with_tools = post("/apply-template", {"messages": messages + [
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "open_door", "arguments": {}}}]},
        {"role": "tool", "content": "The door creaks open."}], "tools": tools})["prompt"]
    expect('{"name": "open_door", "arguments": {}}' in with_tools and "<tool_response>\nThe door creaks open.\n</tool_response>" in with_tools,
           "/apply-template renders tool calls and results")
    try:
        post("/apply-template", {"messages": "not a list"})
        expect(False, "/apply-template refuses a body without messages")
    except urllib.error.HTTPError as e:
        expect(e.code == 400, f"/apply-template refuses a body without messages ({e.code})")

print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)

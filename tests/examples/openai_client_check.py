"""ember-server through the official openai Python client: a plain completion, a streamed chat,
16 requests run alone (their texts saved to ALONE_JSON), a stream the client abandons, and the
errors the client surfaces for bad input. With --batched, against a server started with
--batch-min 16: the same 16 requests as concurrent streams, each the same text as alone
(batching changes nothing), all 16 sharing every engine step.

    openai_client_check.py BASE_URL ALONE_JSON
    openai_client_check.py --batched BASE_URL ALONE_JSON
"""
import concurrent.futures
import json
import sys
import time
import urllib.request

import openai

batched = sys.argv[1] == "--batched"
base, alone_json = sys.argv[-2:]
client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=120)
failures = []


def expect(condition, what):
    print(("ok:   " if condition else "FAIL: ") + what, flush=True)
    if not condition:
        failures.append(what)


def metric(name):
    text = urllib.request.urlopen(base + "/metrics", timeout=30).read().decode()
    values = [float(l.split()[1]) for l in text.splitlines() if l.split(" ")[0] == name]
    return values[0] if values else 0.0


model = client.models.list().data[0].id
MAX_TOKENS = 24


def story(i, stream):
    return client.completions.create(model=model, prompt=f"Story {i}:", max_tokens=MAX_TOKENS,
                                     temperature=0, stream=stream, extra_body={"ignore_eos": True})


def streamed(i):
    return "".join(chunk.choices[0].text for chunk in story(i, stream=True))


def check_batched():
    with open(alone_json) as f:
        alone = json.load(f)
    steps0, tokens0 = metric("ember_engine_steps_total"), metric("ember_generated_tokens_total")
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        together = list(pool.map(streamed, range(16)))
    steps = metric("ember_engine_steps_total") - steps0
    tokens = metric("ember_generated_tokens_total") - tokens0
    expect(together == alone, "16 concurrent streams: each text equals the request run alone")
    # --batch-min 16 holds the engine until all 16 are queued, so they start together and share
    # every step: about MAX_TOKENS steps (the bound leaves the scheduler room for an extra
    # prefill step or two). One sequence per step would take 16 * MAX_TOKENS.
    expect(tokens == 16 * MAX_TOKENS and steps < 2 * MAX_TOKENS,
           f"batched: {tokens:.0f} tokens in {steps:.0f} steps")


def check_requests():
    expect(model == "example-model", f"models.list() -> {model}")

    c = client.completions.create(model=model, prompt="The river town", max_tokens=6, temperature=0)
    expect(c.object == "text_completion" and c.choices[0].finish_reason in ("stop", "length")
           and 0 < c.usage.completion_tokens <= 6, "completions.create")

    messages = [{"role": "user", "content": "Who guards the bridge?"}]
    plain = client.chat.completions.create(model=model, messages=messages, max_tokens=10,
                                           temperature=0, extra_body={"ignore_eos": True})
    pieces, finish = [], None
    for chunk in client.chat.completions.create(model=model, messages=messages, max_tokens=10,
                                                temperature=0, stream=True,
                                                extra_body={"ignore_eos": True}):
        for choice in chunk.choices:
            pieces.append(choice.delta.content or "")
            finish = choice.finish_reason or finish
    expect(finish == "length" and "".join(pieces) == plain.choices[0].message.content,
           "streamed chat equals the plain answer")

    with open(alone_json, "w") as f:  # the texts --batched compares its concurrent streams with
        json.dump([story(i, stream=False).choices[0].text for i in range(16)], f)

    cancelled0 = metric('ember_completions_total{finish_reason="cancelled"}')
    stream = client.completions.create(model=model, prompt="Tell me everything.", max_tokens=4000,
                                       stream=True, extra_body={"ignore_eos": True})
    for n, _ in enumerate(stream):
        if n == 2:
            break
    stream.close()  # the client goes away mid-stream
    deadline = time.time() + 20
    while time.time() < deadline and metric('ember_completions_total{finish_reason="cancelled"}') == cancelled0:
        time.sleep(0.2)
    expect(metric('ember_completions_total{finish_reason="cancelled"}') == cancelled0 + 1,
           "an abandoned stream is cancelled")

    check_structured_output()

    try:
        client.completions.create(model=model, prompt="hi", max_tokens="ten")
        expect(False, "a bad max_tokens raises BadRequestError")
    except openai.BadRequestError as e:
        expect(e.status_code == 400 and e.param == "max_tokens", "a bad max_tokens raises BadRequestError")
    try:
        client.completions.create(model=model, prompt="hello " * 2000)
        expect(False, "an oversize prompt raises BadRequestError")
    except openai.BadRequestError as e:
        expect(e.code == "context_length_exceeded", "an oversize prompt raises BadRequestError")
    try:
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": "x" * 70000}])
        expect(False, "an oversize body raises APIStatusError 413")
    except openai.APIStatusError as e:
        expect(e.status_code == 413 and e.code == "request_too_large", "an oversize body raises APIStatusError 413")


def check_structured_output():
    """response_format through chat.completions.parse with a Pydantic model, a tool-calling
    round trip (plain and streamed), logprobs, and a 400 for a field the server lacks."""
    from typing import Literal

    import pydantic

    class Npc(pydantic.BaseModel):
        say: str = pydantic.Field(max_length=20)
        action: Literal["give", "attack", "flee"]
        count: int = pydantic.Field(ge=0, le=9)

    messages = [{"role": "user", "content": "The blacksmith greets you."}]
    parsed = client.beta.chat.completions.parse(model=model, messages=messages, response_format=Npc,
                                                max_tokens=80, temperature=0.7, seed=3)
    npc = parsed.choices[0].message.parsed
    expect(isinstance(npc, Npc) and parsed.choices[0].finish_reason == "stop",
           f"chat.completions.parse with a Pydantic model -> {npc!r}")
    obj = client.chat.completions.create(model=model, messages=messages, max_tokens=60, temperature=0,
                                         response_format={"type": "json_object"})
    try:
        ok = isinstance(json.loads(obj.choices[0].message.content), dict)
    except ValueError:
        ok = obj.choices[0].finish_reason == "length"  # a cut-off object is still a prefix
    expect(ok, "response_format json_object gives a JSON object")

    tools = [{"type": "function", "function": {
        "name": "get_weather", "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                                        "unit": {"enum": ["c", "f"]}},
                       "required": ["city", "unit"], "additionalProperties": False}}}]
    ask = [{"role": "user", "content": "What is the weather in Oslo?"}]
    r = client.chat.completions.create(model=model, messages=ask, tools=tools, tool_choice="required",
                                       max_tokens=300, temperature=0)
    call = (r.choices[0].message.tool_calls or [None])[0]
    args = json.loads(call.function.arguments) if call else None
    expect(call is not None and call.function.name == "get_weather" and set(args) == {"city", "unit"}
           and r.choices[0].finish_reason == "tool_calls" and r.choices[0].message.content is None,
           f"tool_choice required -> tool_calls {call} ({r.choices[0].finish_reason}: {r.choices[0].message.content!r})")
    if call is None:
        return
    # The same streamed: the name first, then the arguments as deltas that add up to the call.
    name, pieces, finish = None, [], None
    for chunk in client.chat.completions.create(model=model, messages=ask, tools=tools, tool_choice="required",
                                                max_tokens=300, temperature=0, stream=True):
        for choice in chunk.choices:
            for d in choice.delta.tool_calls or []:
                name = d.function.name or name
                pieces.append(d.function.arguments or "")
            finish = choice.finish_reason or finish
    expect(name == "get_weather" and json.loads("".join(pieces)) == args and finish == "tool_calls",
           "streamed tool_calls deltas add up to the same call")
    # Round trip: the call and its result go back; the model answers (text or another call).
    followup = ask + [{"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
                      {"role": "tool", "tool_call_id": call.id, "content": '{"temp": 21}'}]
    r2 = client.chat.completions.create(model=model, messages=followup, tools=tools, max_tokens=20,
                                        temperature=0)
    expect(r2.choices[0].finish_reason in ("stop", "length", "tool_calls"), "tool round trip answered")
    named = client.chat.completions.create(
        model=model, messages=ask, tools=tools, max_tokens=300, temperature=0,
        tool_choice={"type": "function", "function": {"name": "get_weather"}})
    expect(named.choices[0].message.tool_calls[0].function.name == "get_weather", "a named tool_choice")

    lp = client.chat.completions.create(model=model, messages=ask, max_tokens=5, temperature=0,
                                        logprobs=True, top_logprobs=2, extra_body={"ignore_eos": True})
    content = lp.choices[0].logprobs.content
    expect(len(content) == 5 and all(len(t.top_logprobs) == 2 and t.logprob <= 0 for t in content)
           and content[0].top_logprobs[0].logprob == content[0].logprob, "logprobs + top_logprobs")
    try:
        client.chat.completions.create(model=model, messages=ask, max_tokens=5, extra_body={"echo": True})
        expect(False, "an unimplemented field raises BadRequestError naming it")
    except openai.BadRequestError as e:
        expect(e.status_code == 400 and e.param == "echo", "an unimplemented field raises BadRequestError naming it")


def check_embeddings():
    """/v1/embeddings: strings, a list, token arrays, float and base64 alike, usage, errors."""
    import base64
    import math
    import struct
    texts = ["The knight found a golden key.", "Hello", "The stock market fell."]
    r = client.embeddings.create(model=model, input=texts, encoding_format="float")
    expect(len(r.data) == 3 and [d.index for d in r.data] == [0, 1, 2], "embeddings: one per input, in order")
    dim = len(r.data[0].embedding)
    expect(dim > 0 and all(len(d.embedding) == dim for d in r.data), f"embeddings: {dim} floats each")
    expect(all(abs(math.sqrt(sum(v * v for v in d.embedding)) - 1) < 1e-4 for d in r.data), "embeddings: unit norm")
    expect(r.usage.prompt_tokens > 3 and r.usage.total_tokens == r.usage.prompt_tokens, "embeddings: usage")
    one = client.embeddings.create(model=model, input=texts[1], encoding_format="float")
    expect(one.data[0].embedding == r.data[1].embedding, "embeddings: a string alone equals it in a list")
    raw = client.embeddings.with_raw_response.create(model=model, input=texts[1], encoding_format="base64")
    b64 = json.loads(raw.http_response.text)["data"][0]["embedding"]
    decoded = list(struct.unpack(f"<{dim}f", base64.b64decode(b64)))
    expect(decoded == r.data[1].embedding, "embeddings: base64 decodes to the float values")
    ids = client.embeddings.create(model=model, input=[[1, 2, 3], [4, 5]], encoding_format="float")
    expect(len(ids.data) == 2 and ids.usage.prompt_tokens == 5, "embeddings: token arrays, 5 tokens")
    for bad, what in (({"input": []}, "empty input"), ({"input": "x", "dimensions": 8}, "unsupported field")):
        try:
            client.embeddings.create(model=model, **bad)
            expect(False, f"embeddings: {what} refused")
        except (openai.BadRequestError, TypeError) as e:
            expect(isinstance(e, openai.BadRequestError), f"embeddings: {what} refused with 400")


if batched:
    check_batched()
else:
    check_requests()
    check_embeddings()
print(f"{len(failures)} check(s) failed" if failures else "all checks passed")
sys.exit(1 if failures else 0)

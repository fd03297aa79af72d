#!/usr/bin/env python3
"""Renders the chat-template corpus with Python's jinja2 for tests/template/test_corpus.cpp.

Every template of tests/data/tokenizer/templates/ (where each comes from: templates/SOURCES.md)
is rendered over every conversation below (system prompts, tools, tool calls and results,
multi-part content, reasoning), with and without the generation prompt, plus the extra keyword
arguments some templates take (enable_thinking, reasoning_effort, documents, ...). SNIPPETS are
small templates that pin down one rule each (scoping, whitespace control, filters, tests).
Rendering is transformers' own (transformers/utils/chat_template_utils.py): an
ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and loop controls, its `tojson`
(json.dumps, insertion order, no HTML escaping), `raise_exception`, and `strftime_now`, here
pinned to FIXED_NOW so the expectations do not change with the date. A case the template rejects
is recorded as an error; ember must reject it too.

Run with jinja2 installed (tests/reference/README.md):
    ~/.cache/ember/venv-jinja/bin/python tests/reference/make_template_corpus.py
"""
import datetime
import json
import os

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEMPLATES = os.path.join(ROOT, "data", "tokenizer", "templates")
OUT = os.path.join(ROOT, "data", "tokenizer", "template_corpus.json")
FIXED_NOW = datetime.datetime(2026, 7, 26, 9, 30, 0)


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return FIXED_NOW.strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


# name, file, bos_token, eos_token, extra keyword-argument sets (each adds cases)
TEMPLATE_LIST = [
    ("smollm2", "smollm2.jinja", "<|im_start|>", "<|im_end|>", []),
    ("qwen2", "qwen2.jinja", "", "<|im_end|>", []),
    ("qwen2.5", "qwen2_5.jinja", "", "<|im_end|>", []),
    ("qwen3", "qwen3.jinja", "", "<|im_end|>", [{"enable_thinking": False}, {"enable_thinking": True}]),
    ("qwen2-vl", "qwen2_vl.jinja", "", "<|im_end|>", [{"add_vision_id": True}]),
    ("llama2", "llama2.jinja", "<s>", "</s>", []),
    ("llama3", "llama3.jinja", "<|begin_of_text|>", "<|eot_id|>", []),
    ("llama3.1", "llama3_1.jinja", "<|begin_of_text|>", "<|eot_id|>",
     [{"builtin_tools": ["brave_search", "wolfram_alpha", "code_interpreter"]}, {"tools_in_user_message": False},
      {"date_string": "01 Jan 2025"}]),
    ("llama3.2", "llama3_2.jinja", "<|begin_of_text|>", "<|eot_id|>", [{"tools_in_user_message": False}]),
    ("gemma2", "gemma2.jinja", "<bos>", "<eos>", []),
    ("gemma3", "gemma3.jinja", "<bos>", "<eos>", []),
    ("mistral", "mistral.jinja", "<s>", "</s>", []),
    ("mistral-v0.3-tools", "mistral_v3_tools.jinja", "<s>", "</s>", []),
    ("mistral-small-3", "mistral_small3.jinja", "<s>", "</s>", []),
    ("phi3.5", "phi3.jinja", "<s>", "<|endoftext|>", []),
    ("phi4", "phi4.jinja", "<|endoftext|>", "<|im_end|>", []),
    ("deepseek-r1-distill", "deepseek_r1.jinja", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", []),
    ("zephyr", "zephyr.jinja", "<s>", "</s>", []),
    ("olmo2", "olmo2.jinja", "<|endoftext|>", "<|endoftext|>", []),
    ("falcon3", "falcon3.jinja", "", "<|endoftext|>", []),
    ("granite3.1", "granite3_1.jinja", "<|end_of_text|>", "<|end_of_text|>",
     [{"documents": [{"text": "Paris is the capital of France."}, {"text": "It has 2.1 million inhabitants."}],
       "controls": {"citations": True, "length": "short"}}]),
    ("hermes2-pro-tools", "hermes2_pro_tools.jinja", "<|begin_of_text|>", "<|im_end|>", []),
    ("internlm2", "internlm2.jinja", "<s>", "<|im_end|>", []),
    ("vicuna", "vicuna.jinja", "<s>", "</s>", []),
    ("gpt-oss", "gpt_oss.jinja", "<|startoftext|>", "<|return|>",
     [{"reasoning_effort": "high"}, {"model_identity": "You are a helpful NPC."}]),
]

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"},
                "days": {"type": "integer", "description": "Forecast days", "default": 1},
            },
            "required": ["city"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for"},
                "tags": {"type": "array", "items": {"type": "string"}, "description": "Filters"},
                "limit": {"type": ["integer", "null"], "description": "At most this many results"},
            },
            "required": ["query"],
        },
    },
}


def m(role, content, **extra):
    out = {"role": role, "content": content}
    out.update(extra)
    return out


def call(name, arguments, call_id="call_0001"):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


TOOL_EXCHANGE = [
    m("system", "You are a weather bot."),
    m("user", "What's the weather in Paris?"),
    {"role": "assistant", "content": None, "tool_calls": [call("get_weather", {"city": "Paris", "unit": "celsius"})]},
    {"role": "tool", "tool_call_id": "call_0001", "name": "get_weather", "content": "{\"temperature\": 21.5, \"sky\": \"clear\"}"},
    m("assistant", "It is 21.5 °C and clear in Paris."),
    m("user", "And tomorrow?"),
]

# name, messages, tools (None: not passed)
CONVERSATIONS = [
    ("one-user", [m("user", "Hello!")], None),
    ("system-user", [m("system", "You are terse."), m("user", "What is 2+2?")], None),
    ("multi-turn", [m("user", "Hi"), m("assistant", "Hello! How can I help?"), m("user", "Tell me a joke.")], None),
    ("whitespace-unicode", [m("system", "Be kind.\n"), m("user", "  Spaces around  \n"), m("assistant", "\nSure. "),
                            m("user", "Ünïcödé 日本語 🙂\ttab \"quotes\" 'single' \\ backslash")], None),
    ("only-system", [m("system", "Only a system prompt.")], None),
    ("not-alternating", [m("user", "first"), m("user", "second")], None),
    ("tools", [m("system", "You can call tools."), m("user", "Weather in Oslo, in fahrenheit?")], [WEATHER_TOOL, SEARCH_TOOL]),
    ("tools-no-system", [m("user", "Find news about ember.")], [SEARCH_TOOL]),
    ("tool-exchange", TOOL_EXCHANGE, [WEATHER_TOOL]),
    ("tool-exchange-empty-content", [m("user", "Weather?"),
                                     {"role": "assistant", "content": "", "tool_calls": [call("get_weather", {"city": "Rome"})]},
                                     {"role": "tool", "tool_call_id": "call_0001", "content": "sunny"}], [WEATHER_TOOL]),
    ("two-tool-results", [m("user", "Compare Paris and Rome."),
                          {"role": "assistant", "content": "Checking both.", "tool_calls": [
                              call("get_weather", {"city": "Paris"}), call("get_weather", {"city": "Rome"}, "call_0002")]},
                          {"role": "tool", "tool_call_id": "call_0001", "content": "cloudy"},
                          {"role": "tool", "tool_call_id": "call_0002", "content": "sunny"}], [WEATHER_TOOL]),
    ("string-arguments", [m("user", "Weather?"),
                          {"role": "assistant", "content": None, "tool_calls": [call("get_weather", "{\"city\": \"Lima\"}")]},
                          {"role": "tool", "tool_call_id": "call_0001", "content": "warm"}], None),
    ("multi-part", [m("system", [{"type": "text", "text": "Parts system."}]),
                    m("user", [{"type": "text", "text": "Look at this: "}, {"type": "image", "image": "cat.png"},
                               {"type": "text", "text": "What is it?"}])], None),
    ("multi-part-user-only", [m("user", [{"type": "text", "text": "Just text in a part."}])], None),
    ("reasoning-in-content", [m("user", "What is 3*7?"),
                              m("assistant", "<think>\n3 times 7 is 21.\n</think>\n\n21."),
                              m("user", "And 4*7?")], None),
    ("reasoning-field", [m("user", "Pick a colour."),
                         m("assistant", "Blue.", reasoning_content="The user wants one colour.", thinking="The user wants one colour."),
                         m("user", "Why?")], None),
    ("assistant-last", [m("user", "Say hi."), m("assistant", "<think>short</think>Hi!")], None),
    ("empty", [], None),
]

# Conversations also rendered without the generation prompt.
WITHOUT_GENERATION_PROMPT = {"one-user", "multi-turn", "tool-exchange", "assistant-last", "reasoning-field"}


def render(env, source, variables):
    try:
        return {"output": env.from_string(source).render(**variables)}
    except jinja2.exceptions.TemplateSyntaxError as e:
        raise SystemExit(f"syntax error: {e}")
    except Exception as e:  # what the template raises (TemplateError, TypeError, UndefinedError, ...)
        return {"error": f"{type(e).__name__}: {e}"}


def template_cases(env, source, bos, eos, extras):
    cases = []
    for name, messages, tools in CONVERSATIONS:
        for gen in (True, False):
            if not gen and name not in WITHOUT_GENERATION_PROMPT:
                continue
            for extra in [{}] + (extras if gen else []):
                variables = {"messages": messages, "add_generation_prompt": gen, "bos_token": bos, "eos_token": eos}
                if tools is not None:
                    variables["tools"] = tools
                variables.update(extra)
                case = {"conversation": name, "variables": variables}
                case.update(render(env, source, variables))
                cases.append(case)
    return cases


# One rule each; rendered with the same environment (variables: a list, a dict, strings).
SNIPPET_VARS = {"items": [3, 1, 2], "d": {"b": 2, "a": 1, "c": None}, "s": "  Hello, World  ",
                "people": [{"name": "Ann", "age": 31}, {"name": "bob", "age": 25}, {"name": "Cy", "age": 31}],
                "n": 7, "f": 2.5, "empty": [], "nested": {"x": {"y": [10, 20, {"z": "deep"}]}}}
SNIPPETS = [
    "{% set x = 0 %}{% for i in items %}{{ x }}{% set x = x + i %}{{ x }};{% endfor %}{{ x }}",
    "{% set ns = namespace(total=0) %}{% for i in items %}{% set ns.total = ns.total + i %}{% endfor %}{{ ns.total }}",
    "{% for i in items %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }} {% endfor %}",
    "{% for i in items %}{{ loop.previtem }}<{{ i }}>{{ loop.nextitem }}|{% endfor %}",
    "{% for i in items %}{{ loop.cycle('a', 'b') }}{% endfor %}",
    "{% for i in items if i > 1 %}{{ i }}{{ loop.length }}{% else %}none{% endfor %}",
    "{% for i in empty %}x{% else %}empty{% endfor %}",
    "{% for i in items %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 2 %}{% break %}{% endif %}{{ i }}{% endfor %}",
    "{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}",
    "{% for k, v in d | items %}{{ k }}={{ v }},{% endfor %}{% for k in d %}{{ k }}{% endfor %}",
    "{% for k, v in d | dictsort %}{{ k }}{{ v }}{% endfor %}|{{ d | dictsort(by='key', reverse=true) }}",
    "{{ items | sort }}{{ items | sort(reverse=true) }}{{ people | sort(attribute='age') | map(attribute='name') | list }}",
    "{{ people | selectattr('age', 'equalto', 31) | map(attribute='name') | join(', ') }}",
    "{{ people | rejectattr('age', '>', 30) | list }}",
    "{{ items | select('odd') | list }}{{ items | reject('even') | list }}{{ [0, 1, '', 'a', none] | select | list }}",
    "{{ people | map(attribute='missing', default='?') | join }}{{ ['a', 'b'] | map('upper') | join('-') }}",
    "{{ s | trim }}|{{ s | upper }}|{{ s | lower }}|{{ s | title }}|{{ s | capitalize }}|{{ s | length }}",
    "{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ s.strip(' H') }}|{{ 'xxhixx'.strip('x') }}",
    "{{ s.split(',') }}{{ s.split() }}{{ 'a b  c'.split(' ') }}{{ 'a,b,c'.split(',', 1) }}{{ 'a,b,c'.rsplit(',', 1) }}",
    "{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}{{ 'abc'.upper() }}{{ 'ABC'.lower() }}{{ 'a-b'.replace('-', '+') }}",
    "{{ 'hello world'.title() }}|{{ 'hELLO'.capitalize() }}|{{ 'abcabc'.find('c') }}|{{ 'abcabc'.count('b') }}|{{ '-'.join(['x', 'y']) }}",
    "{{ 'hello' | replace('l', 'L') }}{{ 'hello' | replace('l', 'L', 1) }}{{ 'a\nb\nc' | indent(2) }}|{{ 'a\n\nb' | indent(2, true, true) }}",
    "{{ items | first }}{{ items | last }}{{ items | length }}{{ items | sum }}{{ items | min }}{{ items | max }}{{ items | reverse | list }}",
    "{{ 'abc' | first }}{{ 'abc' | last }}{{ 'abc' | reverse }}{{ 'abc' | list }}{{ empty | first }}",
    "{{ [1, 2, 2, 'a', 'A'] | unique | list }}{{ people | unique(attribute='age') | map(attribute='name') | list }}",
    "{{ undefined_var | default('dflt') }}{{ '' | default('e', true) }}{{ none | default('n') }}{{ 0 | d(5, boolean=true) }}",
    "{{ '42' | int }}{{ '4.7' | int }}{{ 'x' | int(-1) }}{{ 3.99 | int }}{{ '2.5' | float }}{{ 'x' | float }}{{ 7 | float }}",
    "{{ 3.14159 | round(2) }}{{ 2.5 | round }}{{ 2.4 | round(0, 'ceil') }}{{ -3 | abs }}{{ 42 | string }}{{ [1] | string }}",
    "{{ d | tojson }}|{{ people | tojson(indent=2) }}|{{ 'ü\"\\n' | tojson }}|{{ d | tojson(sort_keys=true) }}",
    "{{ nested | tojson(separators=(',', ':')) }}|{{ 'ü' | tojson(ensure_ascii=true) }}|{{ [1.0, 1e20, 0.1, -0.0, 1e-7] | tojson }}",
    "{{ 1 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 1e16 }} {{ 0.1 + 0.2 }} {{ 10 / 5 }} {{ 1.5e-5 }}",
    "{{ 'a' ~ 1 ~ none ~ true ~ 2.0 }} {{ 'ab' * 3 }} {{ [1] + [2] }} {{ 'x' + 'y' }} {{ -n }} {{ +f }}",
    "{{ [1, 'a', none, true, 1.5, {'k': (1, 2)}, (3,)] }} {{ {'a': 'it\\'s', 'b': \"q\\\"\"} }}",
    "{{ n is odd }}{{ n is even }}{{ n is divisibleby 7 }}{{ n is number }}{{ f is float }}{{ n is integer }}{{ true is boolean }}",
    "{{ d is mapping }}{{ items is sequence }}{{ s is string }}{{ s is iterable }}{{ none is none }}{{ nope is defined }}{{ nope is undefined }}",
    "{{ items is not string }}{{ 'ABC' is upper }}{{ 'abc' is lower }}{{ 3 is in items }}{{ n is eq 7 }}{{ n is gt 3 }}{{ n is sameas 7 }}",
    "{{ 'upper' is filter }}{{ 'nope' is filter }}{{ 'odd' is test }}{{ range is callable }}",
    "{{ 2 in items }}{{ 5 not in items }}{{ 'ell' in 'hello' }}{{ 'a' in d }}{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}{{ 'a' < 'b' }}",
    "{{ items[0] }}{{ items[-1] }}{{ items[5] }}{{ items[1:] }}{{ items[::-1] }}{{ items[:-1] }}{{ 'hello'[1:3] }}{{ 'héllo'[::-2] }}",
    "{{ nested.x.y[2].z }}{{ nested['x']['y'][0] }}{{ d.a }}{{ d['b'] }}{{ d.get('a') }}{{ d.get('zz', 'no') }}{{ d.keys() | list }}{{ d.values() | list }}",
    "{{ 'yes' if n > 5 else 'no' }}{{ 'x' if false }}|{{ n > 5 and 'A' or 'B' }}{{ 0 or '' or 'last' }}{{ 1 and 2 }}{{ not n }}",
    "{% if n > 10 %}a{% elif n > 5 %}b{% else %}c{% endif %}{% if empty %}x{% endif %}{% if d %}y{% endif %}",
    "{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}{{ greet('Ann') }} {{ greet('Bob', greeting='Hi') }} {{ greet(greeting='Yo', name='Cy') }}",
    "{% macro f(a, b=2) %}{{ a }}{{ b }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ f(1) }}{{ f(1, 3, 4) }}{{ f(1, x=5) }}",
    "{% macro fact(k) %}{% if k <= 1 %}1{% else %}{{ k * fact(k - 1) | int }}{% endif %}{% endmacro %}{{ fact(6) }}",
    "{% macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}inner {{ n }}{% endcall %}",
    "{% macro rows(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}{% call(item) rows(items) %}[{{ item }}]{% endcall %}",
    "{% filter upper %}shout {{ s | trim }}{% endfilter %}{% filter trim | replace('a', 'o') %}  banana  {% endfilter %}",
    "{% set block %}  captured {{ n }}  {% endset %}[{{ block }}]{% set b2 | trim %}  trimmed  {% endset %}[{{ b2 }}]",
    "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = (1, 2) %}{{ t }}{% set one = (1,) %}{{ one }}{% set l = [] %}{{ l }}",
    "{{ range(5) | list }}{{ range(2, 10, 3) | list }}{{ range(5, 0, -2) | list }}{{ dict(a=1, b='x') }}{{ namespace(k=1).k }}",
    "{{ '%s is %d years' % ('Ann', 31) }}|{{ '%s!' % 'hi' }}|{{ '%r' % 'q' }}|{{ '%.x' | length }}",
    "{{ raise_exception('stop here') }}",
    "{{ undefined_var.attr }}",
    "{{ items.append(4) }}",
    "{{ 1 + 'a' }}",
    "{{ none.x }}",
    "{{ 1 / 0 }}",
    "{% for a, b in items %}{% endfor %}",
    "{{ 'abc' | tojson }}{{ undefined_var | tojson }}",
    "  {% if true %}\n    indented\n  {% endif %}\n  {%- if true %} dash-left{% endif %}\n{%+ if true %}plus{% endif %}\nend",
    "{# comment #}\n  {# indented comment #}\nA {{- ' ' -}} B\n{%- if true -%}\n  C  \n{%- endif -%}\n  D",
    "line1\r\nline2\rline3\n{% raw %}{{ not parsed }}{% endraw %}\n",
    "{{ \"adjacent\" 'strings' }}{{ 'esc\\t\\x41\\u00e9\\101' }}{{ 1_000 }}{{ 0x1F if false else 1.5e3 }}",
    "{% for x in [1, 2] %}{% for y in [3, 4] %}{{ loop.index }}{{ x }}{{ y }} {% endfor %}{{ loop.index }}|{% endfor %}",
    "{% set x = 'outer' %}{% macro m() %}{{ x }}{% endmacro %}{% set x = 'later' %}{{ m() }}{% for i in [1] %}{% set x = 'loop' %}{{ m() }}{% endfor %}",
    "{{ people[0].name | upper }}{{ (people | first).age + 1 }}{{ people | map(attribute='age') | sum }}{{ people | length > 2 }}",
    "{{ d | length }}{{ d.c is none }}{{ d.missing is defined }}{{ d['missing'] is defined }}{{ nested.x.nope is defined }}",
    "{{ 'Hello' | center(11) if false else '' }}{{ s | wordcount }}{{ '<a href=\"x\">&</a>' | e }}{{ 'x' | safe }}",
    "{{ 'a\\nb\\r\\nc' .splitlines() }}{{ '12'.isdigit() }}{{ 'ab'.isalpha() }}{{ ' '.isspace() }}{{ 'aB'.isupper() }}",
    "{{ 'ß'.upper() }}{{ 'ÀÉ'.lower() }}{{ 'éa' | upper }}{{ 'x'.join('abc') }}",
    "{{ true }}{{ True }}{{ false }}{{ none }}{{ None }}{{ [true, none] }}{{ 10 ** 2 }}{{ 2 ** -1 }}{{ 3 * 1.5 }}",
    "{{ items | join }}{{ items | join(attribute=0) if false else '' }}{{ [[1, 2], [3]] | map('length') | list }}{{ [1, 2] | map('string') | join('+') }}",
    "{{ messages | selectattr('role', 'eq', 'user') | list | length if messages is defined else 'no messages' }}",
    "{% set out = [] %}{{ out | length }}{{ {} | length }}{{ {'a': 1} | items | list }}{{ (1, 2) == (1, 2) }}{{ [1, 2] == (1, 2) }}",
    "{{ 5 > 3.5 }}{{ 1 == 1.0 }}{{ true == 1 }}{{ 'a' == 'a' }}{{ [1, [2]] == [1, [2]] }}{{ {'a': 1} == {'a': 1} }}{{ none == none }}",
    "{% for c in 'héj' %}{{ c }}.{% endfor %}{{ 'héj' | length }}{{ 'héj'[1] }}{{ 'hé' ~ 'j' }}",
    "{{ 'abc'[::-1] }}{{ items[10:] }}{{ items[-10:1] }}{{ items[::2] }}{{ items[1::-1] }}",
    "{{ 'x' | indent }}{{ 'a\nb' | indent('--') }}{{ 'a\nb\n' | indent(first=true) }}",
    "{{ people | map(attribute='name') | map('lower') | sort | join(',') }}{{ ['b', 'A', 'c'] | sort }}{{ ['b', 'A', 'c'] | sort(case_sensitive=true) }}",
    "{{ [3, 1] | max }}{{ ['b', 'A'] | max }}{{ people | max(attribute='age') }}{{ people | min(attribute='name') }}",
    "{%- for m in [1, 2, 3] -%}\n  {{ m }}\n{%- endfor %}\n{% for m in [1] %}\n  {{ m }}\n{% endfor %}",
    "{% if true %}{% set inner = 'set in if' %}{% endif %}{{ inner }}{% for i in [1] %}{% set in_loop = 1 %}{% endfor %}{{ in_loop is defined }}",
]


def main():
    env = make_env()
    templates = []
    for name, file, bos, eos, extras in TEMPLATE_LIST:
        with open(os.path.join(TEMPLATES, file), encoding="utf-8") as f:
            source = f.read()
        cases = template_cases(env, source, bos, eos, extras)
        templates.append({"name": name, "file": file, "cases": cases})
        rendered = sum(1 for c in cases if "output" in c)
        print(f"{name:22} {len(cases):3} cases, {rendered:3} rendered, {len(cases) - rendered:3} rejected")
    snippets = []
    for source in SNIPPETS:
        case = {"source": source}
        variables = dict(SNIPPET_VARS)
        case.update(render(env, source, variables))
        snippets.append(case)
    out = {
        "generator": f"jinja2 {jinja2.__version__}",
        "strftime_now": FIXED_NOW.isoformat(),
        "templates": templates,
        "snippet_variables": SNIPPET_VARS,
        "snippets": snippets,
    }
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{sum(len(t['cases']) for t in templates)} template cases, {len(snippets)} snippets -> {OUT}")


if __name__ == "__main__":
    main()

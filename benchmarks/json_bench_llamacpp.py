#!/usr/bin/env python3
"""The llama.cpp side of ember-bench --workload json: llama-cpp-python's grammar sampling
(LlamaGrammar.from_json_schema) on the same four schemas, prompts and model, greedy, one stream.

    ~/.cache/ember/venv-ref/bin/python benchmarks/json_bench_llamacpp.py MODEL [--threads 2] [--repeats 3] [--json OUT]

Reports the schema compile time (from_json_schema) and tokens/s of whole chat completions
(prompt included, the same prompt both ways) with and without the schema; the unconstrained run
is capped at the constrained run's length. ember's figures come from benchmarks/json_workload.cpp.
"""
import argparse
import json
import statistics
import time

from llama_cpp import Llama, LlamaGrammar

# The schemas and prompts of benchmarks/json_workload.cpp, in the same order.
SCHEMAS = [
    ("The blacksmith greets a knight who wants a sword.",
     {"type": "object", "properties": {"say": {"type": "string", "maxLength": 80},
      "action": {"enum": ["give", "attack", "flee", "trade"]}, "item": {"type": ["string", "null"]},
      "count": {"type": "integer", "minimum": 0, "maximum": 20}}, "required": ["say", "action", "count"]}),
    ("Describe a person.",
     {"type": "object", "properties": {"name": {"type": "string", "maxLength": 30},
      "age": {"type": "integer", "minimum": 0, "maximum": 120},
      "email": {"type": "string", "pattern": "^[a-z]{1,12}@[a-z]{1,12}[.](com|org)$"},
      "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 3}},
      "required": ["name", "age", "tags"]}),
    ("An event for the calendar.",
     {"type": "object", "properties": {"title": {"type": "string", "maxLength": 40}, "day": {"type": "string", "format": "date"},
      "at": {"type": "string", "format": "time"}, "id": {"type": "string", "format": "uuid"}},
      "required": ["title", "day", "at", "id"]}),
    ("Call the weather tool for Paris.",
     {"type": "object", "properties": {"name": {"const": "get_weather"}, "arguments": {"type": "object",
      "properties": {"city": {"type": "string", "maxLength": 20}, "unit": {"enum": ["celsius", "fahrenheit"]}},
      "required": ["city", "unit"], "additionalProperties": False}}, "required": ["name", "arguments"],
      "additionalProperties": False}),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json")
    a = ap.parse_args()
    llm = Llama(model_path=a.model, n_threads=a.threads, n_ctx=2048, verbose=False, seed=0)
    compile_ms, grammars = [], []
    for _, schema in SCHEMAS:
        t = time.perf_counter()
        grammars.append(LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False))
        compile_ms.append((time.perf_counter() - t) * 1000)

    def run(i, grammar, max_tokens):
        msgs = [{"role": "system", "content": "You answer with JSON only."}, {"role": "user", "content": SCHEMAS[i][0]}]
        t = time.perf_counter()
        r = llm.create_chat_completion(msgs, grammar=grammar, max_tokens=max_tokens, temperature=0)
        return r["usage"]["completion_tokens"], time.perf_counter() - t

    lengths = [max(2, run(i, grammars[i], 160)[0]) for i in range(len(SCHEMAS))]  # also the warm-up
    free, constrained = [], []
    for _ in range(a.repeats):
        tok = sec = 0
        for i in range(len(SCHEMAS)):
            n, s = run(i, grammars[i], 160)
            tok, sec = tok + n, sec + s
        constrained.append(tok / sec)
        tok = sec = 0
        for i in range(len(SCHEMAS)):
            n, s = run(i, None, lengths[i])
            tok, sec = tok + n, sec + s
        free.append(tok / sec)
    out = {"engine": "llama.cpp", "workload": "json", "model": a.model, "threads": a.threads,
           "compile_ms": {"mean": statistics.mean(compile_ms), "max": max(compile_ms)},
           "tokens_per_s": {"batch1_free": statistics.median(free), "batch1_schema": statistics.median(constrained)}}
    print(f"llama.cpp json: compile mean {out['compile_ms']['mean']:.2f} ms; tokens/s batch 1 (prompt included): "
          f"{out['tokens_per_s']['batch1_free']:.1f} free, {out['tokens_per_s']['batch1_schema']:.1f} with schema "
          f"({out['tokens_per_s']['batch1_schema'] / out['tokens_per_s']['batch1_free']:.2f}x)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()

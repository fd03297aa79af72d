"""The part of grammar_corpus's validators that does not depend on the kind of constraint:
reading grammar_corpus_driver's outputs and reporting what failed.
"""
import json


def check_outputs(tool, kind, corpus_path, outputs_path, why_not, failures=()):
    """Checks every output of the corpus at `corpus_path` (entries with a "name") in
    `outputs_path` (JSON lines): it must have finished with `stop`, and why_not(name, text) must
    return None (else the reason it is not a valid output). Every entry must have an output.
    `failures` are found beforehand by the caller. Prints a summary; returns the exit code."""
    names = [e["name"] for e in json.load(open(corpus_path, encoding="utf-8"))]
    outputs = [json.loads(line) for line in open(outputs_path, encoding="utf-8") if line.strip()]
    failures = list(failures)
    seen = set()
    for o in outputs:
        seen.add(o["name"])
        where = f'{o["name"]} seed {o["seed"]}'
        if o["finish_reason"] != "stop":
            failures.append(f'{where}: finished with {o["finish_reason"]} {o.get("error", "")}: {o["text"]!r}')
            continue
        why = why_not(o["name"], o["text"])
        if why:
            failures.append(f'{where}: {why}: {o["text"]!r}')
    for name in sorted(set(names) - seen):
        failures.append(f"{name}: no output")
    print(f"{tool}: {len(outputs)} outputs of {len(names)} {kind}, {len(failures)} failures")
    for f in failures:
        print("  " + f)
    return 1 if failures else 0

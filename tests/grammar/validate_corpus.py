#!/usr/bin/env python3
"""Validates grammar_corpus_driver's outputs against their schemas with the jsonschema package.

    validate_corpus.py SCHEMAS.json OUTPUTS.jsonl

Every output must have finished with `stop` (the grammar ended it, not max_tokens) and its text
must parse as JSON and validate (Draft 2020-12, formats checked). Exit 0 when all do, 1 listing
each failure, 77 (ctest's skip) when jsonschema is not installed.
"""
import json
import sys

try:
    import jsonschema
except ImportError:
    print("validate_corpus: the jsonschema package is not installed (pip install jsonschema)")
    sys.exit(77)


def main():
    schemas = {e["name"]: e["schema"] for e in json.load(open(sys.argv[1], encoding="utf-8"))}
    outputs = [json.loads(line) for line in open(sys.argv[2], encoding="utf-8") if line.strip()]
    # The 2020-12 format checker: a bare FormatChecker() checks "time" as draft 3 did (no offset).
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    # jsonschema checks "time" only with rfc3339-validator installed and otherwise passes any
    # string: make sure every format the corpus uses is really checked.
    for fmt, bad in [("date", "2024-02-30"), ("time", "25:61:00Z"), ("date-time", "2024-01-01 10:00"),
                     ("uuid", "not-a-uuid")]:
        if checker.conforms(bad, fmt):
            print(f"validate_corpus: the format checker accepts {bad!r} as {fmt} (pip install rfc3339-validator)")
            return 1
    failures = []
    seen = set()
    for o in outputs:
        seen.add(o["name"])
        where = f'{o["name"]} seed {o["seed"]}'
        if o["finish_reason"] != "stop":
            failures.append(f'{where}: finished with {o["finish_reason"]} {o.get("error", "")}: {o["text"]!r}')
            continue
        try:
            value = json.loads(o["text"])
        except ValueError as e:
            failures.append(f'{where}: not JSON ({e}): {o["text"]!r}')
            continue
        validator = jsonschema.Draft202012Validator(schemas[o["name"]], format_checker=checker)
        errors = [e.message for e in validator.iter_errors(value)]
        if errors:
            failures.append(f'{where}: {errors[0]}: {o["text"]!r}')
    missing = set(schemas) - seen
    for name in sorted(missing):
        failures.append(f"{name}: no output")
    print(f"validate_corpus: {len(outputs)} outputs of {len(schemas)} schemas, {len(failures)} failures")
    for f in failures:
        print("  " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

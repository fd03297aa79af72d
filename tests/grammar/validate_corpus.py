#!/usr/bin/env python3
"""Validates grammar_corpus_driver's outputs against their schemas with the jsonschema package.

    validate_corpus.py SCHEMAS.json OUTPUTS.jsonl

Every output must have finished with `stop` (the grammar ended it, not max_tokens) and its text
must parse as JSON and validate (Draft 2020-12, formats checked). Exit 0 when all do, 1 listing
each failure, 77 (ctest's skip) when jsonschema is not installed.
"""
import json
import sys

from corpus_outputs import check_outputs

try:
    import jsonschema
except ImportError:
    print("validate_corpus: the jsonschema package is not installed (pip install jsonschema)")
    sys.exit(77)


def main():
    schemas = {e["name"]: e["schema"] for e in json.load(open(sys.argv[1], encoding="utf-8"))}
    # The 2020-12 format checker: a bare FormatChecker() checks "time" as draft 3 did (no offset).
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    # jsonschema checks "time" only with rfc3339-validator installed and otherwise passes any
    # string: make sure every format the corpus uses is really checked.
    for fmt, bad in [("date", "2024-02-30"), ("time", "25:61:00Z"), ("date-time", "2024-01-01 10:00"),
                     ("uuid", "not-a-uuid")]:
        if checker.conforms(bad, fmt):
            print(f"validate_corpus: the format checker accepts {bad!r} as {fmt} (pip install rfc3339-validator)")
            return 1

    def why_not(name, text):
        try:
            value = json.loads(text)
        except ValueError as e:
            return f"not JSON ({e})"
        validator = jsonschema.Draft202012Validator(schemas[name], format_checker=checker)
        errors = [e.message for e in validator.iter_errors(value)]
        return errors[0] if errors else None

    return check_outputs("validate_corpus", "schemas", sys.argv[1], sys.argv[2], why_not)


if __name__ == "__main__":
    sys.exit(main())

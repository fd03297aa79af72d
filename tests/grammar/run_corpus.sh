#!/usr/bin/env bash
# run_corpus.sh DRIVER PYTHON DATA OUT VENV: the grammar_corpus test (tests/grammar/CMakeLists.txt):
# the schema corpus DATA/schemas.json and the GBNF corpus DATA/grammars.json, outputs in OUT.*.jsonl.
# jsonschema and rfc3339-validator (its checker of the time and date-time formats) come from PyPI
# into VENV on first use.
set -euo pipefail
driver=$1 python=$2 data=$3 out=$4 venv=$5
here=$(cd "$(dirname "$0")" && pwd)
model=${EMBER_MODEL:-$HOME/.cache/ember/SmolLM2-135M-Instruct.Q4_1.gguf}
[[ -f $model ]] || { echo "grammar_corpus: no model at $model (scripts/fetch-model.sh)"; exit 77; }
source "$here/../support/python_venv.sh"
ensure_venv "$venv" "$python" jsonschema rfc3339-validator
seeds=${EMBER_CORPUS_SEEDS:-2}
"$driver" "$model" "$data/grammars.json" "$out.gbnf.jsonl" "$seeds"
status=0
"$VENV_PYTHON" "$here/validate_gbnf.py" "$data/grammars.json" "$out.gbnf.jsonl" || status=1
"$driver" "$model" "$data/schemas.json" "$out.schemas.jsonl" "$seeds"
"$VENV_PYTHON" "$here/validate_corpus.py" "$data/schemas.json" "$out.schemas.jsonl" || status=1
exit $status

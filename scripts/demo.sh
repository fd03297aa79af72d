#!/usr/bin/env bash
# Builds ember and runs it on the default model: installs missing system packages, fetches the
# model, builds the examples and generates a streamed answer with timings. Extra arguments go to
# ember-generate (e.g. --prompt "..." --precision fp32).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
model=${EMBER_MODEL:-$(scripts/fetch-model.sh)}
jobs=${EMBER_JOBS:-$(nproc)}

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_EXAMPLES=ON ${EMBER_CMAKE_ARGS:-}
cmake --build build -j "$jobs" --target ember-generate
build/examples/generate/ember-generate --model "$model" "$@"

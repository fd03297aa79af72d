#!/usr/bin/env bash
# Builds ember and runs it on the default model: installs missing system packages, fetches the
# model, builds the examples and generates a streamed answer with timings.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
model=${EMBER_MODEL:-$(scripts/fetch-model.sh)}
jobs=${EMBER_JOBS:-$(nproc)}

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_EXAMPLES=ON ${EMBER_CMAKE_ARGS:-}
cmake --build build -j "$jobs" --target ember-inspect
build/examples/inspect/ember-inspect "$model" | head -n 40

#!/usr/bin/env bash
# Builds ember and runs one of its example programs on the default model: installs missing
# system packages, fetches the model, builds the program and starts it.
#
#   scripts/demo.sh [generate|chat|npc|server] [FLAGS...]
#
# generate (the default) streams an answer with timings; chat is a terminal chat; npc is eight
# game characters answering inside a frame loop; server is the OpenAI-compatible HTTP server.
# FLAGS go to the program (`scripts/demo.sh chat --help` lists them).
set -euo pipefail
cd "$(dirname "$0")/.."

program=generate
case ${1:-} in
  generate|chat|npc|server) program=$1; shift ;;
esac

scripts/install-deps.sh
model=${EMBER_MODEL:-$(scripts/fetch-model.sh)}
jobs=${EMBER_JOBS:-$(nproc)}

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_EXAMPLES=ON ${EMBER_CMAKE_ARGS:-}
cmake --build build -j "$jobs" --target "ember-$program"
exec "build/examples/$program/ember-$program" --model "$model" "$@"

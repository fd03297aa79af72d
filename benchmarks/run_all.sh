#!/usr/bin/env bash
# The benchmark suite: ember, llama.cpp and CTranslate2 on the same workloads (pp512, tg128,
# shared-prompt serving, an 8-turn chat, cold start, JSON Schema constrained decoding against
# llama.cpp's grammar sampling) and the same thread count, interleaved and
# repeated, plus the teacher-forced quality of each engine's INT8 mode against ember's fp32 path.
#
#   benchmarks/run_all.sh OUTDIR [--quick] [--repeats N] [--threads N] [--engines LIST] [--workloads LIST]
#
# Writes OUTDIR/results.json, OUTDIR/results.md, OUTDIR/*.png and OUTDIR/suite.log (every command
# and its output). --quick is a smoke run (1 round, 4 requests, 2 chat turns, 64 quality positions);
# the normal run (3 rounds) should take about 12 minutes on a quiet 2-core machine (estimated
# from the per-workload times; a --quick run took 15 minutes on a heavily loaded one).
#
# Set-up: the venv of tests/reference/setup_venv.sh (llama-cpp-python built from source on first
# use) with ctranslate2 and matplotlib added from PyPI; ember's programs from BUILD_DIR (default
# build; built here if missing: ember-bench, ember-logits, ember-generate); the model from
# EMBER_MODEL or scripts/fetch-model.sh. Prepared peer models (the Q8_0 requantization, the
# CTranslate2 conversion) and ember's packed-weight cache are kept in ${EMBER_CACHE_DIR:-~/.cache/ember}/bench.
set -euo pipefail
cd "$(dirname "$0")/.."

if (($# < 1)) || [[ $1 == -* ]]; then
  echo "usage: $0 OUTDIR [--quick] [--repeats N] [--threads N] [--engines LIST] [--workloads LIST]" >&2
  exit 2
fi
out=$1
shift

model=${EMBER_MODEL:-}
if [[ -z $model ]]; then
  model=$(scripts/fetch-model.sh)
fi
[[ -f $model ]] || { echo "run_all: model not found: $model" >&2; exit 2; }

python=$(tests/reference/setup_venv.sh)
if ! "$python" -c 'import ctranslate2, matplotlib' 2>/dev/null; then
  echo "run_all: installing ctranslate2 and matplotlib into the venv" >&2
  "$python" -m pip install --disable-pip-version-check ctranslate2 matplotlib >&2
fi

build=${BUILD_DIR:-build}
programs=(benchmarks/ember-bench benchmarks/ember-logits examples/generate/ember-generate)
for program in "${programs[@]}"; do
  if [[ ! -x $build/$program ]]; then
    echo "run_all: building ember's benchmark programs in $build" >&2
    [[ -f $build/build.ninja || -f $build/Makefile ]] ||
      cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >&2
    cmake --build "$build" --target ember-bench ember-logits ember-generate >&2
    break
  fi
done

mkdir -p "$out"
exec "$python" benchmarks/peers/suite.py --out "$out" --build "$build" --model "$model" "$@"

#!/usr/bin/env bash
# Compares ember with llama.cpp on the same GGUF: prompt processing (pp512) and generation (tg128).
#
#   benchmarks/compare_llamacpp.sh [--threads N] [--repeats R] [--model PATH] [--json FILE]
#
# The pp512/tg128 part of the benchmark suite (benchmarks/run_all.sh): ember int8, the ember fp32
# baseline, llama.cpp on the Q4_1 file and on its Q8_0 requantization, interleaved round by round,
# medians; prints the suite's Markdown table (with the ratios) and --json copies its results.json.
set -euo pipefail
cd "$(dirname "$0")/.."

threads=2
repeats=3
json_out=
while (($#)); do
  case $1 in
    --threads) threads=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --model) export EMBER_MODEL=$2; shift 2 ;;
    --json) json_out=$2; shift 2 ;;
    *) echo "usage: $0 [--threads N] [--repeats R] [--model PATH] [--json FILE]" >&2; exit 2 ;;
  esac
done

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
benchmarks/run_all.sh "$out" --threads "$threads" --repeats "$repeats" --workloads pp512,tg128 \
  --engines "ember int8,ember fp32,llama.cpp" >&2
sed -n '/^## Speed/,/^## ember/p' "$out/results.md" | sed '$d'
[[ -z $json_out ]] || cp "$out/results.json" "$json_out"

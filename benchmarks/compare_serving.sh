#!/usr/bin/env bash
# The shared-prompt serving workload (32 requests arriving together, each a 512-token common
# prefix plus 32 unique tokens, 64 generated) on ember's four configurations and on llama.cpp's
# own multi-sequence batching, printed side by side.
#
#   benchmarks/compare_serving.sh [--threads N] [--requests N] [--json FILE]
#
# ember: build/benchmarks/ember-bench --workload shared (BUILD_DIR overrides build).
# llama.cpp: benchmarks/peers/llamacpp_driver.py shared, through llama-cpp-python's batched
# decode: the prefix decoded once on sequence 0 and copied to the others with
# llama_memory_seq_cp (as llama.cpp's examples/parallel does), then one token per sequence per
# decode. Model: EMBER_MODEL, else scripts/fetch-model.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

threads=2
requests=32
json_out=
while (($#)); do
  case $1 in
    --threads) threads=$2; shift 2 ;;
    --requests) requests=$2; shift 2 ;;
    --json) json_out=$2; shift 2 ;;
    *) echo "usage: $0 [--threads N] [--requests N] [--json FILE]" >&2; exit 2 ;;
  esac
done

model=${EMBER_MODEL:-$(scripts/fetch-model.sh)}
python=$(tests/reference/setup_venv.sh)
ember_bench=${BUILD_DIR:-build}/benchmarks/ember-bench
[[ -x $ember_bench ]] || { echo "compare_serving: build the ember-bench target first ($ember_bench)" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$ember_bench" --model "$model" --threads "$threads" --workload shared --requests "$requests" \
  --json "$work/ember.json"
echo "llama.cpp: the same workload with its batched decode" >&2
"$python" benchmarks/peers/llamacpp_driver.py shared --model "$model" --threads "$threads" \
  --requests "$requests" 2>"$work/llamacpp.log" | tail -n 1 >"$work/llamacpp.json"

"$python" - "$work" "$json_out" <<'PY'
import json, os, sys

work, json_out = sys.argv[1], sys.argv[2]
with open(os.path.join(work, "ember.json")) as f:
    rows = [r for r in json.load(f) if r["workload"] == "shared"]
with open(os.path.join(work, "llamacpp.json")) as f:
    llama = json.load(f)
rows.append({"engine": "llama.cpp", "configuration": "llama.cpp Q4_1, batched decode, prefix copied (seq_cp)", **llama})

print(f"\n{'configuration':<56} {'TTFT mean':>10} {'TTFT p99':>10} {'resp. mean':>11} {'resp. p99':>10} {'gen tok/s':>10}")
for r in rows:
    print(f"{r['configuration']:<56} {r['ttft_ms']['mean']:>8.0f}ms {r['ttft_ms']['p99']:>8.0f}ms "
          f"{r['response_ms']['mean']:>9.0f}ms {r['response_ms']['p99']:>8.0f}ms {r['generated_tokens_per_s']:>10.1f}")
best = min(rows[:-1], key=lambda r: r["response_ms"]["mean"])
print(f"\nmean response: llama.cpp / {best['configuration']} = "
      f"{llama['response_ms']['mean'] / best['response_ms']['mean']:.2f}x")
if json_out:
    with open(json_out, "w") as f:
        json.dump(rows, f, indent=1)
PY

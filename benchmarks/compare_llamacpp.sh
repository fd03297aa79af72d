#!/usr/bin/env bash
# Compares ember with llama.cpp on the same GGUF: prompt processing (pp512) and generation (tg128).
#
#   benchmarks/compare_llamacpp.sh [--threads N] [--repeats R] [--model PATH] [--json FILE]
#
# Runs are interleaved round by round (ember int8, ember fp32, llama.cpp, then again), one timed
# run per engine per round, so slow drift of a shared machine hits every engine alike. Prints a
# table of median/min/max tokens/s and the ratios ember int8 / llama.cpp and ember int8 / fp32;
# --json also writes the aggregated results as a JSON list.
#
# Environment: BUILD_DIR (default build) holds benchmarks/ember-bench; EMBER_MODEL overrides the
# model that scripts/fetch-model.sh provides; llama.cpp runs from the venv that
# tests/reference/setup_venv.sh provides (built on first use: minutes).
set -euo pipefail
cd "$(dirname "$0")/.."

threads=2
repeats=3
model=
json_out=
while (($#)); do
  case $1 in
    --threads) threads=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --json) json_out=$2; shift 2 ;;
    *) echo "usage: $0 [--threads N] [--repeats R] [--model PATH] [--json FILE]" >&2; exit 2 ;;
  esac
done

if [[ -z $model ]]; then
  if [[ -n ${EMBER_MODEL:-} ]]; then
    model=$EMBER_MODEL
  elif [[ -x scripts/fetch-model.sh ]]; then
    model=$(scripts/fetch-model.sh)
  else
    echo "compare_llamacpp: no model: pass --model or set EMBER_MODEL" >&2
    exit 2
  fi
fi
[[ -f $model ]] || { echo "compare_llamacpp: model not found: $model" >&2; exit 2; }

python=$(tests/reference/setup_venv.sh)
ember_bench=${BUILD_DIR:-build}/benchmarks/ember-bench
if [[ -x $ember_bench ]]; then
  ember_precisions=(int8 fp32)
else
  echo "compare_llamacpp: $ember_bench not built; measuring llama.cpp only" \
       "(build the ember-bench target, or set BUILD_DIR)" >&2
  ember_precisions=()
fi

results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT
for ((round = 1; round <= repeats; round++)); do
  for workload in pp512 tg128; do
    echo "round $round/$repeats: $workload" >&2
    for precision in "${ember_precisions[@]}"; do
      "$ember_bench" --model "$model" --threads "$threads" --precision "$precision" \
        --workload "$workload" --repeats 1 --json "$results/ember-$precision-$workload-$round.json" >&2
    done
    # llama.cpp logs its context set-up on stderr even with verbose=False; keep only our lines.
    "$python" benchmarks/llamacpp_bench.py --model "$model" --threads "$threads" \
      --workload "$workload" --repeats 1 --json "$results/llamacpp-$workload-$round.json" 2>&1 \
      | grep -v "^llama_context" >&2
  done
done

"$python" - "$results" "$json_out" <<'PY'
import glob, json, os, statistics, sys

results_dir, json_out = sys.argv[1], sys.argv[2]
groups = {}  # (engine, precision, workload) -> {"threads": N, "runs": [...]}
for path in sorted(glob.glob(os.path.join(results_dir, "*.json"))):
    with open(path) as f:
        doc = json.load(f)
    for result in doc if isinstance(doc, list) else [doc]:
        key = (result["engine"], result["precision"], result["workload"])
        group = groups.setdefault(key, {"threads": result["threads"], "runs": []})
        group["runs"].extend(result["runs"])
if not groups:
    sys.exit("compare_llamacpp: no results were written")

rows = []
for (engine, precision, workload), group in sorted(groups.items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1])):
    runs = group["runs"]
    rows.append({"engine": engine, "workload": workload, "precision": precision,
                 "threads": group["threads"],
                 "tokens_per_s": {"median": statistics.median(runs), "min": min(runs), "max": max(runs)},
                 "runs": runs})

print(f"\n{'engine':<10} {'precision':<9} {'workload':<8} {'median tok/s':>12} {'min':>9} {'max':>9}")
for r in rows:
    t = r["tokens_per_s"]
    print(f"{r['engine']:<10} {r['precision']:<9} {r['workload']:<8} {t['median']:>12.1f} {t['min']:>9.1f} {t['max']:>9.1f}")

def median_of(engine, workload, precision=None):
    for r in rows:
        if r["engine"] == engine and r["workload"] == workload and precision in (None, r["precision"]):
            return r["tokens_per_s"]["median"]
    return None

print()
for workload in ("pp512", "tg128"):
    int8, fp32 = median_of("ember", workload, "int8"), median_of("ember", workload, "fp32")
    llama = median_of("llama.cpp", workload)
    if int8 is None:
        print(f"{workload}: no ember results, no ratios")
        continue
    if llama:
        print(f"{workload}: ember int8 / llama.cpp = {int8 / llama:.2f}")
    if fp32:
        print(f"{workload}: ember int8 / ember fp32 = {int8 / fp32:.2f}")

if json_out:
    with open(json_out, "w") as f:
        json.dump(rows, f, indent=1)
        f.write("\n")
PY

#!/usr/bin/env bash
# The GPU check, one command on a machine with an NVIDIA GPU:
#
#   benchmarks/gpu_check.sh [--build DIR [--no-build]] [--keep-going] [--rehearse] [--no-torch] OUTDIR
#
# Builds ember with CUDA (Release, only the targets below, for this GPU's architecture) in
# OUTDIR/build, or in DIR (configured there if new, else rebuilt incrementally); --no-build runs
# DIR's binaries as they are (built on another machine, where the GPU machine's time is short:
# its CTestTestfiles name that machine's paths, so DIR must sit at the same path); writes synthetic models
# with ember's own GGUF writer (the default model's shape and a Llama-1B-like shape: no
# download); runs the CUDA tests (every kernel, the whole model against the CPU backend, batch
# invariance on the GPU); cuda-gemm-bench (the INT8 and FP16 products alone, 1B and 8B shapes);
# then ember-bench --device cuda (INT8 and FP16) on both shapes and the PyTorch FP16 eager
# baseline (benchmarks/torch_generate.py) on the same configurations (--no-torch: not again).
#
# Every log, JSON file and summary.md go to OUTDIR. The check stops at the first failure and
# names it on its last line; --keep-going records failures and goes on (one device run then
# shows every problem). --rehearse runs what needs no GPU (build, models, the scripts' own
# checks) and skips the device steps with a line each: a dry run on a machine without one.
# Budget: under 8 minutes on 16 cores and one H200; each step has its own timeout.
set -uo pipefail

usage() { echo "usage: $0 [--build DIR [--no-build]] [--keep-going] [--rehearse] [--no-torch] OUTDIR" >&2; exit 2; }
BUILD="" NO_BUILD=0 KEEP_GOING=0 REHEARSE=0 TORCH=1 OUT=""
while (($#)); do
  case $1 in
    --build) [[ $# -ge 2 ]] || usage; BUILD=$(realpath -m "$2"); shift 2 ;;
    --no-build) NO_BUILD=1; shift ;;
    --keep-going) KEEP_GOING=1; shift ;;
    --rehearse) REHEARSE=1; shift ;;
    --no-torch) TORCH=0; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) usage ;;
    *) [[ -z $OUT ]] || usage; OUT=$(realpath -m "$1"); shift ;;
  esac
done
[[ -n $OUT ]] || usage
SRC=$(cd "$(dirname "$0")/.." && pwd)
MODELS="$OUT/models"
mkdir -p "$OUT" "$MODELS"
: >"$OUT/summary.log"
START=$SECONDS
STATUS=0
DEADLINE=470
log() { echo "[gpu_check +$((SECONDS - START))s] $*" | tee -a "$OUT/summary.log"; }
finish() {
  log "done in $((SECONDS - START)) s: ${1}"
  exit "$STATUS"
}
# step NAME TIMEOUT COMMAND...: runs with its output in OUTDIR/NAME.log. A failure ends the
# check (unless --keep-going) with its name and the log's last lines.
step() {
  local name=$1 limit=$2
  shift 2
  local left=$((DEADLINE - (SECONDS - START)))
  if ((left < 15)); then
    log "$name: FAILED (not started: the 8-minute deadline is near)"
    STATUS=1
    ((KEEP_GOING)) || finish "stopped at $name"
    return 1
  fi
  ((limit > left)) && limit=$left
  log "$name: $*"
  local code=0
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1 || code=$?
  if ((code == 0)); then
    log "$name: ok"
    return 0
  fi
  ((code == 124)) && log "$name: FAILED (timed out after ${limit} s; see $name.log)" ||
    log "$name: FAILED (exit $code; see $name.log)"
  tail -n 15 "$OUT/$name.log" | sed 's/^/    /' | tee -a "$OUT/summary.log"
  STATUS=1
  ((KEEP_GOING)) || finish "stopped at $name"
  return 1
}
# device_step NAME TIMEOUT COMMAND...: a step that needs the GPU; skipped when rehearsing.
device_step() {
  if ((REHEARSE)); then
    log "$1: skipped (rehearsal: needs a GPU)"
    return 0
  fi
  step "$@"
}

if ((REHEARSE)); then
  log "rehearsal: no GPU steps"
  ARCH=90
else
  if ! nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1; then
    log "nvidia-smi failed: no NVIDIA GPU or driver here (use --rehearse for a dry run)"
    STATUS=1
    finish "stopped: no GPU"
  fi
  ARCH=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ')
  ARCH=${ARCH:-90}
fi

TARGETS=(ember-bench ember-make-synthetic cuda-gemm-bench cuda_kernels_test cuda_backend_test batch_invariance_cuda_test
         device_options_test)
[[ $NO_BUILD == 0 || -n $BUILD ]] || usage
BUILD=${BUILD:-$OUT/build}
if ((NO_BUILD)); then
  log "build: skipped (--no-build: the binaries in $BUILD as they are)"
elif [[ ! -f $BUILD/CMakeCache.txt ]]; then
  GEN=(); command -v ninja >/dev/null && GEN=(-G Ninja)
  step configure 120 cmake -S "$SRC" -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DEMBER_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DEMBER_EXAMPLES=OFF
fi
((NO_BUILD)) || step build 300 cmake --build "$BUILD" -j "$(nproc)" $(printf -- '--target %s ' "${TARGETS[@]}")
BIN="$BUILD/benchmarks"
# Each binary the check runs must be there and start (a missing library shows here, named).
step binaries 30 bash -c 'for f in "$@"; do [[ -x $f ]] || { echo "missing: $f"; exit 1; }; done;
  "$1" --help >/dev/null' _ "$BIN/ember-bench" "$BIN/ember-make-synthetic" "$BIN/cuda-gemm-bench" \
  "$BUILD/tests/backend/cuda_kernels_test" "$BUILD/tests/backend/cuda_backend_test" \
  "$BUILD/tests/engine/batch_invariance_cuda_test" "$BUILD/tests/backend/device_options_test"

for shape in default 1b; do
  step "model_$shape" 120 "$BIN/ember-make-synthetic" "$shape" "$MODELS/$shape.gguf" "$MODELS/$shape.json"
done
step torch_script 30 python3 -m py_compile "$SRC/benchmarks/torch_generate.py"

# -V: the tests' MESSAGE lines (agreement with the CPU) are part of the evidence.
device_step tests 240 ctest --test-dir "$BUILD" -R "cuda|device_options" -V --timeout 200
device_step gemm 120 "$BIN/cuda-gemm-bench" --json "$OUT/gemm.json"

for shape in default 1b; do
  device_step "ember_$shape" 150 "$BIN/ember-bench" --device cuda --model "$MODELS/$shape.gguf" \
    --workload pp512,tg128,tg128x32 --repeats 3 --no-bandwidth --json "$OUT/ember_$shape.json"
  if ((REHEARSE || !TORCH)); then
    log "torch_$shape: skipped ($( ((REHEARSE)) && echo "rehearsal: needs a GPU" || echo "--no-torch"))"
  elif python3 -c "import torch, transformers" 2>/dev/null; then
    device_step "torch_$shape" 150 python3 "$SRC/benchmarks/torch_generate.py" --config "$MODELS/$shape.json" \
      --out "$OUT/torch_$shape.json" --repeats 3
  else
    log "torch_$shape: skipped (torch or transformers not importable)"
  fi
done

# One table: tokens/s per shape and workload, INT8 / FP16 and ember INT8 / PyTorch.
python3 - "$OUT" <<'PY' | tee "$OUT/summary.md"
import json, os, sys
out = sys.argv[1]
def load(name):
    path = os.path.join(out, name)
    return json.load(open(path)) if os.path.exists(path) else []
def rows(data):
    return data["results"] if isinstance(data, dict) and "results" in data else data
print("| shape | workload | ember int8 | ember fp16 | torch fp16 | int8/fp16 | int8/torch |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
for shape in ("default", "1b"):
    ember = {}
    for r in rows(load(f"ember_{shape}.json")):
        tps = r.get("tokens_per_s")
        ember[(r.get("workload"), r.get("precision"))] = tps["median"] if isinstance(tps, dict) else tps
    torch = {r["workload"]: r["tokens_per_s"] for r in rows(load(f"torch_{shape}.json"))}
    for w in ("tg128", "tg128x32", "pp512"):
        i8, f16, t = ember.get((w, "int8")), ember.get((w, "fp16")), torch.get(w)
        fmt = lambda v: f"{v:.0f}" if v else "-"
        ratio = lambda a, b: f"{a / b:.2f}x" if a and b else "-"
        print(f"| {shape} | {w} | {fmt(i8)} | {fmt(f16)} | {fmt(t)} | {ratio(i8, f16)} | {ratio(i8, t)} |")
PY
((STATUS == 0)) && finish "every step ok" || finish "some steps FAILED (see above)"

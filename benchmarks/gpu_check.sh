#!/usr/bin/env bash
# The GPU check (issue 6), one command on a machine with an NVIDIA GPU and the CUDA toolkit:
#
#   benchmarks/gpu_check.sh OUTDIR
#
# Configures and builds ember with CUDA (Release, only the targets below, for this GPU's
# architecture), writes synthetic models with ember's own GGUF writer (the default model's shape
# and a Llama-1B-like shape: no download, no model file), runs the CUDA tests (every kernel and
# the whole model against the CPU backend on the same machine), then ember-bench --device cuda
# (INT8 and FP16) on both shapes and the PyTorch/transformers FP16 eager baseline on the same
# configurations. Logs, JSON and summary.md go to OUTDIR. Budget: under 8 minutes on 16 cores
# and one H200; each step has its own timeout, and none runs past the 8-minute deadline.
set -uo pipefail

[[ $# -eq 1 ]] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
OUT=$(realpath -m "$1")
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD="$OUT/build"
MODELS="$OUT/models"
mkdir -p "$OUT" "$MODELS"
START=$SECONDS
STATUS=0
log() { echo "[gpu_check +$((SECONDS - START))s] $*" | tee -a "$OUT/summary.log"; }
# step NAME TIMEOUT COMMAND...: runs with its output in OUTDIR/NAME.log; a failure is recorded
# and the check goes on.
DEADLINE=470
step() {
  local name=$1 limit=$2
  shift 2
  local left=$((DEADLINE - (SECONDS - START)))
  if ((left < 15)); then
    log "$name: skipped (the 8-minute deadline is near)"
    STATUS=1
    return
  fi
  ((limit > left)) && limit=$left
  log "$name: $*"
  if timeout "$limit" "$@" >"$OUT/$name.log" 2>&1; then
    log "$name: ok"
  else
    log "$name: FAILED (exit $?; see $name.log)"
    STATUS=1
  fi
}

nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1 || log "nvidia-smi failed: is there a GPU?"
ARCH=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ')
ARCH=${ARCH:-90}
JOBS=$(nproc)
GEN=(); command -v ninja >/dev/null && GEN=(-G Ninja)

step configure 120 cmake -S "$SRC" -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DEMBER_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DEMBER_EXAMPLES=OFF
step build 240 cmake --build "$BUILD" -j "$JOBS" --target ember-bench ember-make-synthetic \
  cuda_kernels_test cuda_backend_test batch_invariance_cuda_test device_options_test
BIN="$BUILD/benchmarks"

for shape in default 1b; do
  step "model_$shape" 120 "$BIN/ember-make-synthetic" "$shape" "$MODELS/$shape.gguf" "$MODELS/$shape.json"
done

step tests 240 ctest --test-dir "$BUILD" -R "cuda|device_options" --output-on-failure

for shape in default 1b; do
  step "ember_$shape" 150 "$BIN/ember-bench" --device cuda --model "$MODELS/$shape.gguf" \
    --workload pp512,tg128,tg128x32 --repeats 3 --json "$OUT/ember_$shape.json"
  if python3 -c "import torch, transformers" 2>/dev/null; then
    step "torch_$shape" 150 python3 "$SRC/benchmarks/torch_generate.py" --config "$MODELS/$shape.json" \
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
print("| shape | workload | ember int8 | ember fp16 | torch fp16 | int8/fp16 | int8/torch |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
for shape in ("default", "1b"):
    ember = {(r["workload"], r["precision"]): r["tokens_per_s"]["median"] for r in load(f"ember_{shape}.json")}
    torch = {r["workload"]: r["tokens_per_s"] for r in load(f"torch_{shape}.json")}
    for w in ("tg128", "tg128x32", "pp512"):
        i8, f16, t = ember.get((w, "int8")), ember.get((w, "fp16")), torch.get(w)
        fmt = lambda v: f"{v:.0f}" if v else "-"
        ratio = lambda a, b: f"{a / b:.2f}x" if a and b else "-"
        print(f"| {shape} | {w} | {fmt(i8)} | {fmt(f16)} | {fmt(t)} | {ratio(i8, f16)} | {ratio(i8, t)} |")
PY
log "done in $((SECONDS - START)) s, status $STATUS"
exit $STATUS

#!/usr/bin/env bash
# Instructions each arm64 kernel family executes per tier, under qemu: arm64 speed cannot be
# measured on this machine (qemu is not a clock), instruction counts can
# (docs/benchmarks.md#arm64-insns).
#
#   scripts/test-cross.sh arm64 && scripts/arm64-insn-count.sh [TEST]
#
# Runs TEST (default platform_tokens_test: the default model, a 13-token prompt and 32 greedy
# decode steps) from build-cross-arm64 under `qemu-aarch64 -cpu max` once per arm64 tier
# (EMBER_CPU_ISA=neon, dotprod, i8mm) with a plugin (scripts/qemu-plugin/symbol_insns.cpp) that
# counts the instructions of every function, and sums them per kernel family: the functions
# defined in that family's object files (the scalar file and its arm64 tier files).
# qemu-user-static cannot load plugins; Debian's dynamic qemu-user can, and is unpacked (with
# the two libraries it needs) into the build folder rather than installed.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-cross-arm64
test_name=${1:-platform_tokens_test}
exe=$(find "$build/tests" -name "$test_name" -type f -perm -u+x | head -1)
[[ -n $exe ]] || { echo "arm64-insn-count: build $test_name first (scripts/test-cross.sh arm64)" >&2; exit 2; }

qemu=$build/qemu-user/usr/bin/qemu-aarch64
if [[ ! -x $qemu ]]; then
  mkdir -p "$build/qemu-user"
  (cd "$build/qemu-user" && apt-get download qemu-user libcapstone4 liburing2 >/dev/null 2>&1 &&
     for deb in *.deb; do dpkg-deb -x "$deb" .; done)
fi
export LD_LIBRARY_PATH=$PWD/$build/qemu-user/usr/lib/x86_64-linux-gnu
plugin=$build/qemu-user/libsymbol_insns.so
g++ -std=c++20 -O2 -shared -fPIC -o "$plugin" scripts/qemu-plugin/symbol_insns.cpp

# family -> the object files whose functions it counts (unity builds keep tier files apart).
objects() { find "$build/kernels" -name "$1" -name '*.o'; }
declare -A families=(
  [grouped_w4a8_q8_0]="$(objects 'gemm_grouped*')"
  [gemv_int8]="$(objects 'gemv_int8*')"
  [attention]="$(objects 'attention*') $(objects 'simd*')")
symbols() { for o in $1; do aarch64-linux-gnu-nm --defined-only "$o" | awk '$2 ~ /^[tTwW]$/ {print $3}'; done | sort -u; }

export EMBER_MODEL=${EMBER_MODEL:-$(scripts/fetch-model.sh)}
printf '%-8s' tier
for f in "${!families[@]}"; do printf '%20s' "$f"; done
printf '%20s\n' total
for tier in neon dotprod i8mm; do
  out=$build/insns-$tier.tsv
  EMBER_CPU_ISA=$tier "$qemu" -cpu max -L /usr/aarch64-linux-gnu -plugin "$plugin,out=$PWD/$out" "$exe" >/dev/null
  printf '%-8s' "$tier"
  for f in "${!families[@]}"; do
    printf '%20s' "$(awk -F'\t' 'NR == FNR {want[$1]; next} $2 in want {s += $1} END {printf "%.0f", s}' \
                        <(symbols "${families[$f]}") "$out")"
  done
  printf '%20s\n' "$(awk -F'\t' '{s += $1} END {printf "%.0f", s}' "$out")"
done

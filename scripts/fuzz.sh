#!/usr/bin/env bash
# Runs every libFuzzer target for SECONDS seconds with AddressSanitizer and UBSan:
#   scripts/fuzz.sh SECONDS [TARGET...]      (targets: gguf tokenizer chat_template template capi kv_snapshot server grammar)
# Builds the targets in build-asan (the suite's ASan + UBSan build, Clang's, with -DEMBER_FUZZ=ON;
# scripts/sanitizer-build.sh configures it here if scripts/test-sanitizers.sh has not, installing
# clang and libomp through apt when needed) and runs them, starting from
# tests/fuzz/corpus/<target> (read only: new interesting inputs go to a scratch copy under
# build-asan/corpus), as many at a time as there are cores. Prints the executions per target and
# exits non-zero when any target crashes, leaks, trips a sanitizer or a fuzz check, or goes over
# the memory caps; the crashing input is left in build-asan/findings/<target>/ — copy it to
# tests/fuzz/corpus/<target>/crash-<what> once fixed, so the replay tests keep it fixed.
# Environment: EMBER_FUZZ_BUILD (default build-asan), EMBER_FUZZ_JOBS (ninja -j, default: the number of cores).
set -euo pipefail

seconds=${1:?usage: scripts/fuzz.sh SECONDS [TARGET...]}
shift
targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=(gguf tokenizer chat_template template capi kv_snapshot server grammar)

root=$(cd "$(dirname "$0")/.." && pwd)
build=${EMBER_FUZZ_BUILD:-$root/build-asan}
jobs=${EMBER_FUZZ_JOBS:-$(nproc)}

source "$root/scripts/sanitizer-build.sh"
"$root/scripts/install-deps.sh"
[[ -f $build/build.ninja ]] || configure_sanitizer_build "$root" "$build" address,undefined
# The build is quiet when it works; a failure shows the compiler's messages (ninja writes them
# to stdout, which a silent build would lose).
if ! ninja -C "$build" -j"$jobs" "${targets[@]/#/fuzz_}" >"$build/build.log" 2>&1; then
  echo "fuzz: the fuzz targets did not build; the end of $build/build.log:" >&2
  grep -E -A8 "error:|FAILED:" "$build/build.log" | head -60 >&2 || tail -40 "$build/build.log" >&2
  exit 1
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1
# One target: its log and exit status in build-asan; the targets run as many at a time as there
# are cores (each fuzzer is one thread).
fuzz_one() {
  local t=$1 scratch=$build/corpus/$1 findings=$build/findings/$1 log=$build/fuzz_$1.log rc=0
  mkdir -p "$scratch" "$findings"
  echo "fuzz: $t for ${seconds}s" >&2
  "$build/tests/fuzz/fuzz_$t" "$scratch" "$root/tests/fuzz/corpus/$t" \
    -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$findings/" >"$log" 2>&1 || rc=$?
  echo "$rc" >"$log.rc"
}
running=0
for t in "${targets[@]}"; do
  if ((running >= jobs)); then
    wait -n || true
    running=$((running - 1))
  fi
  fuzz_one "$t" &
  running=$((running + 1))
done
wait
status=0
summary=()
for t in "${targets[@]}"; do
  log=$build/fuzz_$t.log findings=$build/findings/$t
  rc=$(cat "$log.rc")
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  summary+=("$t: ${execs:-?} executions, exit $rc")
  if [[ $rc -ne 0 ]]; then
    status=1
    echo "fuzz: $t FAILED (exit $rc); log $log, inputs in $findings" >&2
    grep -m1 -E "ERROR: |runtime error|fuzz check failed" "$log" >&2 || tail -20 "$log" >&2
  fi
done
printf '%s\n' "${summary[@]}"
exit $status

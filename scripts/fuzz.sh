#!/usr/bin/env bash
# Runs every libFuzzer target for SECONDS seconds with AddressSanitizer and UBSan:
#   scripts/fuzz.sh SECONDS [TARGET...]      (targets: gguf tokenizer chat_template capi kv_snapshot server grammar)
# Configures build-fuzz (Clang, -DEMBER_SANITIZE=address,undefined -DEMBER_FUZZ=ON), installing
# clang and its runtime libraries through apt when missing, builds the targets, and runs them
# one after another, starting from tests/fuzz/corpus/<target> (read only: new interesting
# inputs go to a scratch copy under build-fuzz/corpus). Prints the executions per target and
# exits non-zero when any target crashes, leaks, trips a sanitizer or a fuzz check, or goes over
# the memory caps; the crashing input is left in build-fuzz/findings/<target>/ — copy it to
# tests/fuzz/corpus/<target>/crash-<what> once fixed, so the replay tests keep it fixed.
# Environment: EMBER_FUZZ_BUILD (default build-fuzz), EMBER_FUZZ_JOBS (ninja -j, default: the number of cores).
set -euo pipefail

seconds=${1:?usage: scripts/fuzz.sh SECONDS [TARGET...]}
shift
targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=(gguf tokenizer chat_template capi kv_snapshot server grammar)

root=$(cd "$(dirname "$0")/.." && pwd)
build=${EMBER_FUZZ_BUILD:-$root/build-fuzz}
jobs=${EMBER_FUZZ_JOBS:-$(nproc)}

# clang and libFuzzer (Debian ships libFuzzer in libclang-rt-dev, or in clang itself up to 14).
fuzzer_links() {
  echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' \
    > "$build/probe.cpp"
  clang++ -fsanitize=fuzzer,address,undefined "$build/probe.cpp" -o "$build/probe" 2>/dev/null
}
mkdir -p "$build"
if ! command -v clang++ >/dev/null || ! fuzzer_links; then
  sudo=""
  [[ $(id -u) -ne 0 ]] && sudo=sudo
  echo "fuzz: installing clang and libclang-rt-dev" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    clang libclang-rt-dev >&2 || DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq clang >&2
  fuzzer_links || { echo "fuzz: clang cannot link -fsanitize=fuzzer" >&2; exit 1; }
fi
"$root/scripts/install-deps.sh"

if [[ ! -f $build/build.ninja ]]; then
  # -O1 with line tables: the usual fuzzing trade-off (fast enough, readable stack traces). A
  # unity build, as scripts/test-sanitizers.sh says why.
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" \
    "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" \
    -DEMBER_UNITY_BUILD=ON \
    -DEMBER_CUDA=OFF -DEMBER_SANITIZE=address,undefined -DEMBER_FUZZ=ON \
    -DEMBER_EXAMPLES=OFF -DEMBER_BENCHMARKS=OFF >/dev/null
fi
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
status=0
summary=()
for t in "${targets[@]}"; do
  scratch=$build/corpus/$t
  findings=$build/findings/$t
  mkdir -p "$scratch" "$findings"
  log=$build/fuzz_$t.log
  echo "fuzz: $t for ${seconds}s" >&2
  rc=0
  "$build/tests/fuzz/fuzz_$t" "$scratch" "$root/tests/fuzz/corpus/$t" \
    -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$findings/" >"$log" 2>&1 || rc=$?
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

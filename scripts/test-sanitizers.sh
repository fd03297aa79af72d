#!/usr/bin/env bash
# The test suite under sanitizers, as CI runs it after scripts/test.sh:
#   address,undefined: every test (build-asan/, Clang's: scripts/fuzz.sh runs its fuzz targets)
#   thread: the tests labelled `tsan` in ctest (build-tsan/): the scheduler, prefix-cache and
#     API concurrency tests. libgomp is not TSan-instrumented, so an OpenMP region that forks
#     threads looks like a race; under TSan those tests run their engines with one compute thread
#     (test::compute_threads), no region forks, and no report is suppressed (tests/tsan.supp).
# Usage: scripts/test-sanitizers.sh [asan|tsan|all]   (default all)
set -euo pipefail
cd "$(dirname "$0")/.."

which=${1:-all}
scripts/install-deps.sh
export EMBER_MODEL=${EMBER_MODEL:-$(scripts/fetch-model.sh)}
jobs=${EMBER_JOBS:-$(nproc)}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}

source scripts/sanitizer-build.sh

if [[ $which == asan || $which == all ]]; then
  configure_sanitizer_build . build-asan address,undefined
  cmake --build build-asan -j "$jobs"
  # detect_leaks: the library must not leak on any path, errors included. Not the golden tests
  # (long numeric runs) nor the twins of kernels_test under a narrower oneDNN ISA (label
  # `isa`): they run ember's code on the paths kernels_test itself takes, and oneDNN's JIT
  # kernels are not instrumented. Nor example_npc_real_model: example_npc's program on the
  # default model's text, at ten times its native time (docs/benchmarks.md#ci-zen3-s30), where
  # example_npc runs the same code on a synthetic model here.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan --output-on-failure -j "$jobs" -LE 'golden|isa' -E '^example_npc_real_model$'
fi

if [[ $which == tsan || $which == all ]]; then
  configure_sanitizer_build . build-tsan thread
  # The subset is whatever carries the ctest label `tsan`; each such test's target has its name.
  mapfile -t tsan_tests < <(ctest --test-dir build-tsan -N -L '^tsan$' | sed -n 's/^ *Test *#[0-9]*: //p')
  [[ ${#tsan_tests[@]} -gt 0 ]] || { echo "no test is labelled tsan" >&2; exit 1; }
  cmake --build build-tsan -j "$jobs" --target "${tsan_tests[@]}"
  TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp halt_on_error=1 second_deadlock_stack=1" \
    EMBER_STRESS_REQUESTS=${EMBER_STRESS_REQUESTS:-200} \
    ctest --test-dir build-tsan --output-on-failure -j "$jobs" -L '^tsan$'
fi

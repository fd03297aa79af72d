#!/usr/bin/env bash
# The test suite under sanitizers, as CI runs it after scripts/test.sh:
#   address,undefined: every test (build-asan/)
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

# -O1 with line tables only (-g1): what the sanitizers' own documentation recommends, and half
# the compile time of -O2 -g (the suite's build under ASan + UBSan is most of what CI spends
# here); reports still name the file and line. The library's layers are unity-built (batches
# of 8 sources per compilation: about half the compile time again): these builds start from
# scratch every time, where a unity build's slower rebuilds cost nothing.
configure() {  # dir sanitizer
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMBER_SANITIZE="$2" \
        -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
        -DEMBER_UNITY_BUILD=ON \
        -DEMBER_TESTS=ON -DEMBER_EXAMPLES=ON -DEMBER_BENCHMARKS=OFF -DEMBER_CUDA=OFF
}

if [[ $which == asan || $which == all ]]; then
  configure build-asan address,undefined
  cmake --build build-asan -j "$jobs"
  # detect_leaks: the library must not leak on any path, errors included. Not the golden tests
  # (long numeric runs) nor the twins of kernels_test under a narrower oneDNN ISA (label
  # `isa`): they run ember's code on the paths kernels_test itself takes, and oneDNN's JIT
  # kernels are not instrumented.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan --output-on-failure -j "$jobs" -LE 'golden|isa'
fi

if [[ $which == tsan || $which == all ]]; then
  configure build-tsan thread
  # The subset is whatever carries the ctest label `tsan`; each such test's target has its name.
  mapfile -t tsan_tests < <(ctest --test-dir build-tsan -N -L '^tsan$' | sed -n 's/^ *Test *#[0-9]*: //p')
  [[ ${#tsan_tests[@]} -gt 0 ]] || { echo "no test is labelled tsan" >&2; exit 1; }
  cmake --build build-tsan -j "$jobs" --target "${tsan_tests[@]}"
  TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp halt_on_error=1 second_deadlock_stack=1" \
    EMBER_STRESS_REQUESTS=${EMBER_STRESS_REQUESTS:-200} \
    ctest --test-dir build-tsan --output-on-failure -j "$jobs" -L '^tsan$'
fi

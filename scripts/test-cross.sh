#!/usr/bin/env bash
# Builds ember for another platform with Debian's cross compilers and runs a set of its tests
# there through an emulator: the proof, on a Linux x86-64 machine, that ember builds and runs
# where games ship.
#
#   scripts/test-cross.sh windows        Windows x64: MinGW-w64, tests under Wine
#   scripts/test-cross.sh windows-dll    ember as a DLL (BUILD_SHARED_LIBS=ON), installed, and
#                                        examples/consumer and the C ABI example built against
#                                        it and run under Wine
#   scripts/test-cross.sh arm64-shared   the same for Linux arm64 (a shared libember.so), run
#                                        under qemu-user
#   scripts/test-cross.sh arm64 [CPU]    Linux arm64: tests under qemu-user with CPU model CPU
#                                        (default max: NEON, dotprod, i8mm: the i8mm tier;
#                                        cortex-a57: NEON alone, the neon tier)
#
# Installs what is missing (apt-get). Builds in build-cross-<target>/ without oneDNN
# (ember's own kernels alone, as on those platforms), then runs the tests below: the kernels
# against their scalar reference, the CPU backend against the readable reference, the engine
# end to end on synthetic models, and the layers that touch the OS (files, mappings, threads).
set -euo pipefail
cd "$(dirname "$0")/.."

target=${1:-}
case $target in
  windows | windows-dll)
    packages=(g++-mingw-w64-x86-64-posix wine wine64)
    toolchain=cmake/toolchains/mingw-w64-x86_64.cmake
    build=build-cross-$target
    extra=()
    [[ $target == windows-dll ]] && extra=(-DBUILD_SHARED_LIBS=ON)
    # Wine's first start makes its prefix; keep it out of the user's home and quiet. OpenMP's
    # runtime is a DLL of the compiler's (FindOpenMP links its import library): Wine finds it
    # through WINEPATH, as an app ships it beside its executable.
    export WINEPREFIX=${WINEPREFIX:-$PWD/$build/wineprefix} WINEDEBUG=-all
    ;;
  arm64 | arm64-shared)
    cpu=${2:-max}
    packages=(g++-aarch64-linux-gnu qemu-user-static)
    toolchain=cmake/toolchains/aarch64-linux-gnu.cmake
    # One build for every CPU model: the model is only the tests' emulator command, so a run
    # with another one reconfigures and rebuilds nothing.
    build=build-cross-arm64
    extra=(-DEMBER_QEMU_CPU="$cpu")
    if [[ $target == arm64-shared ]]; then
      build=build-cross-arm64-shared
      extra=(-DBUILD_SHARED_LIBS=ON)
    fi
    ;;
  *)
    echo "usage: $0 windows | windows-dll | arm64 [QEMU_CPU] | arm64-shared" >&2
    exit 2
    ;;
esac

# The header-only dependencies come from the build machine's packages (install-deps.sh).
scripts/install-deps.sh
# The default model, for platform_tokens_test (its greedy tokens on this platform equal the
# committed ones); under Wine its Unix path is read through the Z: drive.
export EMBER_MODEL=${EMBER_MODEL:-$(scripts/fetch-model.sh)}
# Gemma 3's tokenizer (tokenizer_gemma3_test), as scripts/test.sh fetches it.
export EMBER_GEMMA3_MODEL=${EMBER_GEMMA3_MODEL:-$(scripts/fetch-model.sh gemma3)}
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [[ $(id -u) -ne 0 ]] && sudo=sudo
  echo "test-cross: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# Wine makes its prefix on its first start. Two programs starting it at once on a new prefix race
# (one fails: "chdir to /tmp/wine-...: No such file"), and a start that goes wrong while another
# prefix's server is still shutting down leaves one that cannot load kernel32.dll (seen once in
# CI's windows-dll stage, right after the windows stage). So each Windows run makes its prefix
# alone before anything else starts, waits for its server, checks that a program runs in it, and
# makes it once more from nothing if not; its server is stopped when the run ends.
prepare_wine_prefix() {
  local try
  mkdir -p "$(dirname "$WINEPREFIX")"
  for try in 1 2; do
    wineboot --init >/dev/null 2>&1 || true
    wineserver -w || true
    wine cmd /c exit 0 >/dev/null 2>&1 && return 0
    echo "test-cross: the Wine prefix $WINEPREFIX does not run programs (try $try of 2); making it again" >&2
    wineserver -k >/dev/null 2>&1 || true
    rm -rf "$WINEPREFIX"
  done
  echo "test-cross: no working Wine prefix at $WINEPREFIX" >&2
  return 1
}

exe=""
if [[ $target == windows* ]]; then
  exe=.exe
  gcc_dlls=$(dirname "$(x86_64-w64-mingw32-g++-posix -print-file-name=libgomp-1.dll)")
  thread_dlls=$(dirname "$(x86_64-w64-mingw32-g++-posix -print-file-name=libwinpthread-1.dll)")
  export WINEPATH="$gcc_dlls;$thread_dlls"
  trap 'wineserver -k >/dev/null 2>&1 || true' EXIT
  prepare_wine_prefix
fi
if [[ $target == windows-dll || $target == arm64-shared ]]; then
  # The shared library alone (tests reach internal symbols a shared library does not export),
  # installed as a package; then separate projects find it, link it and run through its C++
  # API and C ABI (an exception thrown in the library, caught in the program).
  if [[ $target == windows-dll ]]; then
    run_in() { WINEPATH="$PWD/$build/prefix/bin;$WINEPATH" wine "$@"; }
  else
    run_in() { qemu-aarch64-static -cpu max -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH="$PWD/$build/prefix/lib" "$@"; }
  fi
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE="$toolchain" \
        -DEMBER_TESTS=OFF -DEMBER_EXAMPLES=OFF -DEMBER_BENCHMARKS=OFF -DEMBER_CUDA=OFF "${extra[@]}" \
        ${EMBER_CMAKE_ARGS:-}
  cmake --build "$build" -j "${EMBER_JOBS:-$(nproc)}" --target ember
  rm -rf "$build/prefix" "$build/consumer"
  cmake --install "$build" --prefix "$build/prefix" >/dev/null
  if [[ $target == windows-dll ]]; then ls "$build"/prefix/bin/*.dll "$build"/prefix/lib/*.dll.a; else ls "$build"/prefix/lib/libember.so*; fi
  cmake -S examples/consumer -B "$build/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_TOOLCHAIN_FILE="$PWD/$toolchain" -Dember_DIR="$PWD/$build/prefix/lib/cmake/ember"
  cmake --build "$build/consumer"
  run_in "$build/consumer/ember-consumer$exe"
  # The C ABI example (C11, examples/c_api) against the same package, in a project of its own,
  # then run on the default model: a C program through the library's C ABI end to end.
  rm -rf "$build/c_api_project" "$build/c_api"
  mkdir -p "$build/c_api_project"
  printf '%s\n' 'cmake_minimum_required(VERSION 3.22)' 'project(ember_c_api LANGUAGES C CXX)' \
         'find_package(ember 0.1 REQUIRED)' "add_subdirectory(\"$PWD/examples/c_api\" c_api)" \
         >"$build/c_api_project/CMakeLists.txt"
  cmake -S "$build/c_api_project" -B "$build/c_api" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_TOOLCHAIN_FILE="$PWD/$toolchain" -Dember_DIR="$PWD/$build/prefix/lib/cmake/ember"
  cmake --build "$build/c_api"
  run_in "$build/c_api/c_api/ember-c-api$exe" "$EMBER_MODEL" "Name one colour." | tee "$build/c_api/answer.txt"
  grep -q "^finish: " "$build/c_api/answer.txt"
  echo "test-cross: the consumer and the C ABI example ran against the installed shared library ($target)"
  exit 0
fi
# The issue's set: ctest's kernel, model, tokenizer, grammar, backend-equivalence and engine
# tests, and the layers that touch the OS (files, mappings, threads). Left out: the `golden`
# label (long numeric runs against references, minutes natively), the stress test, the
# grammar corpus (a Python driver on the build machine) and ember-inspect's tests (examples
# are not built here).
tests=(kernels_test isa_invariance_test
       test_model_dequant test_model_gguf test_model_bad_input test_model_real
       tokenizer_unit_test chat_template_test tokenizer_golden_test tokenizer_gemma3_test template_test
       grammar_gbnf grammar_json_schema grammar_schema_coverage grammar_token_mask
       grammar_unique_items
       backend_equivalence_test
       engine_test engine_async_test engine_background_test batch_invariance_test engine_state_test
       engine_state_real_model_test platform_tokens_test load_test grammar_engine_test
       speculation_test thinking_test lora_engine_test
       runtime_block_pool robustness_files_test)
# Also left out, everywhere, grammar_close_at_limit: a real model through dozens of constrained
# completions, where grammar_engine_test is the real-model grammar check on each platform and
# the grammar code itself is CPU-independent. On one platform each, where they only repeat,
# slowly, what runs natively (CI's minutes on an AVX2-only CPU: docs/benchmarks.md#ci-zen3-s30):
#  * speculation_test on arm64: its drafts are verified by the batched kernels that
#    batch_invariance_test checks there; the rest is CPU-independent.
#  * grammar_engine_test on arm64, the longest test under qemu (minutes; seconds natively): a real
#    model's constrained completions, where the kernels are batch_invariance_test's and
#    engine_test's there, the grammar code is CPU-independent and the grammar_* tests run it on
#    arm64 (bytes above 0x7f included); Windows runs it whole (docs/benchmarks.md#ci-s33).
#  * tokenizer_gemma3_test on Windows, minutes under Wine where qemu takes seconds: the tokenizer
#    is OS-independent C++, and tokenizer_golden_test runs it on Windows.
skip=()
[[ $target == arm64 ]] && skip=(speculation_test grammar_engine_test)
[[ $target == windows ]] && skip=(tokenizer_gemma3_test)
kept=()
for t in "${tests[@]}"; do [[ " ${skip[*]} " == *" $t "* ]] || kept+=("$t"); done
tests=("${kept[@]}")
# EMBER_CROSS_TESTS="a b" runs those tests instead (CI's shorter set).
[[ -n ${EMBER_CROSS_TESTS:-} ]] && read -r -a tests <<<"$EMBER_CROSS_TESTS"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE="$toolchain" \
      -DEMBER_TESTS=ON -DEMBER_EXAMPLES=OFF -DEMBER_BENCHMARKS=OFF -DEMBER_CUDA=OFF "${extra[@]}" \
      ${EMBER_CMAKE_ARGS:-}
cmake --build "$build" -j "${EMBER_JOBS:-$(nproc)}" $(printf -- '--target %s ' "${tests[@]}")
regex="^($(IFS='|'; echo "${tests[*]}"))\$"
ctest --test-dir "$build" --output-on-failure -j "${EMBER_JOBS:-$(nproc)}" -R "$regex" --timeout 900

#!/usr/bin/env bash
# Creates the Python venv that produces ember's llama.cpp reference outputs and benchmarks:
# gguf, numpy, jinja2 and llama-cpp-python (which compiles llama.cpp from source, several
# minutes). Prints the venv's python path on stdout; everything else goes to stderr.
#
#   tests/reference/setup_venv.sh [VENV_DIR]   default ${EMBER_CACHE_DIR:-$HOME/.cache/ember}/venv-ref
#   tests/reference/setup_venv.sh --print-cmake-args [CPUINFO]   the llama.cpp flags only (below)
#
# The llama.cpp build. Without CMAKE_ARGS in the environment, llama.cpp is built with
# GGML_NATIVE=OFF and its instruction sets named one by one from this CPU's /proc/cpuinfo flags
# (SSE4.2, AVX, AVX2, FMA, F16C, BMI2, AVX-VNNI; AVX-512 F/CD/VL/DQ/BW as one, then its VBMI,
# VNNI and BF16), with AMX off. Why: GGML_NATIVE (-march=native) turns on AMX on a Xeon that has
# it, and where the kernel or the sandbox does not grant the AMX tile state, the quantized
# matrix products die with SIGILL at `tilezero`. Named flags give the same build, native
# otherwise, on AMD Zen 4 and on Intel Xeons. With CMAKE_ARGS set, those are passed through
# instead. Either way the flags are recorded in VENV_DIR/llama-build-flags.txt.
#
# A complete venv (all four packages import) whose recorded flags are the ones asked for is left
# untouched. One without the file (built before it existed: natively, AMX and all) or with other
# flags gets llama-cpp-python rebuilt, at the version it has; EMBER_REF_KEEP_BUILD=1 keeps it and
# only says so. Concurrent runs serialise on a lock file beside the venv, so two shells never
# build llama-cpp-python at the same time.
set -euo pipefail

# The flags of each ggml option, from /proc/cpuinfo (or the file given) on x86-64; empty
# elsewhere (llama.cpp's defaults; AMX is x86 only). Option names as in llama.cpp's
# ggml/CMakeLists.txt; GGML_AVX512 compiles with -mavx512f -mavx512cd -mavx512vl -mavx512dq
# -mavx512bw (ggml/src/ggml-cpu/CMakeLists.txt), so it needs all five.
derive_cmake_args() {
  local cpuinfo=${1:-/proc/cpuinfo}
  if [[ $cpuinfo == /proc/cpuinfo && $(uname -m) != x86_64 ]]; then
    return 0
  fi
  local flags
  flags=" $(grep -m1 '^flags' "$cpuinfo" | cut -d: -f2- || true) "
  [[ $flags == "  " ]] && return 0
  has() { local f; for f in "$@"; do [[ $flags == *" $f "* ]] || return 1; done; }
  on() { if has "$@"; then echo ON; else echo OFF; fi; }
  local avx512
  avx512=$(on avx512f avx512cd avx512vl avx512dq avx512bw)
  local args=(-DGGML_NATIVE=OFF
    "-DGGML_SSE42=$(on sse4_2)" "-DGGML_AVX=$(on avx)" "-DGGML_AVX2=$(on avx2)"
    "-DGGML_FMA=$(on fma)" "-DGGML_F16C=$(on f16c)" "-DGGML_BMI2=$(on bmi2)"
    "-DGGML_AVX_VNNI=$(on avx_vnni)" "-DGGML_AVX512=$avx512")
  if [[ $avx512 == ON ]]; then
    args+=("-DGGML_AVX512_VBMI=$(on avx512vbmi)" "-DGGML_AVX512_VNNI=$(on avx512_vnni)"
      "-DGGML_AVX512_BF16=$(on avx512_bf16)")
  else
    args+=(-DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF)
  fi
  args+=(-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF)
  echo "${args[*]}"
}

if [[ ${1:-} == --print-cmake-args ]]; then
  derive_cmake_args "${2:-/proc/cpuinfo}"
  exit 0
fi

venv=${1:-${EMBER_CACHE_DIR:-$HOME/.cache/ember}/venv-ref}
python=$venv/bin/python
packages=(gguf numpy jinja2 llama-cpp-python)
flags_file=$venv/llama-build-flags.txt
if [[ -n ${CMAKE_ARGS:-} ]]; then
  cmake_args=$CMAKE_ARGS
  cmake_source="CMAKE_ARGS from the environment"
else
  cmake_args=$(derive_cmake_args)
  cmake_source="derived from /proc/cpuinfo by tests/reference/setup_venv.sh"
fi

complete() {
  [[ -x $python ]] && "$python" -c 'import gguf, numpy, jinja2, llama_cpp' 2>/dev/null
}

recorded_args() {
  [[ -f $flags_file ]] && sed -n 's/^cmake_args=//p' "$flags_file"
}

# The flags recorded are the ones asked for (a missing file never is).
build_current() {
  [[ -f $flags_file ]] && [[ $(recorded_args) == "$cmake_args" ]]
}

record_build() {
  {
    echo "# llama-cpp-python in this venv was built with these CMake arguments (tests/reference/setup_venv.sh)"
    echo "cmake_args=$cmake_args"
    echo "source=$cmake_source"
    echo "llama_cpp_python=$("$python" -c 'import llama_cpp; print(llama_cpp.__version__)')"
    echo "cpu=$(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')"
    echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  } >"$flags_file"
}

# A complete venv built otherwise: rebuilt unless EMBER_REF_KEEP_BUILD=1 (then 0: keep it).
stale_build_kept() {
  local what="has no record of its llama.cpp build flags (built before $flags_file existed, probably with GGML_NATIVE=ON: AMX where the CPU has it)"
  [[ -f $flags_file ]] && what="was built with CMAKE_ARGS '$(recorded_args)'"
  echo "setup_venv: $venv $what; asked for: '${cmake_args:-llama.cpp defaults}'" >&2
  if [[ ${EMBER_REF_KEEP_BUILD:-0} == 1 ]]; then
    echo "setup_venv: EMBER_REF_KEEP_BUILD=1: keeping that build" >&2
    return 0
  fi
  return 1
}

if complete && build_current; then
  echo "$python"
  exit 0
fi

mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
if ! flock --nonblock 9; then
  echo "setup_venv: another setup of $venv is running; waiting for it" >&2
  flock 9
fi
# The run we waited for may have finished the job.
if complete && { build_current || stale_build_kept; }; then
  echo "$python"
  exit 0
fi

# --no-cache-dir: pip's wheel cache is keyed by the package, not by CMAKE_ARGS, and would hand
# back a wheel built with other flags.
export CMAKE_ARGS=$cmake_args
echo "setup_venv: llama.cpp CMake arguments (${cmake_source%% by *}): ${cmake_args:-llama.cpp defaults}" >&2
if complete; then
  version=$("$python" -c 'import llama_cpp; print(llama_cpp.__version__)')
  echo "setup_venv: rebuilding llama-cpp-python $version in $venv with those flags (minutes)" >&2
  "$python" -m pip install --disable-pip-version-check --no-cache-dir --force-reinstall --no-deps \
    "llama-cpp-python==$version" >&2
else
  [[ -x $python ]] || python3 -m venv "$venv" >&2
  "$python" -m pip install --disable-pip-version-check --upgrade pip >&2
  echo "setup_venv: installing ${packages[*]} into $venv (llama-cpp-python builds llama.cpp: minutes)" >&2
  "$python" -m pip install --disable-pip-version-check --no-cache-dir "${packages[@]}" >&2
fi

if ! complete; then
  echo "setup_venv: $venv is still incomplete after pip install" >&2
  exit 1
fi
record_build
echo "$python"
